"""Simulated nccl-tests against published busbw scans (../shared/validation/network_scale).

- GTC24 (NVIDIA S62129 slide 35): all-reduce busbw on DGX H100, 32-8,192 GPUs, 16 MiB-16 GiB,
  run on the ``dgx-h100-rail`` preset (8 x 400G NDR per node, rail-optimized) with NCCL's
  NVLSTree forced, as the published scan was (NVLink SHARP inside the node, a tree across).
- AWS p5 (crazyguitar/aws-gpu-communication-benchmark): all-reduce, all-gather and alltoall on
  8 x H100 with 32 x 100G EFA per node, 16-256 GPUs, on a spine-leaf of 400 Gb/s per GPU with
  spraying (EFA's SRD spreads every message over many paths).

Every row: published and simulated busbw and the error (simulated / published - 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator.network.nccl_tests import nccl_tests

GTC24_ALGORITHM = "nvlstree"
"""The scan forced NCCL_ALGO=NVLSTree; the simulation forces it too."""
GTC24_TOPOLOGY = "dgx-h100-rail"
"""The fabric of NVIDIA's scan: DGX H100 SuperPOD, 8 x 400G NDR per node, rail-optimized."""
AWS_P5_TOPOLOGY = "{kind: spine-leaf, nic_gbps: 400}"
"""32 x 100G EFA per node as 400 Gb/s per GPU (4 EFA interfaces each, sprayed by SRD)."""


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
    return out.assign(error=out.simulated / out.published - 1)


def aws_p5_table(validation_dir: str | Path, max_gpus: int | None = None) -> pd.DataFrame:
    """AWS p5 all-reduce / all-gather / alltoall busbw (out of place), every point (up to
    ``max_gpus``)."""
    pub = pd.read_csv(Path(validation_dir) / "network_scale" / "aws_p5_efa_nccl_tests.csv")
    if max_gpus is not None:
        pub = pub[pub.gpus <= max_gpus]
    rows = []
    for (op, gpus), part in pub.groupby(["collective", "gpus"]):
        sim = _scan(op, int(gpus), part.size_bytes.to_numpy(),  # nccl-tests names, as published
                    topology=AWS_P5_TOPOLOGY, routing="spray")
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
