"""Fit Blackwell Ultra's tensor-core speed-up over Blackwell (calibration.
BLACKWELL_ULTRA_TENSOR_SPEEDUP) on the dense GB300 rows of NeMo 25.11 / 26.02, held out on the
GB300 / B300 rows of later releases.

Usage: .venv/bin/python scripts/calibrate_ultra.py [VALIDATION_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.ultra_fit import summary  # noqa: E402


def main(vdir: str = "../shared/validation") -> None:
    s = summary(vdir)
    print(f"fit {s['fit']:.2f} (today {s['today']:.2f}) on {s['rows']} GB300 rows: mean "
          f"|error| {s['fit_mean_abs_error']:.1%} ({s['at_one_mean_abs_error']:.1%} at 1.0)")
    for label, h in s["held_out"].items():
        print(f"  held out ({h['rows']} rows of later releases), {label}: mean |error| "
              f"{h['mean_abs_error']:.1%}, mean {h['mean_error']:+.1%}, worst {h['worst']:.1%}")
    print(s["scan"].to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main(*sys.argv[1:])
