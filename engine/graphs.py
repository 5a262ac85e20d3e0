"""One decoding step on static buffers, captured once as a CUDA graph and replayed.

A decoding step of fixed shape (batch, window, positions recomputed, committed prefix) does the
same tensor work every time: the trunk over the window (or over its open positions, attending to
the rest through the cache), the head over the open positions and `masked_confidence` over their
logits. What varies between steps is data (the window's tokens, the masks), never shapes, so the
step can be recorded once as a CUDA graph and replayed without the host's Python, checks and
kernel launches: at batch 64 on an 8B model that host work is a large part of a step
(`benchmarks/llada_step.py`).

`CapturedStep` holds the static buffers (`ids`, the caller's bitmask, the result `out`), runs the
step eagerly through the model's checked `forward`/`forward_queries` (`eager`), runs the capturable
body (`static_step`: planned once, pure tensor work, nothing read back to the host) and, on CUDA,
records and replays that body (`capture`, `replay`). The recomputed positions are the window's
last `queries`, the scored (open) ones its last `scored`; the cache's committed lengths must equal
the shape's prefix and stay so (the step commits nothing). Families whose layers carry state along
the window (Gated DeltaNet) are not supported: their whole-window step is not a function of static
buffers alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decide.kernels import MaskedConfidence, masked_confidence

from .attention import AttentionPlan, plan_attention, plan_queries
from .cache import KVCache
from .model import WindowedModel, place_rows


@dataclass(frozen=True)
class StepShape:
    batch: int
    window: int  # tokens of the block run over the cache
    queries: int  # the window's last `queries` positions are recomputed ...
    prefix: int  # committed tokens of every row before the window
    scored: int = 0  # ... and its last `scored` (≤ queries; 0: all queries) are scored

    @property
    def open(self) -> int:
        return self.scored or self.queries


class CapturedStep:
    def __init__(
        self, model: WindowedModel, cache: KVCache, shape: StepShape, bitmask: torch.Tensor
    ) -> None:
        if not model.supports_queries:
            raise ValueError(
                f"{model.config.model_type}: a step with a carried state is not static"
            )
        if not 1 <= shape.queries <= shape.window:
            raise ValueError(f"queries must lie in [1, window={shape.window}], got {shape.queries}")
        if not 0 <= shape.scored <= shape.queries:
            raise ValueError(f"scored must lie in [0, queries={shape.queries}], got {shape.scored}")
        if cache.batch_size != shape.batch or bool((cache.lengths != shape.prefix).any()):
            raise ValueError(
                f"the cache must hold {shape.batch} rows of {shape.prefix} committed tokens, got "
                f"{cache.batch_size} rows of {sorted(set(cache.lengths.tolist()))}"
            )
        rows = shape.batch * shape.open
        if bitmask.dim() != 2 or bitmask.shape[0] != rows:
            raise ValueError(f"bitmask must be [{rows}, W], got {list(bitmask.shape)}")
        self.model, self.cache, self.shape, self.bitmask = model, cache, shape, bitmask
        device = model.device
        self.ids = torch.full(
            (shape.batch, shape.window), model.config.mask_token_id, device=device
        )
        self.window_lens = torch.full((shape.batch,), shape.window, device=device)
        first = shape.window - shape.queries
        self.offsets = torch.arange(first, shape.window, device=device).expand(shape.batch, -1)
        self.out = MaskedConfidence(
            torch.empty(rows, dtype=torch.int64, device=device),
            torch.empty(rows, dtype=torch.float32, device=device),
            torch.empty(rows, dtype=torch.float32, device=device),
            None,
        )
        self.plan = self._plan()
        self.graph: torch.cuda.CUDAGraph | None = None

    @property
    def whole_window(self) -> bool:
        return self.shape.queries == self.shape.window

    def _plan(self) -> AttentionPlan:
        c, s = self.model.config, self.shape
        block = c.block_size if c.attention == "block_causal" else None
        prefix = self.cache.lengths.clone()
        if self.whole_window:
            plan = plan_attention(prefix, self.window_lens, s.window, block)
        else:
            plan = plan_queries(prefix, self.window_lens, s.window, self.offsets, block)
        self.cache.reserve(plan.span)  # before capture: the buffers must not move afterwards
        return plan

    def _score(self, aligned: torch.Tensor) -> MaskedConfidence:
        """Head over the open positions of aligned states `[B, Lw, H]`, then the masked choice."""
        open_states = aligned[:, self.shape.window - self.shape.open :]
        logits = self.model.logits(open_states.reshape(-1, open_states.shape[-1]))
        return masked_confidence(logits, self.bitmask, out=self.out)

    def eager(self) -> MaskedConfidence:
        """The step through the model's checked entry points, as the decoding loop runs it."""
        if self.whole_window:
            aligned = self.model(self.ids, self.cache)
        else:
            wanted = list(range(self.shape.window - self.shape.queries, self.shape.window))
            aligned = self.model.forward_queries(
                self.ids, self.cache, self.window_lens, [wanted] * self.shape.batch
            )
        return self._score(aligned)

    def static_step(self) -> MaskedConfidence:
        """The step's capturable body: the planned trunk, alignment, head and choice."""
        m = self.model
        if self.whole_window:
            hidden = m._trunk(self.ids, self.plan, self.cache)
        else:
            part = m._trunk(self.ids.gather(1, self.offsets), self.plan, self.cache)
            hidden = place_rows(part, self.offsets, self.shape.window)
        return self._score(m.shift_to_prediction(hidden, self.cache))

    def capture(self) -> None:
        """Record `static_step` as a CUDA graph (after warm-up runs on a side stream)."""
        if self.model.device.type != "cuda":
            raise RuntimeError("CUDA graphs need the model on a CUDA device")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # Triton compiles and the allocator's first requests stay outside
                self.static_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.static_step()
        self.graph = graph

    def replay(self) -> MaskedConfidence:
        if self.graph is None:
            raise RuntimeError("capture() the step before replaying it")
        self.graph.replay()
        return self.out

    def matches_eager(self, atol: float = 2e-2) -> bool:
        """Whether a replay gives the eager step's tokens (and probabilities within `atol`)."""
        want = MaskedConfidence(*(t.clone() if t is not None else None for t in self.eager()))
        got = self.replay()
        same_token = bool((got.token == want.token).all())
        close = bool(torch.allclose(got.prob, want.prob, atol=atol, equal_nan=True))
        return same_token and close
