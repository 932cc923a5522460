"""Fit of the rate NCCL's sends reach across nodes on EFA (calibration.P2P_NET_FRACTION) on the
all-to-all points of AWS p5's nccl-tests (../shared/validation/network_scale/
aws_p5_efa_nccl_tests.csv), in sample and leaving each GPU count out.

As for the rings and trees (:mod:`validation.ring_fit`, :mod:`validation.tree_fit`), the
``aws-p5`` fabric is non-blocking and sprayed, so each point's time is the alpha-beta one
(:func:`simulator.network.alpha_beta.all_to_all_s`), with the candidate rate and every other
constant as it is.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator.calibration import NET_BUSBW_EFFICIENCY, P2P_NET_FRACTION
from simulator.network.alpha_beta import all_to_all_s
from simulator.step.groups import Group
from validation import grid_fit
from validation.ring_fit import GPUS_PER_NODE, p5_alpha_beta

FRACTION_GRID = np.round(np.arange(0.70, 0.9601, 0.005), 3)
"""Candidate rates of a send across nodes, as a fraction of the NIC's line rate."""


def a2a_points(validation_dir: str | Path) -> pd.DataFrame:
    """Every all-to-all point of the p5 table: gpus, nodes, bytes, published busbw (GB/s)."""
    pub = pd.read_csv(Path(validation_dir) / "network_scale" / "aws_p5_efa_nccl_tests.csv")
    a = pub[pub.collective == "alltoall"]
    return pd.DataFrame({"gpus": a.gpus.astype(int).to_numpy(),
                         "nodes": (a.gpus // GPUS_PER_NODE).astype(int).to_numpy(),
                         "bytes": a.size_bytes.astype(int).to_numpy(),
                         "published": a.busbw_outofplace_GBps.astype(float).to_numpy()})


def errors(points: pd.DataFrame, fraction: float) -> np.ndarray:
    """Simulated / published busbw - 1 of every point with sends at ``fraction`` of line rate."""
    ab = p5_alpha_beta()
    out = np.empty(len(points))
    for i, r in enumerate(points.itertuples()):
        g = Group(size=r.gpus, per_node=GPUS_PER_NODE)
        t = all_to_all_s(g, r.bytes, ab.nvlink_rate, ab.net_bytes_per_s, ab.gpu_name,
                         ab.net_latency_us, ab.transport, p2p_fraction=fraction)
        out[i] = r.bytes * (r.gpus - 1) / r.gpus / t / 1e9 / r.published - 1
    return out


def fit(points: pd.DataFrame) -> float:
    """The rate of the grid with the least mean |error| over ``points``."""
    return grid_fit.fit(points, errors, FRACTION_GRID)


def summary(validation_dir: str | Path) -> dict:
    """The fit on every all-to-all point, its in-sample error, each GPU count held out (fitted
    on the others), and the error with the sends at a ring's rate (NET_BUSBW_EFFICIENCY)."""
    pts = a2a_points(validation_dir)
    f = fit(pts)
    err = errors(pts, f)
    held = grid_fit.held_out(pts, "gpus", errors, FRACTION_GRID)
    ring = errors(pts, NET_BUSBW_EFFICIENCY["efa"])
    return {"fraction": f, "points": len(pts), "today": P2P_NET_FRACTION["efa"],
            **grid_fit.abs_stats(err),
            "held_out": held, **grid_fit.abs_stats(ring, "ring_"),
            "table": pts.assign(error=err)}
