"""Published training runs (../shared/validation/public_runs.csv) as scenarios, and their error.

Every row is turned into a scenario by the rules below, applied to all rows alike (never per
row); a row whose stated layout the simulator cannot run is reported with the one-line reason
the scenario gives, not dropped silently.

- Model: the row's own architecture columns. Llama / Qwen3 / GLM families: gated FFN
  (SwiGLU; GLM's GeGLU has the same shapes), RMSNorm, no biases, RoPE, untied embeddings;
  GPT-3 / OPT / BLOOM / MPT: GELU, LayerNorm, biases (MPT has none), learned positions (BLOOM
  and MPT: ALiBi, no position parameters). Dropout 0 (none of these runs used it).
  DeepSeek-V3 is the ``deepseek-v3`` preset with its one MTP layer, GPT-OSS 120B the
  ``gpt-oss-120b`` preset (heads of 64, not hidden / heads; biases; windowed layers of 128
  tokens alternating with full ones: what its columns do not state). Qwen3's head dimension is
  128 (its config's ``head_dim``), not hidden / heads.
- Parallel degrees, micro-batch and vpp as stated (one exception, where the table contradicts
  itself and its recipe: :data:`RECIPE_MICRO_BATCH`); an unstated micro-batch is ``auto``, except
  FSDP-only runs (pp 1) whose micro-batch is the local batch (torchtitan and llm-foundry run
  one micro-batch per step unless they state gradient accumulation) and torchtitan's
  pipeline runs, whose micro-batch count defaults to the pipeline degree
  (``pipeline_parallel_microbatches`` unset -> pp, torchtitan 2024); an unstated vpp is 1
  (no interleaving) unless the row says it was > 1, then torchtitan's default of two stages
  per rank for looped schedules (``generate_split_points``, torchtitan 9dec370,
  parallelisms/pipelining_utils.py) or ``auto`` for other stacks.
- MoE rows of NVIDIA's: expert tensor parallelism 1 (``expert_tensor_parallel_size = 1`` in
  every Megatron-Bridge MoE performance recipe), so experts fold over tp ranks where tp > 1;
  the expert all-to-alls overlapped (``ep_overlap``) where the release's performance recipe
  turns ``moe_a2a_overlap`` on (:data:`RECIPE_EP_OVERLAP`: Qwen3 on H100 and B200,
  DeepSeek-V3 on H100), with the experts' weight gradient delayed (``delay_wgrad``) where
  that recipe delays it (Qwen3). From NeMo 26.06 the MXFP8 recipes of Qwen3 (GB200, GB300,
  B300) and DeepSeek-V3 (GB200, GB300) dispatch sync-free under full-iteration CUDA graphs
  with one fused grouped MLP, EP overlap and delayed weight gradients
  (:data:`RECIPE_SYNC_FREE`); Qwen3-30B's H100 recipe of 26.04-26.06 dispatches with HybridEP
  and no overlap (:data:`RECIPE_HYBRIDEP`).
- DeepSeek-V3: Megatron-Bridge's pipeline layout for the row's (pp, vpp) with its MTP layer
  (:data:`DSV3_LAYOUTS`). DeepSeek's own run is DualPipe (schedule ``dualpipe``) on 16 ranks,
  its split unpublished: the embedding, 61 layers, the MTP layer and the loss as 64 equal
  slots, four per rank (:data:`DSV3_DUALPIPE_LAYOUT`).
- Other layers that do not split evenly over pp x vpp: the embedding and the loss each take one
  layer's slot (Megatron-Core's account_for_embedding / loss_in_pipeline_split, as the
  Llama 3.1 405B recipes set them; BLOOM's and GLM-130B's partitions do the same).
- ZeRO: FSDP / Megatron-FSDP / full shard -> 3 (under a pipeline: gathered once per step,
  ``ParallelConfig.zero``); distributed optimizer, ZeRO-1, BLOOM's
  BF16Optimizer and NeMo's unstated default -> 1; otherwise 0.
- Recompute: as stated (torchtitan's "selective (per-op SAC)" is ``op``, its own policy, not
  Megatron's selective; modules the row names, DeepSeek's RMSNorm and MLA up-projections, as
  ``recompute_modules``); unstated -> none (NeMo / Megatron-Bridge performance recipes), unless
  the row infers activation checkpointing (OPT) or Megatron-Bridge's recipe recomputes
  modules (:data:`RECIPE_RECOMPUTE_MODULES`: DeepSeek-V3, GPT-OSS).
- Sequence parallelism: on wherever tp > 1 unless the row says no.
- TP overlap: torchtitan's vanilla TP (DTensor) does not overlap the backward's TP
  collectives with the weight-gradient GEMMs (``tp_bwd_overlap`` false), which Megatron-LM
  does by default. Its async TP (the row names AsyncTP) is run as hiding those backward
  collectives and not the forward's (``tp_bwd_overlap`` true, ``tp_overlap`` false): that is
  what the three published vanilla / async pairs gained (+5.7 % Llama 3 70B FP8, +9.8 % 8B
  and +9.2 % 70B BF16 in tokens/s; hiding the backward's collectives gives +6.6, +12.0 and
  +6.9 % here, hiding every TP collective, ``tp_overlap``, +20 % and more).
- Precision: fp8 where the row's precision starts with fp8, fp16 / bf16 otherwise. FP8 recipe
  (:func:`_fp8_recipe`) as the row states it: FP8-MX -> ``mxfp8``; FP8-CS and torchao's Float8
  linears (dynamic tensorwise scaling, torchao's default) -> ``tensorwise``; DeepSeek-V3's
  1 x 128 / 128 x 128 tiles -> ``blockwise``; unstated (NeMo 24.07's Transformer Engine,
  llm-foundry's amp_fp8) -> ``delayed``, Transformer Engine's default recipe. Saved linear
  inputs (``fp8_saved_inputs``): torchtitan's torchao float8 keeps them in bf16, Transformer
  Engine (every other FP8 row) in FP8. DeepSeek-V3's own run tracks AdamW's moments in bf16
  (its report's section 3.3.3: ``moments_dtype``), and Megatron-Bridge's DeepSeek-V3 recipes
  keep moments and main gradients in bf16 and reduce them so (:data:`RECIPE_BF16_OPTIMIZER`).
  Every Megatron-Bridge performance recipe reduces its gradients in bf16
  (:data:`BF16_GRAD_REDUCE_FRAMEWORKS`).
- FP8 all-gathers: torchtitan's Float8 recipe gathers its GEMM operands in FP8 (its TP plan
  switches to torchao's Float8ColwiseParallel, whose sequence-parallel all-gather moves FP8;
  FSDP2's float8 all-gather of the weights); Transformer Engine's recipes here are taken as
  gathering bf16 (Megatron's --fp8-param-gather is off by default).
- SMs a row's notes say its communication holds (DeepSeek-V3: 20 for the all-to-all) are
  ``optimizations.comm_sms``.
- Attention kernel: FlashAttention-2 for the PyTorch-native stacks (torchtitan's SDPA,
  llm-foundry's flash-attn), Transformer Engine's choice (``auto``) for the rest.
- Software: flash attention, fused kernels and overlapped DP communication everywhere except
  the 2022 Megatron-DeepSpeed / SwissArmyTransformer runs (BLOOM, GLM-130B: fused softmax,
  no DP overlap) and OPT (metaseq, 2022: no flash attention).
- GPU: the row's; an H100 the notes name as the 96 GB HBM2e / 500 W part runs as
  ``h100-96gb`` (2.4 TB/s HBM). PyTorch eager without torch.compile (the notes say so) runs
  without fused element-wise kernels.
- Hardware: 8 GPUs per node; Hopper and Blackwell on the DGX H100 rail-optimised fabric
  (8 x 400 Gb/s per node), Ampere on Selene's (8 x 200 Gb/s); GB200 and GB300 in NVL72 racks
  (one 400 / 800 Gb/s NIC per GPU), B300 on DGX B300's 8 x 800 Gb/s (:data:`TOPOLOGY`).
  Fabric details the rows do not state are not guessed per row.

Sources for leave-one-source-out (:data:`SOURCE_GROUPS`): the seven publishers the CSV names.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from simulator import calibration
from simulator.config.scenario import Scenario
from simulator.simulate import simulate
from workloads.presets import model_mapping

SOURCE_GROUPS = (("torchtitan", "torchtitan"), ("nvidia", "NVIDIA NeMo"),
                 ("deepseek", "DeepSeek-V3"), ("mosaicml", "MosaicML"), ("bloom", "BLOOM"),
                 ("opt", "OPT: "), ("glm", "GLM-130B"))
"""(group, text in the ``source`` column): NeMo and Megatron-Bridge are one publisher (NVIDIA,
one software stack), so they are held out together."""

TOPOLOGY = {"a100": "selene-a100", "h100": "dgx-h100-rail", "h200": "dgx-h100-rail",
            "h800": "dgx-h100-rail", "b200": "dgx-h100-rail", "gb200": "gb200-nvl72",
            "gb300": "gb300-nvl72", "b300": "dgx-b300-rail"}
"""Fabric by GPU family: the DGX reference fabrics (DGX B200 also has 8 x 400 Gb/s NICs,
DGX B300 8 x 800 Gb/s; GB200 NVL72 racks one 400 Gb/s NIC per GPU, GB300 NVL72 racks one
800 Gb/s)."""


LEGACY_2022 = ("bloom", "glm")
"""Source groups whose software predates flash attention and overlapped DP (fused softmax)."""
NO_FLASH = ("bloom", "glm", "opt")
FLASH2_STACKS = ("torchtitan", "mosaicml")
"""PyTorch-native stacks whose fused attention is FlashAttention-2: torchtitan calls
F.scaled_dot_product_attention (its flash backend is FlashAttention-2), llm-foundry's
``attn_impl: flash`` the flash-attn package; Megatron / NeMo run Transformer Engine's
(``attention_kernel: auto``)."""
H100_96GB = ("96GB HBM2e", "(95GB)")
"""Notes that name Meta's 96 GB HBM2e, 500 W H100 (preset ``h100-96gb``)."""


TORCHTITAN_STAGES_PER_RANK = 2
"""Stages per pipeline rank torchtitan builds for a looped (interleaved) schedule when no split
points are given (``generate_split_points``, torchtitan 9dec370): its layer split is the
embedding-and-loss-slot split used here for uneven layers (first and last stage one layer
short)."""
ASYNC_TP = "Async TP (SymmetricMemory"
"""How a torchtitan row's notes say the run had async TP (otherwise its precision column)."""


def source_group(source: str) -> str:
    for group, text in SOURCE_GROUPS:
        if text.lower() in source.lower():
            return group
    raise ValueError(f"public_runs.csv: no source group for {source!r}")


def _num(value) -> int | None:
    """The leading integer of a cell ("768 per expert" -> 768), None when blank / unstated."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    m = re.match(r"\s*(\d+)", str(value))
    return int(m.group(1)) if m else None


_DSV3_16 = "Et*4|(t*4|)*14tmL"
_DSV3_8 = "Et*8|(t*8|)*6t*5mL"
DSV3_LAYOUTS = {(8, 4): "Et|(tt|)*30mL", (16, 1): _DSV3_16, (8, 2): _DSV3_16, (4, 4): _DSV3_16,
                (2, 8): _DSV3_16,
                (8, 1): _DSV3_8, (4, 2): _DSV3_8, (4, 1): "Et*16|t*16|t*16|t*13mL",
                (16, "DualPipe"): "Et*3|(t*4|)*14t*2mL"}
"""Megatron-Bridge's DeepSeek-V3 pipeline layouts by (pp, vpp), each with its one MTP layer
(mtp_num_layers 1): the H100 performance recipe's ``pp_layout`` (8, 4), and the table of
``_get_deepseek_v3_pipeline_layout`` (src/megatron/bridge/recipes/deepseek/deepseek_v3.py)
that the B200 and GB200 recipes set: 16, 8 or 4 virtual stages whatever pp x vpp makes them
(the GB200 rows' pp 4 x vpp 4 is the B200 row's pp 16; GB300's pp 2 x vpp 8 states it too:
``pp_layout`` of DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_V1, deepseek_workload_base_configs.py at
c270efc5)."""


DSV3_DUALPIPE_LAYOUT = DSV3_LAYOUTS[16, "DualPipe"]
"""DeepSeek-V3's DualPipe run (arXiv 2412.19437 section 3.2.1) on 16 ranks: its split is not
published; this one gives every rank four slots (embedding + 3 layers, 4 layers, ..., 2 layers
+ MTP + loss)."""

STATED_MODULES = {"rmsnorm": "layernorm", "mla up-proj": "mla_up_proj"}
"""Recomputed modules a row's recompute text names (lower case) -> Megatron-Core's names."""
PAPER_RECOMPUTE_MODULES = {"DeepSeek-V3": ["moe_act"]}
"""Modules a run's own paper recomputes beyond what the row's recompute column names:
DeepSeek-V3 caches only the input of the experts' SwiGLU, in FP8, and recomputes its output in
the backward (arXiv 2412.19437 section 3.3.3, "Low-Precision Storage and Communication");
Megatron-Core's ``moe_act``. Applied where the row states its recomputed modules."""


def _model(r) -> dict | str:
    name = r.model
    if name.startswith("DeepSeek-V3"):
        return {**model_mapping("deepseek-v3"), "mtp_num_layers": 1}
    if name.startswith("GPT-OSS-120B"):
        return model_mapping("gpt-oss-120b")
    llama_like = any(k in name for k in ("Llama", "Qwen3", "GLM", "GPT-OSS"))
    heads = int(r.num_attention_heads)
    m = {"name": name, "num_layers": int(r.num_layers), "hidden_size": int(r.hidden_size),
         "num_attention_heads": heads, "vocab_size": int(r.vocab_size),
         "ffn_hidden_size": _num(r.ffn_hidden_size),
         "num_query_groups": _num(r.num_query_groups) or heads,
         "hidden_dropout": 0.0, "attention_dropout": 0.0,
         "max_position_embeddings": int(r.seq_len)}
    if llama_like:
        m.update(activation="swiglu", normalization="rmsnorm", add_bias_linear=False,
                 position_embedding_type="rope", untie_embeddings_and_output_weights=True)
    else:
        alibi = any(k in name for k in ("BLOOM", "MPT"))
        m.update(activation="gelu", normalization="layernorm",
                 add_bias_linear="MPT" not in name,
                 position_embedding_type="none" if alibi else "learned_absolute")
    if "Qwen3" in name:
        m["kv_channels"] = 128
    experts = _num(r.num_experts)
    if experts:
        m.update(num_experts=experts, moe_top_k=_num(r.top_k),
                 moe_ffn_hidden_size=m["ffn_hidden_size"])
    return m


def _zero(text: str, source: str) -> int:
    t = str(text)
    if "FSDP=0" in t or "distributed optimizer" in t or "ZeRO-1" in t or "zero stage 1" in t:
        return 1
    if "FSDP" in t or "ZeRO-3" in t or "full shard" in t.lower():
        return 3
    if t.startswith("unstated") and source_group(source) in ("nvidia", "glm"):
        return 1
    return 0


RECIPE_RECOMPUTE_MODULES = {("DeepSeek-V3", "h100"): ["mla_up_proj", "mlp"],
                            ("DeepSeek-V3", "b200"): ["mla_up_proj"],
                            ("GPT-OSS", "h100"): ["layernorm", "moe_act"],
                            ("GPT-OSS", "b200"): ["layernorm", "moe_act"],
                            ("GPT-OSS", "gb200"): ["layernorm", "moe_act"],
                            ("DeepSeek-V3", "gb200", "NeMo 26.06"): ["mla_up_proj"],
                            ("DeepSeek-V3", "gb200", "NeMo 26.08"): ["mla_up_proj"]}
"""Megatron-Bridge's performance recipes that recompute modules (``recompute_modules``, under
selective recomputation) where the table states no recomputation: DeepSeek-V3 on H100
(recipes/deepseek/h100/deepseek_v3.py) and B200 (perf_recipes/deepseek/b200), GPT-OSS 120B on
H100, B200 and GB200 (perf_recipes/gpt_oss/h100; scripts/performance/configs/gpt_oss/
gpt_oss_workload_base_configs.py, the same for the three GPUs at 267f8bbcc, 2025-11-24, and
5dd02f535, 2026-01-16), DeepSeek-V3's sync-free MXFP8 recipe on GB200 from NeMo 26.06
(:data:`RECIPE_SYNC_FREE`: deepseek_workload_base_configs.py at c270efc5 and
perf_recipes/deepseek/gb200/deepseek_v3.py at 067f987d; its GB300 twin recomputes nothing).
Keyed by model family and GPU (the first GPU name the row's starts with) and, where given, the
release."""


RECIPE_EP_OVERLAP = (("Qwen3", "h100"), ("Qwen3", "b200"), ("DeepSeek-V3", "h100"))
"""Megatron-Bridge's performance recipes of the benchmarked releases that overlap the expert
all-to-alls (overlap_moe_expert_parallel_comm, "moe_a2a_overlap"): Qwen3 30B / 235B on H100
and B200 (scripts/performance/configs/qwen/qwen3_workload_base_configs.py, Megatron-Bridge
267f8bbcc, 2025-11-24) and DeepSeek-V3 on H100 (run_script.py A2A_1F1B, a28844195,
2025-10-15); DeepSeek-V3 on B200 and GPT-OSS do not. Keyed by model family and GPU. (A month
after 25.11 Megatron-Bridge turned it off for Qwen3-235B on B200 and H100, "due to CPU
overhead": pull 1760, commits bee7d5e and d17ee7f. The model has no host-side cost; the rows
are run as their release ran them.)"""


RECIPE_DELAY_WGRAD = ("Qwen3",)
"""Model families whose recipes delay the experts' weight gradient with the overlap
(delay_wgrad_compute): Qwen3's, whose ``moe_a2a_overlap`` sets it with the overlap
(scripts/performance/utils/overrides.py _set_moe_a2a_overlap_overrides, Megatron-Bridge
267f8bbcc); DeepSeek-V3's H100 run script turns it off ("fix this when right TE is
installed": run_script.py, a28844195)."""


BF16_GRAD_REDUCE_FRAMEWORKS = ("Megatron-Bridge",)
"""Frameworks (the rows' ``framework`` column, its start) whose performance recipes keep and
reduce gradients in bf16 (``parallel.grad_reduce_dtype: bf16``): Megatron-Bridge sets
``grad_reduce_in_fp32: false`` for every model it benchmarks, in the YAML configs of 25.09
(scripts/performance/configs/*/..._llm_pretrain.yaml at a28844195, 2025-10-15: Llama 3 8B /
70B, Llama 3.1 405B, DeepSeek-V3, Qwen3 30B / 235B) and in each model's common settings since
(set_*_common_configs, scripts/performance/configs/*/*_llm_pretrain.py at 267f8bbcc,
2025-11-24, GPT-OSS included). NeMo 24.x's rows keep Megatron-LM's fp32 default."""

RECIPE_BF16_OPTIMIZER = ("DeepSeek-V3",)
"""Models whose Megatron-Bridge recipes run the precision-aware optimizer with bf16 moments and
bf16 main gradients, reduced in bf16 (src/megatron/bridge/recipes/deepseek/deepseek_v3.py:
exp_avg_dtype / exp_avg_sq_dtype / main_grads_dtype bfloat16, grad_reduce_in_fp32 False,
"DeepSeek V3 uses precision-aware optimizer with bf16 moments"); DeepSeek's own run keeps its
moments in bf16 too (arXiv 2412.19437 section 3.3.3)."""


RECIPE_CPU_OFFLOAD = {("Llama-3-70B", "gb200"): 40, ("Llama-3.1-405B", "gb200"): 92,
                      ("Llama-3-70B", "gb300"): 20}
"""Layers Megatron-Bridge's GB200 / GB300 FP8-CS Megatron-FSDP recipes offload to host memory
(``cpu_offloading_num_layers``; scripts/performance/configs/llama/
llama3_workload_base_configs.py at 00919dc and llama31_workload_base_configs.py at 0013c9a:
Llama 3 70B 40 of 80 on GB200 and 20 on GB300 (288 GB), in both the GBS 128 and 256
variants (the GB300 figure also at 267f8bbcc, 2025-11-24), Llama 3.1 405B 92 of 126 on 128
GB200). The releases' own recipes are taken to match; keyed by model and GPU, applied to the
FSDP rows (pp 1, as offloading needs)."""


RECIPE_MICRO_BATCH = {("GPT-OSS", "h100", "NeMo 25.11"): 1}
"""Micro-batch of Megatron-Bridge's recipe where a table's row contradicts itself: the 25.11
DGX-H100 GPT-OSS 120B row prints B200's GBS / MBS / GA (512 / 4 / 2; GA 2 is 512 / (4 x 64),
B200's 64 data-parallel ranks, not H100's 16 under pp 4). The recipe of that release runs
H100 at micro-batch 1 (GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_BASE_CONFIG keeps the base
config's micro_batch_size 1: scripts/performance/configs/gpt_oss/
gpt_oss_workload_base_configs.py at 267f8bbcc, 2025-11-24), 26.02's table states MBS 1 for the
same H100 layout, and at micro-batch 4 its first stage needs 103 GiB of an 80 GB GPU. Keyed
by model family, GPU and release (the row's framework names it)."""


RECIPE_SYNC_FREE = {(family, gpu, release): True
                    for family, gpus in (("Qwen3", ("gb200", "gb300", "b300")),
                                         ("DeepSeek-V3", ("gb200", "gb300")))
                    for gpu in gpus for release in ("NeMo 26.06", "NeMo 26.08")}
"""Megatron-Bridge's MXFP8 recipes that run dropless MoE sync-free from NeMo 26.06 on: Qwen3
30B / 235B on GB200, GB300 and B300 (pull 4211, 55443cbf, 2026-06-10) and DeepSeek-V3 on GB300
and GB200 (pulls 3983 and 4226, 8af195c0 and afb5dd47, 2026-06-06 and -10), all before the
26.06 tables; for 26.08 perf_recipes/qwen/common.py ``_enable_hybridep_full_iteration_mxfp8``
and perf_recipes/deepseek/common.py ``_enable_deepseek_full_iteration_mxfp8`` at 067f987d: the
HybridEP flex dispatcher with a per-rank receive budget of 1.5 and paged stashing
(``moe_expert_rank_capacity_factor``, ``moe_paged_stash``), full-iteration CUDA graphs, the
CuTeDSL fused grouped MLP (one grouped kernel), EP overlap with the delayed weight gradient,
HybridEP on :data:`HYBRIDEP_SMS` SMs. Their FP8 attention (``fp8_dot_product_attention``,
where set) is not modelled (bf16 attention rates). Keyed by model family, GPU and release (a
release key also matches its patch releases, 26.06.01)."""
SYNC_FREE_RANK_CAPACITY = 1.5
"""``moe_expert_rank_capacity_factor`` of those recipes."""
HYBRIDEP_SMS = 32
"""SMs Megatron-Bridge's benchmarks give HybridEP (``moe_hybridep_num_sms``, forced for every
hybridep recipe: scripts/performance/utils/overrides.py at c270efc5, 2026-06-17)."""


RECIPE_HYBRIDEP = {("Qwen3-30B", "h100", release): True
                   for release in ("NeMo 26.04", "NeMo 26.06")}
"""Megatron-Bridge's recipes that dispatch with HybridEP (the flex dispatcher, on
:data:`HYBRIDEP_SMS` SMs) and do not overlap the all-to-alls, whatever
:data:`RECIPE_EP_OVERLAP` says of the family's earlier releases: Qwen3-30B-A3B on 16 H100
(QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 from pull 2477, 4a645075, 2026-02-23: EP 16,
``moe_flex_dispatcher_backend`` hybridep, ``moe_a2a_overlap`` False, no CUDA graphs under
FP8; unchanged at 74695a06, 21d102f5 and c270efc5, the 26.04, 26.04.01 and 26.06 tables'
commits). Keyed by model, GPU and release."""


def _recipe_sync_free(r, group: str) -> bool:
    return group == "nvidia" and bool(_num(r.num_experts)) and \
        "fp8-mx" in str(r.precision).lower() and bool(_by_family_gpu(RECIPE_SYNC_FREE, r))


def _by_family_gpu(table: dict, r):
    """The value of ``table`` keyed (model family, GPU[, release]) that row ``r`` matches: its
    model and GPU start with the key's (and its framework names the release), else None."""
    for (family, gpu, *release), value in table.items():
        if r.model.startswith(family) and r.gpu.startswith(gpu) and \
                all(x in str(r.framework) for x in release):
            return value
    return None


def _recipe_micro_batch(r, group: str) -> int | None:
    return _by_family_gpu(RECIPE_MICRO_BATCH, r) if group == "nvidia" else None


def _recipe_cpu_offload(r, group: str, zero: int) -> int:
    if group != "nvidia" or zero != 3 or int(r.pp) != 1:
        return 0
    return RECIPE_CPU_OFFLOAD.get((r.model, r.gpu), 0)


def _recipe_hybridep(r, group: str) -> bool:
    return group == "nvidia" and bool(_num(r.num_experts)) and \
        bool(_by_family_gpu(RECIPE_HYBRIDEP, r))


def _recipe_ep_overlap(r, group: str) -> bool:
    return group == "nvidia" and bool(_num(r.num_experts)) and \
        not _recipe_hybridep(r, group) and \
        bool(_by_family_gpu(dict.fromkeys(RECIPE_EP_OVERLAP, True), r))


def _recipe_recompute(r, group: str) -> list[str] | None:
    if group != "nvidia" or _recompute(r.recompute) != "none":
        return None
    return _by_family_gpu(RECIPE_RECOMPUTE_MODULES, r)


def _stated_modules(text: str) -> list[str] | None:
    """The recompute_modules a row's recompute text names, if any."""
    t = str(text).lower().replace("up-projections", "up-proj")
    mods = [m for k, m in STATED_MODULES.items() if k in t]
    return mods or None


def _paper_modules(r, stated: list[str] | None) -> list[str] | None:
    """The row's stated recompute modules and those its paper adds
    (:data:`PAPER_RECOMPUTE_MODULES`)."""
    if not stated:
        return stated
    extra = [m for family, mods in PAPER_RECOMPUTE_MODULES.items()
             if r.model.startswith(family) for m in mods if m not in stated]
    return stated + extra


def _recompute(text: str) -> str:
    t = str(text).lower()
    if t.startswith("selective") and "per-op" in t:
        return "op"
    if t.startswith("selective"):
        return "selective"
    if t.startswith("full") or "checkpointing" in t or "re-materialization" in t:
        return "full"
    return "none"


DSV3_NODE_LIMIT = 4
"""DeepSeek-V3's group-limited routing (config.json n_group 8, topk_group 4; arXiv 2412.19437
section 2.1.2): each token's experts come from at most 4 of 8 expert groups, which are nodes
wherever 64-way expert parallelism spans 8 nodes."""


def _routing(notes: str, model: str) -> dict:
    """``workload.moe`` of an MoE row from what its source states: NVIDIA's benchmarks force
    the router to balance (imbalance 0, dropless); DeepSeek's own run limits each token to M
    nodes and dispatches with DeepEP (flex); Megatron-Bridge's DeepSeek-V3 recipes dispatch
    with DeepEP / HybridEP (flex) under the model's 4-node limit."""
    routing = {"imbalance": 0.0} if "force-balanced" in notes else {}
    limit = re.search(r"each token to at most (\d+) nodes", notes)
    if limit:
        routing.update(dispatcher="flex", max_nodes_per_token=int(limit.group(1)))
    elif model.startswith("DeepSeek-V3"):
        routing.update(dispatcher="flex", max_nodes_per_token=DSV3_NODE_LIMIT)
    return routing


def _comm_sms(notes: str) -> int:
    """SMs the row's notes say its communication kernels hold ("20 SMs reserved ...")."""
    m = re.search(r"(\d+) SMs reserved", notes)
    return int(m.group(1)) if m else 0


def _fp8_recipe(precision: str) -> str:
    """``workload.fp8_recipe`` of a row's precision text (the rules in the module docstring)."""
    t = precision.lower()
    if "fp8-mx" in t or "mxfp8" in t:
        return "mxfp8"
    if "fp8-cs" in t or "current scaling" in t or "float8" in t:
        return "tensorwise"
    if "1x128" in t:
        return "blockwise"
    return "delayed"


def scenario_dict(r) -> dict:
    """The scenario mapping of one public_runs.csv row (the rules in the module docstring)."""
    gpus, tp, pp, cp, ep = int(r.gpus), int(r.tp), int(r.pp), int(r.cp), int(r.ep)
    dp = gpus // (tp * pp * cp)
    zero = _zero(r.zero_fsdp, r.source)
    gbs = int(r.global_batch_seqs)
    group = source_group(r.source)
    mb = _recipe_micro_batch(r, group) or _num(r.micro_batch)
    if mb is None and zero == 3 and pp == 1:
        mb = gbs // dp
    elif mb is None and group == "torchtitan" and pp > 1 and (gbs // dp) % pp == 0:
        mb = gbs // dp // pp
    elif mb is None:
        mb = "auto"
    vpp_text = str(r.vpp)
    vpp = _num(r.vpp) or (1 if ">1" not in vpp_text else
                          TORCHTITAN_STAGES_PER_RANK if group == "torchtitan" else "auto")
    if "DualPipe" in vpp_text:
        vpp = "DualPipe"
    L = int(r.num_layers)
    layout = DSV3_LAYOUTS.get((pp, vpp)) if r.model.startswith("DeepSeek-V3") else None
    recipe_mods = _recipe_recompute(r, group) or _paper_modules(r, _stated_modules(r.recompute))
    sync_free = _recipe_sync_free(r, group)
    ep_overlap = _recipe_ep_overlap(r, group) or sync_free
    uneven = pp > 1 and (L % pp or (isinstance(vpp, int) and L % (pp * vpp)))
    sp_text = str(r.sequence_parallel).lower()
    sp = tp > 1 and not sp_text.startswith("no")
    prec = str(r.precision).lower()
    precision = "fp8" if prec.startswith("fp8") else ("fp16" if prec.startswith("fp16")
                                                     else "bf16")
    legacy = group in LEGACY_2022
    notes = str(r.notes)
    async_tp = group == "torchtitan" and ("AsyncTP" in str(r.precision) or ASYNC_TP in notes)
    gpu = "h100-96gb" if r.gpu == "h100-sxm" and any(k in notes for k in H100_96GB) else r.gpu
    workload = {"model": _model(r), "seq_len": int(r.seq_len), "global_batch": gbs,
                "micro_batch": mb, "precision": precision,
                "fp8_recipe": _fp8_recipe(prec) if precision == "fp8" else "delayed"}
    if precision == "fp8" and group == "torchtitan":       # torchao float8: bf16 inputs kept
        workload["fp8_saved_inputs"] = "bf16"
    bf16_state = group == "nvidia" and r.model.startswith(RECIPE_BF16_OPTIMIZER)
    bf16_reduce = bf16_state or str(r.framework).startswith(BF16_GRAD_REDUCE_FRAMEWORKS)
    if group == "deepseek" or bf16_state:      # AdamW's moments in bf16 (arXiv 2412.19437 3.3.3)
        workload["moments_dtype"] = "bf16"
    if _num(r.num_experts):
        workload["moe"] = _routing(notes, r.model)
    recipe_opts = {}
    if sync_free or _recipe_hybridep(r, group):       # HybridEP on its SMs
        workload["moe"].update(dispatcher="flex")
        recipe_opts["ep_comm_sms"] = HYBRIDEP_SMS
    if sync_free:
        workload["moe"].update(rank_capacity_factor=SYNC_FREE_RANK_CAPACITY)
        recipe_opts["cuda_graph_scope"] = ["full_iteration"]
    return {
        "name": r.id,
        "workload": workload,
        "parallel": {"tp": tp, "pp": pp, "cp": cp, "ep": ep,
                     "vpp": 1 if vpp == "DualPipe" else vpp,
                     "etp": 1 if _num(r.num_experts) and group == "nvidia" else None,
                     "schedule": "dualpipe" if vpp == "DualPipe" else "1f1b",
                     "sequence_parallel": sp, "zero": zero,
                     "account_for_embedding_in_pipeline_split": bool(uneven) and not layout,
                     "account_for_loss_in_pipeline_split": bool(uneven) and not layout,
                     "pipeline_layout": layout,
                     "recompute": "selective" if recipe_mods else _recompute(r.recompute),
                     "recompute_modules": recipe_mods,
                     "cpu_offloading_num_layers": _recipe_cpu_offload(r, group, zero),
                     "grad_reduce_dtype": "bf16" if bf16_reduce else "auto"},
        "optimizations": {"flash_attention": group not in NO_FLASH,
                          "tp_bwd_overlap": group != "torchtitan" or async_tp,
                          "comm_sms": _comm_sms(notes),
                          "ep_overlap": ep_overlap,
                          "delay_wgrad": ep_overlap and (
                              r.model.startswith(RECIPE_DELAY_WGRAD) or sync_free),
                          "attention_kernel": "flash2" if group in FLASH2_STACKS else "auto",
                          "fused_kernels": "No torch.compile" not in notes,
                          "dp_overlap": not legacy,
                          "fp8_all_gather": precision == "fp8" and group == "torchtitan",
                          # DeepSeek's stack runs its experts as one grouped kernel
                          # (DeepGEMM), the sync-free recipes theirs as CuTeDSL's fused MLP
                          "grouped_gemm": "fused" if group == "deepseek" or sync_free
                          else "multi_stream", **recipe_opts},
        "cluster": {"gpu": gpu, "gpus": gpus,        # node: the GPU's (GPUSpec.node_gpus)
                    "topology": TOPOLOGY[r.gpu.split("-")[0]]},
        "network": {"congestion_control": "none"},
    }


GB300_RUNS = Path(__file__).parent / "gb300_runs" / "runs.csv"
"""Megatron-Bridge's dense DGX-GB300 rows of NeMo 25.11 and 26.02 in public_runs.csv's columns
(not in ../shared; fitted to nothing: validation/gb300_runs/README.md)."""


NEWER_RUNS = Path(__file__).parent / "newer_runs" / "runs.csv"
"""Megatron-Bridge's rows of the releases after 26.02 (26.02.01-26.08) in public_runs.csv's
columns: the dense pre-training rows on DGX H100, GB200 and GB300, and the MoE rows whose
recipes are traced (:data:`RECIPE_SYNC_FREE`, :data:`RECIPE_HYBRIDEP`; not in ../shared; fitted
to nothing:
validation/newer_runs/README.md)."""


GB200_RUNS = Path(__file__).parent / "gb200_runs" / "runs.csv"
"""Megatron-Bridge's DGX-GB200 rows of NeMo 25.09, 25.11 and 26.02 in public_runs.csv's
columns (not in ../shared; the dense rows fitted to nothing, the MoE rows among those the
host's per-expert issue time is fitted on: validation/gb200_runs/README.md)."""


def cases(validation_dir: str | Path, csv: str | Path | None = None
          ) -> list[tuple[pd.Series, Scenario | None, str]]:
    """(row, scenario or None, why not) for every row of public_runs.csv, or of ``csv`` (a
    table in its columns)."""
    rows = pd.read_csv(csv or Path(validation_dir) / "public_runs.csv")
    out = []
    for r in rows.itertuples():
        try:
            out.append((r, Scenario.from_dict(scenario_dict(r)), ""))
        except ValueError as e:
            out.append((r, None, str(e).splitlines()[0]))
    return out


FAMILY_KEYS = ("h100", "h800", "h200", "b200")
"""GPU names whose compute constants the Hopper fit sets (Blackwell shares Hopper's,
simulator.calibration.BLACKWELL)."""
FIT_GRID = {"gemm_efficiency": np.arange(0.40, 0.861, 0.01),
            "memory_efficiency": np.arange(0.30, 0.921, 0.02),
            "flash_scale": np.arange(0.40, 1.251, 0.025)}
"""What the Hopper fit searches: the tensor-core fraction (one for BF16 and FP8, see
:func:`fit`), the HBM fraction and one factor on both flash-attention efficiencies. The
HBM fraction is bounded above by what a STREAM triad reaches on H100 (~0.92 of 3.35 TB/s) and
reaches far below it, like Ampere's own fit (0.675): it is the constant that absorbs the
element-wise work the model does not list, not a measured bandwidth."""
LOW_WEIGHT = ("nemo-longseq",)
"""Rows whose step time hangs on a FLOP-counting convention (public_runs.md, 'How step times
were derived'): weighted half in the fit."""
SURROGATE_STEP = 0.8
"""The fit's probe: each constant in turn at 0.8 x its value."""


def evaluate(validation_dir: str | Path, cal=None, fixed: dict | None = None,
             csv: str | Path | None = None) -> pd.DataFrame:
    """Every row predicted. Columns: id, group, gpu, model, precision, moe, published_s,
    predicted_s, error (predicted / published - 1), micro_batch, vpp, fits_memory, reason (why
    a row is not simulated). ``cal`` replaces the Hopper-family compute constants; ``fixed``
    maps id -> (micro_batch, vpp) to hold the auto choices of an earlier pass; ``csv``: rows
    of another table in public_runs.csv's columns (:data:`GB200_RUNS`)."""
    saved = dict(calibration.CALIBRATIONS)
    if cal is not None:
        cal = dict(cal)
        scale = cal.pop("flash_scale", calibration.HOPPER_FLASH_SCALE)
        hop = replace(calibration.HOPPER, **cal)
        rel = scale / calibration.HOPPER_FLASH_SCALE
        hop = replace(hop, flash_fwd_efficiency=hop.flash_fwd_efficiency * rel,
                      flash_bwd_efficiency=hop.flash_bwd_efficiency * rel)
        for k in FAMILY_KEYS:
            calibration.CALIBRATIONS[k] = hop
        calibration.CALIBRATIONS["b300"] = calibration.tensor_scaled(
            hop, calibration.BLACKWELL_ULTRA_TENSOR_SPEEDUP)      # Blackwell Ultra follows
    rows = []
    try:
        for r, sc, why in cases(validation_dir, csv):
            row = {"id": r.id, "group": source_group(r.source), "gpu": r.gpu, "model": r.model,
                   "precision": sc.workload.precision if sc else None,
                   "moe": not pd.isna(r.num_experts), "published_s": float(r.step_time_s),
                   "predicted_s": float("nan"), "error": float("nan"), "micro_batch": None,
                   "vpp": None, "fits_memory": None, "reason": why}
            if sc is not None:
                if fixed and r.id in fixed:
                    b, v = fixed[r.id]
                    held = [f"workload.micro_batch={b}"] + \
                        ([] if sc.parallel.schedule == "dualpipe" else [f"parallel.vpp={v}"])
                    sc = sc.from_dict(sc.model_dump(mode="python"), held)
                try:
                    res = simulate(sc)
                except ValueError as e:
                    row["reason"] = str(e).splitlines()[0]
                else:
                    row.update(predicted_s=res.step_time_s,
                               error=res.step_time_s / float(r.step_time_s) - 1,
                               micro_batch=res.micro_batch, vpp=res.vpp,
                               fits_memory=res.fits_memory)
            rows.append(row)
    finally:
        calibration.CALIBRATIONS.clear()
        calibration.CALIBRATIONS.update(saved)
    return pd.DataFrame(rows)


def synced_predictions(validation_dir: str | Path, csv: str | Path) -> pd.Series:
    """[id] step time predicted for the sync-free rows of ``csv`` (:data:`RECIPE_SYNC_FREE`)
    with their dispatch as the releases before ran it: the counts through the host, no CUDA
    graphs, Transformer Engine's per-expert GEMM loop; everything else as the row states."""
    out = {}
    for r, sc, _ in cases(validation_dir, csv):
        if sc is None or sc.workload.moe.rank_capacity_factor is None:
            continue
        synced = sc.from_dict(sc.model_dump(mode="python"), [
            "workload.moe.rank_capacity_factor=null", "optimizations.cuda_graph_scope=[]",
            "optimizations.grouped_gemm=multi_stream"])
        out[r.id] = simulate(synced, frames=False).step_time_s
    return pd.Series(out, dtype=float)


def current_constants() -> dict:
    h = calibration.HOPPER
    return {"gemm_efficiency": h.gemm_efficiency, "fp8_gemm_efficiency": h.fp8_gemm_efficiency,
            "memory_efficiency": h.memory_efficiency,
            "flash_scale": calibration.HOPPER_FLASH_SCALE}


def surrogate(validation_dir: str | Path) -> pd.DataFrame:
    """:func:`evaluate` at today's constants plus, per row, t ~ c0 + sum_k a_k / x_k over the
    fitted constants x_k (from one extra run per constant at :data:`SURROGATE_STEP` x its
    value, the auto choices held fixed): compute time is inverse in each efficiency."""
    base = evaluate(validation_dir)
    done = base.micro_batch.notna()
    fixed = {r.id: (int(r.micro_batch), int(r.vpp)) for r in base[done].itertuples()}
    x0 = current_constants()
    t0 = base.predicted_s.to_numpy()
    out = base.copy()
    c0 = t0.copy()
    for k, x in x0.items():
        probe = dict(x0, **{k: x * SURROGATE_STEP})
        t = evaluate(validation_dir, probe, fixed).predicted_s.to_numpy()
        a = (t0 - t) / (1 / x - 1 / (x * SURROGATE_STEP))
        out["a_" + k] = a
        c0 = c0 - a / x
    out["c0"] = c0
    return out


def fit_rows(sur: pd.DataFrame) -> pd.Series:
    """Rows the Hopper fit uses: Hopper / Blackwell, simulated, dense (MoE rows are reported
    but not fitted: expert dispatch and grouped-GEMM efficiency are not modelled yet)."""
    return sur.gpu.str.match("|".join(FAMILY_KEYS)) & sur.predicted_s.notna() & ~sur.moe


def fit(sur: pd.DataFrame, rows: pd.Series) -> tuple[dict, float]:
    """The constants on :data:`FIT_GRID` minimising the weighted mean |log(predicted /
    published)| over ``rows`` of the surrogate; (constants, objective).

    FP8 GEMMs sustain the fraction of the FP8 peak that BF16 GEMMs sustain of theirs, so one
    constant sets both: cuBLASLt E4M3 x E4M3 (bf16 out) at 8192^3 measures 1,600-1,630 TFLOP/s
    on H100 SXM (0.81 of 1,979) where BF16's best shape reaches 792 of 989 (0.80; the MAMF
    table of stas00/ml-engineering, CUDA 12.1). Fitted apart, FP8's fraction trades against
    the HBM fraction on the FP8 rows (their casts are HBM traffic) and held out it did worse
    when tried (leave-one-source-out 9.0 % against 8.0 % tied, over the 35 rows that ran
    then)."""
    d = sur[rows]
    w = np.where(d.id.str.startswith(LOW_WEIGHT), 0.5, 1.0)
    pub = d.published_s.to_numpy()[:, None]
    g = FIT_GRID["gemm_efficiency"]
    gemm = (d.a_gemm_efficiency.to_numpy() + d.a_fp8_gemm_efficiency.to_numpy())[:, None] \
        / g[None, :]
    best = None
    for me in FIT_GRID["memory_efficiency"]:
        for fl in FIT_GRID["flash_scale"]:
            rest = d.c0.to_numpy() + d.a_memory_efficiency.to_numpy() / me + \
                d.a_flash_scale.to_numpy() / fl
            t = rest[:, None] + gemm
            err = (w[:, None] * np.abs(np.log(t / pub))).sum(0) / w.sum()
            j = int(err.argmin())
            if best is None or err[j] < best[1]:
                best = ({"gemm_efficiency": round(float(g[j]), 3),
                         "fp8_gemm_efficiency": round(float(g[j]), 3),
                         "memory_efficiency": round(float(me), 3),
                         "flash_scale": round(float(fl), 3)}, float(err[j]))
    return best


def surrogate_predict(sur: pd.DataFrame, consts: dict) -> pd.Series:
    return sur.c0 + sum(sur["a_" + k] / v for k, v in consts.items())


def leave_one_source_out(sur: pd.DataFrame) -> pd.DataFrame:
    """Per source group: the constants fitted on every other group's rows, and the error on
    this group's rows. Columns: group, rows, constants, mean_abs_error, worst_abs_error."""
    rows = fit_rows(sur)
    out = []
    for g in sorted(sur[rows].group.unique()):
        consts, _ = fit(sur, rows & (sur.group != g))
        held = rows & (sur.group == g)
        err = surrogate_predict(sur[held], consts) / sur[held].published_s - 1
        out.append({"group": g, "rows": int(held.sum()), "constants": consts,
                    "mean_abs_error": float(err.abs().mean()),
                    "worst_abs_error": float(err.abs().max())})
    return pd.DataFrame(out)


def fit_summary(sur: pd.DataFrame) -> dict:
    """What the calibration script and the report print: today's error, the in-sample fit,
    leave-one-source-out, whether today's constants are that fit (``adopted``: within one grid
    step of it, so today's error is in sample) and, if not, whether the fit qualifies for
    adoption (``adopt``: it beats today's constants held out, from inside its search box)."""
    rows = fit_rows(sur)
    now = (sur[rows].predicted_s / sur[rows].published_s - 1).abs()
    consts, _ = fit(sur, rows)
    ins = (surrogate_predict(sur[rows], consts) / sur[rows].published_s - 1).abs()
    loso = leave_one_source_out(sur)
    held = float((loso.rows * loso.mean_abs_error).sum() / loso.rows.sum())
    edges = [k for k, v in consts.items() if k in FIT_GRID and
             (np.isclose(v, FIT_GRID[k].min()) or np.isclose(v, FIT_GRID[k].max()))]
    today = current_constants()
    adopted = all(abs(consts[k] - today[k]) <= (g[1] - g[0]) * 1.001
                  for k, g in FIT_GRID.items())
    return {"rows": int(rows.sum()), "today": today,
            "today_mean": float(now.mean()), "today_worst": float(now.max()),
            "fit": consts, "fit_mean": float(ins.mean()), "fit_worst": float(ins.max()),
            "loso": loso, "loso_mean": held,
            "loso_worst_source": float(loso.mean_abs_error.max()), "edges": edges,
            "adopted": adopted, "adopt": not adopted and held < now.mean() and not edges}
