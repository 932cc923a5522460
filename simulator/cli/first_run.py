"""Whether numba has compiled clustersim's kernels in this checkout yet.

The max-min solver (:mod:`simulator.network.waterfill`) and the fluid congestion step
(:mod:`simulator.congestion.kernel`) are numba functions cached next to their modules
(``cache=True``: ``__pycache__/<module>.<function>-<line>.py<ver>.nbi``). The first run in a
fresh checkout compiles them, which takes far longer than the step: measured on a 2-core
machine, about 7 s for the solver and 40 s for the congestion step. ``clustersim simulate``,
``nccl-tests`` and ``flows`` say so before a run through the congestion model rather than sit
silent for 40 s; nothing here imports numba.
"""

from __future__ import annotations

import sys
from pathlib import Path

_PKG = Path(__file__).parents[1]
KERNELS = {"flow": (_PKG / "network" / "__pycache__", "waterfill.fill-"),
           "fluid": (_PKG / "congestion" / "__pycache__", "kernel.run_steps-")}
"""Per kind of run, where its entry kernel's numba index lives and the index's name prefix."""
COMPILE_S = {"flow": 7, "fluid": 40}
"""About how long each compiles the first time, on 2 cores (measured, ``make run`` on a fresh
checkout); for the message only."""


def uncompiled(kinds: tuple[str, ...]) -> list[str]:
    """The kinds among ``kinds`` (``flow``, ``fluid``) whose kernels have no numba cache yet."""
    out = []
    for kind in kinds:
        folder, prefix = KERNELS[kind]
        if not any(folder.glob(f"{prefix}*.nbi")):
            out.append(kind)
    return out


def first_run_notice(kinds: tuple[str, ...]) -> str | None:
    """One line for the user when ``kinds`` still need compiling, else None."""
    todo = uncompiled(kinds)
    if not todo:
        return None
    secs = sum(COMPILE_S[k] for k in todo)
    what = " and ".join({"flow": "the max-min solver", "fluid": "the congestion model"}[k]
                        for k in todo)
    return (f"first run in this checkout: numba compiles {what} (about {secs} s on 2 cores), "
            "cached for later runs")


def say_if_first_fluid_run(stream=None) -> None:
    """Write :func:`first_run_notice` for the congestion model to ``stream`` (stderr) when its
    kernel is not compiled yet: the CLI calls it before a run through the fluid model."""
    note = first_run_notice(("fluid",))
    if note:
        (stream or sys.stderr).write(note + "\n")
