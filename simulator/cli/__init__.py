"""The `clustersim` command line. Bad input: one line on stderr, exit code 2, no traceback.

One module per command family (:mod:`.presets`, :mod:`.step`, :mod:`.network`, :mod:`.sweep`,
:mod:`.regress`, :mod:`.failures`); the parsers live apart (:mod:`.parsers`), so parsing the
arguments imports no command, and a command's module (with what it needs: Dask for sweeps, the
fluid model's compiler under DCQCN) loads when that command runs.
"""

from __future__ import annotations

import importlib
import sys

from rich.console import Console

from simulator.cli.parsers import EXIT_BAD_INPUT, build_parser
from simulator.errors import FabricError, ScenarioError

PIPE_WIDTH = 132
"""Console width when stdout is a pipe or file (rich would assume 80 and squeeze tables)."""
COMMANDS = {"presets": ("presets", "run"), "memory": ("step", "memory"),
            "simulate": ("step", "simulate_cmd"), "topology": ("step", "topology"),
            "nccl-tests": ("network", "nccl_tests_cmd"), "flows": ("network", "flows"),
            "failures": ("failures", "run"), "sweep": ("sweep", "run_sweep_cmd"),
            "regress": ("regress", "run_regress_cmd")}
"""Command -> (module of this package, function(args, console) -> exit code)."""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Console(highlight=False, soft_wrap=True,
                  width=None if sys.stdout.isatty() else PIPE_WIDTH)
    module, func = COMMANDS[args.command]
    run = getattr(importlib.import_module(f"{__name__}.{module}"), func)
    try:
        return run(args, out)
    except (ScenarioError, FabricError) as err:
        sys.stderr.write(f"clustersim: error: {err}\n")
        return EXIT_BAD_INPUT
