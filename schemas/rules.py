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

Value rules (`ValueRule`, the CEL rules over finite questions) join the same search: every
question one reads gets one cell per value, and the rule is tabulated once over its questions'
joint values, so the search reads a table entry where a JSON Schema rule evaluates atoms.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from decide.engine.constraints import InfeasibleSlot

from .drafts import normalize
from .errors import EmptySchema, SchemaError, UnsupportedSchema
from .nullable import value_schema
from .rule_parse import Atom, Parser, Rule, atoms_of, evaluate
from .slot import CompiledSlot, SlotState, compile_slot

MAX_CELLS = 64  # per slot
MAX_ASSIGNMENTS = 200_000  # combinations the satisfiability search may visit


@dataclass(frozen=True)
class ValueRule:
    """A rule given as a predicate over the answers of finite questions (a CEL rule compiled by
    `jobs.checks`): enforced exactly by enumerating the questions' joint values, once, into a
    table over their cells (one cell per value)."""

    pointer: str
    questions: tuple[str, ...]
    holds: Callable[[dict[str, Any]], bool]


@dataclass
class Cell:
    truth: tuple[bool, ...]  # truth value of each of the slot's atoms
    slot: CompiledSlot
    value: Any = None  # the cell's one value, for a question a `ValueRule` reads


class RuleSet:
    """Rules compiled against the job's questions; `bind` makes one document's constraints.
    `rules` is the JSON Schema form (None: none); `value_rules` are predicates over finite
    questions' values, each tabulated over their joint values."""

    def __init__(
        self,
        rules: Any,
        questions: dict[str, Any],
        compiled: dict[str, CompiledSlot],
        value_rules: Sequence[ValueRule] = (),
    ) -> None:
        parser = Parser(questions)
        self.rules = parser.rule(rules, "") if rules is not None else []
        self.atoms = parser.atoms
        self.mentioned = parser.mentioned
        for rule in self.rules:
            rule.questions = {self.atoms[i].question for i in atoms_of(rule.formula)}
        self.schemas = questions
        self.slot_atoms: dict[str, list[int]] = {}
        for i, atom in enumerate(self.atoms):
            self.slot_atoms.setdefault(atom.question, []).append(i)
        self.valued: set[str] = set()  # questions some value rule reads: one cell per value
        for rule in value_rules:
            for qid in rule.questions:
                if qid not in compiled or compiled[qid].values is None:
                    raise UnsupportedSchema(rule.pointer, "rules", f"{qid!r} is not a finite "
                                            "question of this document")  # fmt: skip
                self.mentioned.setdefault(qid, rule.pointer)
            self.valued.update(rule.questions)
        ruled = sorted(set(self.slot_atoms) | self.valued)
        self.cells = {qid: self._cells(qid, compiled[qid]) for qid in ruled}
        self.finite = {qid for qid in ruled if compiled[qid].values is not None}
        for rule in value_rules:
            self.rules.append(Rule(rule.pointer, self._table(rule), set(rule.questions)))
        self.components = self._components()

    def _components(self) -> list[tuple[list[str], list[tuple[int, np.ndarray]]]]:
        """The ruled questions grouped by the rules that link them, each group with its rules
        tabulated over the group's cells (axes in the group's order): the search runs on each
        group alone, so unlinked rules never multiply each other's cases."""
        group = {q: q for q in self.cells}

        def root(q: str) -> str:
            while group[q] != q:
                q = group[q]
            return q

        for rule in self.rules:
            first, *rest = sorted(rule.questions) or [None]
            for q in rest:
                group[root(q)] = root(first)
        members: dict[str, list[str]] = {}
        for q in sorted(self.cells):
            members.setdefault(root(q), []).append(q)
        out = []
        for order in members.values():
            shape = [len(self.cells[q]) for q in order]
            if int(np.prod(shape)) > MAX_ASSIGNMENTS:
                pointers = ", ".join(r.pointer for r in self.rules if r.questions & set(order))
                raise UnsupportedSchema(pointers, "rules", f"{int(np.prod(shape))} combinations "
                                        f"of cases of {', '.join(order)} to check")  # fmt: skip
            tables = []
            for k, rule in enumerate(self.rules):
                if rule.questions and rule.questions <= set(order):
                    tables.append((k, self._lift(rule, order)))
            out.append((order, tables))
        return out

    def _lift(self, rule: Rule, order: list[str]) -> np.ndarray:
        """A rule's truth over every choice of its questions' cells, broadcastable over the
        axes of `order`."""
        own = sorted(rule.questions, key=order.index)
        shape = [len(self.cells[q]) for q in own]
        table = np.zeros(shape, dtype=bool)
        for index in np.ndindex(*shape):
            chosen = dict(zip(own, index, strict=True))
            truth = {i: value for q, c in chosen.items()
                     for i, value in zip(self.slot_atoms.get(q, ()), self.cells[q][c].truth,
                                         strict=True)}  # fmt: skip
            table[index] = evaluate(rule.formula, truth, chosen)
        return table.reshape([len(self.cells[q]) if q in rule.questions else 1 for q in order])

    def _table(self, rule: ValueRule) -> tuple:
        """The formula of a value rule: its truth over every joint choice of its questions'
        cells (each holding one value)."""
        shape = tuple(len(self.cells[q]) for q in rule.questions)
        if int(np.prod(shape)) > MAX_ASSIGNMENTS:
            raise UnsupportedSchema(rule.pointer, "rules", f"{int(np.prod(shape))} joint values")
        table = np.zeros(shape, dtype=bool)
        for index in np.ndindex(*shape):
            values = {q: self.cells[q][i].value for q, i in zip(rule.questions, index, strict=True)}
            table[index] = rule.holds(values)
        return ("table", rule.questions, table)

    def _cells(self, qid: str, slot: CompiledSlot) -> list[Cell]:
        atoms = [self.atoms[i] for i in self.slot_atoms.get(qid, [])]
        pointer = self.mentioned.get(qid, f"/properties/{qid}")  # where a rule first names it
        if slot.values is not None:  # finite: group the values by the atoms they satisfy
            groups: dict[tuple, list[Any]] = {}
            for text in slot.values:
                value = json.loads(text)
                key = tuple(a.holds(value) for a in atoms)
                groups.setdefault((key, text if qid in self.valued else ""), []).append(value)
            return [Cell(truth, self._cell_slot(qid, slot, {"enum": values}),
                         values[0] if qid in self.valued else None)
                    for (truth, _), values in sorted(groups.items())]  # fmt: skip
        if not _integer_question(self.schemas[qid]):
            raise UnsupportedSchema(
                pointer, "rules", f"rules may test finite questions (enums, booleans, small "
                f"ranges) and integer questions; {qid!r} has too many values of another kind",
            )  # fmt: skip
        return self._integer_cells(qid, slot, atoms)

    def holding(self, qid: str, value: Any) -> list[bool]:
        """Which of question `qid`'s cells hold `value` (none, for a value outside them all:
        a null where the cells are integer ranges)."""
        atoms = [self.atoms[i] for i in self.slot_atoms.get(qid, [])]
        truth = tuple(a.holds(value) for a in atoms)
        cells = self.cells[qid]
        if qid in self.finite:  # the cell lists its values
            return [c.truth == truth and any(_same(json.loads(t), value) for t in c.slot.values)
                    for c in cells]  # fmt: skip
        whole = isinstance(value, int) and not isinstance(value, bool)
        return [whole and c.truth == truth for c in cells]

    def cheapest(self, costs: dict[str, Sequence[float]]) -> dict[str, int] | None:
        """The choice of one cell per ruled question that satisfies every rule at the least
        total cost, or None when no choice does. `costs[q][c]`: what choosing cell c of
        question q gives up (inf: q has no answer there); a question `costs` lacks is free,
        every cell at no cost."""
        out: dict[str, int] = {}
        for order, tables in self.components:
            joint = np.zeros([len(self.cells[q]) for q in order])
            for axis, q in enumerate(order):
                cost = np.asarray(costs.get(q, np.zeros(len(self.cells[q]))), dtype=float)
                shape = [1] * len(order)
                shape[axis] = len(cost)
                joint = joint + cost.reshape(shape)
            for _, table in tables:
                joint = np.where(table, joint, np.inf)
            best = int(np.argmin(joint))
            if not np.isfinite(joint.flat[best]):
                return None
            index = np.unravel_index(best, joint.shape)
            out.update({q: int(i) for q, i in zip(order, index, strict=True)})
        return out

    def _integer_cells(self, qid: str, slot: CompiledSlot, atoms: list[Atom]) -> list[Cell]:
        points: set[int] = set()  # the integers where some atom's truth can change
        for atom in atoms:
            _check_integer_atom(atom, self.mentioned.get(qid, f"/properties/{qid}"))
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
            with contextlib.suppress(EmptySchema):  # a case no value of the question falls in
                cells.append(Cell(truth, self._cell_slot(qid, slot, {"anyOf": ranges})))
        if len(cells) > MAX_CELLS:
            raise UnsupportedSchema(f"/properties/{qid}", "rules", "too many distinct cases")
        return cells

    def _cell_slot(self, qid: str, slot: CompiledSlot, case: dict[str, Any]) -> CompiledSlot:
        """The slot of question `qid`'s values that also satisfy `case` (see `within`); a
        refusal names its location in the question's schema as the user wrote it."""
        schema, norm = within(self.schemas[qid], case)
        try:
            return compile_slot(schema, slot.vocab, max_tokens=slot.length)
        except SchemaError as exc:
            for prefix in ("/allOf/0", f"/$defs/{QUESTION}"):
                if exc.pointer == prefix or exc.pointer.startswith(prefix + "/"):
                    exc.pointer = norm.original_pointer(exc.pointer[len(prefix) :])
                    break
            else:  # the wrapper itself: the rules' split of the question into cases
                exc.pointer, exc.keyword = "", "rules"
            exc.args = (f"question {qid!r}: {exc.pointer or '#'}: {exc.keyword}: {exc.message}",)
            raise

    def bind(
        self,
        questions: Sequence[tuple[str, CompiledSlot]],
        filler: int,
        elsewhere: Sequence[tuple[str, CompiledSlot]] = (),
        fixed: dict[str, Any] | None = None,
    ) -> list[Any]:
        """Constraints for one document's slots, in order: plain `SlotState`s for questions no
        rule mentions, rule-aware ones sharing one `RuleState` for the others. Rules may mention
        questions this document is not asked: they are judged as JSON Schema judges the
        decision object without those keys (`properties` ignores them, `required` fails), and a
        rule that no answer can satisfy makes the document fail here. `elsewhere`: ruled
        questions the document asks but decodes in another request (a window's other blocks):
        any of their values the rules allow is assumed possible, so the slots here keep to the
        answers that some choice of theirs satisfies; `fixed` gives the values of those already
        decided (earlier blocks), and the slots here keep to the answers that agree with them."""
        for rule in self.rules:
            if not rule.questions and not evaluate(rule.formula, {}):
                why = "cannot hold for this document: it requires an answer it is not asked"
                raise UnsupportedSchema(rule.pointer, "rules", why)
        lengths = {qid: slot.length for qid, slot in [*questions, *elsewhere]}
        state = RuleState(self, lengths, filler)
        for qid, value in (fixed or {}).items():
            if qid in self.cells:
                state.fix(qid, self.holding(qid, value))
        if fixed and not all(any(ok) for ok in state.supported().values()):
            state = RuleState(self, lengths, filler)  # they break a rule: checked afterwards
        return [RuledSlot(state, qid) if qid in self.cells else slot.new_constraint(filler)
                for qid, slot in questions]  # fmt: skip


QUESTION = "decide-question"  # where `within` keeps the question's schema


def within(schema: Any, case: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """A 2020-12 schema of the values of question schema `schema` (any draft) that also satisfy
    `case`, with the `drafts.Normalized` form of `schema`. The question's schema, normalised to
    2020-12 (`case` is written in it), is put inline under `allOf` beside `case` and kept whole
    under `$defs`, its local references (`#`, `#/$defs/…` as Pydantic writes enums and nested
    models) rewritten to point into that copy: they resolve, and recurse, exactly as in the
    question's own schema."""
    norm = normalize(schema)
    prefix = f"/$defs/{QUESTION}"
    question = _rebase(norm.schema, prefix)
    return {"$defs": {QUESTION: question}, "allOf": [question, case]}, norm


def _rebase(schema: Any, prefix: str) -> Any:
    """`schema` with every local JSON pointer reference (`#`, `#/…`) moved under `prefix`
    (anchor references, `#name`, resolve anywhere and stay); `enum`/`const` values untouched."""
    if isinstance(schema, list):
        return [_rebase(x, prefix) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("enum", "const"):
            out[key] = value
        elif key == "$ref" and isinstance(value, str) and (value == "#" or value.startswith("#/")):
            out[key] = "#" + prefix + value[1:]
        else:
            out[key] = _rebase(value, prefix)
    return out


def _same(a: Any, b: Any) -> bool:
    """JSON equality: `true` is not `1`, `1` is `1.0`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    return a == b


def _integer_question(schema: Any) -> bool:
    schema, _ = value_schema(schema)
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
        self.order = sorted(rules.cells)
        self.states = {
            qid: [cell.slot.new_constraint(filler, lengths[qid]) for cell in rules.cells[qid]]
            for qid in self.order
        }
        self.alive = {qid: [s.feasible() for s in self.states[qid]] for qid in self.order}
        self.narrowed: dict[str, int] = {}
        self.exhausted = False  # set when a slot was left with no answer the rules allow
        self._supported: dict[str, list[bool]] | None = None
        self._seen = {qid: list(self.alive[qid]) for qid in self.order}

    def fix(self, qid: str, holding: list[bool]) -> None:
        """Keep only the cells of `qid` in `holding`, the value decided for it elsewhere (an
        earlier block); a value no cell holds leaves it free."""
        if any(holding):
            self.alive[qid] = [a and h for a, h in zip(self.alive[qid], holding, strict=True)]
            self._seen[qid] = list(self.alive[qid])
            self._supported = None

    def _search(self, alive: dict[str, list[bool]], skip: int | None = None) -> dict[str, set]:
        """For each ruled slot, the cells that appear in some assignment satisfying every rule
        (except rule `skip`): per group of linked questions, the rules' tables and the cells
        still alive are multiplied out over the group's joint cells."""
        found: dict[str, set] = {}
        for order, tables in self.rules.components:
            joint = np.ones([len(alive[q]) for q in order], dtype=bool)
            for axis, q in enumerate(order):
                shape = [1] * len(order)
                shape[axis] = len(alive[q])
                joint &= np.asarray(alive[q], dtype=bool).reshape(shape)
            for k, table in tables:
                if k != skip:
                    joint &= table
            for axis, q in enumerate(order):
                others = tuple(a for a in range(len(order)) if a != axis)
                found[q] = set(np.flatnonzero(joint.any(axis=others)).tolist())
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
    parser = Parser({})
    parser.rule(rules, "")
    return parser.mentioned


def compile_rules(
    rules: Any,
    questions: dict[str, Any],
    compiled: dict[str, CompiledSlot],
    value_rules: Sequence[ValueRule] = (),
) -> RuleSet:
    """Parse and compile a spec's `rules` (JSON Schema, or None) and `value_rules` for its
    questions (`SchemaError` with a pointer)."""
    return RuleSet(rules, questions, compiled, value_rules)
