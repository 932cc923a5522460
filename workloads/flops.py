"""Forward FLOPs by operator, and model / hardware FLOPs per training step.

Conventions
-----------
- A GEMM of (m x k) by (k x n) costs 2 m n k FLOPs. Backward costs twice the forward (input and
  weight gradients), so model FLOPs = 3 x forward (Narayanan et al. 2021, appendix).
- *Model* FLOPs count attention over the full s x s score matrix, ignoring the causal mask, as
  Megatron-LM's ``num_floating_point_operations`` and Korthikanti et al. 2022 eq. 7 do; with a
  sliding window w each query is charged min(s, w) keys. This is the MFU numerator.
- *Executed* FLOPs (``exec_flops``) are what a causal flash-attention kernel actually computes:
  sum over queries of the keys it can see, s (s + 1) / 2 without a window. The compute model times
  these.
- Hardware FLOPs add the forward FLOPs recomputed in backward: nothing (``none``), the core
  attention (``selective``: QK^T and attention-over-values, Korthikanti et al. 2022 section 5),
  or every transformer layer (``full``; the logits are never recomputed), or every second
  matmul of each layer (``op``, torchtitan's per-op selective checkpointing). For GPT this gives
  Narayanan et al. 2021 eq. 3 for ``full``: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
- Elementwise work (norms, activations, softmax, dropout) counts no FLOPs, as in both papers.
- The vocabulary is padded as Megatron does (to a multiple of 128 x tp) before counting logits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workloads.model import ModelConfig

MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128
"""Megatron-LM's ``--make-vocab-size-divisible-by`` default; the padded vocabulary is a multiple
of this times tp (megatron/training/tokenizer, ``_vocab_size_with_padding``)."""


def padded_vocab(vocab_size: int, tp: int) -> int:
    multiple = MAKE_VOCAB_SIZE_DIVISIBLE_BY * tp
    return math.ceil(vocab_size / multiple) * multiple

COLUMN_PARALLEL = {"qkv", "fc1", "q_up", "kv_up", "q_proj", "expert_fc1", "shared_fc1", "logits"}
"""GEMMs whose output dimension is split over tp (Megatron ColumnParallelLinear)."""
ROW_PARALLEL = {"out_proj", "fc2", "expert_fc2", "shared_fc2"}
"""GEMMs whose input dimension is split over tp (RowParallelLinear)."""


@dataclass(frozen=True)
class Op:
    """One forward operator of a layer for one micro-batch (all tp ranks together)."""

    name: str
    module: str
    """attention | mlp | moe | logits"""
    kind: str
    """gemm (dense matrix multiply) | attention (QK^T or attention-over-values)"""
    flops: float
    """Forward model FLOPs (MFU convention, see module notes)."""
    exec_flops: float
    """Forward FLOPs a causal kernel executes."""
    m: int
    """GEMM rows (tokens); for attention: queries x batch x heads."""
    n: int
    """GEMM output columns; for attention: keys attended (model convention)."""
    k: int
    """GEMM reduction size; for attention: the head dimension."""
    selective: bool = False
    """Recomputed under selective recomputation (core attention)."""


def _gemm(name: str, module: str, tokens: int, out: int, inner: int) -> Op:
    f = 2.0 * tokens * out * inner
    return Op(name, module, "gemm", f, f, tokens, out, inner)


def causal_keys(seq_len: int, window: int | None) -> int:
    """Sum over the s queries of the keys each sees under a causal (sliding-window) mask."""
    s, w = seq_len, window or seq_len
    if w >= s:
        return s * (s + 1) // 2
    return w * (w + 1) // 2 + (s - w) * w


def _core_attention(model: ModelConfig, s: int, b: int, qk_dim: int, v_dim: int) -> list[Op]:
    """QK^T and attention over values of one layer. Where windowed and full layers alternate
    (``window_attn_skip_freq``) every layer is charged the model's mix of the two, which sums to
    the model's own work (a stage holding a multiple of the pattern's length holds it exactly)."""
    a = model.num_attention_heads
    f = model.windowed_fraction
    span = f * min(s, model.sliding_window or s) + (1 - f) * s
    seen = f * causal_keys(s, model.sliding_window) + (1 - f) * causal_keys(s, None)
    ops = []
    for name, dim in (("attn_scores", qk_dim), ("attn_context", v_dim)):
        ops.append(Op(name, "attention", "attention", flops=2.0 * b * a * s * span * dim,
                      exec_flops=2.0 * b * a * seen * dim, m=b * a * s, n=round(span), k=dim,
                      selective=True))
    return ops


def attention_ops(model: ModelConfig, s: int, b: int) -> list[Op]:
    """QKV (or MLA) projections, core attention and output projection of one layer."""
    h, a, t = model.hidden_size, model.num_attention_heads, s * b
    if model.multi_latent_attention:
        qk = model.qk_head_dim + model.qk_pos_emb_head_dim
        v, kr, rope = model.v_head_dim, model.kv_lora_rank, model.qk_pos_emb_head_dim
        if model.q_lora_rank:
            ops = [_gemm("q_down", "attention", t, model.q_lora_rank, h),
                   _gemm("q_up", "attention", t, a * qk, model.q_lora_rank)]
        else:
            ops = [_gemm("q_proj", "attention", t, a * qk, h)]
        ops += [_gemm("kv_down", "attention", t, kr + rope, h),
                _gemm("kv_up", "attention", t, a * (model.qk_head_dim + v), kr)]
        ops += _core_attention(model, s, b, qk, v)
        ops.append(_gemm("out_proj", "attention", t, h, a * v))
        return ops
    d, g = model.head_dim, model.query_groups
    return [_gemm("qkv", "attention", t, a * d + 2 * g * d, h),
            *_core_attention(model, s, b, d, d),
            _gemm("out_proj", "attention", t, h, a * d)]


def _mlp_ops(model: ModelConfig, module: str, tokens: int, width: int, prefix: str) -> list[Op]:
    h = model.hidden_size
    fc1 = width * (2 if model.gated else 1)
    return [_gemm(f"{prefix}fc1", module, tokens, fc1, h),
            _gemm(f"{prefix}fc2", module, tokens, h, width)]


def layer_ops(model: ModelConfig, s: int, b: int, moe: bool) -> list[Op]:
    """Forward operators of one transformer layer for ``b`` sequences of ``s`` tokens."""
    ops = attention_ops(model, s, b)
    t = s * b
    if not moe:
        return ops + _mlp_ops(model, "mlp", t, model.ffn, "")
    ops.append(_gemm("router", "moe", t, model.num_experts, model.hidden_size))
    ops += _mlp_ops(model, "moe", t * model.moe_top_k, model.moe_ffn, "expert_")
    if model.moe_shared_expert_intermediate_size:
        ops += _mlp_ops(model, "moe", t, model.moe_shared_expert_intermediate_size, "shared_")
    return ops


def layer_matmuls(model: ModelConfig, s: int, b: int, moe: bool) -> list[Op]:
    """The layer's forward matrix multiplies one by one, in the order PyTorch issues them with
    unfused projections (torchtitan's Llama block: wq, wk, wv, wo, w1, w3, w2): the fused QKV
    and gated fc1 of :func:`layer_ops` split into their parts, each keeping its fused parent's
    name (hence its tp split). MoE experts (grouped matmuls) are not among them."""
    out = []
    for op in layer_ops(model, s, b, moe):
        if op.kind != "gemm" or op.name.startswith("expert_"):
            continue
        if op.name == "qkv":
            q = model.num_attention_heads * model.head_dim
            kv = model.query_groups * model.head_dim
            out += [_gemm("qkv", op.module, op.m, q, op.k), _gemm("qkv", op.module, op.m, kv, op.k),
                    _gemm("qkv", op.module, op.m, kv, op.k)]
        elif op.name.endswith("fc1") and model.gated:
            half = _gemm(op.name, op.module, op.m, op.n // 2, op.k)
            out += [half, half]
        else:
            out.append(op)
    return out


def op_sac_recomputed(model: ModelConfig, s: int, b: int, moe: bool) -> list[Op]:
    """The matmuls torchtitan's per-op selective activation checkpointing recomputes
    (``activation_checkpoint.mode = "selective"``, ``selective_ac_option = "op"``): its policy
    saves the output of every compute op (matmuls, SDPA, reduce-scatter) except every second
    matmul of a layer, and recomputes everything else (norms, RoPE, activations, adds). With
    :func:`layer_matmuls`' order that is wk, wo and w3 of a Llama block."""
    return layer_matmuls(model, s, b, moe)[1::2]


def logits_op(model: ModelConfig, s: int, b: int, tp: int = 1) -> Op:
    return _gemm("logits", "logits", s * b, padded_vocab(model.vocab_size, tp), model.hidden_size)


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one optimizer step over the whole job."""

    model: float
    """Fwd + bwd without recomputation: the MFU numerator."""
    hardware: float
    """Model plus recomputed forward FLOPs: the HFU numerator."""
    forward: float
    """Forward only (layers + logits)."""


RECOMPUTE_MODULES = ("core_attn", "layernorm", "mla_up_proj", "mlp", "moe_act",
                     "shared_experts")
"""Megatron-Core's ``recompute_modules`` under selective recomputation that clustersim runs:
core attention (the default), the LayerNorms, MLA's up-projections, the dense MLP, the
experts' activation function, the shared experts."""


def recomputed(op: Op, modules: tuple[str, ...]) -> bool:
    """Whether selective recomputation of ``modules`` runs this operator's forward again."""
    return (("core_attn" in modules and op.selective)
            or ("mla_up_proj" in modules and op.name in ("q_up", "kv_up"))
            or ("mlp" in modules and op.module == "mlp")
            or ("shared_experts" in modules and op.name.startswith("shared_")))


def layer_kind_counts(model: ModelConfig) -> tuple[tuple[bool, int], ...]:
    """(moe, count) of the transformer layers, multi-token-prediction layers included (each of
    the model's last kind)."""
    mtp = model.mtp_num_layers
    return ((False, model.num_dense_layers + (0 if model.is_moe else mtp)),
            (True, model.num_moe_layers + (mtp if model.is_moe else 0)))


def _layers_forward(model: ModelConfig, s: int, b: int,
                    modules: tuple[str, ...] | None = None) -> float:
    """Forward FLOPs of every layer, or only of the operators ``modules`` recompute."""
    total = 0.0
    for moe, count in layer_kind_counts(model):
        if count:
            ops = layer_ops(model, s, b, moe)
            total += count * sum(o.flops for o in ops
                                 if modules is None or recomputed(o, modules))
    return total


def step_flops(model: ModelConfig, *, seq_len: int, global_batch: int, recompute: str = "none",
               tp: int = 1, recompute_modules: tuple[str, ...] = ("core_attn",),
               full_recomputed: dict[bool, int] | None = None) -> StepFlops:
    """Model and hardware FLOPs of one step of ``global_batch`` sequences of ``seq_len``.

    Notes
    -----
    For GPT (MHA, 4h GELU MLP) this equals Korthikanti et al. 2022 eq. 7,
    72 B L s h^2 (1 + s/(6h) + V/(12 h L)), and for ``full`` Narayanan et al. 2021 eq. 3.
    Linear in ``global_batch`` (every sequence is independent), so it is counted for one
    sequence and scaled. ``full_recomputed``: {is MoE: layers} that full recomputation runs
    again, where not all of them are (Megatron's block method).
    """
    layers = _layers_forward(model, seq_len, 1)
    fwd = layers + (1 + model.mtp_num_layers) * logits_op(model, seq_len, 1, tp).flops
    if recompute == "none":
        extra = 0.0
    elif recompute == "selective":
        extra = _layers_forward(model, seq_len, 1, modules=recompute_modules)
    elif recompute == "full" and full_recomputed is not None:   # block: some layers only
        extra = sum(n * sum(o.flops for o in layer_ops(model, seq_len, 1, moe))
                    for moe, n in full_recomputed.items() if n)
    elif recompute == "full":
        extra = layers
    elif recompute == "op":
        extra = sum(count * sum(o.flops for o in op_sac_recomputed(model, seq_len, 1, moe))
                    for moe, count in layer_kind_counts(model) if count)
    else:
        raise ValueError(f"parallel.recompute: unknown mode {recompute!r}")
    B = global_batch
    return StepFlops(model=3 * fwd * B, hardware=(3 * fwd + extra) * B, forward=fwd * B)
