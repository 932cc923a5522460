"""Figures from result DataFrames (matplotlib). Functions return a Figure and never write files.

Every axis is labelled with its unit; figures are sized for a notebook cell and a README PNG.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import ScalarFormatter  # noqa: E402

STRATEGY_LABELS = {"sync": "synchronous", "two-stage": "two-stage (async persist)",
                   "in-memory": "in-memory replica"}


def ettr_vs_interval(table: pd.DataFrame, title: str | None = None) -> Figure:
    """ETTR against checkpoint interval, one line per strategy, its optimum marked
    (``table``: :func:`simulator.reliability.run.ettr_vs_interval`)."""
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    for strategy, g in table.groupby("strategy", sort=False):
        g = g.sort_values("interval_min")
        line, = ax.plot(g.interval_min, g.ettr * 100, marker="o", ms=3,
                        label=STRATEGY_LABELS.get(strategy, strategy))
        ax.fill_between(g.interval_min, g.ettr_p5 * 100, g.ettr_p95 * 100,
                        color=line.get_color(), alpha=0.15, lw=0)
        best = g[g.optimal].iloc[0]
        ax.plot(best.interval_min, best.ettr * 100, marker="*", ms=12, color=line.get_color())
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("checkpoint interval (minutes of training, log scale)")
    ax.set_ylabel("ETTR (% of wall time training)")
    ax.set_title(title or "Effective training time ratio vs checkpoint interval")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="checkpoint strategy (band: 5-95 % of trials, star: best)", fontsize=8,
              title_fontsize=8)
    return fig
