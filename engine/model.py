"""The window/cache forward every architecture shares, and the LLaMA-style decoder of the four
diffusion LM families: embeddings, N × (RMSNorm → GQA attention with RoPE → RMSNorm → SwiGLU),
final RMSNorm, tied or untied head (`bert.py` holds the BERT encoder).

`forward` takes a window of new tokens per row on top of the row's cached prefix and returns final
hidden states *aligned to prediction*: entry `i` holds the state whose logits predict the token at
window position `i`. For families trained with shifted logits (Dream, Fast-dLLM v2) that is the
state one position earlier; window position 0 then takes the cached state of the row's last
committed token (and predicts nothing, as zeros, when the row has no prefix). Callers compute
logits only where they need them with `logits()`, so a step over a 150k vocabulary does not
materialise `[B, L, V]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AttentionPlan, attend, plan_attention, plan_queries
from .cache import KVCache
from .config import ModelConfig
from .layers import RMSNorm, SwiGLU, apply_partial_rope, by_token_chunks, rope_cos_sin


class SelfAttention(nn.Module):
    """GQA attention with RoPE over the window and the row's cached prefix. `rotary_dim` (default:
    the whole head) is how many leading dims of each head RoPE rotates; `fused_qkv` reads q, k and
    v from one `qkv_proj` (LLaDA2's `query_key_value`) instead of three projections."""

    def __init__(self, c: ModelConfig, rotary_dim: int | None = None, fused_qkv: bool = False):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.rotary_dim = c.head_dim if rotary_dim is None else rotary_dim
        q, kv = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        self.sizes = (q, kv, kv)
        self.qkv_proj = (
            nn.Linear(c.hidden_size, q + 2 * kv, bias=c.attention_bias) if fused_qkv else None
        )
        if self.qkv_proj is None:
            self.q_proj = nn.Linear(c.hidden_size, q, bias=c.attention_bias)
            self.k_proj = nn.Linear(c.hidden_size, kv, bias=c.attention_bias)
            self.v_proj = nn.Linear(c.hidden_size, kv, bias=c.attention_bias)
        self.o_proj = nn.Linear(q, c.hidden_size, bias=c.output_bias)
        self.q_norm = RMSNorm(c.head_dim, c.norm_eps) if c.qk_norm else None
        self.k_norm = RMSNorm(c.head_dim, c.norm_eps) if c.qk_norm else None

    def forward(
        self,
        x: torch.Tensor,  # [B, Lw, H], or [1, N, H] when the plan packs queries
        cos: torch.Tensor,  # [B, Lw, rotary_dim]
        sin: torch.Tensor,
        cache: KVCache | None,
        layer: int,
        plan: AttentionPlan,
        outputs: Outputs | None = None,
    ) -> torch.Tensor:
        # `x` is in the token layout (packed or not), attention in the padded one (`plan`).
        # `outputs`: keys and values of every position, queries (and the result `[B, Q, H]`)
        # only at `outputs.offsets`.
        b, lw = plan.positions.shape
        if self.qkv_proj is not None:
            q, k, v = plan.to_rows(self.qkv_proj(x)).split(self.sizes, dim=-1)
            q = q if outputs is None else outputs.pick(q)
        else:
            k, v = (plan.to_rows(p(x)) for p in (self.k_proj, self.v_proj))
            q = plan.to_rows(self.q_proj(x)) if outputs is None else (
                self.q_proj(outputs.pick(plan.to_rows(x)))
            )  # fmt: skip
        q_cos, q_sin, q_plan = (cos, sin, plan) if outputs is None else (
            outputs.pick(cos), outputs.pick(sin), outputs.plan
        )  # fmt: skip
        lq = q.shape[1]
        q = q.reshape(b, lq, self.num_heads, self.head_dim)
        k = k.reshape(b, lw, self.num_kv_heads, self.head_dim)
        v = v.reshape(b, lw, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = apply_partial_rope(q.transpose(1, 2), q_cos, q_sin, self.rotary_dim)  # [B, Hq, Lq, D]
        k = apply_partial_rope(k.transpose(1, 2), cos, sin, self.rotary_dim)  # [B, Hkv, Lw, D]
        v = v.transpose(1, 2)
        keys, values = (
            (k, v) if cache is None else cache.write(layer, k, v, plan.span, plan.positions)
        )
        out = attend(q, keys, values, q_plan).transpose(1, 2).reshape(b, lq, -1)
        return self.o_proj(out if outputs is not None else plan.to_packed(out))


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.attn = SelfAttention(c)
        self.mlp_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.mlp = SwiGLU(c.hidden_size, c.intermediate_size, c.mlp_bias)


class WindowedModel(nn.Module):
    """What every architecture shares: the window/cache contract of `forward` (see the module
    docstring). Subclasses build `embed` and implement `_trunk` and `logits`."""

    config: ModelConfig
    embed: nn.Embedding
    # Whether `forward_queries` may run a window's positions apart from each other (not for a
    # trunk whose layers carry state along the sequence, as Gated DeltaNet's do).
    supports_queries: bool = True
    # Whether `_trunk` takes `outputs` (its last layer then runs queries, attention output and
    # MLP only at the positions whose states are read; keys and values everywhere).
    supports_outputs: bool = False

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    def new_cache(self, batch_size: int, capacity: int = 0) -> KVCache:
        c = self.config
        return KVCache(
            num_layers=c.num_layers,
            batch_size=batch_size,
            num_kv_heads=c.num_kv_heads,
            head_dim=c.head_dim,
            hidden_size=c.hidden_size,
            capacity=capacity,
            dtype=self.dtype,
            device=self.device,
            limit=c.max_position_embeddings,
        )

    def _trunk(
        self, input_ids: torch.Tensor, plan: AttentionPlan, cache: KVCache | None
    ) -> torch.Tensor:
        """Final hidden states `[B, Lw, H]` of the window (unshifted); no cache: the window is
        the whole sequence."""
        raise NotImplementedError

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits `[..., embedding_size]` for hidden states `[..., H]`."""
        raise NotImplementedError

    def token_logits(
        self, hidden: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor
    ) -> torch.Tensor:
        """`logits(hidden[rows[q]])[tokens[q]]` for each pair q `[Q]`, without computing the
        other logits: finite answer slots only ever need a handful of candidate tokens."""
        raise NotImplementedError

    def subset_logits(self, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """`logits(hidden)[..., tokens]` `[..., T]` from the head rows of `tokens` only: one
        matrix product with T columns instead of the full vocabulary."""
        raise NotImplementedError

    def _check(
        self,
        input_ids: torch.Tensor,
        cache: KVCache | None,
        window_lens: torch.Tensor | None,
        commit: torch.Tensor | int | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(window_lens, commit counts, prefix lengths) of a window, checked."""
        c = self.config
        if input_ids.dim() != 2 or (cache is not None and input_ids.shape[0] != cache.batch_size):
            raise ValueError(
                f"input_ids must be [B, L] with B = cache batch "
                f"{None if cache is None else cache.batch_size}, got {list(input_ids.shape)}"
            )
        b, lw = input_ids.shape
        device = input_ids.device
        if window_lens is None:
            window_lens = torch.full((b,), lw, dtype=torch.long, device=device)
        window_lens = window_lens.to(device=device, dtype=torch.long)
        if bool(((window_lens < 1) | (window_lens > lw)).any()):
            raise ValueError(f"window_lens must lie in [1, {lw}], got {window_lens.tolist()}")
        if commit is None:
            commit = 0
        counts = torch.as_tensor(commit, dtype=torch.long, device=device).expand(b).clone()
        if bool(((counts < 0) | (counts > window_lens)).any()):
            raise ValueError(
                f"commit must lie in [0, window_lens], got {counts.tolist()} "
                f"for window_lens {window_lens.tolist()}"
            )
        if cache is None and bool((counts > 0).any()):
            raise ValueError("commit needs a cache to commit to")
        prefix = torch.zeros(b, dtype=torch.long, device=device) if cache is None else cache.lengths
        if c.attention == "block_causal" and bool((prefix % c.block_size).any()):
            raise ValueError(
                f"block-causal model ({c.model_type}, block size {c.block_size}): every row's "
                f"cached prefix must be whole blocks, got lengths {prefix.tolist()}"
            )
        if int((prefix + window_lens).max()) > c.max_position_embeddings:
            raise ValueError(
                f"window reaches position {int((prefix + window_lens).max())}, beyond the "
                f"model's {c.max_position_embeddings} positions"
            )
        return window_lens, counts, prefix

    def shift_to_prediction(self, hidden: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """States aligned to prediction (see the module docstring), committing nothing: pure
        tensor work, so a captured CUDA graph can run it."""
        if not self.config.logits_shift:
            return hidden
        first = torch.zeros_like(hidden[:, 0])  # [B, H]
        if cache is not None:
            first = torch.where(cache.has_last[:, None], cache.last_hidden.to(hidden.dtype), first)
        return torch.cat((first[:, None], hidden[:, :-1]), dim=1)

    def _align(
        self, hidden: torch.Tensor, cache: KVCache | None, counts: torch.Tensor
    ) -> torch.Tensor:
        """States aligned to prediction; commits `counts`."""
        aligned = self.shift_to_prediction(hidden, cache)
        if cache is not None:
            cache.commit(counts, hidden if self.config.logits_shift else None)
        return aligned

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: KVCache | None = None,
        window_lens: torch.Tensor | None = None,
        commit: torch.Tensor | int | None = None,
        position_shift: torch.Tensor | None = None,
        outputs: Sequence[Sequence[int]] | None = None,
    ) -> torch.Tensor:
        """Run a window `input_ids` `[B, Lw]` over `cache`; return aligned hidden states
        `[B, Lw, H]`. `window_lens` `[B]` marks right padding (default: all `Lw`); `commit` (per
        row or one int, default 0) makes that many leading window tokens part of the prefix.
        Without a cache the window is each row's whole sequence (training, exact recompute).
        `position_shift` `[B, Lw]` (default none) is added to the positions the model encodes,
        not to those that index the cache (`AttentionPlan.encoded`). `outputs` (with a cache):
        per row, the window offsets whose aligned states the caller reads; the others come back
        as anything (zeros where the last layer skipped them), while the cache gets every
        position's keys and values exactly as without it: the last layer's queries, attention
        output and MLP then run at those positions only."""
        c = self.config
        window_lens, counts, prefix = self._check(input_ids, cache, window_lens, commit)
        block = c.block_size if c.attention == "block_causal" else None
        lw = input_ids.shape[1]
        plan = plan_attention(prefix, window_lens, lw, block)
        if position_shift is not None:
            plan = replace(plan, encoded=plan.positions + position_shift.to(plan.positions))
        if cache is not None:
            cache.reserve(plan.span)
        subset = None
        if outputs is not None and cache is not None and self.supports_outputs:
            subset = self._outputs(outputs, counts, prefix, window_lens, lw, block)
        if subset is None:
            return self._align(self._trunk(input_ids, plan, cache), cache, counts)
        return self._align(self._trunk(input_ids, plan, cache, subset), cache, counts)

    def _states_needed(self, wanted: Sequence[int], commit: int, window_len: int) -> set[int]:
        """The window offsets whose last-layer states give the aligned states `wanted` (one
        earlier for a shifted family) and, for a shifted family committing `commit` tokens, the
        state `KVCache.commit` records."""
        if not self.config.logits_shift:
            need = set(wanted)
        else:
            need = {o - 1 for o in wanted if o >= 1}
            if commit:
                need.add(commit - 1)
        return {o for o in need if 0 <= o < window_len}

    def _outputs(
        self,
        outputs: Sequence[Sequence[int]],
        counts: torch.Tensor,
        prefix: torch.Tensor,
        window_lens: torch.Tensor,
        lw: int,
        block: int | None,
    ) -> Outputs | None:
        """The last layer's query positions for aligned `outputs` (see `forward`), or None when
        they would not save work."""
        rows = []
        for row, wanted in enumerate(outputs):
            need = self._states_needed(wanted, int(counts[row]), int(window_lens[row]))
            rows.append(sorted(need) or [0])
        width = max(len(r) for r in rows)
        if width * 2 > lw:  # most positions read anyway: not worth the gathers
            return None
        offsets = torch.tensor([r + [r[0]] * (width - len(r)) for r in rows],
                               dtype=torch.long, device=prefix.device)  # fmt: skip
        return Outputs(offsets, plan_queries(prefix, window_lens, lw, offsets, block))

    def forward_queries(
        self,
        input_ids: torch.Tensor,
        cache: KVCache,
        window_lens: torch.Tensor,
        queries: list[list[int]],
        commit: torch.Tensor | int | None = None,
        position_shift: torch.Tensor | None = None,
        outputs: Sequence[Sequence[int]] | None = None,
    ) -> torch.Tensor:
        """`forward`, recomputing only the window offsets `queries[b]` of each row: their keys
        and values are rewritten in the cache, and every other window position's are read from
        it as an earlier forward of the same window left them. Equal to `forward` when every
        offset is queried; approximate otherwise (the caller queries the positions whose tokens
        changed since, and those whose states it needs). A row that commits must query all of
        its window. Returns aligned states `[B, Lw, H]`, zeros where nothing was computed.
        `outputs` as for `forward`, offsets among the queries: the last layer computes only
        those (keys and values of every query)."""
        c = self.config
        if not self.supports_queries:
            raise ValueError(f"{c.model_type}: a window cannot be recomputed in part")
        window_lens, counts, prefix = self._check(input_ids, cache, window_lens, commit)
        lw = input_ids.shape[1]
        for row, wanted in enumerate(queries):
            if any(not 0 <= o < int(window_lens[row]) for o in wanted):
                raise ValueError(f"queries of row {row} must lie in its window, got {wanted}")
            if int(counts[row]) and len(set(wanted)) < int(window_lens[row]):
                raise ValueError("a row that commits must recompute its whole window")
        rows = [sorted(set(q)) or [0] for q in queries]
        width = max(len(q) for q in rows)
        offsets = torch.tensor(
            [q + [q[0]] * (width - len(q)) for q in rows], dtype=torch.long, device=input_ids.device
        )  # padding repeats a real query: it writes the same keys, its output is not read
        block = c.block_size if c.attention == "block_causal" else None
        plan = plan_queries(prefix, window_lens, lw, offsets, block)
        if position_shift is not None:
            shift = position_shift.to(offsets).gather(1, offsets)
            plan = replace(plan, encoded=plan.positions + shift)
        ids = input_ids.gather(1, offsets)
        subset = None
        if outputs is not None and self.supports_outputs:
            subset = self._read_queries(outputs, rows, counts, window_lens, plan)
        if sum(len(q) for q in rows) < len(rows) * width:  # unequal counts: run packed
            plan = replace(plan, **packing(rows, width, offsets.device))
            if plan.mask is None and offsets.device.type == "cpu":  # attention row by row
                keys = (plan.prefix_lens + plan.window_lens).tolist()
                plan = replace(plan, ragged=tuple(zip(map(len, rows), keys, strict=True)))
            ids = plan.to_packed(ids)
        cache.reserve(plan.span)
        if subset is None:
            hidden = plan.to_rows(self._trunk(ids, plan, cache))  # [B, Q, H]
        else:  # the last layer's states come back in the rows layout
            hidden = self._trunk(ids, plan, cache, subset)
            # a row's padding repeats its first query and is placed at its offset too: carry
            # that query's state there (the last layer left the padding's zeros)
            for row, q in enumerate(rows):
                if len(q) < width:
                    hidden[row, len(q) :] = hidden[row, 0]
        return self._align(place_rows(hidden, offsets, lw), cache, counts)

    def _read_queries(
        self,
        outputs: Sequence[Sequence[int]],
        rows: list[list[int]],
        counts: torch.Tensor,
        window_lens: torch.Tensor,
        plan: AttentionPlan,
    ) -> Outputs | None:
        """`_outputs` for `forward_queries`: which of each row's queries (`rows[b]`, sorted
        window offsets) the last layer computes, as indices into the rows layout `[B, Q]`."""
        picks = []
        for row, wanted in enumerate(outputs):
            need = self._states_needed(wanted, int(counts[row]), int(window_lens[row]))
            where = {o: i for i, o in enumerate(rows[row])}
            missing = sorted(need - where.keys())
            if missing:
                raise ValueError(f"outputs of row {row} must be among its queries, got {missing}")
            picks.append(sorted(where[o] for o in need) or [0])
        width = max(len(p) for p in picks)
        if width * 2 > plan.positions.shape[1]:  # most queries read anyway
            return None
        index = torch.tensor([p + [p[0]] * (width - len(p)) for p in picks],
                             dtype=torch.long, device=plan.positions.device)  # fmt: skip
        mask = (
            None
            if plan.mask is None
            else plan.mask.gather(2, index[:, None, :, None].expand(-1, 1, -1, plan.mask.shape[-1]))
        )
        read_plan = replace(plan, positions=plan.positions.gather(1, index), mask=mask,
                            encoded=None, packed=None, spread=None, ragged=None)  # fmt: skip
        return Outputs(index, read_plan)


@dataclass(frozen=True)
class Outputs:
    """The positions a forward's last layer computes states for: window offsets `[B, Q]` (a
    row's list padded by repeating its first) and the plan of their queries over the window's
    keys (`plan_queries`)."""

    offsets: torch.Tensor
    plan: AttentionPlan

    def pick(self, x: torch.Tensor) -> torch.Tensor:
        """`x` `[B, Lw, ...]` at the offsets: `[B, Q, ...]`."""
        index = self.offsets.view(*self.offsets.shape, *([1] * (x.dim() - 2)))
        return x.gather(1, index.expand(-1, -1, *x.shape[2:]))

    def place(self, x: torch.Tensor, width: int) -> torch.Tensor:
        """States `[B, Q, H]` at the offsets in zeros `[B, width, H]`."""
        return place_rows(x, self.offsets, width)


def packing(rows: list[list[int]], width: int, device: torch.device) -> dict[str, torch.Tensor]:
    """`AttentionPlan.packed` and `.spread` for rows of `len(rows[b])` real queries each, padded
    to `width` by repeating their first."""
    packed, spread = [], []
    for b, q in enumerate(rows):
        first = len(packed)
        packed += range(b * width, b * width + len(q))
        spread += range(first, first + len(q))
        spread += [first] * (width - len(q))
    return {
        "packed": torch.tensor(packed, dtype=torch.long, device=device),
        "spread": torch.tensor(spread, dtype=torch.long, device=device),
    }


class LinearHead:
    """The head of the decoder families: `lm_head`, or the embedding when tied (`lm_head` None)."""

    embed: nn.Embedding
    lm_head: nn.Linear | None

    def _head_weight(self) -> torch.Tensor:
        return self.embed.weight if self.lm_head is None else self.lm_head.weight

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self._head_weight())

    def token_logits(
        self, hidden: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor
    ) -> torch.Tensor:
        return (hidden[rows] * self._head_weight()[tokens]).sum(-1)

    def subset_logits(self, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self._head_weight()[tokens])


class DiffusionLM(LinearHead, WindowedModel):
    """The LLaMA-style decoder of llada, Dream, sdar and Fast_dLLM_Qwen."""

    supports_outputs = True

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.embedding_size, config.hidden_size)
        self.layers = nn.ModuleList(self._layer(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.norm_eps)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.hidden_size, config.embedding_size, bias=False)
        )

    def _layer(self, config: ModelConfig, index: int) -> nn.Module:
        """Layer `index` of the stack (subclasses with other layers override this)."""
        return DecoderLayer(config)

    @property
    def rotary_dim(self) -> int:
        """Leading dimensions of each head that RoPE rotates (all of them here)."""
        return self.config.head_dim

    def _trunk(
        self,
        input_ids: torch.Tensor,
        plan: AttentionPlan,
        cache: KVCache | None,
        outputs: Outputs | None = None,
    ) -> torch.Tensor:
        c = self.config
        x = self.embed(input_ids)  # [B, Lw, H]
        cos, sin = rope_cos_sin(plan.encoded_positions, self.rotary_dim, c.rope_theta, x.dtype)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if i == last and outputs is not None:
                attn = layer.attn(layer.attn_norm(x), cos, sin, cache, i, plan, outputs)
                x = outputs.pick(plan.to_rows(x)) + attn
                x = x + by_token_chunks(lambda y, layer=layer: layer.mlp(layer.mlp_norm(y)), x)
                return outputs.place(self.norm(x), plan.positions.shape[1])
            x = x + layer.attn(layer.attn_norm(x), cos, sin, cache, i, plan)
            x = x + by_token_chunks(lambda y, layer=layer: layer.mlp(layer.mlp_norm(y)), x)
        return self.norm(x)


def place_rows(part: torch.Tensor, offsets: torch.Tensor, width: int) -> torch.Tensor:
    """States `part` `[B, Q, H]` of window offsets `offsets` `[B, Q]` placed in zeros
    `[B, width, H]` (one `index_copy_` over rows: on CPU, `scatter_` cost ~12× as much).
    Repeated offsets carry equal states (padding repeats a real query)."""
    b, _, h = part.shape
    full = part.new_zeros(b, width, h)
    rows = (torch.arange(b, device=part.device)[:, None] * width + offsets).reshape(-1)
    full.view(-1, h).index_copy_(0, rows, part.reshape(-1, h))
    return full
