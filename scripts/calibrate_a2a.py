"""Fit the rate NCCL's sends reach across nodes on EFA (calibration.P2P_NET_FRACTION)
on AWS p5's all-to-all points, with each GPU count held out.

Usage: .venv/bin/python scripts/calibrate_a2a.py [VALIDATION_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.grid_fit import held_out_lines  # noqa: E402
from validation.a2a_fit import summary  # noqa: E402


def main(vdir: str = "../shared/validation") -> None:
    s = summary(vdir)
    print(f"fit {s['fraction']:.3f} of line rate (today {s['today']:.3f}) on {s['points']} "
          f"all-to-all points: median |error| {s['median']:.1%}, worst {s['worst']:.1%}; at a "
          f"ring's rate: {s['ring_median']:.1%}, worst {s['ring_worst']:.1%}")
    print("\n".join(held_out_lines(s["held_out"], "GPUs")))
    print(s["table"].to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main(*sys.argv[1:])
