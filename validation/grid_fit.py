"""A one-constant fit on a grid, in sample and holding out each value of a column in turn
(:mod:`validation.tree_fit`, :mod:`validation.a2a_fit`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

Errors = Callable[[pd.DataFrame, float], np.ndarray]
"""Simulated / published - 1 of every point of a table at a candidate constant."""


def fit(points: pd.DataFrame, errors: Errors, grid: Sequence[float]) -> float:
    """The constant of ``grid`` with the least mean |error| over ``points``."""
    return min((float(np.abs(errors(points, c)).mean()), c) for c in grid)[1]


def abs_stats(err: np.ndarray, prefix: str = "") -> dict[str, float]:
    """{prefix + "median", prefix + "worst"}: the median and worst |error|."""
    e = np.abs(err)
    return {f"{prefix}median": float(np.median(e)), f"{prefix}worst": float(e.max())}


def held_out(points: pd.DataFrame, column: str, errors: Errors, grid: Sequence[float]
             ) -> dict[int, dict]:
    """Each value of ``column`` held out: the constant fitted on the other points, and the
    held-out points' count, median and worst |error| at it."""
    out = {}
    for value in sorted(points[column].unique()):
        train, test = points[points[column] != value], points[points[column] == value]
        c = fit(train, errors, grid)
        out[int(value)] = {"fraction": c, "points": len(test), **abs_stats(errors(test, c))}
    return out


def held_out_lines(held: dict[int, dict], unit: str) -> list[str]:
    """One line per held-out value (``unit``: what the values count) for the calibration
    scripts."""
    return [f"  {k} {unit} held out ({h['points']} points; fitted {h['fraction']:.3f} on the "
            f"rest): median {h['median']:.1%}, worst {h['worst']:.1%}" for k, h in held.items()]
