"""`masked_confidence`: per row, the best token a bitmask allows and how sure the model is of it.

Entry point the engine calls once per denoising step with a block's logits and the slots' token
masks. Contract: `logits` [M, V'] fp32/bf16/fp16 with any strides (rows and columns; a unit column
stride is what makes the Triton kernel fast); `bitmask` int32 [N, W] with any strides, row n
belonging to output row n; `rows` optional int32/int64 [N] picking the logits row of each output row
(without it N == M). Only tokens below `vocab = min(V', 32 * W, vocab_size)` can be allowed, so
logits wider than the tokenizer and bitmask padding bits are ignored. Per output row it returns the
best allowed token (lowest id among equal logits), its probability under the softmax restricted to
the allowed tokens, the margin to the runner-up's probability (0 if there is none) and optionally
the entropy; a row with no allowed token (or only −inf logits) gets token −1 and NaN floats. `out`
optionally supplies the result buffers (contiguous [N]: int64, float32, float32, float32 or None).
"""

from __future__ import annotations

import torch

from decide.kernels import checks, dispatch
from decide.kernels.masked_confidence_ref import MaskedConfidence
from decide.kernels.masked_confidence_torch import masked_confidence_torch

KERNEL = dispatch.Kernel("masked_confidence", "decide.kernels.masked_confidence_triton")
LOGIT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def masked_confidence(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    rows: torch.Tensor | None = None,
    *,
    vocab_size: int | None = None,
    entropy: bool = False,
    backend: dispatch.Backend = "auto",
    out: MaskedConfidence | None = None,
) -> MaskedConfidence:
    """Best allowed token per row with its masked-softmax probability, top-2 margin and entropy."""
    name = KERNEL.name
    checks.ndim(name, "logits", logits, 2, "[M, V] (rows, vocabulary)")
    checks.ndim(name, "bitmask", bitmask, 2, "[N, W] (rows, ceil(V / 32) int32 words)")
    checks.dtype(name, "logits", logits, LOGIT_DTYPES)
    checks.dtype(name, "bitmask", bitmask, (torch.int32,))
    n = bitmask.shape[0]
    if rows is None:
        if n != logits.shape[0]:
            raise ValueError(
                f"{name}: bitmask has {n} rows but logits has {logits.shape[0]} and no `rows` "
                "selects among them"
            )
    else:
        checks.ndim(name, "rows", rows, 1, "[N] (logits row of each output row)")
        checks.dtype(name, "rows", rows, (torch.int64, torch.int32))
        checks.shape(name, "rows", rows, (n,), "one logits row per bitmask row")
    device = checks.same_device(name, logits=logits, bitmask=bitmask, rows=rows)
    if vocab_size is not None and vocab_size < 0:
        raise ValueError(f"{name}: vocab_size={vocab_size} must be ≥ 0")
    vocab = min(logits.shape[1], 32 * bitmask.shape[1])
    if vocab_size is not None:
        vocab = min(vocab, vocab_size)
    if rows is not None:
        rows = rows.contiguous()  # the kernel reads rows[n] at offset n
        if n > 0:
            m = logits.shape[0]
            checks.value(name, (rows >= 0) & (rows < m), f"rows must lie in [0, {m})", rows)
    out = _check_out(out, n, entropy, device)

    if KERNEL.select(backend, device) == "triton":
        KERNEL.triton().masked_confidence_triton(logits, bitmask, rows, vocab, out)
        return out
    done = masked_confidence_torch(logits, bitmask, rows, vocab, entropy)
    for buffer, value in zip(out, done, strict=True):
        if buffer is not None:
            buffer.copy_(value)
    return out


def _check_out(
    out: MaskedConfidence | None, n: int, entropy: bool, device: torch.device
) -> MaskedConfidence:
    """Validate caller-supplied result buffers, or allocate them through `dispatch.scratch`."""
    if out is None:
        return MaskedConfidence(
            dispatch.scratch((n,), torch.int64, device),
            dispatch.scratch((n,), torch.float32, device),
            dispatch.scratch((n,), torch.float32, device),
            dispatch.scratch((n,), torch.float32, device) if entropy else None,
        )
    if (out.entropy is not None) != entropy:
        raise ValueError(
            f"masked_confidence: entropy={entropy} but out.entropy is "
            f"{'None' if out.entropy is None else 'a tensor'}"
        )
    wanted = {"token": torch.int64, "prob": torch.float32, "margin": torch.float32}
    if entropy:
        wanted["entropy"] = torch.float32
    for field, dt in wanted.items():
        t = getattr(out, field)
        checks.dtype("masked_confidence", f"out.{field}", t, (dt,))
        checks.shape("masked_confidence", f"out.{field}", t, (n,), "one value per bitmask row")
        if t.device != device or not t.is_contiguous():
            raise ValueError(
                f"masked_confidence: out.{field} must be contiguous on {device}, got device "
                f"{t.device} stride {t.stride()}"
            )
    return out
