"""`clustersim failures`: a training run under failures (ETTR, effective MFU, lost GPU-hours)."""

from __future__ import annotations

import json

import numpy as np
from rich.console import Console
from rich.table import Table

from simulator.config.failure_catalogue import catalogue
from simulator.config.scenario import Scenario
from simulator.errors import ScenarioError
from simulator.failures import ettr_vs_interval, failure_run
from simulator.plots import ettr_vs_interval as plot_ettr_vs_interval
from simulator.reliability.costs import job_counts
from simulator.reliability.montecarlo import NeverFinishes

TABLE_MAX_DAYS = 30.0
TABLE_MIN_TRIALS, TABLE_MAX_TRIALS = 50, 200
"""The ETTR-vs-interval table re-runs the Monte-Carlo per strategy and interval (42 runs): it
uses at most 30 days and 50-200 trials (common random numbers keep the curves smooth)."""


def run(args, out: Console) -> int:
    sc = Scenario.load(args.scenario, args.overrides)
    if args.components:
        return _components(sc, out, args.json)
    try:
        rep = failure_run(sc, days=args.days, tokens=args.tokens, trials=args.trials)
    except NeverFinishes as err:
        raise ScenarioError(f"--tokens: {err}", field="--tokens") from None
    table_days = min(args.days or TABLE_MAX_DAYS, TABLE_MAX_DAYS)
    table = ettr_vs_interval(sc, days=table_days,
                             trials=int(np.clip(args.trials, TABLE_MIN_TRIALS, TABLE_MAX_TRIALS)))
    if args.plot:
        try:
            fig = plot_ettr_vs_interval(table, title=f"{sc.name}: ETTR vs checkpoint interval")
            fig.savefig(args.plot, dpi=120)
        except OSError as err:
            raise ScenarioError(f"--plot: cannot write {args.plot}: {err.strerror or err}",
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
    t = Table(title=f"ETTR by checkpoint interval over {table_days:g} days of training "
                    f"(* = best per strategy; the run above: {s['ettr']:.1%})")
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
