"""Token-level automaton of a slot language: which token moves which (state, ctx, count) where.

`TokenAutomaton(dfa, vocab)` walks every vocabulary variant from every DFA state at once, level by
level down the vocabulary trie, keeping only live (start state, trie node) pairs, so the cost is
the number of token prefixes the language can actually begin from each state. A token's effect on
the code point counter of a length-bounded string is summarized as `kind 0` (still inside the same
string: count += a) or `kind 1` (left it: the old count + a must lie in the string's bounds, then
the count becomes b). Tokens with the same (source, target, effect) form an *edge class* with one
int32 bitmask row. Product states `(dfa state, ctx, count)` are numbered densely; `pair_src`,
`pair_dst`, `pair_cls` list every product-state transition of every class, which is all the
fixed-length reachability DP in `slot` needs.
"""

from __future__ import annotations

import numpy as np

from .automata import DFA
from .vocab import Vocabulary

_BIG = 1 << 30
_PAIRS_MEMO = 4096  # tokens whose transitions an automaton remembers (`token_pairs`)


class TokenAutomaton:
    def __init__(self, dfa: DFA, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.n_ctx = vocab.n_ctx
        regions = dfa.regions
        region = dfa.region.astype(np.int64)
        lo = np.array([r.lo for r in regions], dtype=np.int64)
        hi = np.array([r.hi if r.hi is not None else _BIG for r in regions], dtype=np.int64)
        cap = np.array([r.cap for r in regions], dtype=np.int64)
        cap[0] = 0
        self.size_of = cap[region] + 1  # [S] counter values per dfa state
        self.offset = np.zeros(dfa.n * self.n_ctx + 1, dtype=np.int64)
        np.cumsum(np.repeat(self.size_of, self.n_ctx), out=self.offset[1:])
        self.n_states = int(self.offset[-1])
        self.accepting = np.array(
            [
                self.offset[s * self.n_ctx + c]
                for s in np.nonzero(dfa.accept)[0]
                for c in range(self.n_ctx)
            ],
            dtype=np.int64,
        )
        self.start = 0
        records = self._walk(dfa, region, lo, hi, cap)
        self._classes(records, region, lo, hi, cap)

    def _walk(self, dfa: DFA, region, lo, hi, cap):
        trie = self.vocab.trie
        trans = dfa.trans.astype(np.int64)
        inc = dfa.inc.astype(np.int64)
        n = dfa.n
        src = np.arange(n, dtype=np.int64)
        node = np.zeros(n, dtype=np.int64)
        cur = src.copy()
        exited = region[src] == 0
        add = np.zeros(n, dtype=np.int64)  # count added before leaving the start string
        cnt = np.zeros(n, dtype=np.int64)  # count inside the string entered since
        out = []
        while len(src):
            counts = trie.child_count[node]
            total = int(counts.sum())
            if total == 0:
                break
            rep = np.repeat(np.arange(len(src)), counts)
            first = np.repeat(trie.child_start[node], counts)
            start_of_run = np.repeat(np.cumsum(counts) - counts, counts)
            child = first + (np.arange(total) - start_of_run)
            byte = trie.byte[child].astype(np.int64)
            c0 = cur[rep]
            nxt = trans[c0, byte]
            keep = nxt >= 0
            rep, child, byte, c0, nxt = rep[keep], child[keep], byte[keep], c0[keep], nxt[keep]
            s, ex, a, k = src[rep], exited[rep].copy(), add[rep].copy(), cnt[rep].copy()
            r0, r1 = region[c0], region[nxt]
            step = inc[c0, byte]
            stay = (r0 == r1) & (r1 != 0)
            a = np.where(stay & ~ex, a + step, a)
            k = np.where(stay & ex, k + step, k)
            leave = (r0 != r1) & (r0 != 0)
            inner_ok = ~(leave & ex) | ((k >= lo[r0]) & (k <= hi[r0]))
            ex = ex | leave
            k = np.where((r0 != r1) & (r1 != 0), 0, k)
            rs = region[s]
            ok = inner_ok & (ex | (a <= hi[rs])) & (~ex | (r1 == 0) | (k <= hi[r1]))
            a = np.where(ex, a, np.minimum(a, cap[rs]))
            k = np.where(r1 != 0, np.minimum(k, cap[r1]), 0)
            src, node, cur = s[ok], child[ok], nxt[ok]
            exited, add, cnt = ex[ok], a[ok], k[ok]
            # Variants ending at these nodes.
            vs, ve = trie.var_start[node], trie.var_start[node + 1]
            nv = ve - vs
            if nv.sum():
                rep2 = np.repeat(np.arange(len(src)), nv)
                vstart = np.repeat(vs, nv)
                vrun = np.repeat(np.cumsum(nv) - nv, nv)
                var = trie.var_ids[vstart + (np.arange(int(nv.sum())) - vrun)]
                out.append((src[rep2], var, cur[rep2], exited[rep2], add[rep2], cnt[rep2]))
        if not out:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z, z.astype(bool), z, z
        return tuple(np.concatenate(parts) for parts in zip(*out, strict=True))

    def _classes(self, records, region, lo, hi, cap) -> None:
        src, var, dst, exited, add, cnt = records
        vocab = self.vocab
        tok = vocab.var_token[var]
        cin = vocab.var_ctx_in[var].astype(np.int64)
        cout = vocab.var_ctx_out[var].astype(np.int64)
        kind = exited.astype(np.int64)
        fields = [src, cin, dst, cout, kind, add, cnt]
        radix = [int(f.max()) + 1 if len(f) else 1 for f in fields]
        key = np.zeros(len(src), dtype=np.int64)
        for f, r in zip(fields, radix, strict=True):
            key = key * r + f
        space = int(np.prod(np.array(radix, dtype=object)))
        if space <= 1 << 24:
            # Dense relabelling: O(records + key space), no sort of the records.
            present = np.zeros(space, dtype=bool)
            present[key] = True
            ids = np.cumsum(present) - 1
            cls = ids[key]
            uniq_keys = np.nonzero(present)[0]
        else:
            uniq_keys, cls = np.unique(key, return_inverse=True)
        cols = []
        rest = uniq_keys.copy()
        for r in reversed(radix):
            cols.append(rest % r)
            rest //= r
        uniq = np.stack(cols[::-1], axis=1) if len(uniq_keys) else np.zeros((0, 7), np.int64)
        cls = cls.reshape(-1)
        self.n_classes = len(uniq)
        width = (vocab.size + 31) // 32
        self.width = width
        masks = np.zeros(self.n_classes * width, dtype=np.uint32)
        np.bitwise_or.at(masks, cls * width + (tok >> 5), (1 << (tok & 31)).astype(np.uint32))
        self.class_masks = masks.view(np.int32).reshape(self.n_classes, width)
        # Expand classes into product-state pairs.
        srcs, dsts, clss = [], [], []
        nc = self.n_ctx
        for c, (s, ci, d, co, kd, a, b) in enumerate(uniq.tolist()):
            rs, rd = int(region[s]), int(region[d])
            ms = int(self.size_of[s])
            base_s = int(self.offset[s * nc + ci])
            base_d = int(self.offset[d * nc + co])
            counts = np.arange(ms, dtype=np.int64)
            if kd == 0:
                new = counts + a
                good = new <= hi[rs]
                new = np.minimum(new, cap[rs])
            else:
                total = counts + a
                good = ((total >= lo[rs]) & (total <= hi[rs])) if rs else np.ones(ms, dtype=bool)
                new = np.full(ms, b if rd else 0, dtype=np.int64)
            counts, new = counts[good], new[good]
            srcs.append(base_s + counts)
            dsts.append(base_d + new)
            clss.append(np.full(len(counts), c, dtype=np.int64))
        cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)  # noqa: E731
        self.pair_src, self.pair_dst, self.pair_cls = cat(srcs), cat(dsts), cat(clss)
        order = np.argsort(self.pair_cls, kind="stable")
        self.pair_src = self.pair_src[order]
        self.pair_dst = self.pair_dst[order]
        self.pair_cls = self.pair_cls[order]
        # `token_pairs` hands out views of these, remembered: nobody may write into them.
        self.pair_src.flags.writeable = self.pair_dst.flags.writeable = False
        self.cls_start = np.searchsorted(self.pair_cls, np.arange(self.n_classes + 1)).astype(
            np.int64
        )

    def token_pairs(self, token: int) -> tuple[np.ndarray, np.ndarray]:
        """Product-state transitions of one token (empty arrays for excluded tokens; read-only,
        remembered per token: an automaton is shared by every document asking its question, and
        the same few tokens, the filler above all, are committed again and again)."""
        memo = self.__dict__.setdefault("_pairs", {})
        pairs = memo.get(token)
        if pairs is None:
            if len(memo) >= _PAIRS_MEMO:
                memo.clear()
            pairs = memo[token] = self._token_pairs(token)
        return pairs

    def _token_pairs(self, token: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= token < self.vocab.size or self.n_classes == 0:
            z = np.zeros(0, dtype=np.int64)
            return z, z
        word = self.class_masks[:, token >> 5].view(np.uint32)
        classes = np.nonzero((word >> np.uint32(token & 31)) & np.uint32(1))[0]
        if len(classes) == 1:
            a, b = self.cls_start[classes[0]], self.cls_start[classes[0] + 1]
            return self.pair_src[a:b], self.pair_dst[a:b]
        idx = (
            np.concatenate([np.arange(self.cls_start[c], self.cls_start[c + 1]) for c in classes])
            if len(classes)
            else np.zeros(0, dtype=np.int64)
        )
        src, dst = self.pair_src[idx], self.pair_dst[idx]
        src.flags.writeable = dst.flags.writeable = False
        return src, dst
