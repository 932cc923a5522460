"""`clustersim sweep` and `clustersim regress`."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table

SORTS = {"mfu": False, "step_time_s": True, "tokens_per_s": False}
"""Sort key -> ascending."""


def add_parsers(sub, count) -> None:
    sw = sub.add_parser("sweep", help="simulate a grid of configurations (local pool or Dask)")
    sw.add_argument("sweep", metavar="SWEEP.yaml")
    sw.add_argument("--out", required=True, metavar="FILE.{csv,parquet}")
    sw.add_argument("--jobs", type=count(1), default=None, help="worker processes (all cores)")
    sw.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler, e.g. tcp://h:8786")
    sw.add_argument("--resume", action="store_true", help="skip points already in --out")
    sw.add_argument("--fidelity", choices=["analytic", "screening", "flow"],
                    help="override the sweep file's fidelity")
    sw.add_argument("--top", type=count(0), default=10, help="rows of the best-first table")
    sw.add_argument("--sort", choices=list(SORTS), default="mfu")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    rg = sub.add_parser("regress", help="re-simulate a baseline of MFU; exit 1 on drift")
    rg.add_argument("baseline", metavar="BASELINE.csv")
    rg.add_argument("--tolerance", type=float, default=None,
                    help="largest |delta mfu| allowed (absolute, default 0.005)")
    rg.add_argument("--update", action="store_true", help="rewrite the baseline's numbers")
    rg.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    rg.add_argument("--jobs", type=count(1), default=None)


def run_sweep_cmd(args, out: Console) -> int:
    from simulator.sweep_run import run_sweep

    err = Console(stderr=True)
    table = run_sweep(args.sweep, args.out, jobs=args.jobs, scheduler=args.scheduler,
                      resume=args.resume, fidelity=args.fidelity, progress=not args.quiet,
                      console=err)
    counts = table.status.value_counts().to_dict() if len(table) else {}
    out.print(f"{len(table):,} points -> {args.out}: " +
              ", ".join(f"{n:,} {s}" for s, n in sorted(counts.items())))
    ok = table[table.status == "ok"]
    if len(ok) and args.top:
        ok = ok.sort_values(args.sort, ascending=SORTS[args.sort], kind="stable").head(args.top)
        t = Table(title=f"Best {len(ok)} by {args.sort}")
        cols = ["tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "zero", "recompute",
                "step_time_s", "mfu", "memory_gib_per_gpu"]
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


def run_regress_cmd(args, out: Console) -> int:
    from simulator.regress import DEFAULT_TOLERANCE, regress

    tol = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    if not 0 <= tol < 1:
        from simulator.errors import ScenarioError
        raise ScenarioError(f"--tolerance: must be in [0, 1) as an absolute MFU, got {tol}",
                            field="--tolerance")
    report = regress(args.baseline, tolerance=tol, update=args.update, junit=args.junit,
                     jobs=args.jobs)
    t = Table(title=f"MFU regression against {args.baseline} (tolerance {tol:.4f})")
    for c in ("scenario", "overrides", "mfu", "expected", "delta", "step_time_s", "status"):
        t.add_column(c, justify="right")
    for r in report.itertuples():
        t.add_row(r.scenario, r.overrides or "", "" if r.mfu != r.mfu else f"{r.mfu:.4f}",
                  f"{r.expected_mfu:.4f}", "" if r.delta_mfu != r.delta_mfu
                  else f"{r.delta_mfu:+.4f}", "" if r.step_time_s != r.step_time_s
                  else f"{r.step_time_s:.3f}",
                  {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]"}.get(r.status, r.status))
    out.print(t)
    failed = int((report.status != "pass").sum())
    if args.update:
        out.print(f"baseline {args.baseline} updated ({len(report)} rows)")
        return 0
    if failed:
        sys.stderr.write(f"clustersim: regress: {failed} of {len(report)} rows failed\n")
        return 1
    out.print(f"all {len(report)} rows within {tol:.4f} MFU")
    return 0
