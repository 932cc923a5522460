"""Fit of the tree all-reduce's LL128 rate across nodes on EFA
(calibration.TREE_LL128_NET_FRACTION) on the tree points of AWS p5's nccl-tests
(../shared/validation/network_scale/aws_p5_efa_nccl_tests.csv), in sample and leaving each
node count out.

The tree points are the all-reduces NCCL runs as a tree on the ``aws-p5`` preset: aws-ofi-nccl's
region tuner picks Tree / LL128 for 32-256 MiB on 4-32 nodes. As for the rings
(:mod:`validation.ring_fit`), the fabric is non-blocking and sprayed, so each point's bandwidth
time is the alpha-beta one, run through :func:`simulator.network.alpha_beta.tree_run_s` with
the candidate rate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator.calibration import TREE_BUSBW_RATIO, TREE_LL128_NET_FRACTION
from simulator.network.alpha_beta import tree_run_s
from simulator.step.groups import Group
from validation import grid_fit
from validation.ring_fit import GPUS_PER_NODE, p5_alpha_beta

FRACTION_GRID = np.round(np.arange(0.30, 0.9376, 0.005), 3)
"""Candidate LL128 rates of a tree across nodes: 0.30 to the wire format's 120 / 128."""


def tree_points(validation_dir: str | Path) -> pd.DataFrame:
    """Every all-reduce point of the p5 table that runs as a tree: gpus, nodes, bytes,
    protocol, published busbw (GB/s) and what tree_run_s needs."""
    pub = pd.read_csv(Path(validation_dir) / "network_scale" / "aws_p5_efa_nccl_tests.csv")
    ab = p5_alpha_beta()
    rows = []
    for r in pub[pub.collective == "all_reduce"].itertuples():
        g = Group(size=int(r.gpus), per_node=GPUS_PER_NODE)
        algo, proto = ab.choice("all_reduce", g, float(r.size_bytes))
        if algo != "tree":
            continue
        rows.append({"gpus": int(r.gpus), "nodes": g.nodes, "bytes": int(r.size_bytes),
                     "protocol": proto, "published": float(r.busbw_outofplace_GBps),
                     "bandwidth_s": r.size_bytes / (ab.busbw(g) * TREE_BUSBW_RATIO),
                     "factor": 2 * (g.size - 1) / g.size})
    return pd.DataFrame(rows)


def errors(points: pd.DataFrame, fraction: float) -> np.ndarray:
    """Simulated / published busbw - 1 of every point with LL128 at ``fraction``."""
    ab = p5_alpha_beta()
    out = np.empty(len(points))
    for i, r in enumerate(points.itertuples()):
        t = tree_run_s(r.protocol, Group(size=r.gpus, per_node=GPUS_PER_NODE), r.bytes,
                       r.bandwidth_s, net_us=ab.net_latency_us, host_cpu=ab.host_cpu,
                       transport=ab.transport, ll128_fraction=fraction)
        out[i] = r.bytes * r.factor / t / 1e9 / r.published - 1
    return out


def fit(points: pd.DataFrame) -> float:
    """The LL128 rate of the grid with the least mean |error| over ``points``."""
    return grid_fit.fit(points, errors, FRACTION_GRID)


def summary(validation_dir: str | Path) -> dict:
    """The fit on every tree point, its in-sample error, each node count held out (fitted on
    the others), and the error at the wire format's 120 / 128 (NCCL's own model)."""
    pts = tree_points(validation_dir)
    f = fit(pts)
    err = errors(pts, f)
    held = grid_fit.held_out(pts, "nodes", errors, FRACTION_GRID)
    wire = errors(pts, 120 / 128)
    return {"fraction": f, "points": len(pts), "today": TREE_LL128_NET_FRACTION["efa"],
            **grid_fit.abs_stats(err),
            "held_out": held, **grid_fit.abs_stats(wire, "wire_"),
            "table": pts.drop(columns=["bandwidth_s", "factor"]).assign(error=err)}
