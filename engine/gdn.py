"""The Gated-DeltaNet layer of Qwen3-Next (and Clover), run over a window from a committed state.

Per window token: `in_proj_qkvz` gives q, k (Hk heads of Dk), v and the output gate z (Hv heads of
Dv), grouped per key head as the checkpoints store them; `in_proj_ba` gives beta's and the decay's
inputs. q, k, v go through a causal depthwise convolution (width K) and SiLU; then
beta = sigmoid(b), g = −exp(A_log) · softplus(a + dt_bias), q and k are L2-normalised and the gated
delta rule (`decide.kernels.gated_delta_rule`) runs from the committed recurrent state; the output
is RMS-normalised per head, gated by SiLU(z) and projected back.

GDN layers are causal whatever the attention layers do: a block's tokens see the prefix and the
block tokens before them. `forward` takes the committed state (`None`: an empty prefix), never
modifies it, and when `counts` is given also returns the state after exactly `counts[b]` window
tokens of each row: the first max(counts) positions run with per-row lengths `counts` (the kernel
stops each row at its count, so its final state is the committed one), then each row's remaining
`window_lens[b] − counts[b]` positions are gathered to the front and run from that state. Every
position is processed once; the price of ragged commits is two kernel launches and a gather.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from decide.kernels.gated_delta import gated_delta_rule

from .config import ModelConfig

GdnState = tuple[torch.Tensor, torch.Tensor]  # conv [B, C, K−1], recurrent fp32 [B, Hv, Dk, Dv]


class GatedRMSNorm(nn.Module):
    """RMSNorm over each head's values, then · SiLU(gate) (Qwen3-Next's `RMSNormGated`)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        out = self.weight * x32.to(x.dtype)
        return (out * F.silu(gate.float())).to(x.dtype)


class GatedDeltaNet(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        s = c.hybrid
        assert s is not None
        self.hk, self.hv = s.linear_num_key_heads, s.linear_num_value_heads
        self.dk, self.dv = s.linear_key_head_dim, s.linear_value_head_dim
        self.kernel = s.conv_kernel
        self.key_dim, self.value_dim = self.hk * self.dk, self.hv * self.dv
        self.conv_dim = s.conv_dim
        h = c.hidden_size
        self.in_proj_qkvz = nn.Linear(h, 2 * self.key_dim + 2 * self.value_dim, bias=False)
        self.in_proj_ba = nn.Linear(h, 2 * self.hv, bias=False)
        self.conv1d = nn.Conv1d(
            self.conv_dim, self.conv_dim, self.kernel, groups=self.conv_dim, bias=False
        )
        self.dt_bias = nn.Parameter(torch.ones(self.hv))
        self.A_log = nn.Parameter(torch.zeros(self.hv))
        self.norm = GatedRMSNorm(self.dv, c.norm_eps)
        self.out_proj = nn.Linear(self.value_dim, h, bias=False)

    def empty_state(self, batch: int, dtype: torch.dtype, device: torch.device) -> GdnState:
        conv = torch.zeros(batch, self.conv_dim, self.kernel - 1, dtype=dtype, device=device)
        state = torch.zeros(batch, self.hv, self.dk, self.dv, dtype=torch.float32, device=device)
        return conv, state

    def _projections(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """mixed q|k|v `[B, Lw, C]`, z `[B, Lw, Hv, Dv]`, b and a `[B, Lw, Hv]`."""
        b, lw, _ = x.shape
        r = self.hv // self.hk  # value heads per key head
        # The checkpoint groups the projections per key head: [q, k, v (r heads), z (r heads)].
        qkvz = self.in_proj_qkvz(x).view(b, lw, self.hk, 2 * self.dk + 2 * r * self.dv)
        q, k, v, z = torch.split(qkvz, [self.dk, self.dk, r * self.dv, r * self.dv], dim=-1)
        ba = self.in_proj_ba(x).view(b, lw, self.hk, 2 * r)
        beta_in, decay_in = torch.split(ba, [r, r], dim=-1)
        mixed = torch.cat(
            (q.reshape(b, lw, -1), k.reshape(b, lw, -1), v.reshape(b, lw, -1)), dim=-1
        )  # [B, Lw, C]
        z = z.reshape(b, lw, self.hv, self.dv)
        return mixed, z, beta_in.reshape(b, lw, self.hv), decay_in.reshape(b, lw, self.hv)

    def forward(
        self,
        x: torch.Tensor,  # [B, Lw, H]
        committed: GdnState | None,
        window_lens: torch.Tensor,  # [B]
        counts: torch.Tensor | None,  # [B] tokens to commit per row, None: no row commits
    ) -> tuple[torch.Tensor, GdnState | None]:
        """Outputs `[B, Lw, H]` and, with `counts`, the state after each row's first counts[b]
        tokens (see the module docstring)."""
        b, lw, _ = x.shape
        if committed is None:
            committed = self.empty_state(b, x.dtype, x.device)
        conv_prev, state_prev = committed
        mixed, z, beta_in, decay_in = self._projections(x)

        # Causal conv over [last K−1 committed inputs | window]: a valid convolution of that
        # sequence gives exactly one output per window token.
        seq = torch.cat((conv_prev.to(mixed.dtype), mixed.transpose(1, 2)), dim=2)  # [B, C, K−1+Lw]
        conv = F.silu(F.conv1d(seq, self.conv1d.weight, groups=self.conv_dim))  # [B, C, Lw]
        conv = conv.transpose(1, 2)  # [B, Lw, C]
        q, k, v = torch.split(conv, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.unflatten(-1, (self.hk, self.dk))  # [B, Lw, Hk, Dk]
        k = k.unflatten(-1, (self.hk, self.dk))
        v = v.unflatten(-1, (self.hv, self.dv))  # [B, Lw, Hv, Dv]
        beta = torch.sigmoid(beta_in)  # [B, Lw, Hv]
        # fp32: in half precision exp(A_log) · softplus(…) can overflow before the minus sign.
        g = -self.A_log.float().exp() * F.softplus(decay_in.float() + self.dt_bias.float())

        new_state: GdnState | None = None
        if counts is None:
            core = gated_delta_rule(
                q, k, v, g, beta, state_prev, window_lens, qk_l2norm=True, output_final_state=False
            ).out
        else:
            core, state_after = _ragged_commit(q, k, v, g, beta, state_prev, window_lens, counts)
            index = counts[:, None, None] + torch.arange(self.kernel - 1, device=x.device)
            conv_after = seq.gather(2, index.expand(b, self.conv_dim, self.kernel - 1))
            new_state = (conv_after, state_after)

        out = self.norm(core, z)  # [B, Lw, Hv, Dv]
        return self.out_proj(out.reshape(b, lw, self.value_dim)), new_state


def _ragged_commit(
    q: torch.Tensor,  # [B, Lw, Hk, Dk]
    k: torch.Tensor,
    v: torch.Tensor,  # [B, Lw, Hv, Dv]
    g: torch.Tensor,  # [B, Lw, Hv]
    beta: torch.Tensor,
    state: torch.Tensor,  # [B, Hv, Dk, Dv] committed
    window_lens: torch.Tensor,  # [B]
    counts: torch.Tensor,  # [B], ≤ window_lens
) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs of the whole window and the state after each row's first `counts[b]` tokens."""
    lw = q.shape[1]
    first_len = int(counts.max())
    head = gated_delta_rule(
        *(t[:, :first_len] for t in (q, k, v, g, beta)), state, counts, qk_l2norm=True
    )
    assert head.final_state is not None
    rest = window_lens - counts  # [B]
    rest_len = int(rest.max())
    positions = torch.arange(lw, device=q.device)  # [Lw]
    from_head = F.pad(head.out, (0, 0, 0, 0, 0, lw - first_len))  # [B, Lw, Hv, Dv]
    if rest_len == 0:
        return from_head, head.final_state
    # Each row's uncommitted tail, moved to the front: positions counts[b] + t.
    index = (counts[:, None] + positions[None, :rest_len]).clamp(max=lw - 1)  # [B, R]
    tail = [
        t.gather(1, index.view(*index.shape, *([1] * (t.dim() - 2))).expand(-1, -1, *t.shape[2:]))
        for t in (q, k, v, g, beta)
    ]
    rest_out = gated_delta_rule(
        *tail, head.final_state, rest, qk_l2norm=True, output_final_state=False
    ).out  # [B, R, Hv, Dv]
    back = (positions[None, :] - counts[:, None]).clamp(0, rest_len - 1)  # [B, Lw]
    from_rest = rest_out.gather(1, back[:, :, None, None].expand(-1, -1, *rest_out.shape[2:]))
    committed = (positions[None, :] < counts[:, None])[:, :, None, None]  # [B, Lw, 1, 1]
    return torch.where(committed, from_head, from_rest), head.final_state
