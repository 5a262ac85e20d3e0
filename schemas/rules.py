"""Cross-question rules, enforced exactly while a document's answers are decided.

A job spec may declare `rules`: a JSON Schema over the decision object built from `if`/`then`/
`else`, `dependentRequired`, `dependentSchemas` and `allOf` of these, whose conditions and
consequences are `properties` of *atoms*: `const`, `enum`, `type`, and integer bounds
(`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`) on one answer. `compile_rules`
refuses anything else with the JSON pointer of the keyword.

Enforcement. The atoms that mention a question split its values into *cells* (one per
combination of atom truth values: `amount ≥ 1000` and `amount = 0` give at most four). Each cell is
a language of its own: for finite questions the options that fall in it, for integer questions
the integer ranges it spans, both compiled to slot automata like any question. While a document is
decided, every cell of every ruled slot keeps its own constraint state under the committed tokens.
A cell is *supported* when it is still feasible and some choice of one feasible cell per ruled
slot satisfies every rule (a small exhaustive search over few cells). A slot then allows exactly
the tokens some supported cell allows, and a commit is accepted only if the rules stay
satisfiable; so the sampler, which talks to each slot through the plain `SlotConstraint`
protocol, can never commit a combination that violates a rule, and a document whose rules cannot
be met fails with a clear reason. Each time a rule is what removes a cell from a slot, it is
counted as having narrowed that slot.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import numpy as np

from decide.engine.constraints import InfeasibleSlot

from .errors import MalformedSchema, UnsupportedSchema
from .slot import CompiledSlot, SlotState, compile_slot

ANNOTATIONS = {"title", "description", "$comment", "examples", "default"}
RULE_KEYWORDS = {"allOf", "if", "then", "else", "dependentRequired", "dependentSchemas"}
ATOM_KEYWORDS = {"const", "enum", "type", "minimum", "maximum", "exclusiveMinimum",
                 "exclusiveMaximum"}  # fmt: skip
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
MAX_CELLS = 64  # per slot
MAX_ASSIGNMENTS = 200_000  # combinations the satisfiability search may visit


@dataclass(frozen=True)
class Atom:
    question: str
    schema: dict[str, Any]  # the atom as written (const/enum/type/bounds)
    key: str = field(compare=False, default="")

    def holds(self, value: Any) -> bool:
        return jsonschema.Draft202012Validator(self.schema).is_valid(value)


# A formula is ("and", [formulas]) | ("atom", index) | ("true",) | ("if", cond, then, else).
Formula = tuple


@dataclass
class Rule:
    pointer: str
    formula: Formula
    questions: set[str]


def _check_keys(node: dict[str, Any], allowed: set[str], pointer: str) -> None:
    for key in node:
        if key not in allowed and key not in ANNOTATIONS:
            raise UnsupportedSchema(
                f"{pointer}/{key}", key,
                f"rules support {', '.join(sorted(allowed))} here; `{key}` is not enforced "
                "while decoding, so it is refused rather than silently ignored",
            )  # fmt: skip


class _Parser:
    def __init__(self, questions: dict[str, Any]) -> None:
        self.questions = questions  # id -> question schema, the questions this document is asked
        self.mentioned: dict[str, str] = {}  # every question id the rules name -> first pointer
        self.atoms: list[Atom] = []
        self._index: dict[tuple[str, str], int] = {}

    def atom(self, qid: str, schema: Any, pointer: str) -> int:
        if schema is True:
            return -1
        if not isinstance(schema, dict):
            raise MalformedSchema(pointer, "properties", "an atom must be a schema object")
        _check_keys(schema, ATOM_KEYWORDS, pointer)
        if not set(schema) & ATOM_KEYWORDS:
            raise UnsupportedSchema(pointer, "properties", "an atom needs const, enum, type or "
                                    "integer bounds")  # fmt: skip
        for bound in BOUNDS:
            if bound in schema and not isinstance(schema[bound], int | float):
                raise MalformedSchema(f"{pointer}/{bound}", bound, "must be a number")
        key = json.dumps(schema, sort_keys=True)
        if (qid, key) not in self._index:
            self._index[(qid, key)] = len(self.atoms)
            self.atoms.append(Atom(qid, schema, key))
        return self._index[(qid, key)]

    def clause(self, node: Any, pointer: str) -> Formula:
        """A condition or consequence: `properties` of atoms, and `required` questions."""
        if node is True:
            return ("true",)
        if not isinstance(node, dict):
            raise UnsupportedSchema(pointer, "if", "conditions and consequences must be objects "
                                    "with `properties`")  # fmt: skip
        _check_keys(node, {"properties", "required"}, pointer)
        required = node.get("required", [])
        if not isinstance(required, list) or not all(isinstance(q, str) for q in required):
            raise MalformedSchema(f"{pointer}/required", "required", "must be a list of ids")
        parts: list[Formula] = []
        for i, qid in enumerate(required):
            if not self.asked(qid, f"{pointer}/required/{i}"):
                parts.append(("false",))  # every asked answer is present; an unasked one never
        properties = node.get("properties", {})
        if not isinstance(properties, dict):
            raise MalformedSchema(f"{pointer}/properties", "properties", "must be an object")
        for qid, schema in properties.items():
            where = f"{pointer}/properties/{qid}"
            if not self.asked(qid, where):
                continue  # `properties` ignores a key the decision object does not have
            index = self.atom(qid, schema, where)
            if index >= 0:
                parts.append(("atom", index))
        return ("and", parts)

    def rule(self, node: Any, pointer: str) -> list[Rule]:
        if not isinstance(node, dict):
            raise MalformedSchema(pointer or "#", "rules", "rules must be a schema object")
        _check_keys(node, RULE_KEYWORDS, pointer)
        out: list[Rule] = []
        for i, sub in enumerate(node.get("allOf", [])):
            out.extend(self.rule(sub, f"{pointer}/allOf/{i}"))
        if "if" in node:
            cond = self.clause(node["if"], f"{pointer}/if")
            then = self.clause(node.get("then", True), f"{pointer}/then")
            other = self.clause(node.get("else", True), f"{pointer}/else")
            out.append(Rule(f"{pointer}/if", ("if", cond, then, other), set()))
        elif "then" in node or "else" in node:
            raise MalformedSchema(pointer or "#", "then", "`then`/`else` without `if`")
        for qid, needed in node.get("dependentRequired", {}).items():
            where = f"{pointer}/dependentRequired/{qid}"
            if not isinstance(needed, list) or not all(isinstance(q, str) for q in needed):
                raise MalformedSchema(where, "dependentRequired", "must be a list of ids")
            missing = [n for i, n in enumerate(needed) if not self.asked(n, f"{where}/{i}")]
            if self.asked(qid, where) and missing:
                out.append(Rule(where, ("and", [("false",)]), set()))
        for qid, sub in node.get("dependentSchemas", {}).items():
            where = f"{pointer}/dependentSchemas/{qid}"
            clause = self.clause(sub, where)
            if self.asked(qid, where):
                out.append(Rule(where, clause, set()))
        return out

    def asked(self, qid: Any, pointer: str) -> bool:
        """Whether this document is asked `qid`; records every id the rules name."""
        if not isinstance(qid, str):
            raise MalformedSchema(pointer, "rules", "question ids are strings")
        self.mentioned.setdefault(qid, pointer)
        return qid in self.questions


def _evaluate(formula: Formula, truth: dict[int, bool]) -> bool:
    kind = formula[0]
    if kind in ("true", "false"):
        return kind == "true"
    if kind == "atom":
        return truth[formula[1]]
    if kind == "and":
        return all(_evaluate(f, truth) for f in formula[1])
    cond, then, other = formula[1], formula[2], formula[3]
    return _evaluate(then if _evaluate(cond, truth) else other, truth)


def _atoms_of(formula: Formula) -> Iterable[int]:
    if formula[0] == "atom":
        yield formula[1]
    elif formula[0] == "and":
        for f in formula[1]:
            yield from _atoms_of(f)
    elif formula[0] == "if":
        for f in formula[1:]:
            yield from _atoms_of(f)


@dataclass
class Cell:
    truth: tuple[bool, ...]  # truth value of each of the slot's atoms
    slot: CompiledSlot


class RuleSet:
    """Rules compiled against the job's questions; `bind` makes one document's constraints."""

    def __init__(self, rules: Any, questions: dict[str, Any], compiled: dict[str, CompiledSlot]):
        parser = _Parser(questions)
        self.rules = parser.rule(rules, "")
        self.atoms = parser.atoms
        self.mentioned = parser.mentioned
        for rule in self.rules:
            rule.questions = {self.atoms[i].question for i in _atoms_of(rule.formula)}
        self.schemas = questions
        self.slot_atoms: dict[str, list[int]] = {}
        for i, atom in enumerate(self.atoms):
            self.slot_atoms.setdefault(atom.question, []).append(i)
        self.cells = {qid: self._cells(qid, compiled[qid]) for qid in self.slot_atoms}

    def _cells(self, qid: str, slot: CompiledSlot) -> list[Cell]:
        atoms = [self.atoms[i] for i in self.slot_atoms[qid]]
        pointer = f"/properties/{qid}"
        if slot.values is not None:  # finite: group the values by the atoms they satisfy
            groups: dict[tuple[bool, ...], list[Any]] = {}
            for text in slot.values:
                value = json.loads(text)
                groups.setdefault(tuple(a.holds(value) for a in atoms), []).append(value)
            return [Cell(truth, compile_slot({"allOf": [self.schemas[qid], {"enum": values}]},
                                             slot.vocab, max_tokens=slot.length))
                    for truth, values in sorted(groups.items())]  # fmt: skip
        if not _integer_question(self.schemas[qid]):
            raise UnsupportedSchema(
                pointer, "rules", f"rules may test finite questions (enums, booleans, small "
                f"ranges) and integer questions; {qid!r} has too many values of another kind",
            )  # fmt: skip
        return self._integer_cells(qid, slot, atoms)

    def _integer_cells(self, qid: str, slot: CompiledSlot, atoms: list[Atom]) -> list[Cell]:
        points: set[int] = set()  # the integers where some atom's truth can change
        for atom in atoms:
            _check_integer_atom(atom, f"/properties/{qid}")
            for key, value in atom.schema.items():
                if key == "const":
                    points.update({value, value + 1})
                elif key == "enum":
                    for v in value:
                        points.update({v, v + 1})
                elif key in ("minimum", "exclusiveMaximum"):
                    points.add(_ceil(value))
                elif key in ("maximum", "exclusiveMinimum"):
                    points.add(_floor(value) + 1)
        edges = sorted(points)
        spans = [(None, edges[0] - 1)] if edges else [(None, None)]
        spans += [(a, b - 1) for a, b in itertools.pairwise(edges)]
        if edges:
            spans.append((edges[-1], None))
        groups: dict[tuple[bool, ...], list[dict[str, int]]] = {}
        for low, high in spans:
            probe = low if low is not None else (high if high is not None else 0)
            truth = tuple(a.holds(probe) for a in atoms)
            bounds = {k: v for k, v in (("minimum", low), ("maximum", high)) if v is not None}
            groups.setdefault(truth, []).append({"type": "integer", **bounds})
        cells = []
        for truth, ranges in sorted(groups.items()):
            schema = {"allOf": [self.schemas[qid], {"anyOf": ranges}]}
            try:
                cells.append(Cell(truth, compile_slot(schema, slot.vocab, max_tokens=slot.length)))
            except UnsupportedSchema as exc:
                if "no value satisfies" not in exc.message:
                    raise
        if len(cells) > MAX_CELLS:
            raise UnsupportedSchema(f"/properties/{qid}", "rules", "too many distinct cases")
        return cells

    def bind(self, questions: Sequence[tuple[str, CompiledSlot]], filler: int) -> list[Any]:
        """Constraints for one document's slots, in order: plain `SlotState`s for questions no
        rule mentions, rule-aware ones sharing one `RuleState` for the others. Rules may mention
        questions this document is not asked: they are judged as JSON Schema judges the
        decision object without those keys (`properties` ignores them, `required` fails), and a
        rule that no answer can satisfy makes the document fail here."""
        for rule in self.rules:
            if not rule.questions and not _evaluate(rule.formula, {}):
                why = "cannot hold for this document: it requires an answer it is not asked"
                raise UnsupportedSchema(rule.pointer, "rules", why)
        state = RuleState(self, {qid: slot.length for qid, slot in questions}, filler)
        return [RuledSlot(state, qid) if qid in self.slot_atoms else slot.new_constraint(filler)
                for qid, slot in questions]  # fmt: skip


def _integer_question(schema: Any) -> bool:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return kind == "integer" or (isinstance(kind, list) and set(kind) <= {"integer", "null"})


def _check_integer_atom(atom: Atom, pointer: str) -> None:
    for key, value in atom.schema.items():
        values = value if key == "enum" else [value] if key == "const" else []
        if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
            raise UnsupportedSchema(pointer, key, "atoms on an integer question compare with "
                                    "integers")  # fmt: skip
        if key == "type" and value != "integer":
            raise UnsupportedSchema(pointer, key, "an integer question is always an integer")


def _ceil(x: float) -> int:
    return int(np.ceil(x))


def _floor(x: float) -> int:
    return int(np.floor(x))


class RuleState:
    """One document's cells and the search that says which of them the rules still allow."""

    def __init__(self, rules: RuleSet, lengths: dict[str, int], filler: int) -> None:
        self.rules = rules
        self.order = sorted(rules.slot_atoms)
        self.states = {
            qid: [cell.slot.new_constraint(filler, lengths[qid]) for cell in rules.cells[qid]]
            for qid in self.order
        }
        self.alive = {qid: [s.feasible() for s in self.states[qid]] for qid in self.order}
        self.narrowed: dict[str, int] = {}
        self.exhausted = False  # set when a slot was left with no answer the rules allow
        self._supported: dict[str, list[bool]] | None = None
        self._seen = {qid: list(self.alive[qid]) for qid in self.order}

    def _search(self, alive: dict[str, list[bool]], skip: int | None = None) -> dict[str, set]:
        """For each ruled slot, the cells that appear in some assignment satisfying every rule
        (except rule `skip`)."""
        domains = [[i for i, ok in enumerate(alive[q]) if ok] for q in self.order]
        found: dict[str, set] = {q: set() for q in self.order}
        if any(not d for d in domains):
            return found
        total = int(np.prod([len(d) for d in domains]))
        if total > MAX_ASSIGNMENTS:
            raise UnsupportedSchema("", "rules", f"{total} combinations of cases to check")
        position = {q: k for k, q in enumerate(self.order)}
        rules = [r for i, r in enumerate(self.rules.rules) if i != skip]
        for choice in itertools.product(*domains):
            truth: dict[int, bool] = {}
            for q, c in zip(self.order, choice, strict=True):
                cell = self.rules.cells[q][c]
                for i, value in zip(self.rules.slot_atoms[q], cell.truth, strict=True):
                    truth[i] = value
            if all(_evaluate(r.formula, truth) for r in rules):
                for q in self.order:
                    found[q].add(choice[position[q]])
        return found

    def supported(self) -> dict[str, list[bool]]:
        if self._supported is None:
            found = self._search(self.alive)
            self._supported = {q: [i in found[q] for i in range(len(self.alive[q]))]
                               for q in self.order}  # fmt: skip
            self._count_narrowing()
        return self._supported

    def _count_narrowing(self) -> None:
        """Attribute each cell the rules newly exclude to the rules whose removal would keep it."""
        assert self._supported is not None
        lost = [(q, i) for q in self.order for i, ok in enumerate(self.alive[q])
                if ok and not self._supported[q][i] and self._seen[q][i]]  # fmt: skip
        if not lost:
            return
        for k, rule in enumerate(self.rules.rules):
            without = self._search(self.alive, skip=k)
            for q, i in lost:
                if i in without[q]:
                    self.narrowed[rule.pointer] = self.narrowed.get(rule.pointer, 0) + 1
        for q, i in lost:
            self._seen[q][i] = False

    def try_commit(self, qid: str, position: int, token: int) -> bool:
        supported = self.supported()[qid]
        states = self.states[qid]
        keep = [supported[i] and states[i]._allowed(position, token) for i in range(len(states))]
        if not any(keep):
            return False
        trial = dict(self.alive)
        trial[qid] = keep
        if not self._search(trial)[qid]:
            return False
        for i, state in enumerate(states):
            if keep[i]:
                if not state.commit(position, token):
                    raise AssertionError("a cell refused a token its mask allowed")
                keep[i] = state.feasible()
        self.alive[qid] = keep
        self._supported = None
        return True


class RuledSlot:
    """The `SlotConstraint` of one ruled question: the union of its supported cells."""

    def __init__(self, state: RuleState, qid: str) -> None:
        self.state, self.qid = state, qid
        self._length = state.states[qid][0].length
        self.tokens: dict[int, int] = {}

    @property
    def length(self) -> int:
        return self._length

    def _live(self) -> list[SlotState]:
        supported = self.state.supported()[self.qid]
        return [s for s, ok in zip(self.state.states[self.qid], supported, strict=True) if ok]

    def fill_bitmask(self, out) -> None:
        live = self._live()
        if not live:
            self.state.exhausted = True
            rules = ", ".join(r.pointer for r in self.state.rules.rules
                              if self.qid in r.questions)  # fmt: skip
            raise InfeasibleSlot(
                f"no answer to {self.qid!r} satisfies the rules ({rules}) together with the "
                "answers committed so far"
            )
        live[0].fill_bitmask(out)
        if len(live) > 1:
            scratch = out.clone()
            for state in live[1:]:
                state.fill_bitmask(scratch)
                out |= scratch

    def commit(self, position: int, token: int) -> bool:
        if position in self.tokens:
            return self.tokens[position] == token
        if not self.state.try_commit(self.qid, position, token):
            return False
        self.tokens[position] = token
        return True

    def is_complete(self) -> bool:
        return len(self.tokens) == self._length

    def options(self) -> list[list[int]] | None:
        out: dict[tuple[int, ...], list[int]] = {}  # insertion-ordered, deduplicated
        for state in self._live():
            options = state.options()
            if options is None:
                return None
            for option in options:
                out.setdefault(tuple(option), option)
        return list(out.values())

    def decode(self):
        for state in self._live() or self.state.states[self.qid]:
            if state.is_complete() and state.feasible():
                return state.decode()
        raise ValueError(f"slot {self.qid!r} is not complete")


def rule_question_ids(rules: Any) -> dict[str, str]:
    """Every question id `rules` names, with the first JSON pointer naming it (`SchemaError`
    if the rules are malformed): a job checks them against all the ids it may ask."""
    parser = _Parser({})
    parser.rule(rules, "")
    return parser.mentioned


def compile_rules(
    rules: Any, questions: dict[str, Any], compiled: dict[str, CompiledSlot]
) -> RuleSet:
    """Parse and compile a spec's `rules` for its questions (`SchemaError` with a pointer)."""
    return RuleSet(rules, questions, compiled)
