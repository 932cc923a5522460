"""Workload (what is trained) and parallel configuration (how it is split), Megatron-style.

Short names (tp, pp, dp, cp, ep, vpp, micro_batch, global_batch) are canonical; Megatron-LM's
long argument names are accepted as aliases.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from workloads.model import ModelConfig
from workloads.pipeline_layout import parse
from workloads.presets import load_model, model_mapping
from workloads.routing import MoERouting, dirichlet_alpha

_MAX = 10**9  # absurd-size guard: no real job has a billion of any of these


def _int_or_auto(value):
    """Accept 'auto' or a positive integer (not a bool, not a float), else a one-line reason."""
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX:
        raise ValueError(f"must be a positive integer or 'auto', got {value!r}")
    return value


IntOrAuto = Annotated[int | Literal["auto"], BeforeValidator(_int_or_auto)]
"""A size that may be derived (``dp``) or chosen by the simulator (``micro_batch``, ``vpp``)."""
Schedule = Literal["gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe"]
Recompute = Literal["none", "selective", "full", "op"]
Precision = Literal["bf16", "fp16", "fp8"]
Optimizer = Literal["adam", "sgd", "lamb", "lars"]
Fp8Recipe = Literal["delayed", "tensorwise", "blockwise", "mxfp8"]
Fp8SavedInputs = Literal["fp8", "bf16"]

def _alias(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class WorkloadConfig(BaseModel):
    """What one training step processes."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)

    model: ModelConfig
    """A preset name (``clustersim presets``), an inline mapping with Megatron field names, or
    a mapping with ``preset`` naming one and the fields that differ from it."""
    seq_len: int = Field(gt=0, le=100_000_000, validation_alias=_alias("seq_len", "seq_length"))
    """Tokens per sequence s."""
    global_batch: int = Field(gt=0, le=_MAX,
                              validation_alias=_alias("global_batch", "global_batch_size"))
    """Sequences per optimizer step B."""
    micro_batch: IntOrAuto = Field(default="auto",
                                    validation_alias=_alias("micro_batch", "micro_batch_size"))
    """Sequences per micro-batch b; ``auto`` lets the simulator pick the fastest valid value."""
    precision: Precision = "bf16"
    """Compute precision of the GEMMs; parameters stay bf16/fp16 with fp32 master copies."""
    fp8_recipe: Fp8Recipe = "delayed"
    """How FP8 operands are scaled (Megatron-Core's --fp8-recipe; what each costs in HBM
    traffic: simulator.step.compute.FP8_RECIPE_CAST_BYTES): ``delayed`` (a per-tensor scale
    from the amax history, Transformer Engine's original recipe), ``tensorwise`` (per-tensor
    current scaling, TE's FP8-CS and torchao's dynamic float8: the tensor's own amax first),
    ``blockwise`` (DeepSeek-V3's 1 x 128 / 128 x 128 blocks, TE's Float8BlockScaling) or
    ``mxfp8`` (OCP MX: an E8M0 scale per 32 elements, Blackwell's tensor cores). Only with
    precision fp8."""
    fp8_saved_inputs: Fp8SavedInputs = "fp8"
    """What a linear layer keeps of its input for the weight gradient under FP8 training:
    ``fp8``, the quantised copy (Transformer Engine: Megatron-LM, NeMo, llm-foundry's
    ``amp_fp8``), or ``bf16``, the input itself, cast again in backward (torchao's float8
    training: torchtitan). Memory only: the casts cost the same HBM traffic either way
    (:data:`simulator.step.compute.FP8_RECIPE_CAST_BYTES`). Only with precision fp8."""
    optimizer: Optimizer = "adam"
    moments_dtype: Literal["fp32", "bf16"] = "fp32"
    """Element type of the optimizer's moments (Adam's m and v, SGD's momentum): fp32, or bf16
    with a precision-aware optimizer (Megatron-Core's --use-precision-aware-optimizer with
    --exp-avg-dtype / --exp-avg-sq-dtype bf16; DeepSeek-V3's AdamW, arXiv 2412.19437 section
    3.3.3). The master weights stay fp32. Sets the state's memory, the optimizer step's HBM
    traffic and the checkpoint's size."""
    moe: MoERouting = Field(default_factory=MoERouting)
    """How the router spreads tokens over the experts (:mod:`workloads.routing`)."""

    @field_validator("model", mode="before")
    @classmethod
    def _resolve_preset(cls, value):
        if isinstance(value, str):
            return load_model(value)
        if isinstance(value, dict) and "preset" in value:
            changes = {k: v for k, v in value.items() if k != "preset"}
            return {**model_mapping(str(value["preset"])), **changes}
        return value

    @model_validator(mode="after")
    def _routing(self) -> "WorkloadConfig":
        if self.moe.is_default:
            return self
        if not self.model.is_moe:
            raise ValueError("moe (routing) needs a model with experts (model.num_experts)")
        if self.moe.imbalance > 0:
            try:
                dirichlet_alpha(self.model.num_experts, self.moe.imbalance)
            except ValueError as e:
                raise ValueError(f"moe.{e}") from None
        return self



ORDER_DIMS = ("tp", "cp", "ep", "dp", "pp")
"""The dimensions of a rank order (Megatron-Core's ``order``)."""


class ParallelConfig(BaseModel):
    """Megatron-LM's 5-D parallel layout (tp, cp, ep, dp, pp) plus schedule and memory levers."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)

    tp: int = Field(default=1, gt=0, le=_MAX,
                    validation_alias=_alias("tp", "tensor_model_parallel_size"))
    """Tensor-parallel size (Shoeybi et al. 2019)."""
    pp: int = Field(default=1, gt=0, le=_MAX,
                    validation_alias=_alias("pp", "pipeline_model_parallel_size"))
    """Pipeline-parallel size (number of stages p)."""
    dp: IntOrAuto = Field(default="auto", validation_alias=_alias("dp", "data_parallel_size"))
    """Data-parallel size; ``auto`` = gpus / (tp x pp x cp). Never needed, always checked."""
    cp: int = Field(default=1, gt=0, le=_MAX,
                    validation_alias=_alias("cp", "context_parallel_size"))
    """Context-parallel size: the sequence is split over cp ranks (ring attention)."""
    ep: int = Field(default=1, gt=0, le=_MAX,
                    validation_alias=_alias("ep", "expert_model_parallel_size"))
    """Expert-parallel size, carved out of dp x cp as in Megatron-Core."""
    etp: int | None = Field(default=None, gt=0, le=_MAX, validation_alias=_alias(
        "etp", "expert_tensor_parallel_size"))
    """Expert tensor-parallel size (Megatron-Core ``expert_tensor_parallel_size``); None = tp.
    Smaller than tp folds the MoE layers' parallelism (Liu et al. 2025, MoE Parallel Folding,
    arXiv 2504.14960): a stage's tp x cp x dp ranks regroup as etp x ep x edp, so expert
    groups may span tensor-parallel ranks (tp 2, ep 32 on 16-way dp), each rank dispatches its
    own sequence-parallel tokens and no TP collective wraps the experts. Must divide tp."""
    vpp: IntOrAuto = Field(default=1, validation_alias=_alias(
        "vpp", "virtual_pipeline_model_parallel_size"))
    """Virtual stages (model chunks) per pipeline rank v for the interleaved schedule."""
    microbatch_group_size: int | None = Field(
        default=None, gt=0, le=_MAX,
        validation_alias=_alias("microbatch_group_size", "microbatch_group_size_per_vp_stage"))
    """Interleaved schedule: micro-batches each model chunk runs in a row before the next chunk
    (Megatron-Core's microbatch_group_size_per_vp_stage; Llama 3's flexible N, arXiv
    2407.21783 section 3.3.2). None = pp, Megatron's default. Between pp and the micro-batch
    count m; m need not be a multiple of pp as long as the last group (m mod N, if any) has at
    least pp."""
    schedule: Schedule = "1f1b"
    """gpipe, 1f1b, interleaved (1F1B with vpp chunks; also chosen by 1f1b with vpp > 1, as
    Megatron does), zb-h1 (zero bubble, Qi et al. 2024), dualpipe (DeepSeek-V3's
    bidirectional pipeline: every rank holds two stages, one per direction; even pp, vpp 1)."""
    cp_comm_type: Literal["p2p", "all_gather", "all_to_all"] = "p2p"
    """Context-parallel attention: ring point-to-point of K/V chunks overlapped with attention
    (Megatron-Core ``p2p``); one all-gather of K/V before attention (Llama 3, section 3.3.2;
    Megatron-Core ``all_gather``); or DeepSpeed-Ulysses (Jacobs et al. 2023, arXiv 2309.14509;
    Megatron-Core ``a2a``): all-to-alls scatter the heads and gather the sequence of Q, K and V
    before attention, and the reverse for its output, so each rank attends over the whole
    sequence for heads / cp of the heads (needs heads per tp rank divisible by cp)."""
    sequence_parallel: bool = False
    """Shard LayerNorm/dropout activations over tp (Korthikanti et al. 2022)."""
    order: str = "tp-cp-ep-dp-pp"
    """Megatron-Core's rank order (``order``): the dimensions, fastest-varying first, so
    ``tp-cp-ep-dp-pp`` puts a tensor-parallel group on consecutive GPUs and the pipeline
    stages furthest apart, and ``tp-pp-dp`` puts the stages of one pipeline next to each
    other. As Megatron-Core's RankGenerator: a dimension of size 1 may be left out (it goes
    last), and ep must sit next to dp (expert groups are carved out of the data-parallel
    ranks: ``ep-dp`` from consecutive ones, ``dp-ep`` from ranks an expert-data-parallel
    group apart)."""
    grad_reduce_dtype: Literal["auto", "fp32", "bf16"] = "auto"
    """Dtype of the gradient buffer and of its data-parallel reduction. auto is Megatron-LM's
    default: fp32 main gradients for bf16 / fp8 training (accumulate_allreduce_grads_in_fp32
    is forced on for bf16), fp16 gradients for fp16; torchtitan's FSDP2 default
    (reduce_dtype float32) is fp32 too. bf16 halves the reduction's bytes and the buffer."""
    zero: int = Field(default=0, ge=0, le=3)
    """ZeRO stage over the data-parallel group: 1 = Megatron's distributed optimizer. 3 with
    pp > 1 runs as FSDP2 runs under a pipeline (torchtitan): a stage's weights are gathered once
    per step and kept over its micro-batches (reshard_after_forward off) and its gradients
    reduce-scattered once, after the last micro-batch's backward (PyTorch's pipeline stages
    sync gradients on the last backward only), which is the traffic and the in-step memory of
    the distributed optimizer (workloads.layout.make_layout runs it as stage 1)."""
    zero_shard_size: int | None = Field(
        default=None, gt=0, le=_MAX,
        validation_alias=_alias("zero_shard_size", "data_parallel_shard_degree"))
    """Shard ZeRO's states over groups of this many data-parallel (x context) ranks and
    replicate them across the groups: HSDP (PyTorch FSDP2 / torchtitan
    ``data_parallel_shard_degree``), MiCS (Zhang et al. 2022, arXiv 2205.00119), Megatron's
    distributed optimizer with ``num_distributed_optimizer_instances`` > 1. Gradients
    reduce-scatter inside the shard group and all-reduce their shard across the replicas once
    per step; parameters all-gather inside the shard group. None = the whole dp x cp group."""
    recompute: Recompute = Field(default="none",
                                 validation_alias=_alias("recompute", "recompute_granularity"))
    """Activation recomputation: none, selective (core attention, Megatron-LM), full (every
    layer), op (torchtitan's per-op selective checkpointing: every second matmul of a layer and
    all its element-wise ops)."""
    recompute_method: Literal["uniform", "block"] = "uniform"
    """With ``recompute: full`` and ``recompute_num_layers`` (Megatron's --recompute-method):
    ``uniform`` checkpoints the input of every group of that many layers and runs the group
    again in the backward (all layers recomputed; fewer, larger checkpoints); ``block``
    recomputes only the first that many layers of each pipeline stage's model chunk and keeps
    every activation of the others (no recomputation there)."""
    recompute_num_layers: int | None = Field(default=None, gt=0, le=_MAX)
    """Megatron's --recompute-num-layers (see ``recompute_method``); None = every layer
    checkpointed on its own (uniform, 1)."""
    recompute_modules: list[Literal["core_attn", "layernorm", "mla_up_proj", "mlp", "moe_act",
                                    "shared_experts"]] | None = None
    """Megatron-Core's ``recompute_modules`` with ``recompute: selective``: which modules store
    only their input and run their forward again in the backward; None = core_attn (the
    default). layernorm: the norms' outputs; mla_up_proj: MLA's up-projections (Q, K, V);
    mlp: the dense MLP; moe_act: the experts' activation function; shared_experts."""
    cpu_offloading_num_layers: int = Field(default=0, ge=0, le=_MAX)
    """Megatron-Core's CPU activation offloading (``cpu_offloading`` with
    ``cpu_offloading_num_layers``, Transformer Engine's ``get_cpu_offload_context``): the
    first N transformer layers copy what they keep for the backward to host memory as their
    forward ends and bring it back one layer ahead of their backward, double-buffered on a
    side stream (:mod:`simulator.step.offload`). Megatron's rules: pp 1, no recomputation, N
    below the layer count. 0 = off."""
    offload_modules: list[Literal["attn_norm", "qkv_linear", "core_attn", "attn_proj",
                                  "mlp_norm", "expert_fc1", "moe_act"]] | None = None
    """Megatron-Core's fine-grained activation offloading (``--fine-grained-activation-
    offloading --offload-modules``): each listed module of every layer copies its input to host
    memory during the forward and brings it back before its backward, on a side stream; any pp
    and schedule, with selective recomputation or none (:mod:`simulator.step.offload`). None =
    off."""
    first_stage_layers: int | None = Field(
        default=None, gt=0, le=_MAX,
        validation_alias=_alias("first_stage_layers", "decoder_first_pipeline_num_layers"))
    """Layers on the first pipeline stage, when uneven (Llama 3 405B: one fewer)."""
    last_stage_layers: int | None = Field(
        default=None, gt=0, le=_MAX,
        validation_alias=_alias("last_stage_layers", "decoder_last_pipeline_num_layers"))
    """Layers on the last pipeline stage, when uneven."""
    account_for_embedding_in_pipeline_split: bool = False
    """Megatron-Core's rule of the same name: the embedding takes one layer's slot, so the
    first virtual stage (stage 0, chunk 0) holds one fewer transformer layer. Llama 3 405B
    (126 layers, pp 16, interleaved; Llama Team 2024, section 3.3.2), BLOOM's and GLM-130B's
    pipelines balance this way."""
    account_for_loss_in_pipeline_split: bool = False
    """Same for the output layer and loss: the last virtual stage holds one fewer layer."""
    pipeline_layout: str | None = Field(
        default=None, min_length=1, max_length=10_000,
        validation_alias=_alias("pipeline_layout", "pipeline_model_parallel_layout"))
    """Megatron-Core's flexible layout string (``--pipeline-model-parallel-layout``), virtual
    stages in order separated by '|': E embedding, t transformer layer, m MTP layer, L loss,
    x*n and (...)*n repeat (workloads.pipeline_layout). Sets vpp (virtual stages / pp); DeepSeek-
    V3 on pp 8 x vpp 4 in Megatron-Bridge: 'Et|(tt|)*30mL'."""

    @model_validator(mode="before")
    @classmethod
    def _layout_sets_vpp(cls, data):
        """A pipeline_layout without vpp: vpp follows from the layout (virtual stages / pp)."""
        if isinstance(data, dict) and \
                any(k in data for k in ("pipeline_layout", "pipeline_model_parallel_layout")) \
                and not any(k in data for k in ("vpp", "virtual_pipeline_model_parallel_size")):
            data = {**data, "vpp": "auto"}
        return data

    @field_validator("order")
    @classmethod
    def _order(cls, order: str) -> str:
        dims = order.split("-")
        if len(set(dims)) != len(dims) or not set(dims) <= set(ORDER_DIMS):
            raise ValueError(f"{order!r} must list dimensions of {'-'.join(ORDER_DIMS)}, each "
                             "at most once, separated by '-'")
        if "ep" in dims and "ep-dp" not in order and "dp-ep" not in order:
            raise ValueError(f"{order!r} must put ep next to dp (expert groups are carved "
                             "out of the data-parallel ranks)")
        return order

    @model_validator(mode="after")
    def _rules(self) -> "ParallelConfig":
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence_parallel needs tp > 1 (it shards activations over the "
                             "tensor-parallel group)")
        if self.vpp != "auto" and self.vpp > 1:
            if self.pp == 1:
                raise ValueError(f"vpp ({self.vpp}) > 1 needs pp > 1")
            if self.schedule in ("gpipe", "zb-h1", "dualpipe"):
                raise ValueError(f"vpp ({self.vpp}) > 1 needs schedule interleaved or 1f1b, "
                                 f"not {self.schedule}")
        if self.schedule == "dualpipe" and (self.pp < 2 or self.pp % 2):
            raise ValueError(f"schedule dualpipe needs an even pp of at least 2 (pp is "
                             f"{self.pp}): its two directions meet in the middle")
        if self.schedule == "interleaved" and self.vpp == 1:
            raise ValueError("schedule interleaved needs vpp > 1 (or vpp: auto)")
        if self.schedule == "interleaved" and self.pp == 1:
            raise ValueError("schedule interleaved needs pp > 1")
        if (self.first_stage_layers or self.last_stage_layers) and self.pp == 1:
            raise ValueError("first_stage_layers / last_stage_layers need pp > 1")
        accounted = (self.account_for_embedding_in_pipeline_split or
                     self.account_for_loss_in_pipeline_split)
        if accounted and self.pp == 1:
            raise ValueError("account_for_embedding_in_pipeline_split / "
                             "account_for_loss_in_pipeline_split need pp > 1")
        if accounted and (self.first_stage_layers or self.last_stage_layers):
            raise ValueError("first_stage_layers / last_stage_layers and account_for_*_in_"
                             "pipeline_split are two ways to unbalance the stages: use one")
        if self.pipeline_layout is not None:
            if accounted or self.first_stage_layers or self.last_stage_layers:
                raise ValueError("pipeline_layout places every layer itself: drop "
                                 "first_stage_layers / last_stage_layers / account_for_*")
            v = len(parse(self.pipeline_layout, self.pp)) // self.pp
            if self.vpp not in ("auto", v):
                raise ValueError(f"pipeline_layout has {v} virtual stages per pipeline rank; "
                                 f"vpp is {self.vpp} (leave it auto or set {v})")
            if v > 1 and self.schedule in ("gpipe", "zb-h1", "dualpipe"):
                raise ValueError(f"pipeline_layout has {v} virtual stages per rank: it needs "
                                 f"schedule interleaved or 1f1b, not {self.schedule}")
        if self.recompute_modules is not None and self.recompute != "selective":
            raise ValueError(f"recompute_modules needs recompute: selective (it is "
                             f"{self.recompute})")
        if self.recompute_num_layers is not None and self.recompute != "full":
            raise ValueError(f"recompute_num_layers ({self.recompute_num_layers}) needs "
                             f"recompute: full (it is {self.recompute}): Megatron's "
                             f"--recompute-method applies to full recomputation")
        if self.recompute_method == "block" and self.recompute_num_layers is None:
            raise ValueError("recompute_method block needs recompute_num_layers (how many "
                             "layers of each model chunk to recompute)")
        if self.offload_modules and self.cpu_offloading_num_layers:
            raise ValueError("offload_modules and cpu_offloading_num_layers are two ways to "
                             "offload activations (Megatron-Core allows one): use one")
        if self.offload_modules and self.recompute in ("full", "op"):
            raise ValueError(f"offload_modules needs recompute none or selective (it is "
                             f"{self.recompute}): a fully recomputed layer keeps only its input")
        if self.cpu_offloading_num_layers and self.pp != 1:
            raise ValueError(f"cpu_offloading_num_layers ({self.cpu_offloading_num_layers}) "
                             f"needs pp 1 (it is {self.pp}): Megatron-Core has no pipeline "
                             f"parallelism with CPU offloading")
        if self.cpu_offloading_num_layers and self.recompute != "none":
            raise ValueError(f"cpu_offloading_num_layers needs recompute: none (it is "
                             f"{self.recompute}): Megatron-Core offloads no recomputed layer")
        if self.zero_shard_size is not None and self.zero == 0:
            raise ValueError(f"zero_shard_size ({self.zero_shard_size}) needs zero >= 1 (it "
                             "sizes the groups ZeRO shards over)")
        return self

    def grad_bytes(self, precision: str) -> int:
        """Bytes per gradient element in the buffer and on the wire."""
        if self.grad_reduce_dtype == "auto":
            return 2 if precision == "fp16" else 4
        return 4 if self.grad_reduce_dtype == "fp32" else 2

    def effective_schedule(self, vpp: int) -> Schedule:
        """The schedule that runs: Megatron interleaves 1F1B whenever vpp > 1."""
        if self.schedule == "1f1b" and vpp > 1:
            return "interleaved"
        return self.schedule
