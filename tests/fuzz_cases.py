"""Fuzz cases shared by the suite (tests/simulator/test_fuzz.py, a few hundred per run) and the
campaign benchmark (benchmarks/fuzz.py, many thousands): mutated scenarios at flow fidelity
with faults on small fabrics, and every file-reading command fed broken files. The CLI runs in
this process; every outcome must be exit 0, or exit 2 with one line on stderr, never a
traceback (exit 1 only from ``regress``, whose drift verdict it is)."""

from __future__ import annotations

import contextlib
import io
import json
import traceback
from pathlib import Path

import numpy as np
import yaml

from simulator.cli import main

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "gpt3-175b-1024-selene.yaml"
FABRICS = [
    {"kind": "spine-leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 8, "nic_gbps": 200},
    {"kind": "spine-leaf", "leaves": 4, "spines": 2, "hosts_per_leaf": 4, "nic_gbps": 100,
     "buffer_mib": 1},
    {"kind": "spine-leaf", "oversubscription": 2, "nic_gbps": 400},
    {"kind": "clos3", "pod_gpus": 16, "nic_gbps": 200, "core_oversubscription": 2},
    {"kind": "rail-optimized", "nic_gbps": 200},
]
NETWORKS = [{"congestion_control": "none"}, {"congestion_control": "dcqcn", "pfc": True},
            {"congestion_control": "dcqcn", "pfc": False},
            {"congestion_control": "none", "routing": "spray"},
            {"congestion_control": "dcqcn", "routing": "adaptive", "queue_pairs": 4},
            {"congestion_control": "dcqcn", "dcqcn": {"reaction_point": "mean_field"}}]
ODD_VALUES = [0, -1, 1.5, float("nan"), float("inf"), 10**12, "x", None, [], {"a": 1}, True]


def run_cli(argv: list[str]) -> tuple[int | str, str]:
    """(exit code, or "traceback", and stderr) of ``clustersim ARGV`` run in this process."""
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except SystemExit as stop:                  # argparse's usage errors
        code = stop.code if isinstance(stop.code, int) else 2
    except Exception:                           # noqa: BLE001 -- what the fuzzing looks for
        return "traceback", traceback.format_exc()
    return code, err.getvalue()


def acceptable(command: str, code, stderr: str) -> bool:
    if code == 0:
        return True
    if code == 2:
        return stderr.strip().count("\n") == 0 and stderr.startswith("clustersim: error:")
    return code == 1 and command == "regress"


def _names(fabric_spec: dict, gpus: int) -> tuple[list[str], list[str]]:
    """Switch and cable names of a fabric (as ``clustersim topology --json`` lists them)."""
    from simulator import Scenario
    from simulator.network.build import build_fabric_for
    sc = Scenario.from_dict(_base(fabric_spec, gpus, {}))
    f = build_fabric_for(sc)
    switches = [n for n, t in zip(f.names, f.tier) if t >= 0]
    keep = f.link_src < f.link_dst
    cables = [f"{f.names[a]}-{f.names[b]}" for a, b in zip(f.link_src[keep], f.link_dst[keep])]
    return switches, cables


def _base(fabric: dict, gpus: int, network: dict) -> dict:
    return {"name": "fuzz", "fidelity": "flow",
            "workload": {"model": "megatron-gpt-1.7b", "seq_len": 2048, "global_batch": 64,
                         "micro_batch": 1},
            "parallel": {"tp": 2, "pp": 2, "schedule": "1f1b"},
            "cluster": {"gpu": "h100-sxm", "gpus": gpus, "gpus_per_node": 4,
                        "topology": fabric},
            "network": network}


def flow_case(rng: np.random.Generator) -> dict:
    """A small job at flow fidelity with random network knobs, faults and a mutated field."""
    fabric = dict(FABRICS[rng.integers(len(FABRICS))])
    gpus = 16
    data = _base(fabric, gpus, dict(NETWORKS[rng.integers(len(NETWORKS))]))
    switches, cables = _names(fabric, gpus)
    faults: dict = {}
    for _ in range(rng.integers(0, 3)):
        kind = rng.integers(4)
        if kind == 0:
            faults.setdefault("failed_links", []).append(cables[rng.integers(len(cables))])
        elif kind == 1:
            faults.setdefault("failed_switches", []).append(switches[rng.integers(len(switches))])
        elif kind == 2:
            faults.setdefault("degraded_links", []).append(
                {"link": cables[rng.integers(len(cables))],
                 "capacity_factor": float(rng.choice([0.01, 0.25, 0.5, 0.99]))})
        else:
            faults.setdefault("stragglers", []).append(
                {"gpu": int(rng.integers(gpus)), "slowdown": float(rng.choice([1.01, 2, 50]))})
    if rng.random() < 0.2:                     # a name that is no cable or switch
        faults.setdefault("failed_links", []).append("leaf9-nowhere")
    data["faults"] = faults
    if rng.random() < 0.5:                     # one odd value somewhere
        path = ["network.queue_pairs", "network.ecn.kmin_kb", "network.pfc_threshold.alpha",
                "cluster.topology.buffer_mib", "cluster.topology.link_latency_us",
                "network.dcqcn.g", "parallel.tp", "workload.global_batch", "seed"]
        key = path[rng.integers(len(path))]
        node = data
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = ODD_VALUES[rng.integers(len(ODD_VALUES))]
    return data


def _valid_files(tmp: Path) -> dict[str, tuple[bytes, list[str]]]:
    """A valid input for each file-reading command, and the command's arguments after it."""
    sweep = {"base": str(EXAMPLE), "grid": {"parallel.tp": [4, 8], "parallel.pp": [4, 8]},
             "fidelity": "analytic"}
    baseline = (f"scenario,overrides,mfu,step_time_s\n{EXAMPLE},fidelity=analytic,0.55,19.0\n")
    flows = "src_gpu,dst_gpu,bytes,start_s\n0,5,1000000,0\n1,5,2000000,0.0001\n"
    topo = "{kind: spine-leaf, leaves: 2, spines: 2, hosts_per_leaf: 4}"
    return {
        "simulate": (EXAMPLE.read_bytes(), ["--json", "--set", "fidelity=analytic"]),
        "memory": (EXAMPLE.read_bytes(), ["--json"]),
        "sweep": (yaml.safe_dump(sweep).encode(), ["--out", str(tmp / "out.csv"), "--jobs", "1",
                                                   "--quiet"]),
        "regress": (baseline.encode(), []),
        "flows": (flows.encode(), ["--topology", topo, "--out", str(tmp / "fct.csv")]),
    }


def broken(data: bytes, rng: np.random.Generator) -> bytes:
    """A broken version of a file: random bytes, cut short, another encoding, a byte flipped,
    a line lost, nothing at all, or a JSON where YAML / CSV was expected."""
    how = rng.integers(7)
    if how == 0:
        return rng.integers(0, 256, int(rng.integers(1, 400)), dtype=np.uint8).tobytes()
    if how == 1:
        return data[:int(rng.integers(0, len(data)))]
    if how == 2:
        return data.decode("utf-8").replace("e", "\xe9", 3).encode(
            str(rng.choice(["latin-1", "utf-16", "cp1252"])), errors="replace")
    if how == 3:
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 6))):
            b[int(rng.integers(len(b)))] = int(rng.integers(256))
        return bytes(b)
    if how == 4:
        lines = data.splitlines(keepends=True)
        del lines[int(rng.integers(len(lines)))]
        return b"".join(lines)
    if how == 5:
        return b""
    return json.dumps({"a": [1, 2, {"b": None}]}).encode()


def file_case(rng: np.random.Generator, tmp: Path) -> tuple[str, list[str]]:
    """(command, argv) of a file-reading command on a broken file written under ``tmp``."""
    files = _valid_files(tmp)
    command = list(files)[rng.integers(len(files))]
    data, rest = files[command]
    path = tmp / f"input-{command}"
    path.write_bytes(broken(data, rng))
    return command, [command, str(path), *rest]
