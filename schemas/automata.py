"""Byte automata: a Thompson NFA builder, subset construction, minimization and products.

Slot languages are built as one byte-level NFA (`NFA`, fragments are `(start, end)` state pairs)
and turned into a minimal DFA (`DFA`: `trans[S, 256]`, -1 = dead, state 0 = start). Two
annotations ride along so string lengths can be counted in code points without unrolling them
into states: every state has a *region* (0 = outside any length-bounded string, r > 0 = inside
string r whose length must lie in `regions[r]`), and every transition has an `inc` bit set on the
last byte of each code point of string content. Subset construction refuses subsets that mix two
regions (a union of differently bounded strings) because the count would no longer be one number.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

Frag = tuple[int, int]


@dataclass(frozen=True)
class Region:
    """Inclusive code point count bounds of one length-bounded string (`hi` None = unbounded)."""

    lo: int
    hi: int | None
    pointer: str

    @property
    def cap(self) -> int:
        """Largest counter value worth distinguishing (the counter saturates there)."""
        return self.hi if self.hi is not None else self.lo


class RegionConflict(Exception):
    def __init__(self, regions: list[Region]) -> None:
        self.regions = regions
        super().__init__("union of strings with different length bounds")


class TooComplex(Exception):
    pass


class NFA:
    """Mutable Thompson NFA over bytes with range edges, epsilon edges and region labels."""

    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int, int]]] = []
        self.region: list[int] = []
        self.regions: list[Region] = [Region(0, None, "")]
        # States inside a string without length bounds (region 0 like the states outside one),
        # and the bounded regions a union held such a string to (`determinize`).
        self.unbounded: set[int] = set()
        self.narrowed: dict[str, None] = {}

    def state(self, region: int = 0) -> int:
        self.eps.append([])
        self.edges.append([])
        self.region.append(region)
        if len(self.region) > 400_000:
            raise TooComplex("automaton exceeds 400000 NFA states")
        return len(self.region) - 1

    def new_region(self, lo: int, hi: int | None, pointer: str) -> int:
        self.regions.append(Region(lo, hi, pointer))
        return len(self.regions) - 1

    def edge(self, a: int, lo: int, hi: int, b: int, inc: int = 0) -> None:
        self.edges[a].append((lo, hi, b, inc))

    def epsilon(self, a: int, b: int) -> None:
        self.eps[a].append(b)

    def literal(self, data: bytes, region: int = 0) -> Frag:
        start = cur = self.state(region)
        for byte in data:
            nxt = self.state(region)
            self.edge(cur, byte, byte, nxt)
            cur = nxt
        return start, cur

    def empty(self) -> Frag:
        s = self.state()
        return s, s

    def nothing(self) -> Frag:
        return self.state(), self.state()

    def cat(self, frags: Iterable[Frag]) -> Frag:
        frags = list(frags)
        if not frags:
            return self.empty()
        for (_, end), (start, _) in itertools.pairwise(frags):
            self.epsilon(end, start)
        return frags[0][0], frags[-1][1]

    def alt(self, frags: Iterable[Frag]) -> Frag:
        start, end = self.state(), self.state()
        for s, e in frags:
            self.epsilon(start, s)
            self.epsilon(e, end)
        return start, end

    def star(self, frag: Frag) -> Frag:
        start, end = self.state(), self.state()
        self.epsilon(start, frag[0])
        self.epsilon(start, end)
        self.epsilon(frag[1], frag[0])
        self.epsilon(frag[1], end)
        return start, end

    def opt(self, frag: Frag) -> Frag:
        self.epsilon(frag[0], frag[1])
        return frag

    def embed(self, dfa: DFA, region: int | None = 0, fold: bool = False) -> Frag:
        """Copy a DFA in. With `region` an int the DFA must be region-free and all its states go
        into `region`; with None its own regions are copied as fresh regions of this NFA. `fold`:
        every edge on `A`-`Z` gets a twin on the lower-case letters (`fold_case`)."""
        if region is None:
            fresh = [0] + [self.new_region(r.lo, r.hi, r.pointer) for r in dfa.regions[1:]]
            base = [self.state(fresh[int(r)]) for r in dfa.region]
            end = self.state()
        else:
            base = [self.state(region) for _ in range(dfa.n)]
            end = self.state(region)
        key = dfa.trans.astype(np.int64) * 2 + dfa.inc  # [S, 256]
        change = np.ones((dfa.n, 256), dtype=bool)
        change[:, 1:] = key[:, 1:] != key[:, :-1]
        for s, b in zip(*np.nonzero(change), strict=True):
            t = int(dfa.trans[s, b])
            if t < 0:
                continue
            row = change[s, b + 1 :]
            e = b + (int(np.argmax(row)) if row.any() else 256 - b - 1)
            self.edge(base[s], int(b), int(e), base[t], int(dfa.inc[s, b]))
            lo, hi = max(int(b), ord("A")), min(int(e), ord("Z"))
            if fold and lo <= hi:
                self.edge(base[s], lo + CASE, hi + CASE, base[t], int(dfa.inc[s, b]))
        for s in np.nonzero(dfa.accept)[0]:
            self.epsilon(base[s], end)
        return base[0], end


@dataclass
class DFA:
    trans: np.ndarray  # [S, 256] int32, -1 = dead
    inc: np.ndarray  # [S, 256] uint8
    accept: np.ndarray  # [S] bool
    region: np.ndarray  # [S] int32
    regions: list[Region]

    @property
    def n(self) -> int:
        return int(self.trans.shape[0])

    def run(self, data: bytes) -> int:
        s = 0
        for byte in data:
            s = int(self.trans[s, byte])
            if s < 0:
                return -1
        return s

    def accepts_ignoring_counts(self, data: bytes) -> bool:
        s = self.run(data)
        return s >= 0 and bool(self.accept[s])

    def accepts(self, data: bytes) -> bool:
        """Membership including the code point count bounds of every region."""
        s, count = 0, 0
        for byte in data:
            s, count = self._advance(s, count, byte)
            if s < 0:
                return False
        return bool(self.accept[s])

    def accepts_many(self, datas: Sequence[bytes]) -> list[bool]:
        """`accepts` of every item, walked in lockstep: one vectorised transition per byte
        position for all items still alive (a document's spans: thousands of short strings)."""
        n = len(datas)
        if n == 0:
            return []
        lens = np.fromiter((len(d) for d in datas), dtype=np.int64, count=n)
        width = int(lens.max())
        data = np.zeros((n, max(width, 1)), dtype=np.uint8)
        for i, d in enumerate(datas):
            data[i, : len(d)] = np.frombuffer(d, dtype=np.uint8)
        lo = np.array([r.lo for r in self.regions], dtype=np.int64)
        hi = np.array([-1 if r.hi is None else r.hi for r in self.regions], dtype=np.int64)
        region = self.region.astype(np.int64)
        state = np.zeros(n, dtype=np.int64)  # -1 = dead
        count = np.zeros(n, dtype=np.int64)  # code points so far in the current region
        for p in range(width):
            live = np.nonzero((lens > p) & (state >= 0))[0]
            if live.size == 0:
                break
            s, c = state[live], count[live]
            byte = data[live, p]
            t = self.trans[s, byte].astype(np.int64)
            r0, r1 = region[s], region[np.maximum(t, 0)]
            leaving = (t >= 0) & (r0 != r1) & (r0 != 0)
            bad = leaving & ((c < lo[r0]) | ((hi[r0] >= 0) & (c > hi[r0])))
            t = np.where(bad, -1, t)
            c = np.where(r0 != r1, 0, c) + np.where(r1 != 0, self.inc[s, byte], 0)
            state[live] = t
            count[live] = np.where(t >= 0, c, 0)
        return [bool(s >= 0 and self.accept[s]) for s in state.tolist()]

    def _advance(self, s: int, count: int, byte: int) -> tuple[int, int]:
        """One byte from state `s` with `count` code points in the current region."""
        t = int(self.trans[s, byte])
        if t < 0:
            return -1, 0
        r0, r1 = int(self.region[s]), int(self.region[t])
        if r0 != r1 and r0:
            reg = self.regions[r0]
            if count < reg.lo or (reg.hi is not None and count > reg.hi):
                return -1, 0
        if r0 != r1:
            count = 0
        return t, count + (int(self.inc[s, byte]) if r1 else 0)


def accepts_without(dfa: DFA, first: int | None = None) -> bool:
    """Whether some accepted string, code point bounds included, starts with another byte than
    `first` (`ord("n")`: a value other than null; None: whether any string is accepted).
    Breadth-first over (state, count), the count saturating where no bound can tell two counts
    apart."""
    if first is None and dfa.accept[0]:
        return True
    caps = [max(r.lo, r.hi or 0) + 1 for r in dfa.regions]
    seen: set[tuple[int, int]] = set()
    frontier = []
    for byte in np.nonzero(dfa.trans[0] >= 0)[0]:
        if int(byte) != first:
            frontier.append(dfa._advance(0, 0, int(byte)))
    while frontier:
        nxt = []
        for s, count in frontier:
            if s < 0:
                continue
            count = min(count, caps[int(dfa.region[s])])
            if (s, count) in seen:
                continue
            seen.add((s, count))
            if dfa.accept[s]:
                return True
            nxt += [dfa._advance(s, count, int(b)) for b in np.nonzero(dfa.trans[s] >= 0)[0]]
        frontier = nxt
    return False


def _closure(nfa: NFA, states: Iterable[int], memo: dict[int, frozenset[int]]) -> frozenset[int]:
    out: set[int] = set()
    for s in states:
        c = memo.get(s)
        if c is None:
            seen = {s}
            stack = [s]
            while stack:
                x = stack.pop()
                for y in nfa.eps[x]:
                    if y not in seen:
                        seen.add(y)
                        stack.append(y)
            c = memo[s] = frozenset(seen)
        out |= c
    return frozenset(out)


def determinize(nfa: NFA, frag: Frag, max_states: int = 20_000) -> DFA:
    """Subset construction from `frag`, then minimization."""
    memo: dict[int, frozenset[int]] = {}
    start = _closure(nfa, [frag[0]], memo)
    ids = {start: 0}
    order = [start]
    rows: list[np.ndarray] = []
    incs: list[np.ndarray] = []
    i = 0
    while i < len(order):
        subset = order[i]
        i += 1
        edges = [e for s in subset for e in nfa.edges[s]]
        row = np.full(256, -1, dtype=np.int32)
        inc = np.zeros(256, dtype=np.uint8)
        if edges:
            cuts = sorted({e[0] for e in edges} | {e[1] + 1 for e in edges})
            targets: list[set[int]] = [set() for _ in cuts]
            bits = [0] * len(cuts)
            for lo, hi, dst, flag in edges:
                a = bisect.bisect_left(cuts, lo)
                b = bisect.bisect_left(cuts, hi + 1)
                for k in range(a, b):
                    targets[k].add(dst)
                    bits[k] |= flag
            for k in range(len(cuts) - 1):
                if not targets[k]:
                    continue
                nxt = _closure(nfa, targets[k], memo)
                j = ids.get(nxt)
                if j is None:
                    j = ids[nxt] = len(order)
                    order.append(nxt)
                    if j >= max_states:
                        raise TooComplex(f"automaton exceeds {max_states} DFA states")
                row[cuts[k] : cuts[k + 1]] = j
                inc[cuts[k] : cuts[k + 1]] = bits[k]
        rows.append(row)
        incs.append(inc)
    region = np.zeros(len(order), dtype=np.int32)
    for j, subset in enumerate(order):
        found = {nfa.region[s] for s in subset} - {0}
        if len(found) > 1:
            raise RegionConflict([nfa.regions[r] for r in sorted(found)])
        region[j] = found.pop() if found else 0
        if region[j] and not nfa.unbounded.isdisjoint(subset):
            # An unbounded string shares its path with a bounded one: one counter serves both,
            # so the union keeps the bounded one's limit (sound; its other values are cut).
            nfa.narrowed[nfa.regions[region[j]].pointer] = None
    accept = np.array([frag[1] in subset for subset in order], dtype=bool)
    dfa = DFA(np.stack(rows), np.stack(incs), accept, region, list(nfa.regions))
    return minimize(dfa)


def trim(dfa: DFA) -> DFA:
    """Drop states that are unreachable or cannot reach an accepting state (start is kept)."""
    n = dfa.n
    live = dfa.accept.copy()
    while True:
        nxt = live | np.any((dfa.trans >= 0) & live[np.maximum(dfa.trans, 0)], axis=1)
        if (nxt == live).all():
            break
        live = nxt
    trans = np.where((dfa.trans >= 0) & live[np.maximum(dfa.trans, 0)], dfa.trans, -1)
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    frontier = [0]
    while frontier:
        s = frontier.pop()
        for t in set(trans[s].tolist()):
            if t >= 0 and not reach[t]:
                reach[t] = True
                frontier.append(t)
    keep = reach & live
    keep[0] = True
    new_id = np.full(n + 1, -1, dtype=np.int32)
    new_id[:n][keep] = np.arange(int(keep.sum()), dtype=np.int32)
    trans = new_id[np.where(trans >= 0, trans, n)][keep]
    inc = np.where(trans >= 0, dfa.inc[keep], 0).astype(np.uint8)
    return DFA(trans, inc, dfa.accept[keep], dfa.region[keep], dfa.regions)


def _group_rows(rows: np.ndarray) -> np.ndarray:
    """Dense ids of equal rows (exact: rows compared by their bytes)."""
    ids: dict[bytes, int] = {}
    data = np.ascontiguousarray(rows)
    return np.array([ids.setdefault(r.tobytes(), len(ids)) for r in data], dtype=np.int64)


def minimize(dfa: DFA) -> DFA:
    """Moore partition refinement over (accepting, region) and (target block, inc) per byte."""
    dfa = trim(dfa)
    n = dfa.n
    key = np.stack([dfa.accept.astype(np.int64), dfa.region.astype(np.int64)], axis=1)
    block = _group_rows(key)
    count = int(block.max()) + 1
    while True:
        tgt = np.where(dfa.trans >= 0, block[np.maximum(dfa.trans, 0)], -1).astype(np.int64)
        sig = np.concatenate([block[:, None], tgt * 2 + dfa.inc.astype(np.int64)], axis=1)
        new = _group_rows(sig)
        new_count = int(new.max()) + 1
        block = new
        if new_count == count:
            break
        count = new_count
    # Renumber so the start state's block is 0, keeping first-seen order.
    order: dict[int, int] = {}
    for s in range(n):
        order.setdefault(int(block[s]), len(order))
    remap = np.array([order[int(b)] for b in block], dtype=np.int32)
    reps = np.zeros(count, dtype=np.int64)
    reps[remap[::-1]] = np.arange(n)[::-1]
    trans = dfa.trans[reps]
    trans = np.where(trans >= 0, remap[np.maximum(trans, 0)], -1).astype(np.int32)
    return DFA(trans, dfa.inc[reps], dfa.accept[reps], dfa.region[reps], dfa.regions)


def product(a: DFA, b: DFA, max_states: int = 20_000) -> DFA:
    """Intersection of two DFAs of which at least `b` is region-free (its counters are `a`'s)."""
    if b.region.any():
        raise ValueError("product needs a region-free right operand")
    ids = {(0, 0): 0}
    order = [(0, 0)]
    rows: list[np.ndarray] = []
    incs: list[np.ndarray] = []
    i = 0
    while i < len(order):
        p, q = order[i]
        i += 1
        tp, tq = a.trans[p], b.trans[q]
        row = np.full(256, -1, dtype=np.int32)
        for byte in np.nonzero((tp >= 0) & (tq >= 0))[0]:
            pair = (int(tp[byte]), int(tq[byte]))
            j = ids.get(pair)
            if j is None:
                j = ids[pair] = len(order)
                order.append(pair)
                if j >= max_states:
                    raise TooComplex(f"automaton exceeds {max_states} DFA states")
            row[byte] = j
        rows.append(row)
        incs.append(np.where(row >= 0, a.inc[p] | b.inc[q], 0).astype(np.uint8))
    accept = np.array([bool(a.accept[p] and b.accept[q]) for p, q in order])
    region = np.array([int(a.region[p]) for p, _ in order], dtype=np.int32)
    return minimize(DFA(np.stack(rows), np.stack(incs), accept, region, list(a.regions)))


def complement(dfa: DFA) -> DFA:
    """All byte strings a region-free DFA rejects."""
    if dfa.region.any():
        raise ValueError("cannot complement a language with length counters")
    sink = dfa.n
    trans = np.vstack([np.where(dfa.trans >= 0, dfa.trans, sink), np.full((1, 256), sink)])
    inc = np.vstack([dfa.inc, np.zeros((1, 256), dtype=np.uint8)])
    accept = np.append(~dfa.accept, True)
    region = np.zeros(sink + 1, dtype=np.int32)
    return minimize(DFA(trans.astype(np.int32), inc, accept, region, list(dfa.regions[:1])))


def is_empty(dfa: DFA) -> bool:
    """Whether no string is accepted, code point bounds included (`minLength: 4` with
    `pattern: "^(yes|no)$"` has no value, though its bytes alone would)."""
    if not dfa.accept.any():
        return True
    return len(dfa.regions) > 1 and not accepts_without(dfa)


def enumerate_strings(dfa: DFA, limit: int) -> list[bytes] | None:
    """All accepted byte strings if the language is finite with at most `limit` members."""
    # Finite iff the trimmed graph is acyclic; count paths with a memoized DFS.
    n = dfa.n
    state = [0] * n  # 0 new, 1 on stack, 2 done
    counts = [0] * n

    def visit(s: int) -> int:
        if state[s] == 1:
            raise OverflowError
        if state[s] == 2:
            return counts[s]
        state[s] = 1
        total = 1 if dfa.accept[s] else 0
        for t in dfa.trans[s]:
            if t >= 0:
                total += visit(int(t))
                if total > limit:
                    raise OverflowError
        state[s] = 2
        counts[s] = total
        return total

    try:
        if n == 0 or visit(0) > limit:
            return None
    except (OverflowError, RecursionError):
        return None
    out: list[bytes] = []

    def walk(s: int, prefix: bytearray) -> None:
        if dfa.accept[s]:
            out.append(bytes(prefix))
        row = dfa.trans[s]
        for byte in np.nonzero(row >= 0)[0]:
            prefix.append(int(byte))
            walk(int(row[byte]), prefix)
            prefix.pop()

    walk(0, bytearray())
    return [s for s in out if dfa.accepts(s)]


def intersects(a: DFA, b: DFA) -> bool:
    """Whether two DFAs share a string, ignoring length counters (so True may be spurious)."""
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        p, q = stack.pop()
        if a.accept[p] and b.accept[q]:
            return True
        both = (a.trans[p] >= 0) & (b.trans[q] >= 0)
        for byte in both.nonzero()[0]:
            pair = (int(a.trans[p, byte]), int(b.trans[q, byte]))
            if pair not in seen:
                seen.add(pair)
                stack.append(pair)
    return False


UPPER = np.arange(ord("A"), ord("Z") + 1)
CASE = ord("a") - ord("A")


def lower_ascii(data: bytes) -> bytes:
    """`data` with its upper-case ASCII letters in lower case (other bytes as they are)."""
    return bytes(b + CASE if ord("A") <= b <= ord("Z") else b for b in data)


def case_matters(dfa: DFA) -> bool:
    """Whether writing an upper-case ASCII letter of an accepted string in lower case can leave
    the language (`fold_case` adds strings): some state leads elsewhere, or nowhere, on a
    letter's lower case than on its upper case. A free string, which goes on alike after either,
    does not need folding."""
    upper = dfa.trans[:, UPPER]
    return bool(((upper >= 0) & (upper != dfa.trans[:, UPPER + CASE])).any())


def fold_case(dfa: DFA) -> DFA:
    """The strings of `dfa` with any of their upper-case ASCII letters written in lower case
    (the language an uncased tokenizer can spell of it): every edge on `A`-`Z` gains a twin on
    its lower-case letter, then subset construction. Length counters are kept (a letter is one
    code point either way); raises `RegionConflict` where the twins would merge two of them."""
    nfa = NFA()
    return determinize(nfa, nfa.embed(dfa, None, fold=True))


def unfold(dfa: DFA, data: bytes) -> bytes | None:
    """A string `dfa` accepts that reads as `data` once lower-cased where `data` is (`fold_case`
    undone): `data` itself where it is accepted, else the one that keeps each byte as it is for
    as long as an accepting path allows, upper-casing a letter only where it must. None if none."""
    n = len(data)
    twins = [
        (b, b - CASE) if ord("a") <= b <= ord("z") else (b,) for b in data
    ]  # the bytes each position may be, its own first
    # live[i]: states from which data[i:] can be read (unfolded) to an accepting state.
    live = [np.zeros(dfa.n, dtype=bool) for _ in range(n + 1)]
    live[n] = dfa.accept.copy()
    for i in range(n - 1, -1, -1):
        for b in twins[i]:
            targets = dfa.trans[:, b]
            live[i] |= (targets >= 0) & live[i + 1][np.maximum(targets, 0)]
    if not live[0][0]:
        return None
    out, s = bytearray(), 0
    for i in range(n):
        for b in twins[i]:
            t = int(dfa.trans[s, b])
            if t >= 0 and live[i + 1][t]:
                out.append(b)
                s = t
                break
    found = bytes(out)
    return found if dfa.accepts(found) else None
