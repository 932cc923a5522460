"""Simulated nccl-tests against published busbw scans (../shared/validation/network_scale).

- GTC24 (NVIDIA S62129 slide 35): all-reduce busbw on DGX H100, 32-8,192 GPUs, 16 MiB-16 GiB,
  run on the ``dgx-h100-rail`` preset (8 x 400G NDR per node, rail-optimized) with NCCL's
  NVLSTree forced, as the published scan was (NVLink SHARP inside the node, a tree across).
- AWS p5 (crazyguitar/aws-gpu-communication-benchmark): all-reduce, all-gather and alltoall on
  8 x H100 with 32 x 100G EFA per node, 16-256 GPUs, on the ``aws-p5`` preset (a spine-leaf of
  400 Gb/s per GPU, transport efa: SRD sprays every message over many paths, and NCCL adds
  aws-ofi-nccl's reported latency to every network hop).

Every row: published and simulated busbw and the error (simulated / published - 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.calibration import NCCL_CHANNELS_PER_NIC
from simulator.network.nccl_tests import nccl_tests
from topologies.spec import topology_mapping
from workloads.units import GIB

GTC24_ALGORITHM = "nvlstree"
"""The scan forced NCCL_ALGO=NVLSTree; the simulation forces it too."""
GTC24_TOPOLOGY = "dgx-h100-rail"
"""The fabric of NVIDIA's scan: DGX H100 SuperPOD, 8 x 400G NDR per node, rail-optimized."""
AWS_P5_TOPOLOGY = "aws-p5"
"""The p5 preset: 32 x 100G EFA per node as 400 Gb/s per GPU (4 EFA interfaces each, sprayed by
SRD), transport efa (aws-ofi-nccl's 75 us per network hop)."""


def _scan(op: str, gpus: int, sizes: np.ndarray, **kw) -> pd.DataFrame:
    """nccl-tests of ``op`` on ``gpus`` over the sizes (powers of two apart), by size."""
    lo, hi = int(sizes.min()), int(sizes.max())
    df = nccl_tests(op, gpus=gpus, gpu="h100-sxm", min_bytes=lo, max_bytes=hi, factor=2, **kw)
    return df.set_index("bytes")


def gtc24_table(validation_dir: str | Path, gpus: tuple[int, ...] | None = None
                ) -> pd.DataFrame:
    """NVIDIA's all-reduce scan, every point (gpus, bytes, published, simulated, error), or
    those of the given GPU counts."""
    pub = pd.read_csv(Path(validation_dir) / "network_scale" /
                      "nccl_allreduce_scaling_gtc24.csv")
    if gpus is not None:
        pub = pub[pub.gpus.isin(gpus)]
    rows = []
    for gpus, part in pub.groupby("gpus"):
        sim = _scan("all_reduce", int(gpus), part.size_bytes.to_numpy(),
                    topology=GTC24_TOPOLOGY, algorithm=GTC24_ALGORITHM)
        for r in part.itertuples():
            got = sim.loc[r.size_bytes]
            rows.append({"gpus": int(gpus), "bytes": int(r.size_bytes),
                         "published": float(r.busbw_GBps_approx),
                         "simulated": float(got.busbw_gbyte_per_s),
                         "algorithm": got.algorithm})
    out = pd.DataFrame(rows)
    unc = pub.set_index(["gpus", "size_bytes"]).read_uncertainty_GBps.astype(str) \
        .str.replace("+-", "", regex=False).astype(float)
    out["uncertainty"] = [unc[(g, b)] for g, b in zip(out.gpus, out.bytes)]
    lo, hi = out.published - out.uncertainty, out.published + out.uncertainty
    band = np.where(out.simulated > hi, out.simulated / hi - 1,
                    np.where(out.simulated < lo, out.simulated / lo - 1, 0.0))
    return out.assign(error=out.simulated / out.published - 1, band_error=band)


def aws_p5_table(validation_dir: str | Path, max_gpus: int | None = None, *,
                 collectives: tuple[str, ...] | None = None,
                 gpus: tuple[int, ...] | None = None,
                 max_bytes: int | None = None) -> pd.DataFrame:
    """AWS p5 all-reduce / all-gather / alltoall busbw (out of place), every point, or those up
    to ``max_gpus`` / of the given ``collectives`` and ``gpus`` / up to ``max_bytes``."""
    pub = pd.read_csv(Path(validation_dir) / "network_scale" / "aws_p5_efa_nccl_tests.csv")
    if max_gpus is not None:
        pub = pub[pub.gpus <= max_gpus]
    if collectives is not None:
        pub = pub[pub.collective.isin(collectives)]
    if gpus is not None:
        pub = pub[pub.gpus.isin(gpus)]
    if max_bytes is not None:
        pub = pub[pub.size_bytes <= max_bytes]
    rows = []
    for (op, gpus), part in pub.groupby(["collective", "gpus"]):
        sim = _scan(op, int(gpus), part.size_bytes.to_numpy(),  # nccl-tests names, as published
                    topology=AWS_P5_TOPOLOGY)
        for r in part.itertuples():
            got = sim.loc[r.size_bytes]
            rows.append({"collective": op, "gpus": int(gpus), "bytes": int(r.size_bytes),
                         "published": float(r.busbw_outofplace_GBps),
                         "simulated": float(got.busbw_gbyte_per_s),
                         "algorithm": got.algorithm})
    out = pd.DataFrame(rows)
    return out.assign(error=out.simulated / out.published - 1)


def summary(table: pd.DataFrame) -> dict:
    err = table.error.abs()
    return {"points": len(table), "median_abs_error": float(err.median()),
            "worst_abs_error": float(err.max())}


ROCE_400G = "{kind: spine-leaf, nic_gbps: 400, transport: roce}"
"""8 x 400G RoCE nodes on a non-blocking spine-leaf (the reports state no more)."""
DGX_H100 = {"gpu": "h100-sxm", "topology": "dgx-h100-rail"}
"""DGX H100 nodes on NVIDIA's rail-optimized NDR InfiniBand fabric (the vendor bars)."""
DGX_H100_SHARP = {"gpu": "h100-sxm",
                  "topology": json.dumps({**topology_mapping("dgx-h100-rail"), "sharp": True})}
"""The same fabric with SHARP in its switches (NCCL's CollNet: NVLS across nodes)."""
H100_ROCE = {"gpu": "h100-sxm", "topology": ROCE_400G, "channels_per_nic": NCCL_CHANNELS_PER_NIC}
"""The RoCE reports ran NCCL's own channel count (two per NIC), not clustersim's default."""
A100_ROCE_100G = {"gpu": "a100-80gb", "topology": "{kind: spine-leaf, nic_gbps: 100}",
                  "channels_per_nic": NCCL_CHANNELS_PER_NIC}
"""8 x 100G RoCE A100 nodes (nccl-tests#169) on a non-blocking spine-leaf, NCCL's channels."""


def _one_nic(gbps: int, gpu: str) -> dict:
    """Two nodes of one GPU and one InfiniBand NIC each (the maintainers' per-NIC figures)."""
    return {"gpu": gpu, "topology": f"{{kind: spine-leaf, nic_gbps: {gbps}, transport: ib}}",
            "gpus_per_node": 1}


REPORTED_CASES = (
    # (what the report ran, its source in nccl_busbw_reported_points.csv, collective, GPUs,
    #  simulated with: nccl_tests keyword arguments; bytes where the report states none: 8 GiB,
    #  where nccl-tests' busbw has plateaued)
    ("DGX H100, 8 x 400G (GTC24 bar)", "GTC24 S62129 slide 12 (", "all_reduce", 32, DGX_H100),
    ("DGX H100, 8 x 400G IB + SHARP (GTC24 bar)", "GTC24 S62129 slide 12", "all_reduce", 32,
     DGX_H100_SHARP),
    ("DGX H100, 8 x 400G (GTC25 bar)", "GTC25 S72583 slide 12", "all_reduce", 32, DGX_H100),
    ("DGX A100, 8 x 200G IB", "nccl/issues/812", "all_reduce", 32,
     {"gpu": "a100-80gb", "topology": "selene-a100"}),
    ("Voltage Park H100, 3.2 Tb/s IB, 8 GiB", "vpbenchmarking", "all_reduce", 32, DGX_H100),
    ("DGX H100 alltoall (GTC25 bar)", "GTC25 S72583 slide 13", "alltoall", 32, DGX_H100),
    ("1,984 H200, 8 HCAs, IB, 512 MB", "nccl-tests/issues/283", "all_reduce", 1984,
     {**DGX_H100, "gpu": "h200"}),
    ("256 H100 RoCE, 1 QP, 16 channels, 2 GiB", "nccl/issues/1218", "all_gather", 256,
     H100_ROCE),
    ("256 H100 RoCE, 1 QP, 16 channels, 2 GiB (attribution inferred)", "nccl/issues/1218",
     "all_reduce", 256, H100_ROCE),
    ("32 H100, 8 x 400G RoCE, 4 GiB", "nccl/issues/1221", "all_reduce", 32, H100_ROCE),
    ("64 H100, 8 x 400G CX-7 RoCE", "uccl/issues/205", "all_reduce", 64, H100_ROCE),
    *((f"A100, 8 x 100G RoCE, {n} nodes", "nccl-tests/issues/169", "all_reduce", 8 * n,
       A100_ROCE_100G) for n in (2, 3, 5, 6)),
    ("one 400G NDR NIC per node, 2 nodes", "nccl-tests/issues/267", "sendrecv", 2,
     _one_nic(400, "h100-sxm")),
    ("one 200G HDR NIC per node, 2 nodes", "nccl-tests/issues/119", "sendrecv", 2,
     _one_nic(200, "a100-80gb")),
    ("8 H100 in one node, ring over NVLink", "nccl/issues/2140", "all_reduce", 8,
     {"gpu": "h100-sxm", "algorithm": "ring"}),
)
"""The reported points of ../shared/validation/network_scale/nccl_busbw_reported_points.csv that
clustersim can express, each with the fabric it ran on (a SHARP bar with ``sharp: true``).
Left out: CollNet on DGX A100 (sharp_nvls.csv: a maintainer's estimate, not a measurement),
NVLS (sharp_nvls.csv: its fitting point and held-out checks are in
tests/simulator/test_nvls_tuner.py; GB200 NVL72's ring and NVLS bars are an effect of
:data:`EFFECTS`), dual-port 2 x 200G NICs (nccl#1031), B300 (no preset: its 8-GPU figures set
NVLink 5's efficiencies), a 32-GPU run whose fabric is not stated (nccl-tests#309)."""
REPORT_DEFAULT_BYTES = 8 * GIB
"""Bytes simulated where a report states no message size: 8 GiB, where nccl-tests' busbw has
plateaued (the vendor bars and user reports quote the plateau)."""


def reported_table(validation_dir: str | Path) -> pd.DataFrame:
    """Every case of :data:`REPORTED_CASES`: case, source, collective, gpus, bytes, published,
    simulated busbw (GB/s), algorithm, error."""
    pub = pd.read_csv(Path(validation_dir) / "network_scale" / "nccl_busbw_reported_points.csv")
    rows = []
    for case, source, op, gpus, kw in REPORTED_CASES:
        match = pub[pub.source.str.contains(source, regex=False)]
        if op != "sendrecv":          # the per-NIC rows name no collective of their own
            match = match[(match.gpus == gpus) & (match.collective == op)]
        match = match[[kw["gpu"].upper().startswith(g) for g in match.gpu]]
        match = match[match.fabric.str.contains("SHARP") == ('"sharp": true' in
                                                             str(kw.get("topology")))]
        if len(match) != 1:
            raise ValueError(f"{case}: {len(match)} rows of the reported points match")
        r = match.iloc[0]
        size = int(r.size_bytes) if pd.notna(r.size_bytes) else REPORT_DEFAULT_BYTES
        got = nccl_tests(op, gpus=gpus, min_bytes=size, max_bytes=size, **kw).iloc[0]
        rows.append({"case": case, "source": r.source.split(";")[0].strip(), "collective": op,
                     "gpus": gpus, "bytes": size, "published": float(r.busbw_GBps),
                     "simulated": float(got.busbw_gbyte_per_s), "algorithm": got.algorithm})
    out = pd.DataFrame(rows)
    return out.assign(error=out.simulated / out.published - 1)


_ROCE_48 = "{kind: spine-leaf, nic_gbps: 400, hosts_per_leaf: 24}"
"""Six 8-GPU nodes on two 400G RoCE racks, one leaf each, 1:1 to the spines (UCCL's testbed)."""
ECMP_RING = {"gpu": "h100-sxm", "topology": "{kind: spine-leaf, nic_gbps: 400}",
             "algorithm": "ring", "channels_per_nic": NCCL_CHANNELS_PER_NIC}
"""A ring all-reduce of 256 H100 on a 400G RoCE spine-leaf with NCCL's two channels per NIC:
the setting of the ECMP and queue-pair effect sizes (their reports state 400G RoCE, or 100G
links, and no more)."""

NVLS_SCAN_RING_GBPS = 370
"""The ring's one-node all-reduce busbw on H100 that the NVLS reports compare against
(nccl#2140, nccl#1455: 365-370 GB/s with NVLS off or on 2-4 GPUs)."""
NVLS_SCAN = ((5, 420, "nccl#1455"), (6, 440, "nccl#1455"), (7, 460, "nccl#1455"),
             (8, 480, "nccl#2140"))
"""(GPUs in one node, NVLS all-reduce busbw GB/s, source) of sharp_nvls.csv."""

EFFECTS = (
    # (effect, as published, (low, high), source, (collective, GPUs, bytes, baseline and
    #  variant nccl_tests arguments), kind: gain or ratio)
    *((f"NVLS vs ring inside one node, {k} H100",
       f"+{(m / NVLS_SCAN_RING_GBPS - 1) * 100:.0f} % ({NVLS_SCAN_RING_GBPS} -> {m} GB/s)",
       (m / NVLS_SCAN_RING_GBPS - 1,) * 2, src,
       ("all_reduce", k, 4 * GIB, {"gpu": "h100-sxm", "algorithm": "ring"},
        {"gpu": "h100-sxm"}), "gain") for k, m, src in NVLS_SCAN),
    ("NVLS vs ring inside one NVLink domain, 32 GB200 (NVL72)", "+25 % (680 -> 850 GB/s)",
     (850 / 680 - 1,) * 2, "GTC25 S72583 slide 12",
     ("all_reduce", 32, 8 * GIB, {"topology": "gb200-nvl72", "algorithm": "ring"},
      {"topology": "gb200-nvl72"}), "gain"),
    ("NVLS on, 2 nodes of 8 H100, 8 x 400G RoCE", "+30 % (330 -> 430 GB/s)", (0.30, 0.30),
     "nccl#1221", ("all_reduce", 16, 4 * GIB, {**H100_ROCE, "algorithm": "ring"}, H100_ROCE),
     "gain"),
    ("NVLS on, 4 nodes of 8 H100, 8 x 400G RoCE", "none (320 both)", (0.0, 0.0), "nccl#1221",
     ("all_reduce", 32, 4 * GIB, {**H100_ROCE, "algorithm": "ring"}, H100_ROCE), "gain"),
    ("IB SHARP, 4 DGX H100 (8 x 400G)", "+26-30 % (370-380 -> 480 GB/s)", (0.26, 0.30),
     "GTC24 S62129 / GTC25 S72583 slide 12",
     ("all_reduce", 32, 8 * GIB, DGX_H100, DGX_H100_SHARP), "gain"),
    ("ECMP collisions: busbw under 5-tuple ECMP over spraying, 1 QP",
     "~0.7 of line (Baidu, 100G); ~1/2 untuned (OCI)", (0.5, 0.7),
     "ecmp_lb_adaptive_routing.csv (Baidu AIPod; OCI cluster-readiness-engine#287)",
     ("all_reduce", 256, GIB, {**ECMP_RING, "routing": "spray"}, ECMP_RING), "ratio"),
    ("Queue-pair scaling under ECMP, 1 -> 8 QPs per connection",
     "up to +40 % (Meta); ~+10 % (Baidu); +70 % (OCI)", (0.10, 0.70),
     "ecmp_lb_adaptive_routing.csv (Meta 2024; Baidu AIPod; OCI)",
     ("all_reduce", 256, GIB, ECMP_RING, {**ECMP_RING, "queue_pairs": 8}), "gain"),
    ("Spraying vs one path per connection, 48 H100 on two 400G RoCE racks",
     "up to 2.5x all-reduce (UCCL)", (1.0, 2.5), "uccl README, arXiv 2504.17307",
     ("all_reduce", 48, GIB,
      {"gpu": "h100-sxm", "topology": _ROCE_48, "channels_per_nic": NCCL_CHANNELS_PER_NIC},
      {"gpu": "h100-sxm", "topology": _ROCE_48, "channels_per_nic": NCCL_CHANNELS_PER_NIC,
       "routing": "spray"}), "ratio"),
)
"""The published effect sizes of ../shared/validation/network_scale (sharp_nvls.csv,
ecmp_lb_adaptive_routing.csv) that clustersim can express: (effect, as published, its range
(low, high) as a gain (variant / baseline - 1) or a ratio (variant / baseline), source, the
simulated pair (collective, GPUs, bytes, baseline and variant nccl_tests arguments), kind).
Left out: B300 (no preset; its 8-GPU figures set NVLink 5's efficiencies), CollNet on DGX
A100 (a maintainer's estimate),
Alibaba's dual-plane HPN and C4, Crux's inter-job contention, Spectrum-X and Dragonfly+
(fabrics or jobs clustersim does not build), UCCL's all-to-all on p4d (EFA already sprays)."""


def effect_table() -> pd.DataFrame:
    """Every effect of :data:`EFFECTS`: effect, published (text), low, high, simulated (gain or
    ratio, as the row's kind), baseline and variant busbw (GB/s) and their algorithms, and
    ``outside``: how far the simulated effect lies outside [low, high] (0 inside; a point
    published as one value has low == high)."""
    rows = []
    for effect, text, (lo, hi), source, (op, gpus, size, base, var), kind in EFFECTS:
        got = [nccl_tests(op, gpus=gpus, min_bytes=size, max_bytes=size, **kw).iloc[0]
               for kw in (base, var)]
        b, v = (float(g.busbw_gbyte_per_s) for g in got)
        sim = v / b - (1.0 if kind == "gain" else 0.0)
        rows.append({"effect": effect, "published": text, "low": lo, "high": hi,
                     "kind": kind, "simulated": sim, "baseline_busbw": b, "variant_busbw": v,
                     "algorithms": f"{got[0].algorithm} -> {got[1].algorithm}",
                     "source": source,
                     "outside": max(lo - sim, sim - hi, 0.0)})
    return pd.DataFrame(rows)
