"""Figures from result DataFrames (matplotlib). Functions return a Figure and never write files.

Every axis is labelled with its unit; figures are sized for a notebook cell and a README PNG.
Matplotlib picks its own backend (inline in Jupyter, Agg when headless).
"""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import ScalarFormatter

STRATEGY_LABELS = {"sync": "synchronous", "two-stage": "two-stage (async persist)",
                   "in-memory": "in-memory replica"}


def _figure(*grid, figsize, **kw):
    """A figure and its axes outside pyplot: a notebook shows the returned figure once (a
    pyplot figure would also be shown by the inline backend), and nothing is left open."""
    fig = Figure(figsize=figsize, layout=kw.pop("layout", None))
    return fig, fig.subplots(*grid, **kw)


def ettr_vs_interval(table: pd.DataFrame, title: str | None = None) -> Figure:
    """ETTR against checkpoint interval, one line per strategy, its optimum marked
    (``table``: :func:`simulator.failures.ettr_vs_interval`)."""
    fig, ax = _figure(figsize=(7, 4.2), layout="constrained")
    styles = ("-", "--", ":", "-.")
    for k, (strategy, g) in enumerate(table.groupby("strategy", sort=False)):
        g = g.sort_values("interval_min")
        line, = ax.plot(g.interval_min, g.ettr * 100, marker="o", ms=3, ls=styles[k % 4],
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


# ---------------- one step ----------------
KIND_COLOURS = {"forward": "#4C72B0", "backward": "#DD8452", "backward_weight": "#937860",
                "optimizer": "#2F4F2F", "grad_reduce": "#8172B3", "embedding_sync": "#64B5CD",
                "param_gather": "#C44E52"}
STREAM_COLOURS = {"tp": "#C44E52", "cp": "#DA8BC3", "ep": "#8C8C8C", "zero": "#CCB974",
                  "data": "#64B5CD", "offload": "#B8860B", "host": "#E377C2", "pp": "#8172B3",
                  "dp": "#55A868"}
STREAMS = ("compute", "tp", "cp", "ep", "zero", "data", "offload", "host", "pp", "dp")


def timeline(tl: pd.DataFrame, title: str | None = None, max_stages: int = 16) -> Figure:
    """Gantt chart of one step: a row per pipeline stage and stream (``Result.timeline``).

    Compute is coloured by action (forward, backward, ...); each communication stream by its
    kind; grey behind the compute lane is idle time, i.e. the pipeline bubble."""
    stages = sorted(tl.stage.unique())[:max_stages]
    lanes = [(s, st) for s in stages for st in STREAMS
             if ((tl.stage == s) & (tl.stream == st)).any()]
    fig, ax = _figure(figsize=(11, 0.32 * len(lanes) + 1.6), layout="constrained")
    end = float(tl.end_s.max()) if len(tl) else 0.0
    for y, (s, st) in enumerate(lanes):
        rows = tl[(tl.stage == s) & (tl.stream == st)]
        if st == "compute":
            ax.broken_barh([(0, end)], (y - 0.4, 0.8), color="#E5E5E5", lw=0)
            for kind, g in rows.groupby("kind"):
                ax.broken_barh(list(zip(g.start_s, g.end_s - g.start_s)), (y - 0.4, 0.8),
                               color=KIND_COLOURS.get(kind, "#333333"), lw=0)
        else:
            ax.broken_barh(list(zip(rows.start_s, rows.end_s - rows.start_s)), (y - 0.3, 0.6),
                           color=STREAM_COLOURS.get(st, "#333333"), lw=0)
    ax.set_yticks(range(len(lanes)), [f"stage {s} {st}" for s, st in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, end * 1.01 if end else 1)
    ax.set_xlabel("time within the step (s)")
    ax.set_title(title or "One training step per pipeline stage and stream")
    shown = set(tl.kind[tl.stream == "compute"]) if len(tl) else set()
    handles = [Patch(color=c, label=k.replace("_", " ")) for k, c in KIND_COLOURS.items()
               if k in shown]
    handles += [Patch(color=STREAM_COLOURS[s], label=f"{s} comm") for s in STREAM_COLOURS
                if (tl.stream == s).any()]
    handles.append(Patch(color="#E5E5E5", label="idle (bubble)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7,
              frameon=False)
    return fig


BREAKDOWN_COLOURS = {"forward_compute": "#4C72B0", "backward_compute": "#DD8452",
                     "recompute": "#937860", "tp_comm": "#C44E52", "cp_comm": "#DA8BC3",
                     "ep_comm": "#8C8C8C", "zero_comm": "#CCB974", "data_load": "#64B5CD",
                     "offload": "#B8860B", "host": "#E377C2",
                     "pp_comm": "#8172B3", "bubble": "#CFCFCF", "dp_comm": "#55A868",
                     "optimizer": "#2F4F2F", "param_gather": "#A1C9A1"}
"""Same colours as :func:`timeline` (compute by action, comm by stream, bubble = idle grey)."""
BREAKDOWN_ORDER = tuple(BREAKDOWN_COLOURS)


def breakdown(frame: pd.DataFrame, title: str | None = None) -> Figure:
    """Stacked horizontal bars of where the step goes: one bar per row (a scenario), columns
    are ``Result.breakdown_s`` parts in seconds (``pd.DataFrame([r.breakdown_s], [r.name])``)."""
    cols = [c for c in BREAKDOWN_ORDER if c in frame.columns and frame[c].abs().sum() > 0]
    fig, ax = _figure(figsize=(10, 0.5 * len(frame) + 2.2), layout="constrained")
    left = pd.Series(0.0, index=frame.index)
    for c in cols:
        ax.barh([str(i) for i in frame.index], frame[c], left=left, color=BREAKDOWN_COLOURS[c],
                label=c.replace("_", " "))
        left = left + frame[c]
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step (critical stage)")
    ax.set_title(title or "Where the step time goes")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


# ---------------- sweeps ----------------
def mfu_heatmap(sweep: pd.DataFrame, x: str = "tp", y: str = "pp", value: str = "mfu",
                title: str | None = None) -> Figure:
    """Best ``value`` (MFU by default) for every (x, y) pair of a sweep table's ``ok`` rows;
    cells with no feasible configuration are blank."""
    ok = sweep[sweep.status == "ok"] if "status" in sweep else sweep
    grid = ok.pivot_table(index=y, columns=x, values=value, aggfunc="max")
    fig, ax = _figure(figsize=(1.1 * grid.shape[1] + 2.5, 0.6 * grid.shape[0] + 1.8),
                           layout="constrained")
    scale = 100 if value in ("mfu", "hfu") else 1
    im = ax.imshow(grid.values * scale, cmap="viridis", aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(i) for i in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    for (i, j), v in np.ndenumerate(grid.values):
        if v == v:
            ax.text(j, i, f"{v * scale:.1f}", ha="center", va="center", fontsize=8,
                    color="white" if v * scale < np.nanmean(grid.values * scale) else "black")
    unit = " (%)" if scale == 100 else ""
    fig.colorbar(im, ax=ax, label=f"best {value}{unit}")
    ax.set_title(title or f"Best {value} over {x} x {y} (blank: nothing fits)")
    return fig


# ---------------- fabric ----------------
def link_utilisation(links: pd.DataFrame, top: int = 12, title: str | None = None) -> Figure:
    """Left: utilisation of every used link by tier; right: the hottest links
    (``Result.links`` at flow fidelity)."""
    fig, (a, b) = _figure(1, 2, figsize=(11, 4.2), layout="constrained",
                               gridspec_kw={"width_ratios": [1, 1.3]})
    tiers = [t for t in ("gpu-nic", "nic-leaf", "leaf-spine", "spine-core", "nvlink")
             if (links.tier == t).any()]
    data = [links.utilisation[links.tier == t] * 100 for t in tiers]
    if data:
        a.boxplot(data, tick_labels=tiers, showfliers=True)
    a.set_ylabel("utilisation over the step (%)")
    a.set_xlabel("tier")
    a.set_title("Link utilisation by tier")
    hot = links.nlargest(top, "utilisation")
    b.barh(hot.link, hot.utilisation * 100, color="#C44E52")
    b.invert_yaxis()
    b.set_xlabel("utilisation over the step (%)")
    b.tick_params(axis="y", labelsize=7)
    b.set_title(f"Hottest {len(hot)} links")
    if title:
        fig.suptitle(title)
    return fig


def ecmp_load(load: pd.DataFrame, tier: str = "leaf-spine", title: str | None = None
              ) -> Figure:
    """Flows per ``tier`` link against balls into bins: n flows hashed uniformly onto m equal
    links give Binomial(n, 1/m) flows per link. ``load``: columns tier and flows, every link of
    the tier included (:func:`simulator.network.flowfile.flows_per_link`)."""
    counts = load.flows[load.tier == tier].to_numpy().astype(int)
    m, n = len(counts), int(counts.sum())
    fig, ax = _figure(figsize=(7, 4.2), layout="constrained")
    if m:
        top = int(counts.max()) + 2
        k = np.arange(0, top + 1)
        ax.hist(counts, bins=np.arange(-0.5, top + 0.5), color="#4C72B0", alpha=0.8,
                label=f"simulated ({m} links, {n} flows)")
        p = 1.0 / m
        pmf = np.array([comb(n, int(x)) * p ** x * (1 - p) ** (n - x) for x in k])
        ax.plot(k, pmf * m, "o-", color="#DD8452", label="balls into bins: m x Binomial(n, 1/m)")
        ax.axvline(n / m, color="grey", ls="--", lw=1, label=f"perfect balance ({n / m:.1f})")
        idle = float(np.mean(counts == 0))
        ax.text(0.98, 0.6, f"idle links: {idle:.0%} (expected {(1 - p) ** n:.0%})",
                transform=ax.transAxes, ha="right", fontsize=8)
    ax.set_xlabel(f"flows on one {tier} link")
    ax.set_ylabel("number of links")
    ax.set_title(title or f"ECMP load on {tier} links")
    ax.legend(fontsize=8)
    return fig


# ---------------- congestion ----------------
def queue_depth(runs: dict[str, pd.DataFrame], title: str | None = None) -> Figure:
    """Bottleneck queue and PFC pauses over time for one or more runs of the fluid model.

    ``runs`` maps a label to the ``links`` frame of :func:`simulator.network.flowfile.run_flow_file`
    (its ``attrs`` carry ``queue_trace`` and ``pause_trace``). Top: the deepest queue of each
    run; bottom: how many ports are paused at once."""
    fig, (a, b) = _figure(2, 1, figsize=(9, 5.5), sharex=True, layout="constrained",
                               gridspec_kw={"height_ratios": [2, 1]})
    for label, links in runs.items():
        q = links.attrs.get("queue_trace", pd.DataFrame(columns=["t_s", "link", "queue_bytes"]))
        if len(q):
            hot = q.groupby("link").queue_bytes.max().idxmax()
            g = q[q.link == hot]
            line, = a.plot(g.t_s * 1e3, g.queue_bytes / 1e6, lw=1, label=f"{label} ({hot})")
        p = links.attrs.get("pause_trace", pd.DataFrame(columns=["t_s", "link", "paused"]))
        if len(p):
            n = p.groupby("t_s").paused.sum()
            b.step(n.index * 1e3, n.values, where="post", lw=1, label=label)
    a.set_ylabel("egress queue (MB)")
    a.set_title(title or "Bottleneck queue and PFC pauses")
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    b.set_xlabel("time (ms)")
    b.set_ylabel("ports paused")
    b.grid(alpha=0.3)
    if b.get_legend_handles_labels()[0]:
        b.legend(fontsize=8)
    return fig
