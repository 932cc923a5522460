"""Parameter counts per layer and per model, split by how tensor / expert parallelism shards them.

Notes
-----
For GPT (MHA, GELU MLP of 4h, biases, LayerNorm) one layer holds 12 h^2 + 13 h parameters and the
model 12 l h^2 + 13 l h + V h + s h (+2h for the final LayerNorm): Narayanan et al. 2021 eq. 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.model import ModelConfig


@dataclass(frozen=True)
class ParamSplit:
    """Parameters of one layer (or block), by sharding class."""

    tp_sharded: int = 0
    """Column/row-parallel weights and column-parallel biases: divided by tp."""
    replicated: int = 0
    """Norms, row-parallel biases, router, MLA down-projections: every tp rank holds them."""
    expert: int = 0
    """Routed-expert weights: divided by ep x tp (Megatron-Core's expert-tensor-parallel = tp)."""

    @property
    def total(self) -> int:
        return self.tp_sharded + self.replicated + self.expert

    def __add__(self, other: "ParamSplit") -> "ParamSplit":
        return ParamSplit(self.tp_sharded + other.tp_sharded, self.replicated + other.replicated,
                          self.expert + other.expert)

    def __mul__(self, n: int) -> "ParamSplit":
        return ParamSplit(self.tp_sharded * n, self.replicated * n, self.expert * n)

    def per_rank(self, tp: int, ep: int, etp: int | None = None) -> float:
        """Parameters on one GPU: dense weights split over tp, experts over etp x ep (expert
        tensor parallelism, tp unless folded)."""
        return self.tp_sharded / tp + self.replicated + self.expert / ((etp or tp) * ep)


def _norm(model: ModelConfig) -> int:
    h = model.hidden_size
    return 2 * h if model.normalization == "layernorm" else h


def _mlp(model: ModelConfig, width: int) -> tuple[int, int]:
    """(tp-sharded, replicated) parameters of one MLP of ``width``."""
    h, bias = model.hidden_size, model.add_bias_linear
    fc1_out = width * (2 if model.gated else 1)
    sharded = h * fc1_out + width * h + (fc1_out if bias else 0)
    return sharded, (h if bias else 0)


def attention_params(model: ModelConfig) -> ParamSplit:
    h, a, bias = model.hidden_size, model.num_attention_heads, model.add_bias_linear
    if model.multi_latent_attention:
        qk = model.qk_head_dim + model.qk_pos_emb_head_dim
        kr, v = model.kv_lora_rank, model.v_head_dim
        if model.q_lora_rank:
            q_rep = h * model.q_lora_rank + model.q_lora_rank  # down-projection + its RMSNorm
            q_sh = model.q_lora_rank * a * qk
        else:
            q_rep, q_sh = 0, h * a * qk
        kv_rep = h * (kr + model.qk_pos_emb_head_dim) + kr   # joint latent + rope key + norm
        kv_sh = kr * a * (model.qk_head_dim + v)
        return ParamSplit(tp_sharded=q_sh + kv_sh + a * v * h, replicated=q_rep + kv_rep)
    d, g = model.head_dim, model.query_groups
    qkv_out = a * d + 2 * g * d
    sharded = h * qkv_out + a * d * h + (qkv_out if bias else 0)
    return ParamSplit(tp_sharded=sharded, replicated=h if bias else 0)


def layer_params(model: ModelConfig, moe: bool) -> ParamSplit:
    """One transformer layer: attention, (MoE) MLP and the two norms (one with parallel_block)."""
    norms = _norm(model) * (1 if model.parallel_block else 2)
    split = attention_params(model) + ParamSplit(replicated=norms)
    if not moe:
        sh, rep = _mlp(model, model.ffn)
        return split + ParamSplit(tp_sharded=sh, replicated=rep)
    e_sh, e_rep = _mlp(model, model.moe_ffn)
    split += ParamSplit(expert=model.num_experts * (e_sh + e_rep),
                        replicated=model.num_experts * model.hidden_size)  # router
    if model.moe_shared_expert_intermediate_size:
        sh, rep = _mlp(model, model.moe_shared_expert_intermediate_size)
        split += ParamSplit(tp_sharded=sh, replicated=rep)
    return split


def embedding_params(model: ModelConfig, seq_len: int) -> ParamSplit:
    """Word embeddings (vocab-parallel) and, for learned positions, the position table."""
    h = model.hidden_size
    pos = 0
    if model.position_embedding_type == "learned_absolute":
        pos = (model.max_position_embeddings or seq_len) * h
    return ParamSplit(tp_sharded=model.vocab_size * h, replicated=pos)


def output_params(model: ModelConfig, pp: int) -> ParamSplit:
    """Output projection and final norm held by the last stage.

    Tied embeddings need no separate matrix when pp = 1; with pp > 1 Megatron keeps a copy of
    the word embeddings on the last stage and all-reduces their gradients with the first.
    """
    own = model.untie_embeddings_and_output_weights or pp > 1
    return ParamSplit(tp_sharded=model.vocab_size * model.hidden_size if own else 0,
                      replicated=_norm(model))


@dataclass(frozen=True)
class ParamCount:
    total: int
    """Unique parameters (tied embeddings counted once)."""
    active: int
    """Parameters a token passes through (routed experts: top_k of num_experts)."""
    embedding: int


def count_params(model: ModelConfig, seq_len: int) -> ParamCount:
    dense = layer_params(model, moe=False).total * model.num_dense_layers
    moe_layer = layer_params(model, moe=True) if model.is_moe else ParamSplit()
    moe = moe_layer.total * model.num_moe_layers
    emb = embedding_params(model, seq_len).total
    out = output_params(model, pp=1).total
    total = dense + moe + emb + out
    inactive = 0
    if model.is_moe:
        inactive = moe_layer.expert * (model.num_experts - model.moe_top_k) // model.num_experts
        inactive *= model.num_moe_layers
    return ParamCount(total=total, active=total - inactive, embedding=emb)
