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
from validation.gemm_kernels import fit, load_table, log_errors  # noqa: E402


def _fmt(consts: dict) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in consts.items())


def main() -> None:
    table = load_table()
    consts, err = fit(table)
    print(f"all {len(table)} shapes: {_fmt(consts)}; mean |log error| {err:.3f}")
    single = table[table.batch == 1]
    held = table[table.batch > 1]
    c1, e1 = fit(single)
    out = np.abs(log_errors(held, c1))
    print(f"fitted on the {len(single)} unbatched shapes ({_fmt(c1)}; in sample {e1:.3f}), "
          f"the {len(held)} batched ones: mean {out.mean():.3f}, worst {out.max():.3f}")
    today = dict(consts, fill_k=calibration.GEMM_TILE_FILL_K,
                 fixed_s=calibration.GEMM_FIXED_S)
    e = np.abs(log_errors(table, today))
    print(f"today's GEMM_TILE_FILL_K {calibration.GEMM_TILE_FILL_K}, GEMM_FIXED_S "
          f"{calibration.GEMM_FIXED_S}: mean {e.mean():.3f}, worst {e.max():.3f}")


if __name__ == "__main__":
    main()
