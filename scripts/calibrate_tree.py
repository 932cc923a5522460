"""Fit the tree all-reduce's LL128 rate across nodes on EFA (calibration.TREE_LL128_NET_FRACTION)
on AWS p5's tree points, with each node count held out.

Usage: .venv/bin/python scripts/calibrate_tree.py [VALIDATION_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.grid_fit import held_out_lines  # noqa: E402
from validation.tree_fit import summary  # noqa: E402


def main(vdir: str = "../shared/validation") -> None:
    s = summary(vdir)
    print(f"fit LL128 {s['fraction']:.3f} (today {s['today']:.3f}) on {s['points']} tree "
          f"points: median |error| {s['median']:.1%}, worst {s['worst']:.1%}; at 120 / 128 "
          f"(NCCL's model): {s['wire_median']:.1%}, worst {s['wire_worst']:.1%}")
    print("\n".join(held_out_lines(s["held_out"], "nodes")))
    print(s["table"].to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main(*sys.argv[1:])
