"""The resolved parallel layout: Megatron's divisibility rules, stage sizes, in-flight work.

Every rule raises ``ValueError`` whose message names the scenario fields involved (dotted paths as
they appear in the scenario YAML) and the reason, so the CLI can print it as one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate

from workloads.model import ModelConfig
from workloads.parallel import ParallelConfig, WorkloadConfig
from workloads.pipeline_layout import parse, pipeline_layout

M = "workload.model"


@dataclass(frozen=True)
class Layout:
    """Plain numbers the accounting and the simulator consume (no config objects)."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vpp: int
    micro_batch: int
    num_micro_batches: int
    """m = global_batch / (micro_batch x dp): micro-batches each pipeline runs per step."""
    schedule: str
    """Effective schedule: gpipe, 1f1b, interleaved or zb-h1."""
    stage_layers: tuple[int, ...]
    """Transformer layers on each pipeline stage (first to last)."""
    sequence_parallel: bool
    zero: int
    recompute: str
    zero_shard: int = 0
    """ZeRO shard group size (HSDP / MiCS); 0 = the whole dp x cp group."""
    etp: int = 0
    """Expert tensor-parallel size; 0 = tp (no folding)."""
    order: str = "tp-cp-ep-dp-pp"
    """Megatron's rank order, fastest-varying dimension first, all five dimensions
    (:func:`full_order`; workloads.ranks)."""
    chunk_layers: tuple[tuple[int, ...], ...] = ()
    """Transformer layers of each (stage, model chunk), multi-token-prediction layers included;
    empty = each stage's layers split over its vpp chunks as evenly as they go (the first
    chunks take any remainder)."""
    recompute_modules: tuple[str, ...] = ("core_attn",)
    """Modules selective recomputation runs again (Megatron-Core's recompute_modules)."""
    recompute_method: str = "uniform"
    """Full recomputation's method (uniform / block; Megatron's --recompute-method)."""
    recompute_num_layers: int = 1
    """Layers per checkpoint (uniform) or recomputed layers per model chunk (block)."""
    mtp_chunk: tuple[int, int] | None = None
    """(stage, chunk) whose last layers are the model's MTP layers (each adds an output-layer
    pass); None = no MTP."""
    microbatch_group: int = 0
    """Interleaved schedule's micro-batch group N (Megatron's microbatch_group_size_per_vp_stage);
    0 = pp."""
    overlap_warmup: int = 0
    """Forwards the interleaved schedule runs before its first backward beyond Megatron-LM's
    count: one under EP all-to-all overlap, so that the forward and backward merged in every
    1F1B step are independent (get_pp_rank_microbatches, overlap_moe_expert_parallel_comm)."""
    cpu_offload_layers: int = 0
    """The first N layers offload their activations to host memory (pp 1; 0 = none)."""
    offload_modules: tuple[str, ...] = ()
    """Modules of every layer whose input goes to host memory (fine-grained offloading)."""

    @property
    def mb_group(self) -> int:
        """The interleaved schedule's micro-batch group N (pp unless set)."""
        return self.microbatch_group or self.pp

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def shard(self) -> int:
        """Ranks ZeRO shards dense states over (the dp x cp group unless HSDP / MiCS)."""
        return self.zero_shard or self.dp * self.cp

    @property
    def expert_tp(self) -> int:
        """Expert tensor-parallel size (tp unless the MoE layers are folded)."""
        return self.etp or self.tp

    @property
    def folded(self) -> bool:
        """MoE parallel folding: expert groups regroup the tp x cp x dp ranks (etp < tp)."""
        return self.expert_tp != self.tp

    @property
    def expert_shard(self) -> int:
        """Ranks ZeRO shards expert states over: the expert-data-parallel ranks of a shard
        group (with folding, of the stage's tp / etp x dp x cp ranks)."""
        return max(1, self.shard * (self.tp // self.expert_tp) // self.ep)

    def layers(self, stage: int, chunk: int) -> int:
        """Transformer layers of model chunk ``chunk`` on pipeline stage ``stage``."""
        if self.chunk_layers:
            return self.chunk_layers[stage][chunk]
        n, v = self.stage_layers[stage], self.vpp
        return n // v + (chunk < n % v)

    @property
    def dualpipe(self) -> bool:
        return self.schedule == "dualpipe"

    @property
    def pieces(self) -> int:
        """Model pieces (virtual stages) the layers are split into: pp x vpp, or pp under
        DualPipe, whose two chunks per rank are two copies' worth of different pieces."""
        return self.pp if self.dualpipe else self.pp * self.vpp

    def piece(self, stage: int, chunk: int) -> int:
        """Which model piece a (stage, chunk) runs: chunk-major (c p + i) when interleaved;
        under DualPipe chunk 0 of rank i is piece i and chunk 1 piece p - 1 - i."""
        if self.dualpipe:
            return stage if chunk == 0 else self.pp - 1 - stage
        return chunk * self.pp + stage

    def is_first_piece(self, stage: int, chunk: int) -> bool:
        """Whether this chunk runs the embedding."""
        return self.piece(stage, chunk) == 0

    def is_last_piece(self, stage: int, chunk: int) -> bool:
        """Whether this chunk runs the output layer and the loss."""
        return self.piece(stage, chunk) == self.pieces - 1

    def holds_mtp(self, stage: int, chunk: int) -> bool:
        """Whether this chunk runs the MTP layers (both copies of their piece under DualPipe)."""
        if self.mtp_chunk is None:
            return False
        return self.piece(stage, chunk) == self.piece(*self.mtp_chunk)

    def first_layer(self, stage: int, chunk: int) -> int:
        """Index of the chunk's first layer: Megatron assigns layers to virtual stages in the
        order chunk 0 of stages 0..p-1, then chunk 1, ... (interleaved schedule); DualPipe's
        pieces are in rank order (chunk 0 of each rank)."""
        return self._piece_starts[self.piece(stage, chunk)]

    @cached_property
    def _piece_starts(self) -> tuple[int, ...]:
        """First layer of every model piece, in piece order (:meth:`piece`): the layers of
        the pieces before it (under DualPipe rank i's chunk 0 is piece i)."""
        sizes = [0] * self.pieces
        for stage in range(self.pp):
            for chunk in range(1 if self.dualpipe else self.vpp):
                sizes[self.piece(stage, chunk)] = self.layers(stage, chunk)
        return tuple(accumulate(sizes[:-1], initial=0))

    def warmup_chunks(self, stage: int) -> int:
        """Forward chunks the interleaved schedule runs on ``stage`` before its first backward:
        Megatron-LM's 2 (p - i - 1) + (v - 1) N, plus :attr:`overlap_warmup` (not capped at the
        step's m v chunks)."""
        return interleaved_warmup(self.pp, stage, self.vpp, self.mb_group) + self.overlap_warmup

    def recomputed_layers(self, stage: int, chunk: int) -> int:
        """Layers of (stage, chunk) whose whole forward runs again in the backward (full
        recomputation): all of them, or the first ``recompute_num_layers`` under block."""
        if self.recompute != "full":
            return 0
        n = self.layers(stage, chunk)
        return min(n, self.recompute_num_layers) if self.recompute_method == "block" else n

    def in_flight(self, stage: int) -> float:
        """Peak micro-batches whose activations stage ``stage`` holds, in whole-stage units.

        Notes
        -----
        GPipe holds all m. 1F1B holds min(p - i, m) on stage i (Narayanan et al. 2021, section
        2.2.1). ZB-H1 defers stage i's weight gradients by i backwards, so every stage holds
        min(p, m), 1F1B's peak (Qi et al. 2024, section 3), until each W. DualPipe holds
        p + 1 chunk passes on every rank, each one of its two pieces. Interleaved 1F1B
        runs Megatron-LM's warm-up of min(2(p - i - 1) + (v - 1) N, m v) chunks (N the
        micro-batch group, p by default) and holds one more, each chunk being 1/v of the stage:
        on stage 0 with N = p that is p (1 + (p - 1)/(p v)) stage-equivalents, Korthikanti et
        al. 2022 section 4.2.3.
        """
        p, m, v = self.pp, self.num_micro_batches, self.vpp
        if self.schedule == "gpipe":
            return float(m)
        if self.dualpipe:                   # p + 1 pieces' worth (DeepSeek-V3 Table 2)
            return (p + 1) / 2
        if self.schedule == "interleaved":
            return min(self.warmup_chunks(stage) + 1, m * v) / v
        if self.schedule == "zb-h1":
            return float(min(p, m))
        return float(min(p - stage, m))


def dualpipe_pairs(p: int, stage: int, m: int) -> int:
    """Forward-backward pairs DualPipe.step overlaps on rank ``stage`` (steps 4 and 5): two per
    main step, less one on a middle rank's first, plus one per step 5; of the rank's m forward
    chunk passes the rest (warm-up) run alone."""
    hr = min(stage, p - 1 - stage)
    middle = hr == p // 2 - 1
    return 2 * (m // 2 - p + hr + 1) - middle + (p // 2 - hr - 1)


def interleaved_warmup(p: int, stage: int, v: int, group: int | None = None) -> int:
    """Forward chunks pipeline ``stage`` runs before its first backward in Megatron-LM's
    interleaved 1F1B (get_pp_rank_microbatches): 2 (p - i - 1) + (v - 1) N with N the
    micro-batch group (p by default), before capping at the m v chunks there are."""
    return 2 * (p - stage - 1) + (v - 1) * (group or p)


def resolve_dp(parallel: ParallelConfig, gpus: int) -> int:
    """dp = gpus / (tp x pp x cp), checked against an explicit ``parallel.dp``."""
    mp = parallel.tp * parallel.pp * parallel.cp
    if parallel.dp == "auto":
        if gpus % mp:
            raise ValueError(f"cluster.gpus ({gpus}) must be divisible by parallel.tp x pp x cp "
                             f"({parallel.tp} x {parallel.pp} x {parallel.cp} = {mp})")
        return gpus // mp
    if mp * parallel.dp != gpus:
        raise ValueError(f"cluster.gpus ({gpus}) must equal parallel.tp x pp x cp x dp "
                         f"({parallel.tp} x {parallel.pp} x {parallel.cp} x {parallel.dp} = "
                         f"{mp * parallel.dp})")
    return parallel.dp


def stage_layers(model: ModelConfig, parallel: ParallelConfig, vpp: int) -> tuple[int, ...]:
    """Layers per pipeline stage, Megatron's even split or the explicit uneven first/last."""
    L, p = model.num_layers, parallel.pp
    first, last = parallel.first_stage_layers, parallel.last_stage_layers
    if first is None and last is None:
        if L % (p * vpp):
            raise ValueError(f"{M}.num_layers ({L}) must be divisible by parallel.pp x vpp "
                             f"({p} x {vpp} = {p * vpp})")
        return (L // p,) * p
    fixed = (first or 0) + (last or 0)
    middle = p - (first is not None) - (last is not None)
    rest = L - fixed
    if middle == 0 and rest != 0 or middle > 0 and (rest < middle or rest % middle):
        raise ValueError(
            f"{M}.num_layers ({L}) minus parallel.first_stage_layers/last_stage_layers "
            f"({fixed}) must split evenly over the other {middle} pipeline stages")
    each = rest // middle if middle else 0
    layers = [each] * p
    if first is not None:
        layers[0] = first
    if last is not None:
        layers[-1] = last
    if vpp > 1 and any(n % vpp for n in layers):
        raise ValueError(f"every pipeline stage's layers {sorted(set(layers))} must be "
                         f"divisible by parallel.vpp ({vpp})")
    return tuple(layers)


def chunk_layers(model: ModelConfig, parallel: ParallelConfig, vpp: int
                 ) -> tuple[tuple[tuple[int, ...], ...], tuple[int, int] | None]:
    """Layers of each (stage, model chunk), MTP layers included, and the chunk holding the MTP
    layers: as ``parallel.pipeline_layout`` places them, else the decoder layers split as below
    and the MTP layers on the last virtual stage (Megatron-Core's default)."""
    p, mtp = parallel.pp, model.mtp_num_layers
    if parallel.pipeline_layout is not None:
        pl = pipeline_layout(parallel.pipeline_layout, p, model.num_layers, mtp)
        grid = tuple(tuple(d + m for d, m in zip(dec, mt))
                     for dec, mt in zip(pl.decoder, pl.mtp))
        held = [(i, c) for i in range(p) for c in range(pl.vpp) if pl.mtp[i][c]]
        return grid, (held[0] if held else None)
    grid = [list(row) for row in _decoder_chunks(model, parallel, vpp)]
    if not mtp:
        return tuple(tuple(row) for row in grid), None
    grid[p - 1][vpp - 1] += mtp
    return tuple(tuple(row) for row in grid), (p - 1, vpp - 1)


def _decoder_chunks(model: ModelConfig, parallel: ParallelConfig, vpp: int
                    ) -> tuple[tuple[int, ...], ...]:
    """Decoder layers of each (stage, model chunk). With Megatron-Core's account_for_embedding
    / account_for_loss_in_pipeline_split the embedding and the loss each take one layer's slot:
    (layers + slots) / (pp x vpp) per virtual stage, one fewer on the first and the last."""
    p = parallel.pp
    emb = int(parallel.account_for_embedding_in_pipeline_split)
    loss = int(parallel.account_for_loss_in_pipeline_split)
    if not emb and not loss:
        return tuple((n // vpp,) * vpp for n in stage_layers(model, parallel, vpp))
    L = model.num_layers
    slots = L + emb + loss
    if slots % (p * vpp):
        raise ValueError(
            f"{M}.num_layers ({L}) + {emb + loss} (embedding / loss accounted in the pipeline "
            f"split) must be divisible by parallel.pp x vpp ({p} x {vpp} = {p * vpp})")
    per = slots // (p * vpp)
    # at one slot per virtual stage the first holds the embedding alone and the last the loss
    # alone, as Megatron-Bridge's Llama 3.1 405B on 256 GB200 runs (126 layers, pp 16 x vpp 8)
    grid = [[per] * vpp for _ in range(p)]
    grid[0][0] -= emb
    grid[p - 1][vpp - 1] -= loss
    return tuple(tuple(row) for row in grid)


def vpp_candidates(model: ModelConfig, parallel: ParallelConfig) -> list[int]:
    """Every vpp the layer rules allow (what ``vpp: auto`` chooses among)."""
    if parallel.schedule in ("gpipe", "zb-h1", "dualpipe"):
        try:
            chunk_layers(model, parallel, 1)
        except ValueError:
            return []
        return [1]
    if parallel.pipeline_layout is not None:
        try:
            chunk_layers(model, parallel, 1)
        except ValueError:
            return []
        return [len(parse(parallel.pipeline_layout, parallel.pp)) // parallel.pp]
    if parallel.account_for_embedding_in_pipeline_split or \
            parallel.account_for_loss_in_pipeline_split:
        slots = model.num_layers + parallel.account_for_embedding_in_pipeline_split + \
            parallel.account_for_loss_in_pipeline_split
        if slots % parallel.pp:
            return []
        out = []
        for v in divisors(slots // parallel.pp):
            try:
                chunk_layers(model, parallel, v)
            except ValueError:
                continue
            out.append(v)
        return out
    try:
        base = stage_layers(model, parallel, 1)
    except ValueError:
        return []
    return [v for v in divisors(min(base)) if all(n % v == 0 for n in base)]


def check_model_split(model: ModelConfig, parallel: ParallelConfig, seq_len: int) -> None:
    """Rules between the architecture, the sequence and tp / cp / ep."""
    tp, cp, ep = parallel.tp, parallel.cp, parallel.ep
    a = model.num_attention_heads
    if a % tp:
        raise ValueError(f"parallel.tp ({tp}) must divide {M}.num_attention_heads ({a})")
    if not model.multi_latent_attention and model.query_groups % tp:
        raise ValueError(
            f"parallel.tp ({tp}) must divide {M}.num_query_groups ({model.query_groups}): "
            "Megatron splits key/value heads over tensor-parallel ranks")
    if model.ffn % tp:
        raise ValueError(f"parallel.tp ({tp}) must divide {M}.ffn_hidden_size ({model.ffn})")
    if cp > 1 and seq_len % (2 * cp):
        raise ValueError(f"workload.seq_len ({seq_len}) must be divisible by 2 x parallel.cp "
                         f"({2 * cp}): causal context parallelism gives each rank two chunks")
    if cp > 1 and parallel.cp_comm_type == "all_to_all":
        kv = None if model.multi_latent_attention else model.query_groups
        for name, heads in (("num_attention_heads", a), ("num_query_groups", kv)):
            if heads is not None and (heads // tp) % cp:
                raise ValueError(
                    f"parallel.cp ({cp}) must divide {M}.{name} / parallel.tp ({heads} / {tp}) "
                    "with cp_comm_type all_to_all: Ulysses scatters attention heads over cp")
    if parallel.sequence_parallel and (seq_len // cp) % tp:
        raise ValueError(f"workload.seq_len / parallel.cp ({seq_len // cp}) must be divisible by "
                         f"parallel.tp ({tp}) with sequence_parallel")
    if ep > 1:
        if not model.is_moe:
            raise ValueError(f"parallel.ep ({ep}) > 1 needs an MoE model ({M}.num_experts)")
        if model.num_experts % ep:
            raise ValueError(f"parallel.ep ({ep}) must divide {M}.num_experts "
                             f"({model.num_experts})")
        if tp > 1 and not parallel.sequence_parallel:
            raise ValueError("parallel.ep > 1 with parallel.tp > 1 needs "
                             "parallel.sequence_parallel: true (Megatron-Core rule)")


def divisors(n: int) -> list[int]:
    """Divisors of ``n`` in increasing order, in O(sqrt n)."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def micro_batch_candidates(workload: WorkloadConfig, parallel: ParallelConfig,
                           dp: int, vpp: int) -> list[int]:
    """Every micro_batch that splits the per-replica batch as the schedule requires."""
    if workload.global_batch % dp:
        return []
    per_replica = workload.global_batch // dp
    interleaved = parallel.effective_schedule(vpp) == "interleaved"
    return [b for b in divisors(per_replica)
            if not (interleaved and not _group_fits(per_replica // b, parallel.pp,
                                                    parallel.microbatch_group_size))]


def _group_fits(m: int, pp: int, group: int | None) -> bool:
    """Whether m micro-batches run interleaved with this group (:func:`_check_microbatch_group`)."""
    n = group or pp
    return (group is not None or m % pp == 0) and pp <= n <= m and not 0 < m % n < pp


APPENDED_ORDER = ("tp", "pp", "dp", "ep", "cp")
"""The order in which Megatron-Core's RankGenerator appends the dimensions an order leaves out
(its ``name_to_size`` keys)."""


def full_order(order: str, sizes: dict[str, int]) -> str:
    """``order`` with the dimensions it leaves out appended, as Megatron-Core's RankGenerator
    does (:data:`APPENDED_ORDER`); only a dimension of size 1 may be left out."""
    dims = order.split("-")
    for dim in APPENDED_ORDER:
        if dim not in dims:
            if sizes[dim] != 1:
                raise ValueError(f"parallel.order ({order!r}) leaves out {dim}, whose size is "
                                 f"{sizes[dim]}: only a dimension of size 1 may be left out")
            dims.append(dim)
    return "-".join(dims)


def make_layout(workload: WorkloadConfig, parallel: ParallelConfig, *, gpus: int,
                micro_batch: int | None = None, vpp: int | None = None) -> Layout:
    """Check every rule and lower the configuration to a :class:`Layout`.

    ``micro_batch`` / ``vpp`` give the values for fields set to ``auto`` (the caller chooses;
    see :func:`micro_batch_candidates` and :meth:`simulator.Scenario.choices`).
    """
    model = workload.model
    dp = resolve_dp(parallel, gpus)
    check_model_split(model, parallel, workload.seq_len)
    etp = parallel.etp or parallel.tp
    if parallel.tp % etp:
        raise ValueError(f"parallel.etp ({etp}) must divide parallel.tp ({parallel.tp})")
    if etp == parallel.tp and parallel.ep > 1 and (dp * parallel.cp) % parallel.ep:
        raise ValueError(f"parallel.ep ({parallel.ep}) must divide parallel.dp x cp "
                         f"({dp} x {parallel.cp}): experts are spread over data-parallel ranks "
                         f"(or fold them over tensor-parallel ranks too with parallel.etp < tp)")
    folds = parallel.tp // etp * dp * parallel.cp
    if etp < parallel.tp and folds % parallel.ep:
        raise ValueError(f"parallel.ep ({parallel.ep}) must divide parallel.tp / etp x dp x cp "
                         f"({parallel.tp // etp} x {dp} x {parallel.cp} = {folds}): folded "
                         f"expert groups tile a stage's ranks")
    order = full_order(parallel.order, {"tp": parallel.tp, "pp": parallel.pp, "dp": dp,
                                        "ep": parallel.ep, "cp": parallel.cp})
    if "dp-ep" in order and parallel.ep > 1 and parallel.zero_shard_size is not None:
        raise ValueError("parallel.zero_shard_size with parallel.order dp-ep (expert groups "
                         "across HSDP shard groups) is not modelled")
    if etp < parallel.tp and parallel.zero_shard_size is not None:
        raise ValueError("parallel.zero_shard_size with parallel.etp < tp (folded expert "
                         "groups inside HSDP shard groups) is not modelled")
    if model.is_moe and (model.moe_ffn % etp):
        raise ValueError(f"parallel.etp ({etp}) must divide {M}.moe_ffn_hidden_size "
                         f"({model.moe_ffn})")
    z = parallel.zero_shard_size
    if z is not None and ((dp * parallel.cp) % z or z % parallel.ep):
        raise ValueError(f"parallel.zero_shard_size ({z}) must divide parallel.dp x cp "
                         f"({dp} x {parallel.cp}) and be a multiple of parallel.ep "
                         f"({parallel.ep}): shard groups tile the data-parallel ranks")
    b = workload.micro_batch if workload.micro_batch != "auto" else micro_batch
    v = parallel.vpp if parallel.vpp != "auto" else vpp
    if b is None or v is None:
        raise ValueError("workload.micro_batch / parallel.vpp are 'auto': choose values first")
    if v > 1 and (parallel.pp == 1 or parallel.schedule in ("gpipe", "zb-h1", "dualpipe")):
        raise ValueError(f"parallel.vpp ({v}) > 1 needs parallel.pp > 1 and the 1f1b or "
                         f"interleaved schedule (parallel.schedule is {parallel.schedule})")
    if v == 1 and parallel.schedule == "interleaved":
        raise ValueError("parallel.schedule interleaved needs parallel.vpp > 1")
    chunks, mtp_chunk = chunk_layers(model, parallel, v)
    if workload.global_batch % (b * dp):
        raise ValueError(f"workload.global_batch ({workload.global_batch}) must be divisible by "
                         f"workload.micro_batch x parallel.dp ({b} x {dp} = {b * dp})")
    m = workload.global_batch // (b * dp)
    schedule = parallel.effective_schedule(v)
    group = parallel.microbatch_group_size
    if schedule == "interleaved":
        _check_microbatch_group(m, parallel.pp, group)
    elif group is not None:
        raise ValueError(f"parallel.microbatch_group_size ({group}) applies to the interleaved "
                         f"schedule only (the schedule here is {schedule})")
    if schedule == "dualpipe":
        chunks, v = _dualpipe_chunks(chunks, m), 2
    return Layout(tp=parallel.tp, pp=parallel.pp, dp=dp, cp=parallel.cp, ep=parallel.ep, vpp=v,
                  micro_batch=b, num_micro_batches=m, schedule=schedule,
                  stage_layers=tuple(sum(c) for c in chunks), chunk_layers=chunks,
                  mtp_chunk=mtp_chunk,
                  sequence_parallel=parallel.sequence_parallel, zero=_zero_stage(parallel),
                  recompute=parallel.recompute, order=order,
                  zero_shard=0 if z is None or z == dp * parallel.cp else z,
                  etp=0 if etp == parallel.tp else etp,
                  recompute_modules=_recompute_modules(model, parallel),
                  recompute_method=parallel.recompute_method,
                  recompute_num_layers=parallel.recompute_num_layers or 1,
                  microbatch_group=0 if group in (None, parallel.pp) else group,
                  cpu_offload_layers=parallel.cpu_offloading_num_layers,
                  offload_modules=_offload_modules(model, parallel))


def _dualpipe_chunks(pieces: tuple[tuple[int, ...], ...], m: int
                     ) -> tuple[tuple[int, ...], ...]:
    """DualPipe's two chunks per rank (deepseek-ai/DualPipe): rank i runs piece i for the
    micro-batches fed at rank 0 and piece p - 1 - i for those fed at rank p - 1, each
    direction taking half of the m; DualPipe.step asserts m even and m >= 2 pp."""
    p = len(pieces)
    if m % 2 or m < 2 * p:
        raise ValueError(f"micro-batches per step (workload.global_batch / (micro_batch x dp) = "
                         f"{m}) must be even and at least 2 x parallel.pp ({2 * p}) for the "
                         f"dualpipe schedule")
    return tuple((pieces[i][0], pieces[p - 1 - i][0]) for i in range(p))


def _check_microbatch_group(m: int, pp: int, group: int | None) -> None:
    """Megatron-Core's rules for the interleaved schedule's micro-batch groups (schedules.py,
    forward_backward_pipelining_with_interleaving): pp <= N <= m, and a last, shorter group
    of at least pp. With N = pp that is m a multiple of pp."""
    if _group_fits(m, pp, group):
        return
    n = group or pp
    if group is None and m % pp:
        raise ValueError(f"micro-batches per step (workload.global_batch / (micro_batch x dp) = "
                         f"{m}) must be a multiple of parallel.pp ({pp}) for the interleaved "
                         f"schedule, or set parallel.microbatch_group_size")
    if not pp <= n <= m:
        raise ValueError(f"parallel.microbatch_group_size ({n}) must lie between parallel.pp "
                         f"({pp}) and the micro-batches per step ({m})")
    if 0 < m % n < pp:
        raise ValueError(f"parallel.microbatch_group_size ({n}) leaves a last group of {m % n} "
                         f"micro-batches, fewer than parallel.pp ({pp}) (Megatron refuses: "
                         f"dependency bubbles)")


def _offload_modules(model: ModelConfig, parallel: ParallelConfig) -> tuple[str, ...]:
    """The modules fine-grained offloading moves the input of, checked against the model."""
    mods = tuple(dict.fromkeys(parallel.offload_modules or ()))
    for mod in mods:
        if mod in ("expert_fc1", "moe_act") and not model.is_moe:
            raise ValueError(f"parallel.offload_modules {mod} needs an MoE model ({M} has none)")
    return mods


def _recompute_modules(model: ModelConfig, parallel: ParallelConfig) -> tuple[str, ...]:
    """The modules selective recomputation runs again, checked against the model."""
    mods = tuple(dict.fromkeys(parallel.recompute_modules or ("core_attn",)))
    needs = {"mla_up_proj": (model.multi_latent_attention, "multi-latent attention"),
             "moe_act": (model.is_moe, "an MoE model"),
             "shared_experts": (bool(model.moe_shared_expert_intermediate_size),
                                "shared experts")}
    for mod in mods:
        ok, what = needs.get(mod, (True, ""))
        if not ok:
            raise ValueError(f"parallel.recompute_modules {mod} needs {what} "
                             f"({M} has none)")
    return mods


def _zero_stage(parallel: ParallelConfig) -> int:
    """The ZeRO stage the step runs: ZeRO-3 under a pipeline gathers each stage's weights once
    per step and reduce-scatters its gradients once (FSDP2 with PP: ParallelConfig.zero), which
    is stage 1's traffic and memory."""
    return 1 if parallel.zero == 3 and parallel.pp > 1 else parallel.zero
