"""PyTorch reference for `block_attention`: scaled-dot-product attention with an explicit key mask.

Row b's keys are valid below `prefix_lens[b] + block_lens[b]` (the cached prefix, then the block's
own valid positions); every query of the row attends all of them, so attention is bidirectional
inside the block and causal only in the sense that nothing attends the padding after it. Grouped-
query heads share a key/value head: query head h reads kv head h // (Hq // Hkv). A row with no valid
key at all outputs zeros. This is the baseline the Triton kernel must beat: SDPA is handed a
boolean mask, so it cannot use its flash backend and reads every one of the S key positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# `enable_gqa` arrived in torch 2.5; older versions get the kv heads repeated explicitly.
_HAS_ENABLE_GQA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)


def key_mask(prefix_lens: torch.Tensor, block_lens: torch.Tensor, s: int) -> torch.Tensor:
    """bool [B, S]: key j of row b is valid iff j < prefix_lens[b] + block_lens[b]."""
    kv_len = (prefix_lens + block_lens).to(torch.int64)  # [B]
    return torch.arange(s, device=prefix_lens.device)[None, :] < kv_len[:, None]


def block_attention_ref(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    prefix_lens: torch.Tensor,
    block_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Reference on already-checked arguments; returns a new [B, Hq, L, D] tensor in q's dtype."""
    hq = q.shape[1]
    hkv, s = k.shape[1], k.shape[2]
    valid = key_mask(prefix_lens, block_lens, s)  # [B, S]
    mask = valid[:, None, None, :]  # [B, 1, 1, S], broadcast over heads and queries
    if _HAS_ENABLE_GQA:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=scale, enable_gqa=hq != hkv
        )
    else:
        group = hq // hkv
        k = k.repeat_interleave(group, dim=1)  # [B, Hq, S, D]
        v = v.repeat_interleave(group, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    # SDPA leaves rows whose mask is all False as NaN (or backend-dependent); the contract says 0.
    empty = ~valid.any(dim=1)  # [B]
    return out.masked_fill(empty[:, None, None, None], 0.0)
