"""Whether numba has compiled the congestion model's kernel in this checkout yet.

The fluid congestion step (:mod:`simulator.congestion.kernel`) is numba code cached next to
its module (``cache=True``: ``__pycache__/kernel.<function>-<line>.py<ver>.nbi``). The first
run through it in a fresh checkout compiles it, which takes far longer than the step.
``clustersim simulate``, ``nccl-tests`` and ``flows`` say so before such a run rather than sit
silent; nothing here imports numba.
"""

from __future__ import annotations

import sys
from pathlib import Path

KERNEL_CACHE = (Path(__file__).parents[1] / "congestion" / "__pycache__", "kernel.run_steps-")
"""Where the fluid step's entry kernel keeps its numba index, and the index's name prefix."""
COMPILE_S = 40
"""Seconds the congestion kernel takes to compile the first time on 2 cores (measured: the
default scenario's first ``make run`` in a fresh checkout, 46 s, 3.9 s once cached); for the
message only."""


def compiled() -> bool:
    """Whether the congestion kernel has a numba cache in this checkout."""
    folder, prefix = KERNEL_CACHE
    return any(folder.glob(f"{prefix}*.nbi"))


def say_if_first_fluid_run(stream=None) -> None:
    """One line on ``stream`` (stderr) when the congestion kernel is not compiled yet: the CLI
    calls it before a run through the fluid model."""
    if not compiled():
        (stream or sys.stderr).write(
            f"first run in this checkout: numba compiles the congestion model (about "
            f"{COMPILE_S} s on 2 cores), cached for later runs\n")
