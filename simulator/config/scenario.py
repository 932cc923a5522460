"""Scenario: the validated input of every run (design.md, "Contracts").

Parse, don't validate: once a :class:`Scenario` exists, its model, GPU and topology are resolved
objects (presets expanded), every cross-field rule has held, and downstream code trusts it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from simulator.calibration import GPU_SPEED_CV, attention_speed
from simulator.config.data import DataPipeline
from simulator.config.failures import CheckpointConfig, FailuresConfig
from simulator.config.network import NetworkConfig
from simulator.config.resolve import first_failure, layout_choices, resolve
from simulator.config.sensitivity import inert, set_paths
from simulator.errors import ScenarioError, from_validation_error, read_input
from topologies.gpus import GPUSpec, gpu_mapping, load_gpu
from topologies.spec import Clos3, SpineLeaf, TopologySpec, topology_mapping
from workloads.layout import (
    resolve_dp,
)
from workloads.parallel import ParallelConfig, WorkloadConfig
from workloads.presets import model_mapping
from workloads.routing import rank_over_budget


class Optimizations(BaseModel):
    """Levers a practitioner turns on or off (MegaScale section 3; Megatron-LM flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    tp_overlap: bool = False
    """Overlap TP collectives with the GEMMs that produce/consume them (TE userbuffers;
    PyTorch's async TP, which micro-pipelines them in torchtitan)."""
    tp_bwd_overlap: bool = True
    """Megatron-LM's asynchronous tensor-parallel gradient collective (on unless
    --no-async-tensor-model-parallel-allreduce): each column-parallel linear's input-gradient
    all-reduce / reduce-scatter runs under its weight-gradient GEMM. PyTorch DTensor's tensor
    parallelism (torchtitan without async TP) issues them in turn with the backward's GEMMs:
    false exposes the backward's TP collectives whole."""
    dp_overlap: bool = True
    """Overlap the gradient reduce-scatter/all-reduce with backward (bucketed)."""
    pp_overlap: bool = True
    """Overlap pipeline send/recv with compute."""
    parallel_block: bool = False
    """Run attention and MLP side by side (MegaScale's parallel transformer block)."""
    fused_kernels: bool = True
    """Fused element-wise kernels (bias+GeLU, bias+dropout+add, LayerNorm, softmax)."""
    flash_attention: bool = True
    """Fused flash-attention kernel: no s x s tensors stored (off for 2021-22 Megatron runs)."""
    attention_kernel: Literal["auto", "flash2", "flash3", "cudnn"] = "auto"
    """Which fused attention kernel: flash2 (flash-attn 2, PyTorch SDPA's flash backend),
    flash3 (FlashAttention-3, Hopper and later), cudnn (Transformer Engine's FusedAttention);
    auto: what Megatron-Core with Transformer Engine runs on the GPU (flash2 on Ampere, cudnn
    on Hopper and later; calibration.ATTENTION_KERNEL_SPEED)."""
    async_data_loading: bool = True
    """Prefetch each micro-batch's tensors (host-to-device copy and TP broadcast) behind the
    previous one; off, the first and last stages wait for them before each forward."""
    ep_overlap: bool = False
    """Megatron-Core's --overlap-moe-expert-parallel-comm: in the pipeline's steady state each
    MoE layer's forward of one micro-batch runs merged with the backward of another, so each
    one's dispatch and combine all-to-alls hide behind the other's compute (DeepSeek-V3's
    DualPipe pairs passes the same way). Needs ep > 1, vpp > 1 when pp > 1, and no full
    recompute (Megatron's rules)."""
    delay_wgrad: bool = False
    """Megatron-Core's --delay-wgrad-compute under ``ep_overlap``: the experts' weight gradient
    runs after the backward's dispatch has started, beside it, instead of before it (off,
    Megatron's default: the dispatch waits for dgrad and wgrad both). DualPipe always splits
    the weight gradient off. Needs ep_overlap (Megatron's rule)."""
    comm_sms: int = Field(default=0, ge=0, le=10_000)
    """Streaming multiprocessors held by communication kernels for the whole step, so GEMMs
    and attention run in waves over the rest: DeepSeek-V3 dedicates 20 of the H800's 132 to
    its all-to-all (arXiv 2412.19437 section 3.2.2); DeepEP's Buffer.num_sms. Must leave the
    GPU at least one."""
    ep_comm_sms: int | None = Field(default=None, ge=1, le=10_000)
    """SMs the expert all-to-all kernels hold while they run (Megatron-Core's
    moe_flex_dispatcher_num_sms): compute overlapped with them (``ep_overlap``, DualPipe) runs
    on the rest. None: the dispatcher's own, ``flex`` DeepEP's default 20, ``alltoall`` NCCL's
    p2p kernel at one thread block per channel (calibration.NCCL_P2P_SMS). SMs already held by
    ``comm_sms`` count towards it."""
    grouped_gemm: Literal["multi_stream", "fused"] = "multi_stream"
    """How the experts' grouped linear layers run: ``multi_stream``, Transformer Engine's
    GroupedLinear as Megatron-Core's --moe-grouped-gemm runs it (one GEMM per local expert over
    several streams, each issued from a Python loop on the host); ``fused``, one grouped kernel
    over all local experts (CUTLASS grouped GEMM, torch._grouped_mm in torchtitan, DeepGEMM).
    Only the host's issue time differs (simulator.step.host)."""
    cuda_graph_scope: list[Literal["attn", "mlp", "moe", "moe_router", "moe_preprocess",
                                   "full_iteration"]] = Field(default_factory=list)
    """Megatron-Bridge's cuda_graph_scope: the parts of every layer replayed from a captured
    CUDA graph, each issued by the host as one launch instead of its operators (attn, mlp,
    moe_router, moe_preprocess, moe: Transformer Engine's per-layer graphs; full_iteration:
    the whole forward-backward). Dropless MoE layers whose counts go to the host have dynamic
    shapes, so moe and full_iteration need workload.moe.pad_to_capacity or
    workload.moe.rank_capacity_factor (sync-free dispatch); the other dropless MoE runs capture
    attn, moe_router and moe_preprocess. Only the host's issue time changes
    (simulator.step.host)."""
    fp8_all_gather: bool = False
    """With workload.precision fp8, all-gather GEMM operands already cast to FP8 (1 byte per
    element instead of 2): the sequence-parallel activation all-gather before each
    column-parallel linear (torchao's Float8ColwiseParallel, which torchtitan's TP plan uses
    with float8), ZeRO-3 / FSDP's per-layer weight all-gather (torchtitan
    enable_fsdp_float8_all_gather) and the distributed optimizer's parameter all-gather
    (Megatron-LM --fp8-param-gather). Reduce-scatters and gradients stay bf16 / fp32."""


class Straggler(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    gpu: int = Field(ge=0, le=10_000_000)
    """Global GPU index (rank order tp-cp-ep-dp-pp, 8 per server)."""
    slowdown: float = Field(gt=1.0, le=100.0)
    """Compute time multiplier of that GPU (1.1 = 10 % slower)."""


class DegradedLink(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    link: str
    """A cable as ``clustersim topology`` names it, e.g. ``leaf3-spine1``."""
    capacity_factor: float = Field(gt=0.0, lt=1.0)


class Faults(BaseModel):
    """In-step what-ifs (``clustersim topology SCENARIO`` lists switch and cable names)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    stragglers: list[Straggler] = Field(default_factory=list)
    failed_links: list[str] = Field(default_factory=list)
    """Cables as ``a-b`` (both directions go down)."""
    failed_switches: list[str] = Field(default_factory=list)
    degraded_links: list[DegradedLink] = Field(default_factory=list)

    @property
    def touches_fabric(self) -> bool:
        return bool(self.failed_links or self.failed_switches or self.degraded_links)


class HostDetour(BaseModel):
    """One source of OS noise on every host: detours of ``duration_us`` arriving at
    ``rate_hz`` (Poisson) on the core that runs NCCL's proxy thread."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    rate_hz: float = Field(gt=0.0, le=1e6)
    """Detours per second on each host (Poisson arrivals)."""
    duration_us: float = Field(gt=0.0, le=1e7)
    """How long one detour stops the proxy's core, microseconds."""


class Variability(BaseModel):
    """How much GPUs of one SKU differ in speed (simulator.step.variability) and what OS noise
    the hosts add (simulator.step.host_noise)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    gpu_speed_cv: float = Field(default=GPU_SPEED_CV, ge=0.0, le=0.5)
    """Coefficient of variation of per-GPU compute speed (Sinha et al., SC'22: 1.5 %); 0 turns
    variability off (every GPU at its nominal speed)."""
    host_noise: list[HostDetour] = Field(default_factory=list)
    """OS detours on each host (e.g. ``[{rate_hz: 1, duration_us: 2000}]`` for a daemon that
    wakes once a second for 2 ms). A network collective over H hosts stalls whenever one of
    them is in a detour longer than NCCL's buffered slack; none by default (a tuned training
    host, whose kernel ticks and interrupts last single-digit microseconds: de Oliveira et
    al., IEEE TC 2022, far below the slack)."""


class ClusterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    gpu: GPUSpec
    """A GPU name from the catalogue (``clustersim presets``) or an inline mapping."""
    gpus: int = Field(gt=0, le=10_000_000)
    gpus_per_node: int = Field(default=8, gt=0, le=1024)
    """GPUs of one node (one NVLink domain at most). Unset: the GPU's node for this many GPUs
    (:meth:`topologies.gpus.GPUSpec.node_gpus`): 8 on HGX, 72 per GB200 NVL72 rack, or whole
    trays of it (1,024 GB200: racks of 64)."""
    topology: TopologySpec = SpineLeaf(kind="spine-leaf")
    """A topology preset name or a mapping with ``kind`` (spine-leaf, clos3, rail-optimized)."""
    variability: Variability = Variability()
    """GPU-to-GPU speed variation: the step waits for the slowest GPU of each synchronising
    group (``variability: {gpu_speed_cv: 0}`` turns it off)."""

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu_preset(cls, value):
        return load_gpu(value) if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _node_of_the_gpu(cls, data):
        """An unset gpus_per_node is the GPU's node (the field's note); a GPU or GPU count
        that does not validate is left to its own field's error."""
        if not isinstance(data, dict) or data.get("gpus_per_node") is not None:
            return data
        gpu, gpus = data.get("gpu"), data.get("gpus")
        try:
            spec = load_gpu(gpu) if isinstance(gpu, str) else (
                gpu if isinstance(gpu, GPUSpec) else GPUSpec.model_validate(gpu))
        except (ValueError, TypeError):
            return data
        if type(gpus) is not int or gpus < 1:
            return data
        return {**data, "gpus_per_node": spec.node_gpus(gpus)}

    @field_validator("topology", mode="before")
    @classmethod
    def _topology_preset(cls, value):
        return topology_mapping(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _fabric_fits(self) -> "ClusterConfig":
        g, per = self.gpus, self.gpus_per_node
        if per > self.gpu.nvlink_domain:
            raise ValueError(f"cluster.gpus_per_node ({per}) is more than one NVLink domain of "
                             f"cluster.gpu {self.gpu.name} ({self.gpu.nvlink_domain} GPUs): a "
                             f"node is the GPUs NVLink joins (a GPU given as a mapping states "
                             f"its nvlink_domain)")
        if g > per and g % per:
            raise ValueError(f"cluster.gpus ({g}) must be a whole number of nodes of "
                             f"cluster.gpus_per_node ({per})")
        topo = self.topology
        nics = (topo.nics_per_node or per) * max(1, g // per)
        if isinstance(topo, SpineLeaf) and topo.leaves and topo.hosts_per_leaf:
            ports = topo.leaves * topo.hosts_per_leaf
            if ports < nics:
                raise ValueError(
                    f"cluster.topology.leaves x hosts_per_leaf ({topo.leaves} x "
                    f"{topo.hosts_per_leaf} = {ports}) cannot attach the {nics} NICs of "
                    f"cluster.gpus ({g})")
        if isinstance(topo, SpineLeaf) and topo.spines == 0 and topo.leaves not in (None, 1):
            raise ValueError("cluster.topology.spines 0 needs leaves: 1 (a single switch)")
        if isinstance(topo, Clos3) and topo.pod_gpus and topo.pod_gpus % per:
            raise ValueError(f"cluster.topology.pod_gpus ({topo.pod_gpus}) must be a whole "
                             f"number of nodes of cluster.gpus_per_node ({per})")
        return self


class Scenario(BaseModel):
    """A training job on a cluster: model x parallel strategy x system (Calculon's split)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = "scenario"
    workload: WorkloadConfig
    parallel: ParallelConfig = ParallelConfig()
    optimizations: Optimizations = Optimizations()
    cluster: ClusterConfig
    network: NetworkConfig = NetworkConfig()
    faults: Faults = Faults()
    data: DataPipeline = DataPipeline()
    """The data loaders (who loads, workers, prefetch, CPU and storage rates)."""
    failures: FailuresConfig = FailuresConfig()
    """Failure catalogue and recovery model of a training run (``clustersim failures``)."""
    checkpoint: CheckpointConfig = CheckpointConfig()
    fidelity: Literal["analytic", "screening", "flow"] = "flow"
    """flow (the default: the fabric is the product): every inter-node collective of all
    replicas runs as flows on the fabric (routing, faults; max-min sharing, or the DCQCN / PFC
    fluid model with ``congestion_control: dcqcn``); screening: alpha-beta collectives (NCCL
    cost model, no fabric) on the simpy executor, for quick looks; analytic: the screening costs
    with a closed-form pipeline (sweeps)."""
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    """Seed of the run's one ``np.random.Generator`` (ECMP hashing, failures)."""
    _set_paths: tuple = PrivateAttr(default=())
    """The dotted fields the scenario's mapping set (after ``--set``), for :meth:`inert`."""

    @property
    def _nics_per_node(self) -> int:
        return self.cluster.topology.nics_per_node or self.cluster.gpus_per_node

    @property
    def channels_per_nic(self) -> int:
        """NCCL channels on each NIC rail: network.nccl.channels / NICs per node, or
        network.nccl.channels_per_nic."""
        nccl = self.network.nccl
        return nccl.channels // self._nics_per_node if nccl.channels else nccl.channels_per_nic

    def _check_cuda_graphs(self) -> None:
        """Megatron-Core's rules for the captured scopes."""
        scopes = set(self.optimizations.cuda_graph_scope)
        if "full_iteration" in scopes and len(scopes) > 1:
            raise ValueError("optimizations.cuda_graph_scope: full_iteration captures the whole "
                             "step and cannot be combined with per-layer scopes")
        model, moe = self.workload.model, self.workload.moe
        routed = scopes & {"moe", "moe_router", "moe_preprocess"}
        if routed and not model.is_moe:
            raise ValueError(f"optimizations.cuda_graph_scope {sorted(routed)[0]} needs an MoE "
                             f"model (workload.model.num_experts)")
        whole = scopes & {"moe", "full_iteration"}
        if whole and model.is_moe and not moe.pad_to_capacity and \
                moe.rank_capacity_factor is None:
            raise ValueError(f"optimizations.cuda_graph_scope {sorted(whole)[0]} needs "
                             f"workload.moe.pad_to_capacity or workload.moe."
                             f"rank_capacity_factor: dropless MoE layers that send their "
                             f"counts to the host have dynamic shapes and cannot be captured")

    def _check_rank_budget(self) -> None:
        """Sync-free dispatch: every routing drawn must fit each rank's receive budget."""
        moe, model, ep = self.workload.moe, self.workload.model, self.parallel.ep
        if moe.rank_capacity_factor is None or not model.is_moe or \
                model.num_experts % ep:     # (ep's own rule reports that)
            return
        worst = rank_over_budget(moe, model.num_experts, ep)
        if worst:
            raise ValueError(f"workload.moe.rank_capacity_factor ({moe.rank_capacity_factor}) "
                             f"is below the busiest expert-parallel rank's load in routings "
                             f"drawn at imbalance {moe.imbalance} ({worst:.2f}x its share): "
                             f"Megatron-Core stops a sync-free run over budget")

    @model_validator(mode="after")
    def _cross_section_rules(self) -> "Scenario":
        if self.parallel.cp > 1 and not self.optimizations.flash_attention:
            raise ValueError("parallel.cp > 1 needs optimizations.flash_attention: true "
                             "(context parallelism runs ring attention on fused kernels)")
        kernel = self.optimizations.attention_kernel
        if kernel != "auto" and not self.optimizations.flash_attention:
            raise ValueError(f"optimizations.attention_kernel {kernel} is a fused attention "
                             f"kernel; optimizations.flash_attention is false")
        if attention_speed(kernel, self.cluster.gpu.name) is None:
            raise ValueError(f"optimizations.attention_kernel {kernel} does not run on "
                             f"cluster.gpu {self.cluster.gpu.name} (FlashAttention-3 needs "
                             f"Hopper or later)")
        offload, layers = self.parallel.cpu_offloading_num_layers, self.workload.model.num_layers
        if offload >= layers:
            raise ValueError(f"parallel.cpu_offloading_num_layers ({offload}) must be below "
                             f"workload.model.num_layers ({layers}): Megatron-Core keeps the "
                             f"last layer's activations on the GPU")
        if self.workload.precision == "fp8" and self.cluster.gpu.fp8_tflops is None:
            raise ValueError(f"workload.precision fp8 needs a GPU with FP8 tensor cores; "
                             f"cluster.gpu {self.cluster.gpu.name} has none")
        if self.optimizations.comm_sms >= self.cluster.gpu.sms:
            raise ValueError(f"optimizations.comm_sms ({self.optimizations.comm_sms}) must "
                             f"leave compute some of cluster.gpu's {self.cluster.gpu.sms} SMs")
        ep_sms = self.optimizations.ep_comm_sms
        if ep_sms is not None and ep_sms >= self.cluster.gpu.sms:
            raise ValueError(f"optimizations.ep_comm_sms ({ep_sms}) must leave compute some of "
                             f"cluster.gpu's {self.cluster.gpu.sms} SMs")
        recipe = self.workload.fp8_recipe
        if recipe != "delayed" and self.workload.precision != "fp8":
            raise ValueError(f"workload.fp8_recipe {recipe} needs workload.precision fp8 "
                             f"(it is {self.workload.precision})")
        if self.workload.fp8_saved_inputs != "fp8" and self.workload.precision != "fp8":
            raise ValueError(f"workload.fp8_saved_inputs {self.workload.fp8_saved_inputs} "
                             f"needs workload.precision fp8 (it is "
                             f"{self.workload.precision})")
        if recipe == "mxfp8" and not self.cluster.gpu.mx_formats:
            raise ValueError(f"workload.fp8_recipe mxfp8 needs a GPU with MX tensor-core "
                             f"formats (Blackwell); cluster.gpu {self.cluster.gpu.name} has "
                             f"none (mx_formats: false)")
        if self.optimizations.ep_overlap:
            par = self.parallel
            if par.ep == 1:
                raise ValueError("optimizations.ep_overlap needs parallel.ep > 1 (it overlaps "
                                 "the expert-parallel all-to-alls)")
            if par.pp > 1 and par.vpp == 1:
                raise ValueError("optimizations.ep_overlap with parallel.pp > 1 needs "
                                 "parallel.vpp > 1 (Megatron-Core merges passes of the "
                                 "interleaved schedule)")
            if par.recompute == "full":
                raise ValueError("optimizations.ep_overlap needs parallel.recompute other than "
                                 "full (Megatron-Core's rule)")
        elif self.optimizations.delay_wgrad:
            raise ValueError("optimizations.delay_wgrad needs optimizations.ep_overlap (it "
                             "delays the experts' weight gradient past the overlapped "
                             "dispatch; Megatron-Core's rule)")
        self._check_cuda_graphs()
        self._check_rank_budget()
        if self.optimizations.fp8_all_gather and self.workload.precision != "fp8":
            raise ValueError(f"optimizations.fp8_all_gather needs workload.precision fp8 "
                             f"(it is {self.workload.precision}): only FP8 training casts the "
                             f"operands before gathering them")
        channels, nics = self.network.nccl.channels, self._nics_per_node
        if channels is not None and channels % nics:
            raise ValueError(f"network.nccl.channels ({channels}) must be a multiple of the "
                             f"node's {nics} NICs (each NIC rail runs the same channels)")
        algo = self.network.nccl.algorithm
        if algo in ("nvlstree", "nvls") and not self.cluster.gpu.nvls:
            raise ValueError(f"network.nccl.algorithm {algo} needs GPUs with NVLink SHARP; "
                             f"cluster.gpu {self.cluster.gpu.name} has none (nvls: false)")
        if algo in ("nvls", "collnet") and not self.cluster.topology.sharp:
            raise ValueError(f"network.nccl.algorithm {algo} across nodes needs in-network "
                             f"reduction: cluster.topology.sharp is false")
        for st in self.faults.stragglers:
            if st.gpu >= self.cluster.gpus:
                raise ValueError(f"faults.stragglers.gpu ({st.gpu}) must be < cluster.gpus "
                                 f"({self.cluster.gpus})")
        if self.faults.touches_fabric and self.fidelity != "flow":
            raise ValueError("faults.failed_links / failed_switches / degraded_links need "
                             "fidelity: flow (the screening fidelity has no fabric)")
        if not layout_choices(self, first_only=True):
            auto = [f for f, v in (("workload.micro_batch", self.workload.micro_batch),
                                   ("parallel.vpp", self.parallel.vpp)) if v == "auto"]
            if not auto:
                resolve(self)       # raises the precise rule that fails
            # with 'auto' fields, report why the first candidate fails, then say none fit
            raise ValueError(f"no value of {' / '.join(auto)} satisfies the batch and layer "
                             f"rules: {first_failure(self)}")
        return self

    # ---- derived values ----
    def inert(self, fidelity: str) -> list[str]:
        """Fields this scenario sets that cannot change the step at ``fidelity`` (analytic,
        screening, flow or fluid; :mod:`simulator.config.sensitivity`)."""
        return inert(self._set_paths, fidelity)

    @property
    def dp(self) -> int:
        return resolve_dp(self.parallel, self.cluster.gpus)

    # ---- loading ----
    @classmethod
    def from_dict(cls, data: dict[str, Any], overrides: list[str] | tuple[str, ...] = ()
                  ) -> "Scenario":
        """Validate a mapping (after ``--set`` overrides); raises :class:`ScenarioError`."""
        if not isinstance(data, dict):
            raise ScenarioError("scenario: the top level must be a mapping of sections",
                                field="scenario")
        paths = set_paths(data) + override_paths(overrides)   # as written, presets unexpanded
        data = apply_overrides(data, overrides)
        try:
            scenario = cls.model_validate(data)
            scenario._set_paths = tuple(dict.fromkeys(paths))
            return scenario
        except ValidationError as err:
            raise from_validation_error(err) from None
        except ValueError as err:          # raised outside pydantic's wrapping
            raise ScenarioError(str(err)) from None

    @classmethod
    def load(cls, path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> "Scenario":
        """Read a scenario YAML file; every problem is a one-line :class:`ScenarioError`."""
        path = Path(path)
        text = read_input(path, "scenario")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            problem = getattr(err, "problem", None) or "cannot parse"
            raise ScenarioError(f"scenario: invalid YAML in {path}{where}: {problem}",
                                field="scenario") from None
        return cls.from_dict(data, overrides)


_DEFAULT_MAPPINGS = {("cluster", "topology"): {"kind": "spine-leaf"}}
"""What an absent section stands for when an override sets a key inside it."""
_PRESET_KEYS = {("workload", "model"): model_mapping, ("cluster", "topology"): topology_mapping,
                ("cluster", "gpu"): gpu_mapping}


def override_paths(overrides) -> list[str]:
    """The dotted fields ``--set`` overrides set (a mapping value sets each of its leaves)."""
    out = []
    for item in overrides:
        key, value = item if isinstance(item, tuple) else (item.partition("=")[0].strip(),
                                                            item.partition("=")[2])
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError:
                pass
        out += set_paths(value, key) if isinstance(value, dict) else [key]
    return out


def apply_overrides(data: dict, overrides) -> dict:
    """Apply ``dotted.key=value`` overrides (values parsed as YAML), or ``(dotted.key, value)``
    pairs, to a copy of ``data``.

    A path that enters a preset given by name (``workload.model.num_layers=48`` when ``model`` is
    ``gpt3-175b``) first expands the preset into its mapping.
    """
    data = copy.deepcopy(data)
    for item in overrides:
        if isinstance(item, tuple):                # (dotted key, already-parsed value)
            key, value = item
        else:
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key or any(not part for part in key.split(".")):
                raise ScenarioError(f"--set: expected dotted.key=value, got {item!r}",
                                    field="--set")
            try:
                value = yaml.safe_load(raw)
            except yaml.YAMLError:
                raise ScenarioError(f"--set {key}: value {raw!r} is not valid YAML",
                                    field=key) from None
        parts = key.split(".")
        node = data
        for depth, part in enumerate(parts[:-1]):
            here = tuple(parts[:depth + 1])
            child = node.get(part)
            if child is None:
                child = node[part] = dict(_DEFAULT_MAPPINGS.get(here, {}))
            elif isinstance(child, str) and here in _PRESET_KEYS:
                try:
                    child = node[part] = _PRESET_KEYS[here](child)
                except ValueError as err:
                    raise ScenarioError(f"{'.'.join(here)}: {err}", field=".".join(here)) from None
            if not isinstance(child, dict):
                raise ScenarioError(f"{'.'.join(here)}: is {child!r}, not a mapping, so "
                                    f"{key} cannot be set", field=".".join(here))
            node = child
        node[parts[-1]] = value
    return data
