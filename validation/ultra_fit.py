"""Fit of Blackwell Ultra's tensor-core speed-up over Blackwell at equal datasheet peaks
(simulator.calibration.BLACKWELL_ULTRA_TENSOR_SPEEDUP) on the dense DGX-GB300 rows of NeMo
25.11 and 26.02 (validation/gb300_runs), held out on the GB300 and B300 rows of NeMo
26.02.01-26.08 (validation/newer_runs).

Every other constant stays as calibrated (Blackwell's are Hopper's fit); the speed-up scales
the tensor-core work of the ``b300`` generation only (:func:`calibration.tensor_scaled`).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from simulator import calibration
from validation.public_runs import GB300_RUNS, NEWER_RUNS, evaluate

GRID = np.round(np.arange(1.00, 1.301, 0.01), 2)
"""Speed-ups tried: none to 1.3."""
ULTRA_GPUS = ("gb300", "b300")
"""The rows' GPU names (public_runs.csv's ``gpu``) that are Blackwell Ultra."""


@contextmanager
def tensor_speedup(value: float):
    """Blackwell Ultra's compute constants at ``value`` times Blackwell's tensor-core speed
    inside the block."""
    old = calibration.CALIBRATIONS["b300"]
    calibration.CALIBRATIONS["b300"] = calibration.tensor_scaled(calibration.BLACKWELL, value)
    try:
        yield
    finally:
        calibration.CALIBRATIONS["b300"] = old


def _ultra_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The simulated Blackwell Ultra rows that fit their GPU as printed."""
    ok = table.gpu.isin(ULTRA_GPUS) & table.error.notna() & table.fits_memory.astype(bool)
    return table[ok]


def scan(validation_dir: str | Path, grid=GRID) -> pd.DataFrame:
    """Mean |error| of the fitting rows (gb300_runs) at every speed-up."""
    out = []
    for value in grid:
        with tensor_speedup(float(value)):
            t = _ultra_rows(evaluate(validation_dir, csv=GB300_RUNS))
        out.append({"speedup": float(value), "rows": len(t),
                    "mean_abs_error": float(t.error.abs().mean()),
                    "mean_error": float(t.error.mean())})
    return pd.DataFrame(out)


def summary(validation_dir: str | Path, grid=GRID) -> dict:
    """The fitted speed-up (least mean |error| on gb300_runs), its error there and at 1.0, and
    the held-out Blackwell Ultra rows of newer_runs at 1.0 and at the calibrated speed-up."""
    s = scan(validation_dir, grid)
    best = s.loc[s.mean_abs_error.idxmin()]
    at_one = s.loc[(s.speedup - 1.0).abs().idxmin()]
    held = {}
    for label, value in (("none", 1.0),
                         ("calibrated", calibration.BLACKWELL_ULTRA_TENSOR_SPEEDUP)):
        with tensor_speedup(value):
            t = _ultra_rows(evaluate(validation_dir, csv=NEWER_RUNS))
        held[label] = {"rows": len(t), "mean_abs_error": float(t.error.abs().mean()),
                       "mean_error": float(t.error.mean()),
                       "worst": float(t.error.abs().max())}
    return {"fit": float(best.speedup), "fit_mean_abs_error": float(best.mean_abs_error),
            "rows": int(best.rows), "at_one_mean_abs_error": float(at_one.mean_abs_error),
            "today": calibration.BLACKWELL_ULTRA_TENSOR_SPEEDUP, "held_out": held, "scan": s}
