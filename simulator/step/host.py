"""The host thread that issues a rank's kernels, and where it rather than the GPU sets the pace.

PyTorch issues one rank's kernels from one CPU thread, asynchronously: the CPU normally runs
ahead of the GPU and the time it spends issuing is hidden. A dropless MoE layer stops it
running ahead. Its dispatcher copies the tokens-per-expert counts to the host and waits for
them once per forward: Megatron-Core's ``alltoall`` dispatcher needs them as the all-to-all's
split sizes and Transformer Engine's ``GroupedLinear`` as its per-expert ``m_splits``
(token_dispatcher.py, ``cuda_sync_point``); DeepEP's normal dispatch hands the received-token
count to the CPU the same way. At every such sync the GPU drains, and the kernels after it
reach the GPU only as fast as the CPU issues them. Between two syncs a layer therefore takes

    max(G, C)

with G its GPU time (compute and exposed communication) and C the host's issue time; the
backward, issued between the forwards' syncs of a 1F1B schedule, cannot run ahead further
than the next forward's first MoE layer either. The stall max(0, C - G) is booked as the
``host`` part of the step. Padded routing (``moe.pad_to_capacity``: fixed shapes, no counts
on the host), sync-free dispatch (``moe.rank_capacity_factor``: Megatron-Core's paged stash
behind HybridEP, static buffers, the counts kept on the GPU) and dense layers keep the CPU
ahead and cost nothing here.

C counts what the layer issues:

* every operator outside the experts (GEMMs, fused attention, element-wise kernels, FP8
  casts as the recipe issues them, collectives) at :data:`HOST_OP_S`, the backward
  :data:`BACKWARD_OPS_PER_FORWARD` times the forward's;
* the experts' two grouped linear layers (fc1, fc2) once per pass (forward, dgrad, wgrad).
  Megatron-Core's ``--moe-grouped-gemm`` runs Transformer Engine's ``GroupedLinear``, which
  "launches multiple local GEMM kernels in multiple streams" (Megatron-Core MoE README): one
  cuBLAS GEMM per local expert and pass, each with its own split, quantizer and workspace
  bookkeeping in Python, :data:`HOST_EXPERT_GEMM_S` each, plus its operand's quantization
  under FP8: one kernel, two under current scaling, whose amax reduction comes first
  (``compute.FP8_RECIPE_CAST_OPS``). ``optimizations.grouped_gemm: fused`` (one grouped
  kernel over all local experts: CUTLASS grouped GEMM, ``torch._grouped_mm`` in torchtitan,
  DeepGEMM in DeepSeek's own stack) issues one op per pass instead.

CUDA graphs (``optimizations.cuda_graph_scope``, Megatron-Bridge's scopes) replay a captured
scope with one launch a pass: dropless MoE runs capture ``attn`` (norm, projections,
attention, rotary embedding, TP collectives), ``moe_router`` and ``moe_preprocess`` (the
token-count exchange); the experts' per-expert loop has dynamic shapes and stays eager.
"""

from __future__ import annotations

from workloads.flops import layer_ops
from workloads.layout import Layout
from workloads.model import ModelConfig
from workloads.routing import MoERouting

HOST_OP_S = 10e-6
"""Host seconds to issue one PyTorch operator from Python in eager mode: the interpreter and
pybind call, the autograd and ATen dispatchers, the library's kernel choice and
cudaLaunchKernel, each 1-5 us, 5-25 us an operator in all (PyTorch's dispatch path as its
eager-mode overhead is usually broken down). An engineering estimate in that range, not
fitted: the fitted HOST_EXPERT_GEMM_S is conditional on it."""
HOST_EXPERT_GEMM_S = 120e-6
"""Host seconds of one local expert's pass (forward, dgrad or wgrad) through Transformer
Engine's multi-stream ``GroupedLinear``: the Python loop body per GEMM (split views, quantizer
and workspace updates, the stream fork) and the cuBLASLt call. Fitted once
(scripts/calibrate_host.py, validation.host_fit, on a 10 us grid) on the 24 published
dropless Megatron-Core MoE runs (H100, B200, GB200; 2-32 local experts): mean |error|
21 % -> 15 %, 16 % leaving each run out of its own fit; fitted without each GPU generation's
runs it is 110-120 us. Runs with 16-32 local experts move: Qwen3-235B on 64 B200 from -53 %
to +5 %, DeepSeek-V3 on 256 B200 from -36 % to 0 %."""
BACKWARD_OPS_PER_FORWARD = 2
"""A backward issues about twice the forward's operators: a dgrad and a wgrad GEMM per linear
layer, and each element-wise kernel's backward with the gradient accumulation beside it."""
FLASH_KERNELS = 1
"""A fused (flash) attention's forward is one kernel; unfused attention's GEMMs and softmax
are counted as operators of their own."""
EP_OPS = {"moe_preprocess": 2, "dispatch": 2}
"""Operators of one dispatch and one combine beyond the permutations counted as element-wise
kernels: the token-count exchange and the counts' copy to the host (Megatron-Core's
``moe_preprocess``), and the two all-to-alls."""
SCOPE_ELEMENTWISE = {"attn": 4, "moe_router": 1}
"""Element-wise kernels of the forward inside each capturable scope: attention's input norm
(statistics and normalise), rotary embedding and bias-dropout-add; the router's softmax and
top-k. The rest of :data:`simulator.step.compute.LAYER_KERNELS` (the MLP's norm,
bias-dropout-add and activation, the permutations) stays outside them."""


def dispatcher_syncs(routing: MoERouting, num_experts: int, ep: int) -> bool:
    """Whether a MoE layer's forward waits on the host for its tokens-per-expert counts:
    dropless or dropping without padding, with more than one expert to split tokens over,
    unless the dispatch is sync-free (``rank_capacity_factor``: static buffers, counts kept on
    the GPU)."""
    return not routing.pad_to_capacity and routing.rank_capacity_factor is None and \
        (ep > 1 or num_experts > 1)


def _scope_ops(model: ModelConfig, layout: Layout, *, seq_len: int, moe: bool, cast: int,
               flash: bool, kernels: int, tp_collectives: int) -> tuple[dict, int]:
    """({scope: forward operators}, grouped expert linear layers) of one layer; scope
    ``other`` holds what no CUDA-graph scope captures; ``cast``: kernels quantising each GEMM
    operand (0 without FP8)."""
    ops = {"attn": 0, "moe_router": 0, "moe_preprocess": 0, "other": 0}
    expert_modules = 0
    for op in layer_ops(model, seq_len, layout.micro_batch, moe):
        if op.kind == "attention":
            continue
        if op.name.startswith("expert_"):
            expert_modules += 1
        elif op.module == "attention":
            ops["attn"] += 1 + cast                  # the GEMM and its operand's cast
        elif op.name == "router":
            ops["moe_router"] += 1 + cast
        else:
            ops["other"] += 1 + cast
    attn_ew = min(SCOPE_ELEMENTWISE["attn"], kernels)
    router_ew = min(SCOPE_ELEMENTWISE["moe_router"], kernels - attn_ew) if moe else 0
    # TP collective pairs (all-gather + reduce-scatter, or an all-reduce and its twin):
    # attention's first, the MLP's second
    tp_pairs = (1, tp_collectives - 1) if layout.tp > 1 else (0, 0)
    ops["attn"] += (FLASH_KERNELS if flash else 2) + attn_ew + 2 * tp_pairs[0]
    ops["moe_router"] += router_ew
    ops["other"] += kernels - attn_ew - router_ew + 2 * tp_pairs[1]
    if moe and layout.ep > 1:
        ops["moe_preprocess"] += EP_OPS["moe_preprocess"]
        ops["other"] += EP_OPS["dispatch"]
    return ops, expert_modules


def layer_issue_s(model: ModelConfig, layout: Layout, *, seq_len: int, moe: bool, cast: int,
                  flash: bool, kernels: int, tp_collectives: int,
                  grouped_gemm: str = "multi_stream", graphs: frozenset = frozenset()
                  ) -> tuple[float, float]:
    """(forward, backward) host seconds to issue one layer for one micro-batch.

    ``cast`` is the kernels quantising each FP8 GEMM operand (``Device.fp8_cast_ops``, 0
    without FP8), ``kernels`` the layer's element-wise kernel count (the compute model's),
    ``tp_collectives`` its forward's TP collective pairs and ``graphs`` the CUDA-graph scopes
    captured (``optimizations.cuda_graph_scope``): each captured scope is one launch per
    pass. ``moe`` and ``full_iteration`` need padded routing or sync-free dispatch, neither of
    which waits on the host, so a layer that waits has at most attn, moe_router and
    moe_preprocess captured."""
    ops, expert_modules = _scope_ops(model, layout, seq_len=seq_len, moe=moe, cast=cast,
                                     flash=flash, kernels=kernels,
                                     tp_collectives=tp_collectives)
    eager = sum(n for scope, n in ops.items() if scope not in graphs)
    replays = sum(1 for scope, n in ops.items() if scope in graphs and n)
    fwd = HOST_OP_S * (eager + replays)
    bwd = HOST_OP_S * (BACKWARD_OPS_PER_FORWARD * eager + replays)
    if expert_modules:
        local = model.num_experts // layout.ep
        if grouped_gemm == "fused":         # one grouped kernel (and its quantization)
            per_pass = HOST_OP_S * (1 + cast)
        else:                               # a GEMM (and its quantization) per local expert
            per_pass = local * (HOST_EXPERT_GEMM_S + HOST_OP_S * cast)
        fwd += expert_modules * per_pass                   # forward
        bwd += expert_modules * 2 * per_pass               # dgrad and wgrad
    return fwd, bwd


def issue_stalls_s(issue: tuple[float, float], gpu: tuple[float, float]) -> tuple[float, float]:
    """(forward, backward) seconds the GPU waits for the host: max(0, C - G) each."""
    return max(0.0, issue[0] - gpu[0]), max(0.0, issue[1] - gpu[1])
