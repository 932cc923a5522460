"""`clustersim failures`: a training run under failures (ETTR, effective MFU, lost GPU-hours)."""

from __future__ import annotations

import argparse
import json
import re

import numpy as np

from rich.console import Console
from rich.table import Table

from simulator.errors import ScenarioError

TABLE_MAX_DAYS = 30.0
TABLE_MIN_TRIALS, TABLE_MAX_TRIALS = 50, 200
"""The ETTR-vs-interval table re-runs the Monte-Carlo per strategy and interval (42 runs): it
uses at most 30 days and 50-200 trials (common random numbers keep the curves smooth)."""

_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def positive_number(text: str) -> float:
    """argparse type: a number > 0, optionally with a k / M / B / T suffix (15.6T tokens)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*([kmbgt]?)\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if not 0 < value < 1e30:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def add_parser(sub, add_scenario_args, count) -> None:
    p = sub.add_parser("failures", help="a training run under failures: ETTR, effective MFU")
    add_scenario_args(p)
    when = p.add_mutually_exclusive_group()
    when.add_argument("--days", type=positive_number, help="wall-clock days to run (default 30)")
    when.add_argument("--tokens", type=positive_number,
                      help="train this many tokens (e.g. 15.6T) and report the time to train")
    p.add_argument("--trials", type=count(1), default=1000, help="Monte-Carlo trials")
    p.add_argument("--plot", metavar="PNG", help="write the ETTR-vs-interval plot")
    p.add_argument("--components", action="store_true",
                   help="list the failure catalogue (names for failures.rates) and exit")


def run(args, out: Console) -> int:
    from simulator.reliability.run import ettr_vs_interval, failure_run
    from simulator.scenario import Scenario

    sc = Scenario.load(args.scenario, args.overrides)
    if args.components:
        return _components(sc, out, args.json)
    from simulator.reliability.montecarlo import NeverFinishes
    try:
        rep = failure_run(sc, days=args.days, tokens=args.tokens, trials=args.trials)
    except NeverFinishes as err:
        raise ScenarioError(f"--tokens: {err}", field="--tokens") from None
    table = ettr_vs_interval(sc, days=min(args.days or TABLE_MAX_DAYS, TABLE_MAX_DAYS),
                             trials=int(np.clip(args.trials, TABLE_MIN_TRIALS, TABLE_MAX_TRIALS)))
    if args.plot:
        from simulator.plots import ettr_vs_interval as plot
        try:
            plot(table, title=f"{sc.name}: ETTR vs checkpoint interval").savefig(args.plot,
                                                                                 dpi=120)
        except OSError as err:
            raise ScenarioError(f"--plot: cannot write {args.plot}: {err.strerror}",
                                field="--plot") from None
    if args.json:
        print(json.dumps({**rep.to_dict(),
                          "ettr_vs_interval": table.to_dict(orient="records")}))
        return 0
    s = rep.summary
    run_len = (f"{s['tokens']:.3g} tokens in {s['time_to_train_days']:.1f} days "
               f"(p95 {s['time_to_train_days_p95']:.1f})" if s["mode"] == "tokens"
               else f"{s['days']:g} days")
    out.print(f"[bold]{s['name']}[/]: {s['gpus']:,} GPUs ({s['nodes']:,} nodes, "
              f"{s['switches']:,} switches), failures {s['failure_preset']}, {run_len}, "
              f"{s['trials']:,} trials")
    out.print(f"  ETTR          {s['ettr']:.1%}  (5-95 %: {s['ettr_p5']:.1%} - "
              f"{s['ettr_p95']:.1%})")
    out.print(f"  MFU           {s['mfu']:.1%} per step -> effective MFU {s['effective_mfu']:.1%}")
    out.print(f"  interruptions {s['interruptions_per_day']:.2f} per day "
              f"({s['unexpected_per_day']:.2f} unexpected, {s['planned_per_day']:.2f} planned); "
              f"job MTTF {s['job_mttf_h']:.2f} h")
    out.print(f"  checkpoint    {s['checkpoint_strategy']} every "
              f"{s['checkpoint_interval_min']:.1f} min of training: {s['checkpoint_state_tb']:.2f} "
              f"TB, stalls {s['checkpoint_blocking_s']:.2f} s, durable "
              f"{s['checkpoint_persist_s']:.1f} s later")
    out.print(f"  restart       {s['restart_s']:.0f} s (init {s['init_s']:.0f} s, reload "
              f"{s['reload_s']:.0f} s) after detection and diagnosis")
    t = Table(title=f"GPU-hours lost by cause (of {s['gpu_hours']:,.0f})")
    for c in ("cause", "per day", "recovery GPU-h", "lost work GPU-h", "share"):
        t.add_column(c, justify="right")
    for r in rep.by_cause.head(10).itertuples():
        t.add_row(r.label, f"{r.interruptions_per_day:.2f}", f"{r.recovery_gpu_h:,.0f}",
                  f"{r.lost_work_gpu_h:,.0f}", f"{r.share:.1%}")
    out.print(t)
    pivot = table.pivot(index="interval_min", columns="strategy", values="ettr")
    t = Table(title="ETTR by checkpoint interval (* = best per strategy)")
    t.add_column("interval min", justify="right")
    for c in pivot.columns:
        t.add_column(c, justify="right")
    best = {g: float(d[d.optimal].interval_min.iloc[0]) for g, d in table.groupby("strategy")}
    for iv, row in pivot.iterrows():
        t.add_row(f"{iv:.1f}", *[f"{v:.2%}{'*' if best[c] == iv else ' '}"
                               for c, v in row.items()])
    out.print(t)
    if args.plot:
        out.print(f"  plot written to {args.plot}")
    return 0


def _components(sc, out: Console, as_json: bool) -> int:
    from simulator.reliability.catalogue import catalogue
    from simulator.reliability.costs import job_counts

    counts = job_counts(sc)
    rows = [{"name": c.name, "label": c.label, "category": c.category, "unit": c.unit,
             "rate_per_1k_unit_days": sc.failures.rates.get(c.name, c.rate) * sc.failures.scale,
             "units": counts.units(c.unit), "detection": c.detection, "replace": c.replace}
            for c in catalogue(sc.failures.preset)]
    if as_json:
        print(json.dumps(rows))
        return 0
    t = Table(title=f"Failure catalogue {sc.failures.preset} for {sc.cluster.gpus:,} GPUs")
    for c in ("name", "category", "unit", "per 1k unit-days", "units", "per day", "detection"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(r["name"], r["category"], r["unit"], f"{r['rate_per_1k_unit_days']:.4g}",
                  f"{r['units']:,}", f"{r['rate_per_1k_unit_days'] * r['units'] / 1000:.3f}",
                  r["detection"])
    out.print(t)
    return 0
