"""Fit the host's per-expert issue time (simulator.step.host.HOST_EXPERT_GEMM_S) on the
published dropless Megatron-Core MoE runs, with leave-one-run-out and leave-one-GPU-out error.

Usage: .venv/bin/python scripts/calibrate_host.py [VALIDATION_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.host_fit import summary  # noqa: E402


def main(vdir: str = "../shared/validation") -> None:
    s = summary(vdir)
    print(f"fit {s['fit_s'] * 1e6:.0f} us (today {s['today_s'] * 1e6:.0f} us): mean |error| "
          f"{s['in_sample']:.1%} in sample, {s['held_out']:.1%} leaving each run out, "
          f"{s['without']:.1%} without the host model")
    print(s["runs"].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(s["by_gpu"].to_string(index=False, float_format=lambda x: f"{x:.3g}"))


if __name__ == "__main__":
    main(*sys.argv[1:])
