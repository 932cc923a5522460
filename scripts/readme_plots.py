"""Regenerate the README's figures (docs/img/*.png). Usage: .venv/bin/python scripts/readme_plots.py

1. The pipeline timeline of GPT-3 175B on Selene's layout with a small batch (the bubble shows).
2. Best MFU per tp x pp over every valid layout of GPT-3 175B on 1,024 A100s (analytic sweep).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from simulator import Scenario, plots, simulate  # noqa: E402
from simulator.sweep.runner import run_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    r = simulate(Scenario.load(ROOT / "examples/gpt3-175b-1024-selene.yaml",
                               ["workload.global_batch=256", "parallel.vpp=1",
                                "parallel.schedule=1f1b"]))
    r.plot_timeline(max_stages=4, title="GPT-3 175B, tp 8 x pp 8 on 1,024 A100: first 4 "
                    "stages of one step (16 micro-batches, 1F1B)").savefig(OUT / "timeline.png",
                                                                           dpi=110)
    with tempfile.TemporaryDirectory() as tmp:
        table = run_sweep(ROOT / "examples/sweeps/gpt3-175b-1024-auto.yaml",
                          Path(tmp) / "sweep.csv", progress=False)
    plots.mfu_heatmap(table, title="GPT-3 175B on 1,024 A100-80GB: best MFU per tp x pp "
                      f"({len(table):,} layouts)").savefig(OUT / "mfu_heatmap.png", dpi=110)
    print("wrote", *sorted(p.name for p in OUT.glob("*.png")))


if __name__ == "__main__":
    main()
