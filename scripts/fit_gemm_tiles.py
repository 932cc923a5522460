"""Fit the GEMM tile model's kernel constants to measured cuBLAS throughput by shape.

Usage: .venv/bin/python scripts/fit_gemm_tiles.py

Data and method: validation/gemm_kernels.py (374 bf16 GEMM shapes on H100, OpenXLA's matmul
table). Prints the fit over all shapes, the fit over the unbatched shapes predicting the batched
ones (out of sample), and today's constants' error. GEMM_TILE_FILL_K and GEMM_FIXED_S are copied
into simulator/calibration.py by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator import calibration  # noqa: E402
from validation.gemm_kernels import summary  # noqa: E402


def _fmt(consts: dict) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in consts.items())


def main() -> None:
    s = summary()
    today, held = np.abs(s["today_errors"]), np.abs(s["held_out_errors"])
    print(f"all {len(today)} shapes: {_fmt(s['fit'])}; mean |log error| {s['best']:.3f}")
    print(f"fitted on the {s['single_rows']} unbatched shapes ({_fmt(s['single_fit'])}), the "
          f"{len(held)} batched ones: mean {held.mean():.3f}, worst {held.max():.3f}")
    print(f"today's GEMM_TILE_FILL_K {calibration.GEMM_TILE_FILL_K}, GEMM_FIXED_S "
          f"{calibration.GEMM_FIXED_S}: mean {today.mean():.3f}, worst {today.max():.3f}")


if __name__ == "__main__":
    main()
