"""A whole auto sweep on the fabric (not a test): GPT-3 175B on the 12,288-GPU MegaScale fabric,
every layout Megatron-LM's rules allow, at flow fidelity (max-min sharing, ECMP), on a local
pool; then the same points analytically, and the two top-20 rankings side by side.

Usage: .venv/bin/python benchmarks/sweep_flow.py [--jobs N] [--top 20] [--screen-top K]
(``--screen-top K`` runs the funnel instead of every point at flow fidelity.)

Prints: wall time of each sweep, layouts evaluated, fabric collectives solved vs reused (the
content-addressed cache of simulator.network.cache), and the rankings.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.sweep.runner import run_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "examples" / "megascale-175b-12288.yaml"
LAYOUT = ["tp", "pp", "dp", "cp", "vpp", "micro_batch", "zero", "recompute"]


def _ranked(table):
    ok = table[table.status == "ok"].sort_values(["mfu", "point"], ascending=[False, True],
                                                 kind="stable")
    return ok.reset_index(drop=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--screen-top", type=int, default=None)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    console = Console(width=160)
    sweeps = {}
    for fidelity in ("flow", "analytic"):
        spec = tmp / f"{fidelity}.yaml"
        spec.write_text(yaml.safe_dump({"base": str(BASE), "auto": True, "fidelity": fidelity,
                                        "set": ["network.congestion_control=none"]}))
        t0 = time.perf_counter()
        table = run_sweep(spec, tmp / f"{fidelity}.csv", jobs=args.jobs, progress=False,
                          screen_top=args.screen_top if fidelity == "flow" else None)
        wall = time.perf_counter() - t0
        n = table.attrs.get("collectives", {})
        ok = int((table.status == "ok").sum())
        console.print(f"{fidelity}: {len(table):,} points ({ok:,} fit in memory) in {wall:,.0f} s "
                      f"on {args.jobs} worker(s); fabric collectives solved "
                      f"{n.get('solved', 0):,}, reused {n.get('reused', 0):,}")
        sweeps[fidelity] = _ranked(table)
    flow, screen = sweeps["flow"], sweeps["analytic"]
    rank_flow = {p: k + 1 for k, p in enumerate(flow.point)}
    rank_screen = {p: k + 1 for k, p in enumerate(screen.point)}
    mfu_flow = dict(zip(flow.point, flow.mfu))
    for title, first, other, ranks, mfus in (
            ("Top by flow MFU, with their analytic rank", flow, "analytic", rank_screen,
             dict(zip(screen.point, screen.mfu))),
            ("Top by analytic MFU, with their flow rank", screen, "flow", rank_flow, mfu_flow)):
        t = Table(title=title)
        for c in ["rank", f"{other} rank", *LAYOUT, "MFU", f"{other} MFU"]:
            t.add_column(c, justify="right")
        for k, r in enumerate(first.head(args.top).itertuples(), 1):
            t.add_row(str(k), str(ranks.get(r.point, "-")),
                      *(str(getattr(r, c)) for c in LAYOUT), f"{r.mfu:.1%}",
                      f"{mfus[r.point]:.1%}" if r.point in mfus else "-")
        console.print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
