"""The BERT encoder as a diffusion LM: bidirectional attention over learned absolute positions,
post-LayerNorm residual blocks, GELU MLP, and the tied masked-LM head.

This is the family of the bundled decision model (initialised from MiniLM) and of BERT-style
masked diffusion models. It follows the window/cache contract of `WindowedModel`: a window's
positions continue each row's cached prefix, so prefix caching is approximate exactly as for the
other bidirectional families. Token type 0 is used for every position.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AttentionPlan, attend
from .cache import KVCache
from .config import ModelConfig
from .layers import by_token_chunks
from .model import Outputs, WindowedModel


class BertLayer(nn.Module):
    def __init__(self, c: ModelConfig, owner: BertLM) -> None:
        super().__init__()
        self._owner = [owner]  # a list, so the parent is not registered as a submodule
        self.num_heads, self.head_dim = c.num_heads, c.head_dim
        h = c.hidden_size
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.attn_out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=c.norm_eps)
        self.intermediate = nn.Linear(h, c.intermediate_size)
        self.output = nn.Linear(c.intermediate_size, h)
        self.output_norm = nn.LayerNorm(h, eps=c.norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None,
        layer: int,
        plan: AttentionPlan,
        outputs: Outputs | None = None,
    ) -> torch.Tensor:
        # `x` is in the token layout (packed or not), attention in the padded one (`plan`).
        # `outputs`: keys and values of every position, the rest (and the result `[B, Q, H]`)
        # only at `outputs.offsets`.
        b, lw = plan.positions.shape
        h = x.shape[-1]
        k, v = (
            plan.to_rows(proj(x)).view(b, lw, self.num_heads, self.head_dim).transpose(1, 2)
            for proj in (self.key, self.value)
        )
        if outputs is not None:
            x, lw = outputs.pick(plan.to_rows(x)), outputs.offsets.shape[1]
            att_plan = outputs.plan
            q = self.query(x).view(b, lw, self.num_heads, self.head_dim).transpose(1, 2)
        else:
            q = plan.to_rows(self.query(x)).view(b, lw, self.num_heads, self.head_dim)
            q, att_plan = q.transpose(1, 2), plan
        keys, values = (
            (k, v) if cache is None else cache.write(layer, k, v, plan.span, plan.positions)
        )
        out = attend(q, keys, values, att_plan).transpose(1, 2).reshape(b, lw, h)
        attn = out if outputs is not None else plan.to_packed(out)
        p = self._owner[0].dropout if self.training else 0.0

        def rest(x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:  # position-wise
            x = self.attn_norm(x + F.dropout(self.attn_out(attn), p, self.training))
            return self.output_norm(
                x + F.dropout(self.output(F.gelu(self.intermediate(x))), p, self.training)
            )

        return by_token_chunks(rest, x, attn)


class BertLM(WindowedModel):
    """`dropout` (hidden dropout, as BERT's `hidden_dropout_prob`) acts in training mode only;
    the trainer sets it, inference never sees it."""

    supports_outputs = True

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.dropout = 0.0
        h = config.hidden_size
        self.embed = nn.Embedding(config.embedding_size, h)
        self.positions = nn.Embedding(config.max_position_embeddings, h)
        self.token_types = nn.Embedding(max(config.type_vocab_size, 1), h)
        self.embed_norm = nn.LayerNorm(h, eps=config.norm_eps)
        self.layers = nn.ModuleList(BertLayer(config, self) for _ in range(config.num_layers))
        self.head_dense = nn.Linear(h, h)
        self.head_norm = nn.LayerNorm(h, eps=config.norm_eps)
        self.head_bias = nn.Parameter(torch.zeros(config.embedding_size))

    def _trunk(
        self,
        input_ids: torch.Tensor,
        plan: AttentionPlan,
        cache: KVCache | None,
        outputs: Outputs | None = None,
    ) -> torch.Tensor:
        # Padding lanes of a row that ends at the last position lie past the position table;
        # nothing attends to them, so any in-range position does.
        positions = plan.token_positions.clamp(max=self.positions.num_embeddings - 1)
        x = self.embed(input_ids) + self.positions(positions) + self.token_types.weight[0]
        x = F.dropout(self.embed_norm(x), self.dropout if self.training else 0.0, self.training)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if i == last and outputs is not None:
                return outputs.place(layer(x, cache, i, plan, outputs), plan.positions.shape[1])
            x = layer(x, cache, i, plan)
        return x

    def _transform(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head_norm(F.gelu(self.head_dense(hidden)))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self._transform(hidden), self.embed.weight, self.head_bias)

    def token_logits(
        self, hidden: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor
    ) -> torch.Tensor:
        transformed = self._transform(hidden)  # [P, H], once per state
        return (transformed[rows] * self.embed.weight[tokens]).sum(-1) + self.head_bias[tokens]

    def subset_logits(self, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return F.linear(self._transform(hidden), self.embed.weight[tokens], self.head_bias[tokens])
