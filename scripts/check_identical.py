"""Check that a code move changed no result: every example and every regression-baseline row,
at screening and at flow fidelity, one DCQCN / PFC step, and the CLI's nccl-tests, memory and
failures outputs, compared with a reference taken before the move.

Usage:
    .venv/bin/python scripts/check_identical.py --record   # before the move: write the reference
    .venv/bin/python scripts/check_identical.py            # after it: compare (exit 1 on a change)

Compared: the full JSON of each result except ``sim_wall_s`` (and ``fidelity`` where the only
change is the documented "flow" -> "fluid" of a run that went through the congestion model),
plus a digest of each result frame (timeline, links, collectives, queues).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "regression" / "identical_reference.json"
CLI = [str(Path(sys.executable).with_name("clustersim"))]
FLOW_NONE = ["fidelity=flow", "network.congestion_control=none"]


def runs() -> list[tuple[str, str, list[str]]]:
    """(label, scenario path, overrides): every example and baseline row, at screening and at
    flow fidelity (max-min), plus one step through the DCQCN / PFC fluid model."""
    base = ROOT / "tests" / "regression" / "mfu_baseline.csv"
    rows = []
    for ex in sorted((ROOT / "examples").glob("*.yaml")):
        rows.append((ex.relative_to(ROOT).as_posix(), []))
    with base.open() as fh:
        for r in csv.DictReader(fh):
            path = (base.parent / r["scenario"]).resolve().relative_to(ROOT).as_posix()
            over = [o for o in r["overrides"].split(";") if o]
            rows.append((path, over))
    out, seen = [], set()
    for path, over in rows:
        for extra, tag in (([], "own"), (["fidelity=screening"], "screening"),
                           (FLOW_NONE, "flow")):
            o = over + extra
            key = (path, tuple(o))
            if key not in seen:
                seen.add(key)
                out.append((f"{path} [{tag}] {' '.join(o)}".strip(), path, o))
    out.append(("examples/megascale-175b-12288.yaml [dcqcn+pfc]",
                "examples/megascale-175b-12288.yaml", ["fidelity=flow"]))
    out.append(("examples/gpt3-175b-1024-selene.yaml [dcqcn, failed aggregation switch]",
                "examples/gpt3-175b-1024-selene.yaml",
                ["fidelity=flow", "network.congestion_control=dcqcn",
                 "faults.failed_switches=[agg0.3]"]))
    return out


def _digest(frame) -> str | None:
    if frame is None:
        return None
    import pandas as pd
    h = hashlib.sha256(",".join(map(str, frame.columns)).encode())
    h.update(pd.util.hash_pandas_object(frame.reset_index(drop=True), index=False)
             .to_numpy().tobytes())
    return h.hexdigest()[:16]


def simulate_one(path: str, overrides: list[str]) -> dict:
    from simulator import Scenario, simulate
    r = simulate(Scenario.load(ROOT / path, overrides))
    d = r.to_dict()
    d.pop("sim_wall_s")
    d["frames"] = {k: _digest(getattr(r, k)) for k in ("timeline", "links", "collectives",
                                                       "queues")}
    return d


CLI_RUNS = [
    ("nccl-tests all_reduce 64 GPUs ecmp",
     ["nccl-tests", "all_reduce", "--gpus", "64", "-b", "8", "-e", "1G", "-f", "64", "--json"]),
    ("nccl-tests all_to_all 32 GPUs spray",
     ["nccl-tests", "alltoall", "--gpus", "32", "--routing", "spray", "-b", "1M", "-e", "64M",
      "-f", "8", "--json"]),
    ("nccl-tests sendrecv 16 GPUs",
     ["nccl-tests", "sendrecv", "--gpus", "16", "-b", "1K", "-e", "16M", "-f", "64", "--json"]),
    ("memory llama3-405b",
     ["memory", "examples/llama3-405b-16384.yaml", "--json"]),
    ("failures megascale (200 trials)",
     ["failures", "examples/megascale-175b-12288.yaml", "--trials", "200", "--json"]),
]


def cli_one(args: list[str]) -> object:
    out = subprocess.run(CLI + args, cwd=ROOT, capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    if isinstance(data, dict):
        data.pop("sim_wall_s", None)
    return data


def collect() -> dict:
    res = {}
    for label, path, over in runs():
        res[label] = simulate_one(path, over)
        print(f"  ran {label}", file=sys.stderr)
    for label, args in CLI_RUNS:
        res[label] = cli_one(args)
        print(f"  ran {label}", file=sys.stderr)
    return res


def _diff(a, b, where="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'reference' if k in a else 'now'}")
            else:
                out += _diff(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} -> {b!r}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help="write the reference")
    args = ap.parse_args()
    now = collect()
    if args.record:
        REFERENCE.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(now)} runs in {REFERENCE.relative_to(ROOT)}")
        return 0
    ref = json.loads(REFERENCE.read_text())
    now = json.loads(json.dumps(now))              # same float round trip as the reference
    bad = 0
    for label in ref.keys() | now.keys():
        if label not in now or label not in ref:
            print(f"MISSING  {label}")
            bad += 1
            continue
        diffs = _diff(ref[label], now[label])
        intended = [d for d in diffs if d == ".fidelity: 'flow' -> 'fluid'"]
        diffs = [d for d in diffs if d not in intended]
        status = "CHANGED " if diffs else "identical"
        note = " (fidelity flow -> fluid: the congestion model ran)" if intended else ""
        print(f"{status} {label}{note}")
        for d in diffs[:10]:
            print(f"           {d}")
        bad += bool(diffs)
    print(f"{len(ref) - bad} of {len(ref)} runs identical (sim_wall_s excluded)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
