"""The GEMM tile model (simulator.step.compute.gemm_time_s) against measured cuBLAS throughput
by shape: validation/kernels/xla_matmul_sm90_bf16.csv (its README).

:func:`fit` finds the mainloop's fraction of peak, the tile fill (GEMM_TILE_FILL_K), the
kernel's fixed time (GEMM_FIXED_S) and the operand stream's fraction of HBM bandwidth that
minimise the mean |log(predicted / measured time)| (coordinate descent). Only the fill and the
fixed time are kernel facts the step model keeps; in a training step the two fractions are the
GPU family's calibrated gemm_efficiency and memory_efficiency.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from simulator import calibration
from simulator.step import compute
from topologies.gpus import load_gpu

TABLE = Path(__file__).resolve().parent / "kernels" / "xla_matmul_sm90_bf16.csv"
NAMES = ("gemm_efficiency", "fill_k", "fixed_s", "memory_efficiency")


def load_table(path: str | Path = TABLE) -> pd.DataFrame:
    """batch, m, n, k, bf16_tflops and the measured kernel time ``time_s``."""
    t = pd.read_csv(path)
    t["time_s"] = 2.0 * t.batch * t.m * t.n * t.k / (t.bf16_tflops * 1e12)
    return t


def log_errors(table: pd.DataFrame, consts: dict | None = None) -> np.ndarray:
    """log(predicted / measured) time per shape on an H100 SXM; ``consts`` (keys
    :data:`NAMES`) default to today's GEMM_TILE_FILL_K / GEMM_FIXED_S and Hopper's
    calibration."""
    c = dict(consts or {})
    cal = replace(calibration.HOPPER,
                  gemm_efficiency=c.get("gemm_efficiency", calibration.HOPPER.gemm_efficiency),
                  memory_efficiency=c.get("memory_efficiency",
                                          calibration.HOPPER.memory_efficiency))
    dev = compute.Device.of(load_gpu("h100-sxm"), cal)
    saved = compute.GEMM_TILE_FILL_K, compute.GEMM_FIXED_S
    compute.GEMM_TILE_FILL_K = c.get("fill_k", saved[0])
    compute.GEMM_FIXED_S = c.get("fixed_s", saved[1])
    try:
        predicted = np.array([compute.gemm_time_s(dev, r.m, r.n, r.k, batch=r.batch)
                              for r in table.itertuples()])
    finally:
        compute.GEMM_TILE_FILL_K, compute.GEMM_FIXED_S = saved
    return np.log(predicted / table.time_s.to_numpy())


def fit(table: pd.DataFrame) -> tuple[dict, float]:
    """(constants, mean |log error|) of the best fit over ``table``'s shapes."""
    p = np.array([0.85, 128.0, 5e-6, 0.9])
    step = np.array([0.04, 32.0, 1e-6, 0.05])

    def loss(q) -> float:
        if min(q) <= 0 or q[0] > 1 or q[3] > 1:
            return np.inf
        return float(np.mean(np.abs(log_errors(table, dict(zip(NAMES, q))))))

    best = loss(p)
    while step[0] > 1e-3:
        moved = False
        for i in range(len(p)):
            for sign in (1, -1):
                q = p.copy()
                q[i] += sign * step[i]
                lq = loss(q)
                if lq < best:
                    p, best, moved = q, lq, True
        if not moved:
            step = step / 2
    return {k: float(v) for k, v in zip(NAMES, p)}, best


def summary(table: pd.DataFrame | None = None) -> dict:
    """The figures the docs, the fit script and the tests quote: the best fit over every shape
    (``fit``, ``best``), today's GEMM_TILE_FILL_K / GEMM_FIXED_S with that fit's two fractions
    (``today_errors``, log(predicted / measured) per shape), and the fit over the unbatched
    shapes predicting the batched ones (``single_fit``, ``held_out_errors``, the same)."""
    table = load_table() if table is None else table
    consts, best = fit(table)
    today = dict(consts, fill_k=calibration.GEMM_TILE_FILL_K,
                 fixed_s=calibration.GEMM_FIXED_S)
    single = table.batch == 1
    c1, _ = fit(table[single])
    return {"fit": consts, "best": best,
            "today_errors": log_errors(table, today),
            "single_fit": c1, "single_rows": int(single.sum()),
            "held_out_errors": log_errors(table[~single], c1)}
