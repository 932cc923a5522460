"""`clustersim regress`: re-simulate a baseline of MFU; exit 1 on drift."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from simulator.errors import ScenarioError
from simulator.sweep.regress import DEFAULT_TOLERANCE, regress


def run_regress_cmd(args, out: Console) -> int:
    tol = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    if not 0 <= tol < 1:
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
