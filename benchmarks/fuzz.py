"""The fuzz campaign (not a test): many thousands of cases, counted by outcome.

Usage: .venv/bin/python benchmarks/fuzz.py [--screening N] [--flow N] [--files N] [--seed S]

screening: the suite's single-field mutations of a small scenario (tests/simulator/
test_bad_input.py's values and paths), loaded and simulated at screening fidelity; flow:
tests/fuzz_cases.flow_case (faults, network knobs, odd values) at flow fidelity; files: every
file-reading command on broken files. Prints a table of outcomes and every traceback found.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import small_scenario  # noqa: E402
from tests.fuzz_cases import ODD_VALUES, acceptable, file_case, flow_case, run_cli  # noqa: E402
from tests.simulator.test_bad_input import PATHS, SECTION_KEYS, _set  # noqa: E402

SCREEN_VALUES = ODD_VALUES + [2, 3, 8, 96, 4096, "auto", "gpt3-175b", "h100-sxm", "clos3",
                              "interleaved", "zb-h1", "full", "dcqcn", -10**9, 1e-300]


def screening_case(rng: np.random.Generator) -> dict:
    data = small_scenario()
    for _ in range(rng.integers(1, 4)):
        keys = PATHS + [s + ".bogus_key" for s in SECTION_KEYS]
        path = keys[rng.integers(len(keys))]
        data = _set(data, path, SCREEN_VALUES[rng.integers(len(SCREEN_VALUES))])
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--screening", type=int, default=10_000)
    ap.add_argument("--flow", type=int, default=300)
    ap.add_argument("--files", type=int, default=3_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    tmp = Path(tempfile.mkdtemp())
    counts: Counter = Counter()
    found = []
    t0 = time.perf_counter()
    for kind, n in (("screening", args.screening), ("flow", args.flow), ("files", args.files)):
        for _ in range(n):
            if kind == "files":
                command, argv = file_case(rng, tmp)
            else:
                data = screening_case(rng) if kind == "screening" else flow_case(rng)
                if kind == "screening":
                    data["fidelity"] = "screening"
                path = tmp / "scenario.yaml"
                path.write_text(yaml.safe_dump(data))
                command, argv = "simulate", ["simulate", str(path), "--json"]
            code, err = run_cli(argv)
            ok = acceptable(command, code, err)
            counts[(kind, command, code if ok else "TRACEBACK / bad output")] += 1
            if not ok:
                found.append((kind, argv, err[-2000:]))
    t = Table(title=f"fuzz campaign, seed {args.seed}, {time.perf_counter() - t0:.0f} s")
    for c in ("cases", "command", "outcome", "count"):
        t.add_column(c)
    for (kind, command, code), n in sorted(counts.items(), key=str):
        t.add_row(kind, command, str(code), f"{n:,}")
    Console().print(t)
    for kind, argv, err in found:
        print(f"--- {kind}: {' '.join(argv)}\n{err}")
    print(f"{sum(counts.values()):,} cases, {len(found)} tracebacks or bad outputs")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
