"""`clustersim sweep`: a grid of configurations on a local process pool or Dask."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from simulator.cli.parsers import SORTS
from simulator.sweep.runner import run_sweep, screen_path


def _merge_ties(ok, cols: list[str]):
    """One row for layouts that differ only in recomputation and give the same step (with
    flash attention, selective recomputation recomputes nothing): ``none = selective``.
    Points that differ in anything else the grid sets (a dispatcher, a schedule) stay apart."""
    rest = ok.point.map(lambda p: json.dumps({k: v for k, v in json.loads(p).items()
                                              if k != "parallel.recompute"}, sort_keys=True))
    ok = ok.assign(_rest=rest)
    key = [c for c in cols if c not in ("recompute", "mfu", "memory_gib_per_gpu")] + ["_rest"]
    merged = ok.groupby(key, sort=False, dropna=False).agg(
        {**{c: "first" for c in ok.columns if c not in key}, "recompute": " = ".join})
    return merged.reset_index()[[c for c in ok.columns if c != "_rest"]]


def _ranking_moves(screen, table, out: Console, top: int) -> None:
    """The funnel's best layouts at the sweep's fidelity next to their analytic rank."""
    ok_s = screen[screen.status == "ok"].sort_values("mfu", ascending=False, kind="stable")
    rank_s = {p: k + 1 for k, p in enumerate(ok_s.point)}
    mfu_s = dict(zip(ok_s.point, ok_s.mfu))
    ok = table[table.status == "ok"].sort_values("mfu", ascending=False, kind="stable")
    t = Table(title=f"How the ranking moved ({ok.fidelity.iloc[0] if len(ok) else ''} vs "
                    f"analytic)")
    for c in ("rank", "analytic rank", "tp", "pp", "dp", "cp", "vpp", "mb", "zero",
              "recompute", "analytic MFU", "MFU"):
        t.add_column(c, justify="right")
    for k, r in enumerate(ok.head(top or len(ok)).itertuples(), 1):
        t.add_row(str(k), str(rank_s.get(r.point, "-")), *(str(getattr(r, c)) for c in (
            "tp", "pp", "dp", "cp", "vpp", "micro_batch", "zero", "recompute")),
            f"{mfu_s.get(r.point, float('nan')):.1%}", f"{r.mfu:.1%}")
    out.print(t)


def run_sweep_cmd(args, out: Console) -> int:
    err = Console(stderr=True)
    margin = {} if args.screen_margin is None else {"screen_margin": args.screen_margin}
    table = run_sweep(args.sweep, args.out, jobs=args.jobs, scheduler=args.scheduler,
                      resume=args.resume, fidelity=args.fidelity, progress=not args.quiet,
                      console=err, cache=not args.no_cache, screen_top=args.screen_top,
                      **margin)
    counts = table.status.value_counts().to_dict() if len(table) else {}
    screen = table.attrs.get("screen")
    if screen is not None:
        out.print(f"screened {len(screen):,} points analytically -> "
                  f"{screen_path(Path(args.out))}")
    out.print(f"{len(table):,} points -> {args.out}: " +
              ", ".join(f"{n:,} {s}" for s, n in sorted(counts.items())))
    c = table.attrs.get("collectives", {})
    if c.get("solved") or c.get("reused"):
        out.print(f"  fabric collectives: {c['solved']:,} solved, {c['reused']:,} reused "
                  f"over {len(table):,} layouts")
    if screen is not None and len(table):
        _ranking_moves(screen, table, out, args.top)
    ok = table[table.status == "ok"]
    if len(ok) and args.top:
        cols = ["tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "zero", "recompute",
                "step_time_s", "mfu", "memory_gib_per_gpu"]
        if ok.schedule.nunique() > 1:           # shown where the points' schedules differ
            cols.insert(cols.index("micro_batch") + 1, "schedule")
        ok = _merge_ties(ok.sort_values(args.sort, ascending=SORTS[args.sort], kind="stable"),
                         cols).head(args.top)
        t = Table(title=f"Best {len(ok)} by {args.sort}")
        points = [json.loads(p) for p in ok.point]
        shown = {"parallel." + c for c in cols} | {"workload.micro_batch", "parallel.schedule",
                                                   "parallel.sequence_parallel"}
        extra = sorted({k for p in points for k in p} - shown)   # other grid keys
        for c in extra + cols:
            t.add_column(c.split(".")[-1].replace("_gib_per_gpu", " GiB")
                         .replace("micro_batch", "mb"), justify="right")
        for pt, r in zip(points, ok.itertuples()):
            t.add_row(*[str(pt.get(k, "")) for k in extra],
                      *[f"{getattr(r, c):.1%}" if c == "mfu" else
                        f"{getattr(r, c):.3f}" if c == "step_time_s" else
                        f"{getattr(r, c):.1f}" if c == "memory_gib_per_gpu" else
                        str(getattr(r, c)) for c in cols])
        out.print(t)
    return 0
