"""Fit the Hopper compute constants on public_runs.csv, with leave-one-source-out error.

Usage: .venv/bin/python scripts/calibrate_hopper.py [VALIDATION_DIR]

Prints today's error, the in-sample fit over every dense Hopper / Blackwell row
(validation.public_runs.fit) and, per source, the error of a fit that never saw it. A fit was
adopted into simulator/calibration.py (HOPPER) because its leave-one-source-out error beat the
constants before it from inside its search box; rerun after any model change and re-adopt when
the fit moves by more than a grid step.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.public_runs import fit_summary, surrogate  # noqa: E402


def main(vdir: str = "../shared/validation") -> None:
    s = fit_summary(surrogate(vdir))
    print(f"today's constants {s['today']}: mean |error| {s['today_mean']:.1%}, worst "
          f"{s['today_worst']:.1%} over {s['rows']} dense Hopper / Blackwell rows "
          f"({'in sample: they are this fit' if s['adopted'] else 'not fitted on them'})")
    print(f"in-sample fit {s['fit']}: mean |error| {s['fit_mean']:.1%}, worst "
          f"{s['fit_worst']:.1%}; on the edge of the search box: {s['edges'] or 'none'}")
    print(s["loso"].to_string(index=False))
    print(f"leave-one-source-out mean |error| {s['loso_mean']:.1%}, worst source "
          f"{s['loso_worst_source']:.1%}; today's constants are the fit: {s['adopted']}; "
          f"adopt a new fit: {s['adopt']}")


if __name__ == "__main__":
    main(*sys.argv[1:])
