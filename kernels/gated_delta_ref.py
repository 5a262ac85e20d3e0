"""PyTorch backends of `gated_delta_rule`: the recurrence written step by step, and its chunked form

The contract both implement (see `decide.kernels.gated_delta` for the argument checks): per row b
and value head h, whose query/key head is h // (Hv / Hk), starting from the state
S = initial_state[b, h] `[Dk, Dv]` (zeros without one), for t = 0 .. lengths[b] − 1:

    S   ← exp(g[b, t, h]) · S                                  (gated decay)
    S   ← S + k_t ⊗ beta[b, t, h] · (v_t − Sᵀ k_t)             (delta rule: write the correction)
    o_t = scale · Sᵀ q_t

Outputs at t ≥ lengths[b] are zero; the final state is S after exactly lengths[b] steps. With
`qk_l2norm` q and k are first scaled to unit length in fp32 (x / sqrt(|x|² + 1e-6), as Qwen3-Next
and flash-linear-attention do inside the kernel), else used as given. Everything is computed in
fp32; outputs are returned in v's dtype, states in fp32.

`gated_delta_recurrent_ref` is the oracle every other backend is tested against: one plain step per
position, no algebra. `gated_delta_chunk_ref` is the chunked form (the WY/UT transform of DeltaNet,
as in flash-linear-attention and `transformers`' fallback) that the torch backend uses for long
sequences: inside a chunk of C positions the C delta-rule updates collapse into one triangular solve
and a few matmuls, so the sequential loop runs L / C times instead of L. Positions past a row's
length get g = 0 and beta = 0 (identity update) and q = 0 (zero output), which makes them exact
no-ops for both the outputs and the final state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

L2_EPS = 1e-6


def l2norm(x: torch.Tensor) -> torch.Tensor:
    """x / sqrt(|x|² + eps) over the last dim, in fp32."""
    x = x.float()
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def _grouped(x: torch.Tensor, hv: int) -> torch.Tensor:
    """[B, L, Hk, D] → [B, L, Hv, D]: value head h reads key head h // (Hv / Hk)."""
    return x.repeat_interleave(hv // x.shape[2], dim=2) if x.shape[2] != hv else x


def gated_delta_recurrent_ref(
    q: torch.Tensor,  # [B, L, Hk, Dk]
    k: torch.Tensor,  # [B, L, Hk, Dk]
    v: torch.Tensor,  # [B, L, Hv, Dv]
    g: torch.Tensor,  # [B, L, Hv] log decay, ≤ 0
    beta: torch.Tensor,  # [B, L, Hv]
    initial_state: torch.Tensor | None,  # [B, Hv, Dk, Dv]
    lengths: torch.Tensor,  # [B]
    scale: float,
    qk_l2norm: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrence one position at a time: (out [B, L, Hv, Dv], state [B, Hv, Dk, Dv])."""
    b, length, hv, dv = v.shape
    dk = q.shape[-1]
    if qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    qf = _grouped(q, hv).float()  # [B, L, Hv, Dk]
    kf = _grouped(k, hv).float()
    vf, gf, bf = v.float(), g.float(), beta.float()
    state = torch.zeros(b, hv, dk, dv, dtype=torch.float32, device=v.device)
    if initial_state is not None:
        state = initial_state.float().clone()
    out = torch.zeros(b, length, hv, dv, dtype=torch.float32, device=v.device)
    lengths = lengths.to(v.device)
    for t in range(length):
        live = (t < lengths)[:, None, None, None]  # [B, 1, 1, 1]: rows past their length stop
        k_t, v_t, q_t = kf[:, t], vf[:, t], qf[:, t]  # [B, Hv, Dk], [B, Hv, Dv], [B, Hv, Dk]
        decayed = state * gf[:, t].exp()[..., None, None]  # [B, Hv, Dk, Dv]
        predicted = torch.einsum("bhkv,bhk->bhv", decayed, k_t)  # what the state recalls for k_t
        delta = (v_t - predicted) * bf[:, t][..., None]  # [B, Hv, Dv]
        updated = decayed + k_t[..., None] * delta[..., None, :]
        state = torch.where(live, updated, state)
        o_t = torch.einsum("bhkv,bhk->bhv", state, q_t) * scale  # [B, Hv, Dv]
        out[:, t] = torch.where(live[..., 0], o_t, 0.0)
    return out.to(v.dtype), state


def gated_delta_chunk_ref(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None,
    lengths: torch.Tensor,
    scale: float,
    qk_l2norm: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same result in L / chunk_size sequential steps (see the module docstring)."""
    b, length, hv, dv = v.shape
    dk = q.shape[-1]
    if qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    c = chunk_size
    live = torch.arange(length, device=v.device)[None, :] < lengths.to(v.device)[:, None]  # [B, L]
    # Dead positions become exact no-ops: decay exp(0) = 1, no write (beta 0), no read (q 0).
    qf = _grouped(q, hv).float() * live[..., None, None] * scale
    kf = _grouped(k, hv).float() * live[..., None, None]
    vf = v.float()
    gf = g.float() * live[..., None]
    bf = beta.float() * live[..., None]
    pad = (c - length % c) % c
    # [B, Hv, N, C, D] chunks; padding positions are dead as well.
    qf, kf, vf = (F.pad(x, (0, 0, 0, 0, 0, pad)).transpose(1, 2) for x in (qf, kf, vf))
    gf, bf = (F.pad(x, (0, 0, 0, pad)).transpose(1, 2) for x in (gf, bf))
    n = (length + pad) // c
    qf, kf, vf = (x.reshape(b, hv, n, c, x.shape[-1]) for x in (qf, kf, vf))
    gf, bf = gf.reshape(b, hv, n, c), bf.reshape(b, hv, n, c)

    cum = gf.cumsum(-1)  # [B, Hv, N, C] log decay from the chunk start through position i
    lower = torch.ones(c, c, dtype=torch.bool, device=v.device).tril()  # j ≤ i
    # decay[i, j] = exp(cum_i − cum_j) for j ≤ i; masked before exp so nothing overflows.
    decay = (cum[..., :, None] - cum[..., None, :]).masked_fill(~lower, float("-inf")).exp()
    k_beta = kf * bf[..., None]  # [B, Hv, N, C, Dk]
    # (I + N) with N strictly lower: N[i, j] = beta_i (k_i · k_j) decay[i, j]. Solving with it turns
    # the C sequential delta-rule writes of a chunk into one triangular system (the UT transform).
    system = (k_beta @ kf.transpose(-1, -2)) * decay
    system = system.masked_fill(~lower.tril(-1), 0.0) + torch.eye(c, device=v.device)
    u = torch.linalg.solve_triangular(system, vf * bf[..., None], upper=False)  # [.., C, Dv]
    w = torch.linalg.solve_triangular(system, k_beta * cum.exp()[..., None], upper=False)
    attn = (qf @ kf.transpose(-1, -2)) * decay  # [B, Hv, N, C, C] intra-chunk, causal incl. i = j
    q_decayed = qf * cum.exp()[..., None]
    k_to_end = kf * (cum[..., -1:] - cum).exp()[..., None]  # decay from position i to chunk end

    state = torch.zeros(b, hv, dk, dv, dtype=torch.float32, device=v.device)
    if initial_state is not None:
        state = initial_state.float().clone()
    out = torch.empty(b, hv, n, c, dv, dtype=torch.float32, device=v.device)
    for i in range(n):
        v_new = u[:, :, i] - w[:, :, i] @ state  # [B, Hv, C, Dv] corrections the state lacks
        out[:, :, i] = q_decayed[:, :, i] @ state + attn[:, :, i] @ v_new
        state = (
            state * cum[:, :, i, -1].exp()[..., None, None]
            + k_to_end[:, :, i].transpose(-1, -2) @ v_new
        )
    out = out.reshape(b, hv, n * c, dv)[:, :, :length].transpose(1, 2)  # [B, L, Hv, Dv]
    return out.to(v.dtype), state
