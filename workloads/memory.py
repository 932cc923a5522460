"""Memory per GPU: weights, gradients, optimizer state, activations, buffers, reserve.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", arXiv 2205.05198, section 4) tensor by tensor, so that for GPT (MHA, 4h GELU
MLP, dropout, no flash attention) one layer and one micro-batch store, in bytes:

- no parallelism:          s b h (34 + 5 a s / h)
- tensor parallel t:       s b h (10 + 24/t + 5 a s / (h t))
- t + sequence parallel:   s b h / t (34 + 5 a s / h)
- selective recompute:     the 5 a s^2 b term is dropped (core attention is recomputed)
- full recompute:          only the layer input, 2 s b h (/ t with sequence parallelism)
- op (torchtitan's per-op selective checkpointing): the layer input, every other matmul's
  output and attention's output (:func:`_op_sac_bytes`)
- FP8 training under Transformer Engine: every linear layer keeps the FP8 copy of its input
  that its weight-gradient GEMM reads (1 byte an element plus the recipe's scales), not the
  bf16 one (``workload.fp8_saved_inputs``)

and generalise by the same accounting to GQA (smaller K, V), SwiGLU (gate and up stored), MoE
(routed tokens x top-k), MLA (latents replicated over tp), flash attention (no s^2 tensors, a
float32 log-sum-exp per query and head), no-dropout models (no masks) and context parallelism
(s / cp tokens per rank).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from workloads.dtypes import FP8_ELEMENT_BYTES
from workloads.flops import COLUMN_PARALLEL, ROW_PARALLEL, layer_matmuls, padded_vocab
from workloads.layout import Layout
from workloads.model import ModelConfig
from workloads.params import ParamSplit, embedding_params, layer_params, output_params
from workloads.units import GIB

BYTES_PER_ACT = 2
"""Activations are stored in bf16/fp16 (2 bytes); dropout masks take 1 byte per element."""
BYTES_WEIGHT = 2
"""bf16/fp16 model weights (fp8 training keeps bf16 weights and casts per GEMM)."""
BYTES_GRAD = 4
"""fp32 gradient accumulation buffer (Megatron-LM's main_grad, the default for bf16);
``parallel.grad_reduce_dtype`` sets it per scenario (ParallelConfig.grad_bytes)."""
BYTES_OPTIMIZER = {"adam": 12, "sgd": 8, "lamb": 12, "lars": 8}
"""Mixed-precision optimizer state per parameter: fp32 master copy + Adam's two moments (4+4+4),
or master + momentum for SGD (Rajbhandari et al. 2020, ZeRO section 3: K = 12 for Adam); LAMB
keeps Adam's state, LARS SGD's (the trust ratios are per tensor, nothing per parameter)."""
MOMENTS = {"adam": 2, "sgd": 1, "lamb": 2, "lars": 1}
"""Per-parameter moment tensors of each optimizer (Adam's m and v; SGD's momentum)."""
MOMENT_BYTES = {"fp32": 4, "bf16": 2}
"""Bytes per moment element (``workload.moments_dtype``)."""


def optimizer_state_bytes(optimizer: str, moments_dtype: str = "fp32") -> float:
    """Optimizer state per parameter: the fp32 master copy and the moments, in fp32 or, with a
    precision-aware optimizer, bf16 (Megatron-Core's --use-precision-aware-optimizer with
    --exp-avg-dtype / --exp-avg-sq-dtype bf16; DeepSeek-V3, arXiv 2412.19437 section 3.3.3)."""
    saved = MOMENT_BYTES["fp32"] - MOMENT_BYTES[moments_dtype]
    return BYTES_OPTIMIZER[optimizer] - MOMENTS[optimizer] * saved
FRAMEWORK_RESERVE_BYTES = 2.5 * GIB
"""Memory the training framework holds besides tensors: CUDA context (~0.5 GiB on A100/H100),
cuBLAS/cuDNN workspaces, NCCL communicator buffers (NCCL_BUFFSIZE 4 MiB per channel and peer)
and caching-allocator fragmentation. An engineering estimate, not a fit: PyTorch typically shows
2-3 GiB of device memory in use beyond the live tensors of a Megatron-LM job."""
ZERO3_PREFETCH_LAYERS = 2
"""ZeRO-3 keeps the gathered weights of the current and the prefetched layer."""

COLUMNS = ["stage", "layers", "params", "weights_bytes", "grads_bytes", "optimizer_bytes",
           "activations_bytes", "io_activations_bytes", "recompute_working_bytes",
           "zero3_gather_bytes", "reserve_bytes", "total_bytes", "host_offload_bytes"]
"""Columns of :func:`memory_table`, one row per pipeline stage, per GPU of that stage:
``params`` parameters held; ``weights_bytes`` / ``grads_bytes`` / ``optimizer_bytes`` model
state after ZeRO sharding; ``activations_bytes`` transformer-layer activations of the micro-batches
in flight; ``io_activations_bytes`` embedding-dropout masks (first stage) and the output layer and
fp32 logits (last stage); ``recompute_working_bytes`` the transient of one layer rebuilt in
backward; ``zero3_gather_bytes`` gathered ZeRO-3 weights; ``reserve_bytes`` framework reserve;
``total_bytes`` their sum (device memory); ``host_offload_bytes`` the activations CPU
offloading holds in host memory for this GPU (not in the total)."""


@dataclass(frozen=True)
class ActivationOptions:
    seq_len: int
    flash_attention: bool = True
    linear_input_bytes: float = BYTES_PER_ACT
    """Bytes per element of a linear layer's input kept for its weight gradient: bf16 (2), or
    the FP8 copy under Transformer Engine's FP8 training (:func:`saved_linear_input_bytes`)."""


def saved_linear_input_bytes(precision: str, fp8_recipe: str, fp8_saved_inputs: str) -> float:
    """Bytes per element of a saved linear-layer input.

    Transformer Engine's ``Linear`` / ``LayerNormLinear`` under FP8 save the quantised input
    (its column-wise, transposed copy: what the wgrad GEMM reads) and drop the bf16 one
    (transformer_engine/pytorch/module/linear.py, ``saved_inputmat``); torchao's float8
    training saves the high-precision input and casts it again in backward
    (torchao/float8/float8_linear.py, ``matmul_with_hp_or_float8_args``)."""
    if precision != "fp8" or fp8_saved_inputs == "bf16":
        return BYTES_PER_ACT
    return FP8_ELEMENT_BYTES[fp8_recipe]


OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm",
                   "expert_fc1", "moe_act")
"""Modules whose input Megatron-Core's fine-grained activation offloading can move to host
memory (``--offload-modules``), in layer order."""


def module_input_bytes(model: ModelConfig, layout: Layout, opts: ActivationOptions,
                       moe: bool) -> dict[str, float]:
    """Bytes of the stored input of each :data:`OFFLOAD_MODULES` module, one layer and one
    micro-batch on one GPU, as :func:`layer_activation_bytes` counts them (0 where the layer
    keeps no such tensor: a recomputed norm's output, a dense layer's experts)."""
    tp, s_local = layout.tp, opts.seq_len / layout.cp
    T = s_local * layout.micro_batch
    h, a = model.hidden_size, model.num_attention_heads
    rep = 1 / tp if layout.sequence_parallel else 1.0
    A, L = BYTES_PER_ACT, opts.linear_input_bytes
    mods = layout.recompute_modules if layout.recompute == "selective" else ()
    norm_out = 0 if "layernorm" in mods else 1
    if model.multi_latent_attention:
        qk = model.qk_head_dim + model.qk_pos_emb_head_dim
        qkv = 0.0 if "mla_up_proj" in mods else a * (2 * qk + model.v_head_dim)
        ctx = a * model.v_head_dim
    else:
        d, g = model.head_dim, model.query_groups
        qkv, ctx = a * d + 2 * g * d, a * d
    out = {"attn_norm": A * T * h * rep,                              # the layer's input
           "qkv_linear": norm_out * L * T * h * rep,                  # norm output
           "core_attn": A * T * qkv / tp,                             # Q, K, V
           "attn_proj": L * T * ctx / tp,                             # context
           "mlp_norm": 0.0 if model.parallel_block else A * T * h * rep,
           "expert_fc1": 0.0, "moe_act": 0.0}
    if moe:
        k, mf, gate = model.moe_top_k, model.moe_ffn, 2 if model.gated else 1
        out["expert_fc1"] = L * k * T * h                             # dispatched tokens
        out["moe_act"] = A * k * T * mf * gate / tp                   # expert fc1 out
    return out


def layer_activation_bytes(model: ModelConfig, layout: Layout, opts: ActivationOptions,
                           moe: bool) -> float:
    """Bytes one layer stores for one micro-batch on one GPU (see module notes)."""
    tp, cp = layout.tp, layout.cp
    s_local = opts.seq_len / cp
    b = layout.micro_batch
    T = s_local * b                        # tokens of the micro-batch on this cp rank
    h, a = model.hidden_size, model.num_attention_heads
    rep = 1 / tp if layout.sequence_parallel else 1.0   # sharding of the "replicated" tensors
    A = BYTES_PER_ACT
    L = opts.linear_input_bytes                          # a saved linear-layer input
    if layout.recompute == "full":
        return A * T * h * rep
    if layout.recompute == "op":
        return _op_sac_bytes(model, layout, opts, moe)
    hid_mask = T * h * rep if model.hidden_dropout > 0 else 0.0
    mods = layout.recompute_modules if layout.recompute == "selective" else ()
    norm_out = 0 if "layernorm" in mods else 1          # recomputed norms keep only their input

    mi = module_input_bytes(model, layout, opts, moe)
    total = mi["attn_norm"] + mi["mlp_norm"]                          # norm inputs
    total += mi["qkv_linear"] + mi["core_attn"] + mi["attn_proj"]    # QKV in, Q K V, context
    if model.multi_latent_attention:
        lora = (model.q_lora_rank or 0) + model.kv_lora_rank
        total += T * (A * (lora + model.qk_pos_emb_head_dim) + L * lora)   # down-proj outputs:
                                                                      # norm in, up-proj in
    if opts.flash_attention:
        total += 4 * b * a * s_local / tp                             # fp32 log-sum-exp
    elif "core_attn" not in mods:
        scores = b * a * s_local * opts.seq_len / tp
        total += A * scores                                           # softmax output
        if model.attention_dropout > 0:
            total += scores + A * scores                              # mask + dropout output
    total += hid_mask                                                 # attention dropout mask

    mlp_in = 0.0 if model.parallel_block else norm_out * T * h * rep
    gate = 2 if model.gated else 1
    if not moe:
        f = model.ffn
        total += L * mlp_in                                           # fc1 input (norm output)
        if "mlp" not in mods:
            total += A * T * f * gate / tp + L * T * f / tp          # fc1 out, fc2 in
    else:
        k, mf = model.moe_top_k, model.moe_ffn
        total += A * mlp_in + 4 * T * model.num_experts * rep         # bf16 router's input, probs
        total += mi["expert_fc1"] + mi["moe_act"]                     # tokens, expert fc1 out
        if "moe_act" not in mods:
            total += L * k * T * mf / tp                              # expert fc2 in
        sf = model.moe_shared_expert_intermediate_size
        if sf and "shared_experts" not in mods:
            fp8_copy = L * mlp_in if L != A else 0.0              # its own copy of the input
            total += fp8_copy + A * T * sf * gate / tp + L * T * sf / tp
    total += hid_mask                                                 # MLP dropout mask
    return total


def _op_sac_bytes(model: ModelConfig, layout: Layout, opts: ActivationOptions, moe: bool
                  ) -> float:
    """Bytes one layer stores under torchtitan's per-op selective checkpointing
    (:func:`workloads.flops.op_sac_recomputed`): the layer's input, the outputs of the matmuls
    it saves (every other one), attention's output with its fp32 log-sum-exp, and under MoE
    the routed tokens and expert activations (grouped matmuls, saved)."""
    tp, b = layout.tp, layout.micro_batch
    s_local = opts.seq_len / layout.cp
    T = s_local * b
    h, a = model.hidden_size, model.num_attention_heads
    rep = 1 / tp if layout.sequence_parallel else 1.0
    A = BYTES_PER_ACT
    total = A * T * h * rep                                           # the layer's input
    for op in layer_matmuls(model, int(s_local), b, moe)[0::2]:      # saved matmul outputs
        if op.name in ROW_PARALLEL:                                  # reduced over tp
            total += A * T * h * rep
        elif op.name in COLUMN_PARALLEL:
            total += A * T * op.n / tp
        else:                                     # replicated: MLA down-projections, router
            total += A * T * op.n
    v = model.v_head_dim if model.multi_latent_attention else model.head_dim
    total += A * T * a * v / tp + 4 * b * a * s_local / tp            # SDPA output, its lse
    if moe:
        k, mf, gate = model.moe_top_k, model.moe_ffn, 2 if model.gated else 1
        total += 4 * T * model.num_experts * rep + A * k * T * h      # router probs, tokens
        total += A * k * T * mf * gate / tp + A * k * T * mf / tp     # expert fc1 out, fc2 in
    return total


def offloaded_module_bytes(model: ModelConfig, layout: Layout, opts: ActivationOptions,
                           moe: bool) -> float:
    """Bytes fine-grained offloading moves to host memory from one layer and micro-batch: the
    stored inputs of ``layout.offload_modules`` (:func:`module_input_bytes`). One layer's worth
    is on the GPU at any time besides what the layers keep (in transit)."""
    if not layout.offload_modules or (moe and not model.is_moe):
        return 0.0
    mi = module_input_bytes(model, layout, opts, moe)
    return sum(mi[m] for m in layout.offload_modules)


def offloaded_layer_kinds(model: ModelConfig, n: int) -> tuple[int, int]:
    """(dense, moe) among the first ``n`` layers: those CPU activation offloading moves to host
    memory. One offloaded layer's activations are on the GPU at any time besides the layers
    kept (double buffering: the one being copied out, or brought back ahead of its
    backward)."""
    moe = sum(model.is_moe_layer(i) for i in range(n))
    return n - moe, moe


def _grouped_full_recompute(model: ModelConfig, layout: Layout, stage: int, full: dict,
                            none: dict) -> tuple[float, float]:
    """(stored, working) bytes of one micro-batch on ``stage`` under full recomputation with
    Megatron's --recompute-method / --recompute-num-layers k (``full`` / ``none``: one
    layer's bytes by kind, is MoE, when recomputed / not). uniform: each group of k layers of a
    model chunk keeps its input and is rebuilt whole in the backward (k layers' activations at
    once); block: the first k layers of each chunk keep their input and are rebuilt one at a
    time, the others keep everything."""
    k = layout.recompute_num_layers
    stored, working = 0.0, 0.0
    for c in range(layout.vpp):
        first, n = layout.first_layer(stage, c), layout.layers(stage, c)
        kinds = [model.is_moe_layer(first + j) for j in range(n)]
        if layout.recompute_method == "block":
            stored += sum(full[m] for m in kinds[:k]) + sum(none[m] for m in kinds[k:])
            working = max([working] + [none[m] for m in kinds[:k]])
        else:
            stored += sum(full[m] for m in kinds[::k])
            working = max([working] + [sum(none[m] for m in kinds[j:j + k])
                                       for j in range(0, n, k)])
    return stored, working


def _stage_layer_kinds(model: ModelConfig, layout: Layout, stage: int) -> tuple[int, int]:
    """(dense, moe) layers on pipeline stage ``stage``."""
    idx = [layout.first_layer(stage, c) + j for c in range(layout.vpp)
           for j in range(layout.layers(stage, c))]
    moe = sum(model.is_moe_layer(i) for i in idx)
    return len(idx) - moe, moe


def _state_bytes(split: ParamSplit, layout: Layout, optimizer: str, grad_bytes: int,
                 moments_dtype: str = "fp32") -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes on one GPU after ZeRO sharding."""
    tp, ep = layout.tp, layout.ep
    dense = split.tp_sharded / tp + split.replicated
    expert = split.expert / (layout.expert_tp * ep)
    d_dense = layout.shard           # Megatron shards over the DP x CP group (or HSDP's shard)
    d_expert = layout.expert_shard   # its expert-data-parallel ranks
    opt = optimizer_state_bytes(optimizer, moments_dtype)
    w = g = o = 0.0
    for n, d in ((dense, d_dense), (expert, d_expert)):
        shard = {0: (1, 1, 1), 1: (1, 1, d), 2: (1, d, d), 3: (d, d, d)}[layout.zero]
        w += n * BYTES_WEIGHT / shard[0]
        g += n * grad_bytes / shard[1]
        o += n * opt / shard[2]
    return w, g, o


def memory_table(model: ModelConfig, layout: Layout, *, seq_len: int, optimizer: str = "adam",
                 flash_attention: bool = True, grad_bytes: int = BYTES_GRAD,
                 linear_input_bytes: float = BYTES_PER_ACT, moments_dtype: str = "fp32"
                 ) -> pd.DataFrame:
    """Per-GPU memory of every pipeline stage (columns: :data:`COLUMNS`), in bytes."""
    opts = ActivationOptions(seq_len=seq_len, flash_attention=flash_attention,
                             linear_input_bytes=linear_input_bytes)
    act_dense = layer_activation_bytes(model, layout, opts, moe=False)
    act_moe = layer_activation_bytes(model, layout, opts, moe=True) if model.is_moe else 0.0
    off_mods = {m: offloaded_module_bytes(model, layout, opts, m) for m in (False, True)}
    full = layout.recompute == "full"
    no_recompute = replace(layout, recompute="none")
    grouped = full and (layout.recompute_method == "block" or layout.recompute_num_layers > 1)
    if grouped:
        none_act = {m: layer_activation_bytes(model, no_recompute, opts, moe=m)
                    for m in ((False, True) if model.is_moe else (False,))}
        full_act = {False: act_dense, True: act_moe}
    rows = []
    p = layout.pp
    rep = 1 / layout.tp if layout.sequence_parallel else 1.0
    T = seq_len / layout.cp * layout.micro_batch
    h = model.hidden_size
    for i in range(p):
        n_dense, n_moe = _stage_layer_kinds(model, layout, i)
        split = layer_params(model, False)
        split = ParamSplit(split.tp_sharded * n_dense, split.replicated * n_dense, 0)
        if n_moe:
            ms = layer_params(model, True)
            split += ParamSplit(ms.tp_sharded * n_moe, ms.replicated * n_moe, ms.expert * n_moe)
        first = any(layout.is_first_piece(i, c) for c in range(layout.vpp))
        last = any(layout.is_last_piece(i, c) for c in range(layout.vpp))
        if first:
            split += embedding_params(model, seq_len)
        if last:
            split += output_params(model, p)
        w, g, o = _state_bytes(split, layout, optimizer, grad_bytes, moments_dtype)
        in_flight = layout.in_flight(i)
        # offloaded layers of each kind (is MoE) and the bytes each sends to host memory
        off_layers, off_bytes = {False: 0, True: 0}, {False: act_dense, True: act_moe}
        if layout.cpu_offload_layers:                # pp 1: the stage's first N layers
            off_layers = dict(zip((False, True),
                                  offloaded_layer_kinds(model, layout.cpu_offload_layers)))
        elif layout.offload_modules:                 # every layer's listed module inputs
            off_layers, off_bytes = {False: n_dense, True: n_moe}, off_mods
        host = in_flight * sum(off_layers[m] * off_bytes[m] for m in (False, True))
        transit = max((off_bytes[m] for m in (False, True) if off_layers[m]), default=0.0)
        acts = in_flight * (n_dense * act_dense + n_moe * act_moe) - host + transit
        io = 0.0
        if first and model.hidden_dropout > 0:      # embedding dropout mask per micro-batch
            io += in_flight * T * h * rep
        if last:                                     # final norm in, logits in, fp32 logits
            vp = padded_vocab(model.vocab_size, layout.tp)
            io += 2 * BYTES_PER_ACT * T * h * rep + 4 * T * vp / layout.tp
        working = 0.0
        if grouped:
            stored, working = _grouped_full_recompute(model, layout, i, full_act, none_act)
            acts = in_flight * stored
        elif full:
            working = layer_activation_bytes(model, no_recompute, opts, moe=n_moe > 0)
        elif layout.recompute == "op" or (layout.recompute == "selective" and (
                not flash_attention or set(layout.recompute_modules) - {"core_attn"})):
            working = (layer_activation_bytes(model, no_recompute, opts, moe=n_moe > 0)
                       - layer_activation_bytes(model, layout, opts, moe=n_moe > 0))
        gather = 0.0
        if layout.zero == 3:
            per_layer = layer_params(model, n_moe > 0).per_rank(layout.tp, layout.ep,
                                                                 layout.expert_tp)
            gather = ZERO3_PREFETCH_LAYERS * per_layer * BYTES_WEIGHT
        params = split.per_rank(layout.tp, layout.ep, layout.expert_tp)
        parts = [w, g, o, acts, io, working, gather, FRAMEWORK_RESERVE_BYTES]
        rows.append([i, n_dense + n_moe, params, *parts, sum(parts), host])
    return pd.DataFrame(rows, columns=COLUMNS)
