"""Fit of the host's per-expert issue time (simulator.step.host.HOST_EXPERT_GEMM_S) on the
published dropless Megatron-Core MoE runs, with leave-one-out error.

The runs: the MoE rows of ../shared/validation/public_runs.csv from NVIDIA's tables, the MoE
rows of validation/gb200_runs and the runs of validation/moe_runs (all Megatron-Core with
Transformer Engine's multi-stream GroupedLinear). DeepSeek's own run is left out: its stack
runs one grouped kernel (``grouped_gemm: fused``). The constant only moves runs whose layers
are host-bound; the others are in the table all the same, so the fit cannot pick its rows.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.simulate import simulate
from simulator.step import host
from validation import moe_runs, public_runs

GRID_S = np.arange(0.0, 200.1e-6, 10e-6)
"""Values tried, seconds (0-200 us a local expert's pass)."""


@contextmanager
def expert_gemm_s(value: float):
    """HOST_EXPERT_GEMM_S set to ``value`` inside the block."""
    old = host.HOST_EXPERT_GEMM_S
    host.HOST_EXPERT_GEMM_S = value
    try:
        yield
    finally:
        host.HOST_EXPERT_GEMM_S = old


def moe_cases(validation_dir: str | Path) -> list[tuple[str, str, float, object]]:
    """(id, GPU, published step seconds, scenario) of every Megatron-Core MoE run."""
    out = []
    for csv in (None, public_runs.GB200_RUNS):
        for r, sc, _ in public_runs.cases(validation_dir, csv):
            if sc is None or not sc.workload.model.is_moe or \
                    public_runs.source_group(r.source) != "nvidia":
                continue
            out.append((r.id, r.gpu, float(r.step_time_s), sc))
    rows = pd.read_csv(Path(validation_dir) / "public_runs.csv").set_index("id", drop=False)
    for run in pd.read_csv(moe_runs.RUNS).itertuples():
        out.append((run.id, run.gpu, float(run.step_time_s), moe_runs.scenario(run, rows)))
    return out


def scan(validation_dir: str | Path, grid=GRID_S) -> pd.DataFrame:
    """Every run at every value: columns id, gpu, value_s, published_s, predicted_s,
    log_error (log of predicted / published)."""
    cases = moe_cases(validation_dir)
    out = []
    for value in grid:
        with expert_gemm_s(float(value)):
            for id_, gpu, pub, sc in cases:
                pred = simulate(sc, frames=False).step_time_s
                out.append({"id": id_, "gpu": gpu, "value_s": float(value), "published_s": pub,
                            "predicted_s": pred, "log_error": float(np.log(pred / pub))})
    return pd.DataFrame(out)


def best(table: pd.DataFrame) -> float:
    """The value with the least mean |log error| over the table's runs."""
    score = table.assign(a=table.log_error.abs()).groupby("value_s").a.mean()
    return float(score.idxmin())


def leave_one_out(table: pd.DataFrame, key: str) -> pd.DataFrame:
    """Per value of ``key`` (id: one run; gpu: a GPU generation), the value fitted without
    those runs and their error at it: columns key, fitted_s, runs, mean_abs_error, worst."""
    out = []
    for k, held in table.groupby(key):
        v = best(table[table[key] != k])
        e = np.expm1(held[held.value_s == v].log_error)
        out.append({key: k, "fitted_s": v, "runs": len(e),
                    "mean_abs_error": float(e.abs().mean()),
                    "worst": float(e.iloc[int(np.argmax(e.abs().to_numpy()))])})
    return pd.DataFrame(out)


def summary(validation_dir: str | Path) -> dict:
    """In-sample fit, leave-one-run-out and leave-one-GPU-out errors, and each run at the fit
    and without the host model (value 0)."""
    t = scan(validation_dir)
    v = best(t)
    at = t[t.value_s == v].set_index("id")
    zero = t[t.value_s == 0.0].set_index("id")
    runs = pd.DataFrame({"gpu": at.gpu, "published_s": at.published_s,
                         "without_s": zero.predicted_s, "predicted_s": at.predicted_s,
                         "error_without": np.expm1(zero.log_error),
                         "error": np.expm1(at.log_error)})
    loro = leave_one_out(t, "id").set_index("id")
    runs["error_held_out"] = loro.worst
    return {"fit_s": v, "today_s": host.HOST_EXPERT_GEMM_S, "runs": runs.reset_index(),
            "by_gpu": leave_one_out(t, "gpu"),
            "in_sample": float(runs.error.abs().mean()),
            "held_out": float(runs.error_held_out.abs().mean()),
            "without": float(runs.error_without.abs().mean())}
