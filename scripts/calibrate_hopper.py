"""Fit the Hopper compute constants on public_runs.csv, with leave-one-source-out error.

Usage: .venv/bin/python scripts/calibrate_hopper.py [VALIDATION_DIR]

Prints today's out-of-sample error (HOPPER's constants were not fitted on these rows), the
in-sample fit over every dense Hopper / Blackwell row (validation.public_runs.fit) and, per
source, the error of a fit that never saw it. Adopt a fit into simulator/calibration.py only
when its leave-one-source-out error beats today's constants.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.public_runs import (  # noqa: E402
    current_constants,
    fit,
    fit_rows,
    leave_one_source_out,
    surrogate,
    surrogate_predict,
)


def main(vdir: str = "../shared/validation") -> None:
    sur = surrogate(vdir)
    rows = fit_rows(sur)
    now = (sur[rows].predicted_s / sur[rows].published_s - 1).abs()
    print(f"today's constants {current_constants()}: mean |error| {now.mean():.1%}, "
          f"worst {now.max():.1%} over {int(rows.sum())} dense Hopper / Blackwell rows")
    consts, obj = fit(sur, rows)
    err = (surrogate_predict(sur[rows], consts) / sur[rows].published_s - 1).abs()
    print(f"in-sample fit {consts}: mean |error| {err.mean():.1%}, worst {err.max():.1%}")
    print(leave_one_source_out(sur).to_string(index=False))


if __name__ == "__main__":
    main(*sys.argv[1:])
