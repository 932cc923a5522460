"""Fit the pipelined ring's exponent and LL128's rate across nodes (calibration.RING_PIPELINE_P,
LL128_NET_FRACTION) on AWS p5's ring points, with each collective held out.

Usage: .venv/bin/python scripts/calibrate_ring.py [VALIDATION_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.ring_fit import summary  # noqa: E402


def main(vdir: str = "../shared/validation") -> None:
    s = summary(vdir)
    print(f"fit p {s['p']:.2f}, LL128 {s['fraction']:.3f} (today {s['today'][0]:.2f}, "
          f"{s['today'][1]:.3f}) on {s['points']} ring points: median |error| "
          f"{s['median']:.1%}, worst {s['worst']:.1%}; latency and transfer added, LL128 at "
          f"120 / 128: "
          f"{s['additive_median']:.1%}, worst {s['additive_worst']:.1%}")
    for coll, h in s["held_out"].items():
        print(f"  {coll} held out ({h['points']} points; fitted p {h['p']:.2f}, LL128 "
              f"{h['fraction']:.3f} on the rest): median {h['median']:.1%}, "
              f"worst {h['worst']:.1%}")
    print(s["table"].to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main(*sys.argv[1:])
