"""Triton kernels for the decoding hot path, each beside its PyTorch reference, behind one dispatch.

Public entry points: `masked_confidence` (best allowed token, its masked-softmax probability, top-2
margin and entropy per row) and `block_attention` (a block's queries over a ragged cached prefix
plus the block itself, grouped-query heads). Each takes `backend="auto" | "torch" | "triton"`; see
`decide.kernels.dispatch` for how the choice is made and logged. Importing this package never
imports triton.
"""

from decide.kernels.block_attention import block_attention
from decide.kernels.dispatch import ENV_VAR, Backend
from decide.kernels.masked_confidence import masked_confidence
from decide.kernels.masked_confidence_ref import MaskedConfidence

__all__ = ["ENV_VAR", "Backend", "MaskedConfidence", "block_attention", "masked_confidence"]
