"""Model constants of the step simulator: each named, with unit, value and source.

The compute constants with a ``fitted`` note were fitted once per GPU family, jointly: Ampere's
against the Megatron-LM tables of ../shared/validation (scripts/calibrate.py), Hopper's against
the dense Hopper / Blackwell rows of public_runs.csv (scripts/calibrate_hopper.py, with
leave-one-source-out error); nothing is set per scenario. All others are read
from datasheets, NCCL or papers. The host's issue times of MoE layers live with their model
(simulator/step/host.py; HOST_EXPERT_GEMM_S fitted by scripts/calibrate_host.py). A result
records :data:`CALIBRATION_ID`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

CALIBRATION_ID = "clustersim-cal-2026.11-16"
"""Identifies this set of constants in every result (``calibration`` field)."""


@dataclass(frozen=True)
class ComputeCalibration:
    """Per GPU generation. Efficiencies are fractions of the datasheet peak."""

    gemm_efficiency: float
    """Fraction of dense peak that a large, well-shaped GEMM sustains (cuBLAS)."""
    memory_efficiency: float
    """Fraction of HBM bandwidth an element-wise kernel sustains (STREAM-like)."""
    kernel_overhead_s: float
    """Launch plus ramp-up/tail time added to every kernel."""
    flash_fwd_efficiency: float
    """Fraction of dense peak of a fused flash-attention forward, on executed (causal) FLOPs."""
    flash_bwd_efficiency: float
    """Same for its backward (compute.FLASH_BWD_FLOP_RATIO x the forward FLOPs)."""
    fp8_gemm_efficiency: float = 0.0
    """Fraction of the dense FP8 peak a large FP8 GEMM sustains (cuBLASLt, E4M3 x E4M3 with
    bf16 output); 0 on generations without FP8 tensor cores."""


GEMM_TILES = ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64))
"""Output tiles, rows x columns of C per thread block (elements), that the model lets a GEMM
choose among; it runs the one that finishes first (:func:`simulator.step.compute.gemm_time_s`).
They are the CTA tile shapes CUTLASS's Ampere and Hopper tensor-core kernels instantiate
(CUTLASS 3.x sm90 TileShape 64-256 x 64-256); which one cuBLAS's heuristics pick is not
published, so the set is an assumption, checked by the fit to measured shapes
(:data:`GEMM_TILE_FILL_K`)."""
GEMM_TILE_FILL_K = 150
"""A tile's fixed time (pipeline prologue, epilogue: writing the output tile), in k-steps
(elements of the inner dimension) of the bf16 mainloop: a tile over k takes the time of
k + 150. Fitted with :data:`GEMM_FIXED_S` on measured cuBLAS throughput of 374 bf16 GEMM
shapes on H100 (OpenXLA's sm_90 matmul table, validation/kernels; scripts/fit_gemm_tiles.py):
mean |log error| 4 %, against 30 % for one 256 x 128 tile and no fill. It is what makes a
k = 256 GEMM run at half the rate of a large one, and a 1024 x 2048 x 2048 one at two
thirds."""
GEMM_FIXED_S = 5.7e-6
"""A GEMM kernel's fixed time (launch ramp and tail), fitted with :data:`GEMM_TILE_FILL_K`: the
smallest GEMMs of the table take 3-6 us whatever their size."""


AMPERE = ComputeCalibration(
    # fitted once by scripts/calibrate.py against all 25 step rows and 10 per-layer rows of
    # ../shared/validation (minimax of |log error|), with GPU speed variability on
    # (GPU_SPEED_CV; the steps wait for their slowest GPU) and the GEMM tile model
    # (GEMM_TILES, GEMM_TILE_FILL_K): a tile's mainloop at 0.74 x 312 = 231 TFLOP/s with fp16
    # cuBLAS (2021-22 software; NVIDIA quotes 250-270 TFLOP/s for ideal shapes). It was 0.755
    # with one 256 x 128 tile and no fill, 0.715 without variability.
    gemm_efficiency=0.74,
    # fitted with it: element-wise kernels of 2021-22 Megatron-LM (apex LayerNorm, fused
    # softmax, bias-dropout-add) sustain ~1.4 TB/s of the A100's 2.04 (STREAM reaches ~1.7);
    # the fit also absorbs small element-wise work the model does not list.
    memory_efficiency=0.675,
    # a few microseconds per launch without CUDA graphs (PyTorch eager); not fitted.
    kernel_overhead_s=4e-6,
    # Dao 2023 (FlashAttention-2, arXiv 2307.08691) Figs. 4-5: forward 50-73 % and backward
    # ~45-63 % of A100 peak at sequence 2k-16k, head dim 64-128; not fitted (the validation
    # runs predate flash attention).
    flash_fwd_efficiency=0.62,
    flash_bwd_efficiency=0.50,
)

_FA3_PAPER_TFLOPS = {"flash2": (333, 318), "flash3": (602, 559), "cudnn": (529, 518)}
"""Shah et al. 2024 (FlashAttention-3, arXiv 2407.08608) Figs. 1-2: the three kernels on one
H100 SXM5, head dim 128, sequence 8k, forward (causal) and backward TFLOP/s."""
_FA3_PAPER_PEAK_TFLOPS = 989.4
"""Dense BF16 peak of the H100 SXM5 those rates were measured on (its datasheet)."""


HOPPER_FLASH_SCALE = 0.625
"""Fitted (below): the fraction of the FlashAttention-3 paper's kernel rates (single kernel,
head dim 128, sequence 8k, boost clocks) that attention sustains inside published training
steps."""

HOPPER = ComputeCalibration(
    # fitted once by scripts/calibrate_hopper.py over the 39 dense Hopper / Blackwell rows of
    # ../shared/validation/public_runs.csv (torchtitan, NVIDIA NeMo / Megatron-Bridge,
    # MosaicML; 8-1,024 GPUs, BF16 and FP8; minimum weighted mean |log error|), with GPU speed
    # variability and the GEMM tile model (GEMM_TILE_FILL_K) on, after torchtitan's runs were
    # stated as torchtitan runs them (two stages per rank, DTensor TP's exposed backward
    # collectives, the 500 W part's peak) and each row's FP8 recipe: in sample 6.0 %,
    # leave-one-source-out 6.2 % (docs/validation.md; 12.6 % before those four).
    # A tile's mainloop at 0.63 x 989 = 623 TFLOP/s in training (the same kernels reach 0.87
    # on XLA's measured table, validation/kernels; cuBLAS's best shape 792 at boost clocks:
    # ml-engineering's MAMF table; a 700 W H100 under load runs below them).
    gemm_efficiency=0.63,
    # fitted with it (0.64-0.72 held out): 2.3 TB/s of 3.35, like Ampere's 0.675 below
    # STREAM's ~0.92; it absorbs the element-wise work the model does not list.
    memory_efficiency=0.68,
    kernel_overhead_s=4e-6,
    # cuDNN's fused attention, Transformer Engine's default on Hopper: 529 TFLOP/s causal
    # forward and 518 backward at head dim 128, sequence 8k on H100 SXM5 (Shah et al. 2024,
    # FlashAttention-3, arXiv 2407.08608, Figs. 1-2), times the fitted HOPPER_FLASH_SCALE;
    # other kernels: ATTENTION_KERNEL_SPEED.
    flash_fwd_efficiency=HOPPER_FLASH_SCALE * _FA3_PAPER_TFLOPS["cudnn"][0]
    / _FA3_PAPER_PEAK_TFLOPS,
    flash_bwd_efficiency=HOPPER_FLASH_SCALE * _FA3_PAPER_TFLOPS["cudnn"][1]
    / _FA3_PAPER_PEAK_TFLOPS,
    # one fraction for FP8 and BF16: cuBLASLt FP8 (E4M3, bf16 out) at 8192^3 sustains
    # 1,600-1,630 of the 1,979 TFLOP/s dense peak on H100 SXM (0.81), BF16's best shape 792 of
    # 989 (0.80); fitted tied to gemm_efficiency (validation.public_runs.fit).
    fp8_gemm_efficiency=0.63,
)

BLACKWELL = HOPPER
"""No published per-kernel measurements of B200 in validation/: Hopper's fractions are used."""


def tensor_scaled(cal: ComputeCalibration, speedup: float) -> ComputeCalibration:
    """``cal`` with its tensor-core work (BF16 and FP8 GEMMs, fused attention) ``speedup`` times
    as fast; memory-bound kernels and launch overheads unchanged."""
    return replace(cal, gemm_efficiency=cal.gemm_efficiency * speedup,
                   fp8_gemm_efficiency=cal.fp8_gemm_efficiency * speedup,
                   flash_fwd_efficiency=cal.flash_fwd_efficiency * speedup,
                   flash_bwd_efficiency=cal.flash_bwd_efficiency * speedup)


BLACKWELL_ULTRA_TENSOR_SPEEDUP = 1.15
"""How much faster Blackwell Ultra (B300, GB300) runs tensor-core work in training than
Blackwell (B200, GB200) at the same datasheet peaks (2.5 / 5 PFLOPS dense BF16 / FP8 on both
superchips). Fitted once (validation/ultra_fit.py, scripts/calibrate_ultra.py) on the seven
dense DGX-GB300 rows of NeMo 25.11 and 26.02 (validation/gb300_runs; minimum mean |error|):
4.8 % there, 11.2 % at 1.0. Held out, the 24 GB300 and B300 rows of NeMo 26.02.01-26.08
that fit their GPU as printed (validation/newer_runs: dense and MoE, FP8 and MXFP8) go from
mean |error| 15.8 % (every one slow) to 6.1 % (worst 11.9 %). What it stands for is not
separated here: Blackwell Ultra's power budget (1.4 kW per GB300 against GB200's 1.2, 1.1
per B300 against B200's 1.0), which a power-bound tensor clock would feel under training
load, and its doubled SFU rate for attention's exponentials (NVIDIA, 'Inside NVIDIA
Blackwell Ultra', 2025)."""
BLACKWELL_ULTRA = tensor_scaled(BLACKWELL, BLACKWELL_ULTRA_TENSOR_SPEEDUP)

CALIBRATIONS = {"a100": AMPERE, "h100": HOPPER, "h800": HOPPER, "h200": HOPPER,
                "b200": BLACKWELL, "b300": BLACKWELL_ULTRA}


GENERATION_ALIASES = {"b300": "b200"}
"""GPUs whose entries are another's where a table has none of their own: Blackwell Ultra (B300,
GB300) has Blackwell's tensor-core generation, NVLink 5 and NVSwitch (NVIDIA, 'Inside NVIDIA
Blackwell Ultra', 2025), so it takes B200's measured NVLink / NVLS fractions and LL ceilings;
its compute constants are its own (BLACKWELL_ULTRA)."""


def _by_generation(table: dict, gpu_name: str | None):
    """The entry of ``table`` (keyed by GPU name prefix) for ``gpu_name``; a Grace superchip's
    GPU (gb200, gh200, gb300) is its GPU's (b200, h200, b300); a GPU of GENERATION_ALIASES
    without an entry of its own is its alias's; Hopper's (key ``h100``) for a GPU it does not
    know."""
    name = (gpu_name or "").lower()
    if name.startswith(("gb", "gh")):
        name = name[1:]
    if not any(name.startswith(k) for k in table):
        name = next((v + name[len(k):] for k, v in GENERATION_ALIASES.items()
                     if name.startswith(k)), name)
    return next((v for k, v in table.items() if name.startswith(k)), table["h100"])


ATTENTION_KERNELS = ("flash2", "flash3", "cudnn")
"""Fused attention kernels (``optimizations.attention_kernel``): FlashAttention-2 (flash-attn 2,
PyTorch SDPA's flash backend), FlashAttention-3 (Hopper only), cuDNN's fused attention
(Transformer Engine's FusedAttention backend, PyTorch SDPA's cuDNN backend)."""
DEFAULT_ATTENTION_KERNEL = {"a100": "flash2", "h100": "cudnn"}
"""``attention_kernel: auto``, the kernel a generation's ComputeCalibration flash efficiencies
describe: what Megatron-Core with Transformer Engine runs, flash-attn 2 on Ampere, cuDNN's
fused attention on Hopper and later (TE prefers its FusedAttention backend on sm90+)."""
ATTENTION_KERNEL_SPEED = {
    "a100": {"flash2": (1.0, 1.0), "cudnn": (1.0, 1.0), "flash3": None},
    "h100": {kern: (f / _FA3_PAPER_TFLOPS["cudnn"][0], b / _FA3_PAPER_TFLOPS["cudnn"][1])
             for kern, (f, b) in _FA3_PAPER_TFLOPS.items()}}
"""(forward, backward) speed of each kernel relative to the generation's default (None: it
does not run there). Hopper from the FlashAttention-3 paper's comparison (FlashAttention-2
reaches 0.63 / 0.61 of cuDNN's rate, FlashAttention-3 1.14 / 1.08); Ampere: cuDNN's fused
attention taken at flash-attn 2's rate, FlashAttention-3 needs sm90. H800, H200, Blackwell and
unknown GPUs take Hopper's (``_by_generation``; no published B200 comparison in validation/)."""


def attention_speed(kernel: str, gpu_name: str | None) -> tuple[float, float] | None:
    """(forward, backward) speed of ``kernel`` (or ``auto``) relative to the flash
    efficiencies of the GPU's ComputeCalibration; None where the kernel does not run."""
    if kernel == "auto":
        kernel = _by_generation(DEFAULT_ATTENTION_KERNEL, gpu_name)
    return _by_generation(ATTENTION_KERNEL_SPEED, gpu_name)[kernel]


def compute_calibration(gpu_name: str | None) -> ComputeCalibration:
    """The constants of the GPU's generation (by name prefix; Ampere for unknown inline GPUs
    with A100-like peaks is not assumed: an unknown name gets Hopper's, stated in the result)."""
    return _by_generation(CALIBRATIONS, gpu_name)


# ---------------- variability across GPUs ----------------
GPU_SPEED_CV = 0.015
"""Coefficient of variation of per-GPU speed among GPUs of one SKU (``cluster.variability``):
Sinha et al., SC'22 ("Not All GPUs Are Created Equal", arXiv 2208.11035) measure an 8 % average
performance variation across the GPUs of each of five clusters (same SKU; power management and
manufacturing), read here as the whisker-to-whisker range of their box plots, about 5.4
standard deviations of a normal population (Q1 - 1.5 IQR to Q3 + 1.5 IQR): 8 / 5.4 = 1.5 %.
Their outliers (up to 1.5x slower) are stragglers a production job removes; model one with
``faults.stragglers``."""


# ---------------- element-wise traffic (bytes per element, read + write) ----------------
BACKWARD_ELEMENTWISE_FACTOR = 1.5
"""Backward of an element-wise op touches ~1.5x the tensors of its forward: LayerNorm, GeLU and
softmax read the saved input (or output) and the incoming gradient and write one gradient (3
tensors vs 2); dropout and residual adds read the gradient and mask and write one (about 1x)."""
UNFUSED_TRAFFIC_FACTOR = 2.5
"""Unfused element-wise chains (bias, GeLU, dropout, residual add, LayerNorm, scale-mask-softmax
as separate kernels) re-read and re-write the tensor per kernel: ~2-3x the fused traffic
(Megatron-LM's fused kernels; Korthikanti et al. 2022 section 6)."""

# ---------------- communication ----------------
NVLINK_BUSBW_EFFICIENCY = {"a100": 0.775, "h100": 0.822, "h800": 0.822, "h200": 0.822,
                           "b200": 0.772}
"""Achievable NCCL bus bandwidth over NVLink / NVSwitch as a fraction of the per-direction link
rate, by NVLink generation: NVLink3 232.5 GB/s measured on 8 x A100 SXM of 300
(validation/network.md); NVLink4 370 of 450 on 8 x H100, ring (NVIDIA/nccl#2140; NCCL's
maintainers: "effective NVLink4 bandwidth" 370 GB/s, nccl-tests#212); NVLink5 695 of 900 on
8 x B300, ring (NVIDIA/nccl#2140; B200's NVLink5 is the same). Unknown GPUs get Hopper's."""


_NVLS_BUSBW_FACTOR_8 = 2 * (8 - 1) / (8 + 1)
"""busbw / (fraction x NVLink) of an NVLS all-reduce on 8 GPUs: 2 (k - 1) / (k + 1), k = 8."""
_NVLINK4 = 480 / (450 * _NVLS_BUSBW_FACTOR_8)
"""NVLink 4's NVLS fraction (H100, H800, H200): 480 GB/s busbw on 8 x H100 of 450 per
direction."""
NVLS_NVLINK_EFFICIENCY = {"h100": _NVLINK4, "h800": _NVLINK4, "h200": _NVLINK4,
                          "b200": 845 / (900 * _NVLS_BUSBW_FACTOR_8)}
"""Achievable fraction of the per-direction NVLink rate under NCCL's NVLS all-reduce (NVLink
SHARP: the NVSwitch reduces on multimem loads and multicasts stores), by generation. An NVLS
all-reduce of S on k GPUs moves S (k + 1) / k each way per GPU (it serves its share of every
shard's reducing load, S, receives its reduced shard, S / k; stores that shard once, S / k,
and receives every multicast shard, S), so busbw = fraction x NVLink x 2 (k - 1) / (k + 1).
Fitted on one point per generation: 480 GB/s busbw on 8 x H100 (NVIDIA/nccl#2140, #1442,
nccl-tests#212: "30 % improvement using NVLink SHARP" over the ring's 370); 845 on 8 x B300
(NCCL 2.30.4, nccl#2140), taken for B200's NVLink 5 switch as NVLINK_BUSBW_EFFICIENCY takes
B300's ring figure (../shared/validation/network_scale/sharp_nvls.csv). Held out, the H100
scan over GPU counts (nccl#1455: 420 / 440 / 460 on 5 / 6 / 7 GPUs, the ring's 370 on 2-4)
comes out at 411 / 441 / 463 and below the ring up to 4 GPUs. Ampere has no NVLS."""


NVLS_BUSBW_SATURATION_GPUS = 8
"""GPUs of one NVSwitch domain beyond which NVLS's bus bandwidth stops growing. Up to it the
NVLink bytes per GPU set it (NVLS_NVLINK_EFFICIENCY: 420 / 440 / 460 / 480 GB/s on 5-8 H100,
nccl#1455, #2140); beyond it it stays at its 8-GPU value, as NCCL's cost model holds NVLS busBw
whatever the GPU count (tuning.cc) and as GB200 NVL72 measures: 850 GB/s on 32 GPUs against
845 on 8 x B300 (GTC25 S72583 slide 12, nccl#2140; the byte count alone would give 1,020)."""


def nvls_efficiency(gpu_name: str | None) -> float:
    """NVLS_NVLINK_EFFICIENCY of the GPU's generation (by name prefix)."""
    return _by_generation(NVLS_NVLINK_EFFICIENCY, gpu_name)


def nvlink_efficiency(gpu_name: str | None) -> float:
    """NVLINK_BUSBW_EFFICIENCY of the GPU's generation (by name prefix)."""
    return _by_generation(NVLINK_BUSBW_EFFICIENCY, gpu_name)


NET_BUSBW_EFFICIENCY = {"ib": 0.96, "roce": 0.88, "efa": 0.89}
"""Achievable NCCL bus bandwidth over a NIC as a fraction of its line rate, by transport
(``topology.transport``):

- ib 0.96: NCCL's maintainers' per-NIC figures, 24 GB/s per 200G HDR NIC (nccl-tests#119) and
  46-49 GB/s per 400G NDR CX-7 (nccl-tests#267, #290); DGX A100 192 GB/s all-reduce busbw on
  8 x 200G (NVIDIA/nccl#812). Fitting it alone to the >= 4 GiB points of NVIDIA's GTC24 NVLSTree
  scan (dgx-h100-rail, 32-8,192 GPUs) gives the same 0.96 (scripts in docs/validation.md).
- roce 0.88: 8 x 400G RoCE clusters measure 340-350 GB/s all-reduce busbw at 64-256 GPUs
  (NVIDIA/nccl#1218, uccl#205), AWS's EFA 355 (p5, 8 GiB, 64-128 GPUs); 86 and 84.8 of 100
  GB/s on two A100 clusters (validation/network.md). Congestion and ECMP collisions come on top
  of it from the fabric model.
- efa 0.89: AWS p5 (8 x H100, 32 x 100G EFA, NCCL 2.28.7 + aws-ofi-nccl 1.16.3) all-reduce
  busbw plateaus at 355-356 GB/s on 64 and 128 GPUs at 8 GiB of 400 GB/s of line rate per node
  (../shared/validation/network_scale/aws_p5_efa_nccl_tests.csv)."""
NCCL_CHANNELS_PER_NIC = 2
"""NCCL's ring / tree channels per NIC rail: its graph search finds one channel per NIC, then
ncclTopoPostset doubles them "to increase efficiency" (sjeaugey, NVIDIA/nccl#524), e.g. 16
channels on 8 NICs (NVIDIA/nccl#1218). Each channel is its own connection (its own queue pairs,
hence its own RoCE source port) moving 1 / channels of the data as its own ring."""
CHANNELS_PER_NIC_DEFAULT = 1
"""clustersim's default channels per NIC rail (network.nccl.channels_per_nic): one, not NCCL's
two, for now. Two double the flows of every DCQCN shape: the 12,288-GPU MegaScale step under
DCQCN goes from 3.8 s to 11 s on one core and the 131,072-GPU one from 44 s to 270 s, for a
0.3 % change in step time (ECMP spreads the DP rings' channels a little better). Set 2 for
NCCL's own count, e.g. for ECMP collision what-ifs in nccl-tests."""
NCCL_LATENCY_US = {
    # (baseLat, NVLink hop, network hop) for ring / tree x LL, LL128, Simple: NCCL 2.30.7
    # tuning.cc ncclTunerConstantsDefaults (nccl_tuning_model_defaults.csv). Tree / Simple was
    # NCCL 2.4's (0, 28, 28) until clustersim-cal-2026.11-4.
    ("ring", "LL"): (6.6, 0.6, 2.7), ("ring", "LL128"): (14.0, 1.9, 4.0),
    ("ring", "Simple"): (8.4, 3.4, 14.0),
    ("tree", "LL"): (6.8, 0.6, 5.0), ("tree", "LL128"): (14.0, 1.25, 8.5),
    ("tree", "Simple"): (8.4, 4.0, 14.0),
    # NVLSTree (NVLink SHARP inside the node, a tree across nodes; Simple only): no base
    # latency, the NVLS hop over NVLink (hwLat NVLINK NVLS Simple 25 us) and the NVLSTree
    # network hop (hwLat NET NVLSTree Simple 20.9 us); NCCL 2.30.7 tuning.cc,
    # ../shared/validation/network_scale/nccl_tuning_model_defaults.csv.
    ("nvlstree", "Simple"): (0.0, 25.0, 20.9),
    # NVLS (NVLink SHARP; Simple only): no base latency, one NVLS hop (hwLat NVLINK NVLS Simple
    # 25 us), and across nodes (with IB SHARP, CollNet) one network hop (NET NVLS 18 us).
    ("nvls", "Simple"): (0.0, 25.0, 18.0),
    # CollNet Direct (IB SHARP on NVSwitch systems without NVLS; Simple only): hwLat NVLINK
    # CollNetDirect Simple 3.7 us, NET 31 us (tuning.cc; the csv above).
    ("collnet", "Simple"): (0.0, 3.7, 31.0),
}
PROTOCOL_BW_FRACTION = {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0}
"""Payload fraction of each NCCL protocol's wire format: LL sends 4 B of flag per 4 B of data,
LL128 8 B of flag per 128 B line."""
RING_PIPELINE_P = 2.05
"""How a ring across nodes combines its hop latencies with its transfer time: its time is
base + (L^p + W^p)^(1/p), L the ring's steps times the mean hop latency around the ring (an
8-GPU node per network hop: a ring's steady-state period is its cycle's mean, the max-plus
cycle time of a pipelined ring), W the bytes at the protocol's rate. NCCL's model (tuning.cc)
adds them (p = 1) and counts nodes - 1 network hops on n - 1 steps; the ring pipelines its
chunks, so much of the latency hides behind the transfer: LL / LL128 forward each 128-byte
line as its flag lands, Simple each slice, while a network hop's proxy stores and forwards
its step. Fitted once, with LL128_NET_FRACTION, on the ring points of AWS's p5 nccl-tests
(57 all-gather and all-reduce points on 16-256 GPUs, 32 MiB-8 GiB, where NCCL's 75 us per
network hop makes latency and transfer comparable): 2.05 (scripts/calibrate_ring.py: median
|error| 2.9 % there, 15.6 % with p = 1; held out, the all-gathers 6.2 % fitted on the
all-reduces alone, the all-reduces 2.1 % fitted on the all-gathers; docs/validation.md).
NCCL's tuner still chooses by its own
model; this is the time the chosen ring runs. Inside one node NCCL's additive model stands
(no measured NVLink scan here sets it)."""
LL128_NET_FRACTION = {"efa": 0.785}
"""LL128's achieved rate on a ring across nodes as a fraction of the NIC's (Simple's) rate, by
transport where measured: on AWS p5 (EFA, through aws-ofi-nccl) the LL128 rings plateau at
269-280 GB/s busbw at 1-2 GiB on 32-256 GPUs where Simple reaches 355
(aws_p5_efa_nccl_tests.csv); fitted with RING_PIPELINE_P. Elsewhere the wire format's 120 / 128
(PROTOCOL_BW_FRACTION): NCCL's own estimate (0.92 of the bus bandwidth, tuning.cc), tuned on
NVIDIA's InfiniBand systems, puts LL128 within a few percent of that, and nothing measured
here says otherwise (a 0.785 on RoCE would take 256 H100's all-gather of nccl#1218 from +10 %
to -8 %: one point, either side)."""
TREE_BUSBW_RATIO = 0.5
"""Algorithm bandwidth of NCCL's tree all-reduce as a fraction of its bus bandwidth: each tree
edge carries the data up and down (tuning.cc, ``ratio = .5`` for every algorithm but ring)."""
TREE_LL128_NET_FRACTION = {"efa": 0.555}
"""LL128's achieved rate on a tree all-reduce across nodes as a fraction of the NIC's, by
transport where measured: on AWS p5 (EFA, through aws-ofi-nccl) the Tree / LL128 points its
region tuner picks (32-256 MiB on 4-32 nodes, aws_p5_efa_nccl_tests.csv) run at about half
NCCL's tree model, 87-108 GB/s of algorithm bandwidth between sizes where the model gives 167,
with NCCL's tree latency (its pipeline fill, 2 x log2(nodes) network hops at the plugin's
75 us) added, as NCCL adds it. Fitted once on those 11 points (validation/tree_fit.py,
scripts/calibrate_tree.py; each node count held out in turn). What it stands for is not
separated: LL128 over EFA alone runs rings at LL128_NET_FRACTION's 0.785; a tree reaches 0.71
of that. NCCL's own model caps a Hopper tree's LL128 at 29 GB/s per channel on 4+ nodes against
a ring's 36.7 (tuning.cc perChMaxTreeLL128Bws / perChMaxRingLL128Bws: 0.79 of the ring's), and
an interior node's parent and first child share one NIC in its balanced tree pattern; which
of these p5 hits is not known here (its channel count is not published with the table).
NCCL's tuner still chooses by its own model; this is the time the chosen tree runs. Elsewhere
the wire format's 120 / 128 (PROTOCOL_BW_FRACTION)."""
P2P_NET_FRACTION = {"efa": 0.835}
"""The rate NCCL's sends and receives (all-to-all, a hierarchical all-to-all's rail leg, p2p)
reach across nodes as a fraction of the NIC's line rate, by transport where measured; elsewhere
a ring's (NET_BUSBW_EFFICIENCY). On AWS p5 (EFA, through aws-ofi-nccl) the nccl-tests
all-to-alls of 1-2 GiB on 16-256 GPUs move their network bytes at 0.79-0.89 of the 400 Gb/s a
GPU has (0.84 at the median), where the Simple rings reach 0.89 (aws_p5_efa_nccl_tests.csv).
Fitted once on all 35 all-to-all points (16-256 GPUs, 32 MiB-2 GiB) with every other constant
fixed (validation/a2a_fit.py, scripts/calibrate_a2a.py; each GPU count held out in turn): 0.835,
near the bytes-bound points' own 0.84, now that an all-to-all's Simple sends pay
the plugin's latency twice like every Simple network hop (alpha_beta.all_to_all_plugin_s;
paying it once, the fit fell to 0.81 to make up the latency). The 128-512 MiB points on 16-32
nodes carry more than the modelled latency, growing with size there, not separated: up to
17 % fast. A candidate mechanism for the lower rate, not separated either: a send moves one
NCCL_P2P_NET_CHUNKSIZE per network message where a ring moves a step of NCCL_BUFFSIZE /
NCCL_STEPS: 512 KiB against 1 MiB on p5, where aws-ofi-nccl's platform table sets
NCCL_P2P_NET_CHUNKSIZE 512 KiB and NCCL_BUFFSIZE 8 MiB (src/platform-aws.cpp, v1.16.3; the
benchmark's k8s/nccl_alltoall_perf.yaml sets them too; NCCL's own defaults, 128 KiB and 4 MiB,
would make it four times), so a fixed cost per message (aws-ofi-nccl's receive control
message, the completion) weighs twice as much on sends. Applied where sends cross the network,
their NVLink legs unchanged. NCCL's tuner does not choose between sends, so nothing is chosen
by it."""

TREE_CORRECTION_FACTOR = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9),
}
"""NCCL's derating of the tree all-reduce's bandwidth by message size, per protocol: entry
log2i(bytes / 64), 64 B to 256 MiB (tuning.cc treeCorrectionFactor, ncclTopoGetAlgoTime, NCCL
2.30.7 and back to 2.4: "Trees are not perfectly sticking to the model for medium sizes";
../shared/validation/network_scale/nccl_tuning_model_defaults.csv, time model). NVIDIA's
measured correction of its own model, so it sets the tree's time here as well as the choice;
none from 512 MiB."""
LL_MAX_BUSBW_GBPS = {"a100": 87.7, "h100": 141.0, "h800": 141.0, "h200": 141.0,
                     "b200": 282.0}
"""NCCL's ceiling on LL's bus bandwidth inside one node, by GPU generation (tuning.cc llMaxBws
Ampere / Hopper / Blackwell N1, NCCL 2.30.7): LL's flag-per-word stores top out there whatever
NVLink offers. Unknown GPUs get Hopper's."""
LL_MAX_BUSBW_NET_GBPS = {"intel": {2: 39.0, 3: 20.4}, "amd": {2: 22.5, 3: 19.0}}
"""...and across nodes, where tuning.cc indexes llMaxBws by the host CPU instead ("for
multi-node, we look at CPU type"): AMD hosts its second row (22.5 GB/s on two nodes, 19.0 on
three or more), every other host its first (39.0 / 20.4; ``topology.host_cpu``). So LL only
wins for small messages across nodes."""


def ll_max_busbw(gpu_name: str | None, nodes: int, host_cpu: str = "intel") -> float:
    """NCCL's LL bus-bandwidth ceiling, bytes/s, for ``nodes`` nodes of ``gpu_name`` on
    ``host_cpu`` hosts."""
    if nodes > 1:
        row = LL_MAX_BUSBW_NET_GBPS["amd" if host_cpu == "amd" else "intel"]
        return row[min(nodes, 3)] * 1e9
    return _by_generation(LL_MAX_BUSBW_GBPS, gpu_name) * 1e9


NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "arm": 1.0}
"""NCCL's network post overhead per step of an inter-node ring, by host CPU (tuning.cc
getNetOverhead, NCCL 2.30.7: 1 us on Intel x86, 2 us on AMD x86, 1 us on any other host;
../shared/validation/network_scale/nccl_tuning_model_defaults.csv): "inter-node rings still
have to launch nsteps * net overhead", so a ring's NVLink step costs at least this, three
times it under Simple (SIMPLE_NET_OVERHEAD_FACTOR)."""
SIMPLE_NET_OVERHEAD_FACTOR = 3
"""...the factor tuning.cc puts on the overhead under Simple."""
RING_PLATEAU_LATENCY_FACTOR = 1.4
"""NCCL's latency multiplier for a ring / Simple all-reduce across nodes on sm_80 and newer
GPUs (1.9 before) whenever each channel moves at least 64 B per rank (tuning.cc
ncclTopoGetAlgoTime: "plateau effect of ring"; the csv above). Every GPU here is sm_80 or
newer."""


NCCL_BUFFSIZE_BYTES = 4 * 2**20
"""NCCL_BUFFSIZE default (Simple protocol): a channel's staging buffer per connection."""
NCCL_STEPS = 8
"""Slots of that buffer (src/include/device.h): the largest chunk is NCCL_BUFFSIZE / NCCL_STEPS."""
NCCL_P2P_SMS = 16
"""SMs NCCL's send / receive kernel (all-to-all) holds while it runs: one thread block per p2p
channel, and NCCL opens 16 on an 8-GPU Hopper NVSwitch node (its init log: "16 coll channels,
0 nvls channels, 16 p2p channels, 16 p2p channels per peer", H800, github.com/NVIDIA/nccl
issue 892; p2pnChannels = pow2Up(nChannels), src/graph/paths.cc)."""
DEEPEP_SMS = 20
"""SMs DeepEP's dispatch / combine kernels hold by default (Megatron-Core's historical
moe_deepep_num_sms; DeepSeek-V3 dedicates 20 of 132 to its all-to-all, arXiv 2412.19437
section 3.2.2)."""
NVLS_CHANNELS = 16
"""NCCL_NVLS_NCHANNELS default on Hopper: NVLS / NVLSTree channels, each with one head per
NIC of the node (so 16 operations in flight per NIC)."""
NVLSTREE_TREES = 2
"""NVLSTree's inter-node part is NCCL's double binary tree (Sanders et al. 2009; NCCL 2.4
"double binary trees"): half the channels run on each tree, and a node is interior in at most
one of them, so one tree step through a NIC carries the chunks of NVLS_CHANNELS / 2 channels."""
NVLSTREE_HOP_OVERHEAD_US = 8.0
"""Per network hop of NVLSTree's pipeline fill, on top of NCCL's tuner latency (20.9 us per hop,
which the tuner uses to choose) and the chunk's transmission: fitted once, with every other
constant fixed, on the points of NVIDIA's GTC24 NVLSTree scan at 32-512 GPUs (28.5 us per hop
in all, +7.6, rounded); held out, the scan's 24 points at 1,024-8,192 GPUs come out at median
|error| 1.9 %, worst 18 % (docs/validation.md). NCCL's own per-step network overhead
(tuning.cc getNetOverhead: 1-2 us x 3 for Simple) is of the same kind."""
NET_PLUGIN_LATENCY_US = {"ib": 0.0, "roce": 0.0, "efa": 75.0}
"""The latency NCCL's network plugin reports for its devices (ncclNetProperties_t.latency),
which NCCL's tuner adds to every network hop of its latency model (tuning.cc: interLat =
hwLat[NET] + the graph's latencyUs), by transport (``topology.transport``; a topology's
``net_latency_us`` overrides it):

- ib, roce 0: NCCL's built-in IB verbs transport (InfiniBand and RoCE) reports none;
- efa 75 us: aws-ofi-nccl's platform table (src/platform-aws.cpp, v1.16.3) for p5.48xlarge and
  p5e (and p4d / p4de); p5en and P6 report 35 (set ``net_latency_us: 35`` for those).

NCCL's tuner adds it a second time to Simple's network hop for the GPU Direct RDMA flush
(tuning.cc: "Also add the flush extra latency"), and so does clustersim (aws-ofi-nccl turns
the flush off on p5, NCCL_NET_FORCE_FLUSH=0, yet NVLSTree's mid-size all-reduces on 256 p5
GPUs read as measured only with it: tests/simulator/test_protocols.py). NCCL's Simple
protocol pays it for real: a step over EFA crosses the plugin's proxy and libfabric send /
completion path. The p5 nccl-tests all-gather of 32 MiB takes 84-89 us per node on 64-256
GPUs: a ring of 8-GPU nodes steps at its mean hop, one network hop (4 + 75 us under LL128)
and seven NVLink hops per eight steps (RING_PIPELINE_P; docs/validation.md)."""


def net_plugin_latency_us(transport: str, override: float | None = None) -> float:
    """NET_PLUGIN_LATENCY_US of ``transport``, or ``override`` (topology.net_latency_us)."""
    return float(override) if override is not None else NET_PLUGIN_LATENCY_US[transport]


COLLNET_ARITY_US = 0.4
"""CollNet Direct's arity serialisation: 0.4 us per further GPU of a node, twice (tuning.cc,
``(nRanks / nNodes - 1) * 0.4``)."""

P2P_LATENCY_US = {"nvlink": 3.4, "network": 14.0}
"""One send/recv: NCCL's Simple-protocol hop latencies above."""
P2P_LL_THRESHOLD_BYTES = 16384
"""NCCL_P2P_LL_THRESHOLD: a send / receive runs LL when its bytes are at most this times its
channels per peer, else Simple; never LL128 (enqueue.cc, addP2pToPlan, NCCL 2.28)."""
P2P_CHANNELS = 16
"""NCCL's p2p channels on an 8-GPU Hopper NVSwitch node (its init log: "16 p2p channels, 16 p2p
channels per peer", NVLink peers asking for 2 per NVLink's worth of bandwidth)."""
P2P_NET_CHANNELS_PER_PEER = 2
"""Channels per network peer before NCCL halves them while 2 x ranks > 4 x p2p channels
(graph/paths.cc, ncclTopoGetNchannels: "start from 2 channels per NIC and reduce with
scale")."""

# ---------------- data-parallel gradients and optimizer ----------------
DP_BUCKET_PARAMS = 40_000_000
"""Megatron-LM DDP bucket size: max(40M, 1M x dp) parameters (distributed/param_and_grad_buffer)."""
OPTIMIZER_BYTES_PER_PARAM = {"adam": 30, "sgd": 22, "lamb": 50, "lars": 30}
"""Optimizer-step HBM traffic per locally owned parameter (fp32 gradient, fp32 master weight,
fp32 state, a bf16 weight copy written back), one fused pass unless said:

- adam: read grad, master, m, v (16 B), write master, m, v (12 B), write the bf16 copy (2 B);
- sgd (with momentum): read grad, master, momentum (12 B), write master, momentum (8 B), bf16
  copy (2 B);
- lamb (You et al. 2020, arXiv 1904.00962, Algorithm 2; two passes as fused implementations
  run it): Adam's moments and the update written out (28 B), the per-tensor norms of weight and
  update (8 B read), then the trust-ratio step reads update and master and writes master and
  the bf16 copy (14 B);
- lars (You et al. 2017, arXiv 1708.03888): the per-tensor norms of weight and gradient (8 B
  read), then momentum SGD with the trust ratio (22 B)."""

# ---------------- data loading ----------------
BATCH_BYTES_PER_TOKEN = 28
"""Megatron-LM GPT ``get_batch`` tensors per token: int64 tokens, labels and position ids
(3 x 8 B) and a float32 loss mask (4 B); rank 0 of the TP group copies them to the GPU and
broadcasts them (``broadcast_data``) on the first and last pipeline stages."""

DATA_CPU_MS_PER_SAMPLE = 0.1
"""CPU time for a loader worker to assemble one pre-tokenized sample (``data.cpu_ms_per_sample``
default): Megatron-LM's GPTDataset indexes its shuffled sample table, slices the documents the
sample spans out of the memory-mapped .bin file, concatenates them and collates the batch (no
attention mask built on the CPU). An order-of-magnitude estimate of that Python and numpy work,
not a measurement: it keeps a text loader far from the step's critical path, as published runs
show; set the field to a loader's measured time (on-the-fly tokenisation, images) to ask when it
is not."""
DATA_STORAGE_GBYTE_PER_S = 50.0
"""Per-node storage read rate (``data.storage_gbyte_per_s`` default): the two 200 Gb/s
storage / in-band ConnectX ports of a DGX A100 or DGX H100 (NVIDIA DGX user guides), i.e. the
node's storage link; a shared file system delivers less per node under load (set the field to
its measured per-node read rate)."""
