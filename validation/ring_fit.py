"""Fit of the pipelined ring (calibration.RING_PIPELINE_P, LL128_NET_FRACTION) on the ring
points of AWS p5's nccl-tests (../shared/validation/network_scale/aws_p5_efa_nccl_tests.csv),
in sample and leaving each collective out.

The ring points are those NCCL runs as a ring on the ``aws-p5`` preset (its own cost model, or
aws-ofi-nccl's region tuner for the all-reduce on 3+ nodes): all-gathers and all-reduces on 2-32
nodes. On that non-blocking, sprayed fabric a ring's bandwidth time is the alpha-beta one, so
each point is the alpha-beta model's choice and bytes, run through
:func:`simulator.network.alpha_beta.ring_run_s` with the candidate constants.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator.calibration import LL128_NET_FRACTION, RING_PIPELINE_P
from simulator.config.topology import topology_spec
from simulator.network.alpha_beta import BUSBW_FACTOR, AlphaBeta, ll_floor_s, ring_run_s
from simulator.step.groups import Group
from topologies.gpus import load_gpu
from validation.collectives import AWS_P5_TOPOLOGY

P_GRID = np.round(np.arange(1.0, 4.0001, 0.05), 2)
"""Candidate exponents: 1 (NCCL's sum) to 4 (nearly the max of latency and transfer)."""
FRACTION_GRID = np.round(np.arange(0.70, 0.9376, 0.005), 3)
"""Candidate LL128 rates: 0.70 to the wire format's 120 / 128."""
GPUS_PER_NODE = 8
"""GPUs per p5.48xlarge node, as the table's runs used them (8 ranks a node)."""


def p5_alpha_beta() -> AlphaBeta:
    """The alpha-beta model of the ``aws-p5`` preset's H100 nodes."""
    return AlphaBeta.for_cluster(load_gpu("h100-sxm"), topology_spec(AWS_P5_TOPOLOGY),
                                 GPUS_PER_NODE)


def ring_points(validation_dir: str | Path) -> pd.DataFrame:
    """Every all-gather / all-reduce point of the p5 table that runs as a ring: collective,
    gpus, bytes, protocol, published busbw (GB/s) and what ring_run_s needs."""
    pub = pd.read_csv(Path(validation_dir) / "network_scale" / "aws_p5_efa_nccl_tests.csv")
    ab = p5_alpha_beta()
    rows = []
    for r in pub[pub.collective.isin(("all_gather", "all_reduce"))].itertuples():
        g = Group(size=int(r.gpus), per_node=GPUS_PER_NODE)
        algo, proto = ab.choice(r.collective, g, float(r.size_bytes))
        if algo != "ring":
            continue
        factor = BUSBW_FACTOR[r.collective](g.size)
        rows.append({"collective": r.collective, "gpus": int(r.gpus),
                     "bytes": int(r.size_bytes), "protocol": proto,
                     "published": float(r.busbw_outofplace_GBps),
                     "bandwidth_s": r.size_bytes * factor / ab.busbw(g),
                     "ll_floor": ll_floor_s("ring", r.collective, g, r.size_bytes,
                                            ab.gpu_name, ab.host_cpu),
                     "factor": factor})
    return pd.DataFrame(rows)


def errors(points: pd.DataFrame, p: float, fraction: float) -> np.ndarray:
    """Simulated / published busbw - 1 of every point under the candidate constants."""
    ab = p5_alpha_beta()
    out = np.empty(len(points))
    for i, r in enumerate(points.itertuples()):
        t = ring_run_s(r.protocol, r.collective, Group(size=r.gpus, per_node=GPUS_PER_NODE),
                       r.bandwidth_s, net_us=ab.net_latency_us, host_cpu=ab.host_cpu,
                       transport=ab.transport, ll_floor=r.ll_floor, p=p,
                       ll128_fraction=fraction)
        out[i] = r.bytes * r.factor / t / 1e9 / r.published - 1
    return out


def fit(points: pd.DataFrame) -> tuple[float, float]:
    """(p, LL128 fraction) of the grids with the least mean |error| over ``points``."""
    best = min(((float(np.abs(errors(points, p, f)).mean()), p, f)
                for p in P_GRID for f in FRACTION_GRID))
    return best[1], best[2]


def summary(validation_dir: str | Path) -> dict:
    """The fit on every ring point, its in-sample error, each collective held out (fitted on
    the other), and the error with latency and transfer added (p = 1) and LL128 at its wire
    format's 120 / 128."""
    pts = ring_points(validation_dir)
    p, f = fit(pts)
    err = errors(pts, p, f)
    held = {}
    for coll in ("all_gather", "all_reduce"):
        train, test = pts[pts.collective != coll], pts[pts.collective == coll]
        ph, fh = fit(train)
        e = errors(test, ph, fh)
        held[coll] = {"p": ph, "fraction": fh, "points": len(test),
                      "median": float(np.median(np.abs(e))), "worst": float(np.abs(e).max())}
    additive = errors(pts, 1.0, 120 / 128)
    return {"p": p, "fraction": f, "points": len(pts), "today": (RING_PIPELINE_P,
                                                                  LL128_NET_FRACTION["efa"]),
            "median": float(np.median(np.abs(err))), "worst": float(np.abs(err).max()),
            "held_out": held,
            "additive_median": float(np.median(np.abs(additive))),
            "additive_worst": float(np.abs(additive).max()),
            "table": pts.drop(columns=["bandwidth_s", "ll_floor", "factor"]).assign(
                error=err)}
