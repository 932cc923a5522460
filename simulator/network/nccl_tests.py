"""Simulated nccl-tests: one collective over the whole fabric, size by size, reported as
nccl-tests does (algbw = S / t, busbw = algbw x factor)."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from simulator.calibration import CHANNELS_PER_NIC_DEFAULT
from simulator.config.topology import topology_spec
from simulator.errors import ScenarioError
from simulator.network.alpha_beta import (
    BUSBW_FACTOR,
    PROTOCOL_KINDS,
    SIMPLE_ONLY,
    AlphaBeta,
    all_to_all_protocol,
)
from simulator.network.build import make_fabric
from simulator.network.collectives import route_phases, run_collective
from simulator.step.groups import Group
from topologies.gpus import load_gpu

NCCL_OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
            "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all",
            "all_to_all": "all_to_all", "sendrecv": "p2p", "p2p": "p2p"}
"""nccl-tests binary names (all_reduce_perf, ...) to collective kinds."""
DEFAULT_GPU = "h100-sxm"
"""GPU of a fabric given without ``--gpu`` and without a preset that names one."""
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.I)


def parse_size(text: str, what: str) -> int:
    """nccl-tests style sizes: 8, 1K, 128M, 1G (binary multiples)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ScenarioError(f"{what}: expected a size like 8, 64K, 128M or 1G, got {text!r}",
                            field=what)
    mult = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[m.group(2).upper()]
    return int(float(m.group(1)) * mult)


def nccl_tests(op: str, *, gpus: int, gpu: str | None = None,
               topology: str = "{kind: spine-leaf}",
               gpus_per_node: int | None = None, routing: str = "ecmp", queue_pairs: int = 1,
               min_bytes: int = 8, max_bytes: int = 128 * 2**20, factor: int = 2,
               seed: int = 0, net=None, algorithm: str | None = None,
               protocol: str | None = None,
               channels_per_nic: int = CHANNELS_PER_NIC_DEFAULT,
               split_data_on_qps: bool = False, channels: int | None = None,
               fidelity: str = "flow", on_size=None) -> pd.DataFrame:
    """One row per size: bytes, time_s, algbw_gbyte_per_s, busbw_gbyte_per_s (nccl-tests'
    definitions: algbw = S / t, busbw = algbw x factor). With ``net`` (the DCQCN / PFC fluid
    model) also max_queue_bytes (deepest egress queue), pause_s (PFC pause summed over
    links), marked_bytes (ECN-marked) and dropped_bytes (``pfc`` off). Each row also names
    the ``algorithm`` and ``protocol`` that ran: NCCL's cost model picks them per size (as the
    screening fidelity does), unless ``algorithm`` forces one (NCCL_ALGO: ring, tree,
    nvls inside one node or, with topology sharp, across nodes, nvlstree across nodes,
    collnet across nodes with sharp) or ``protocol`` does (NCCL_PROTO:
    LL, LL128, Simple). ``queue_pairs`` / ``split_data_on_qps``: NCCL_IB_QPS_PER_CONNECTION /
    NCCL_IB_SPLIT_DATA_ON_QPS (:func:`simulator.network.collectives.qps_used`); ``channels``
    (NCCL_MIN/MAX_NCHANNELS, a multiple of the node's NICs) replaces ``channels_per_nic``.
    ``gpus_per_node``: default the GPU's node for ``gpus`` (its NVLink domain, or whole
    trays of a rack-scale one: :meth:`topologies.gpus.GPUSpec.node_gpus`). ``fidelity``
    screening: NCCL's cost model alone (the alpha-beta model of a training step at screening
    fidelity), no fabric, for sizes or GPU counts the fabric's flows would not hold (an
    all-to-all of 4,096 ranks).
    ``on_size(bytes)``, if given, is called as each size is done (the CLI's progress bar)."""
    if op not in NCCL_OPS:
        raise ScenarioError(f"OP: unknown collective {op!r}; expected one of "
                            f"{', '.join(sorted(NCCL_OPS))}", field="OP")
    if gpus < 2:
        raise ScenarioError(f"--gpus: needs at least 2 GPUs, got {gpus}", field="--gpus")
    if factor < 2 or min_bytes < 1 or max_bytes < min_bytes:
        raise ScenarioError("-b/-e/-f: need 1 <= min <= max and factor >= 2", field="-f")
    spec = topology_spec(topology)
    try:
        spec_gpu = load_gpu(gpu or spec.gpu or DEFAULT_GPU)
    except ValueError as err:
        raise ScenarioError(f"--gpu: {err}", field="--gpu") from None
    gpus_per_node = gpus_per_node or spec_gpu.node_gpus(gpus)
    if gpus_per_node < 1 or (gpus > gpus_per_node and gpus % gpus_per_node):
        fit = next((d for d in range(gpus_per_node - 1, 1, -1) if gpus % d == 0), None)
        hint = f"; --gpus-per-node {fit} fills {fit} of each" if fit else ""
        raise ScenarioError(f"--gpus-per-node: {gpus} GPUs are not whole nodes of "
                            f"{gpus_per_node}{hint}", field="--gpus-per-node")
    if channels:                    # NCCL_MIN/MAX_NCHANNELS: the same on every NIC rail
        nics = spec.nics_per_node or gpus_per_node
        if channels % nics:
            raise ScenarioError(f"--channels: {channels} is not a multiple of the node's "
                                f"{nics} NICs (each NIC rail runs the same channels)",
                                field="--channels")
        channels_per_nic = channels // nics
    if gpus_per_node > spec_gpu.nvlink_domain:
        raise ScenarioError(f"--gpus-per-node: {gpus_per_node} is more than one NVLink domain "
                            f"of {spec_gpu.name} ({spec_gpu.nvlink_domain} GPUs)",
                            field="--gpus-per-node")
    if fidelity not in ("flow", "screening"):
        raise ScenarioError(f"--fidelity: {fidelity!r} is not flow or screening",
                            field="--fidelity")
    if fidelity == "screening" and (net is not None or routing != "ecmp" or queue_pairs != 1):
        raise ScenarioError("--fidelity: screening has no fabric; --routing, --queue-pairs, "
                            "--cc and --pfc act at --fidelity flow only", field="--fidelity")
    fabric = make_fabric(spec, gpus=gpus, gpus_per_node=gpus_per_node,
                         gpu=spec_gpu, seed=seed) if fidelity == "flow" else None
    kind = NCCL_OPS[op]
    if algorithm not in (None, "ring", "tree", "nvls", "nvlstree", "collnet") or (
            algorithm in ("tree", "nvls", "nvlstree", "collnet") and kind != "all_reduce"):
        raise ScenarioError(f"--algo: {algorithm!r} is not an algorithm of {op} (ring; tree, "
                            f"nvls, nvlstree and collnet for all_reduce)", field="--algo")
    nodes = gpus > gpus_per_node
    if algorithm == "nvls" and not (spec_gpu.nvls and (not nodes or spec.sharp)):
        raise ScenarioError(f"--algo: nvls needs NVLink SHARP (nvls) GPUs in one node, or "
                            f"across nodes a topology with sharp: true; {spec_gpu.name or gpu} "
                            f"x {gpus} has {'no NVLS' if not spec_gpu.nvls else 'several nodes'}"
                            f" (nvlstree runs NVLS across nodes without SHARP)", field="--algo")
    if algorithm == "collnet" and not (nodes and spec.sharp):
        raise ScenarioError("--algo: collnet needs several nodes and a topology with sharp: "
                            "true", field="--algo")
    if algorithm == "nvlstree" and not (spec_gpu.nvls and gpus > gpus_per_node):
        raise ScenarioError(f"--algo: nvlstree needs NVLink SHARP (nvls) GPUs on more than one "
                            f"node; {spec_gpu.name or gpu} x {gpus} has "
                            f"{'no NVLS' if not spec_gpu.nvls else 'one node'}", field="--algo")
    if protocol not in (None, "LL", "LL128", "Simple") or (
            protocol is not None and kind not in PROTOCOL_KINDS):
        raise ScenarioError(f"--proto: {protocol!r} is not a protocol of {op} (LL, LL128, "
                            f"Simple for all_reduce, all_gather, reduce_scatter)", field="--proto")
    if protocol not in (None, "Simple") and algorithm in SIMPLE_ONLY:
        raise ScenarioError(f"--proto: {protocol} cannot run --algo {algorithm} (NCCL runs it "
                            f"Simple only)", field="--proto")
    tuner = replace(AlphaBeta.for_cluster(spec_gpu, spec, gpus_per_node),
                    protocol=protocol or "auto")
    group = Group(size=gpus, per_node=min(gpus, gpus_per_node))
    rows, routes = [], {}
    for size in scan_sizes(min_bytes, max_bytes, factor):
        if fabric is None:          # NCCL's cost model on a non-blocking fabric (screening)
            rows.append(_screening_row(tuner, kind, group, size, algorithm))
        else:
            rows.append(_fabric_row(fabric, kind, gpus, size, tuner, group, routing=routing,
                                    queue_pairs=queue_pairs, net=net, seed=seed,
                                    algorithm=algorithm, protocol=protocol,
                                    channels_per_nic=channels_per_nic, gpu_name=spec_gpu.name,
                                    split_data_on_qps=split_data_on_qps, routes=routes))
        if on_size is not None:
            on_size(size)
    return pd.DataFrame(rows)


def scan_sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """nccl-tests' sizes: -b, then times -f while at most -e."""
    out, size = [], min_bytes
    while size <= max_bytes and factor >= 2:
        out.append(size)
        size *= factor
    return out


def _routed(fabric, kind: str, gpus: int, size: int, algo: str, routes: dict, *,
            routing: str, queue_pairs: int, channels_per_nic: int, split_data_on_qps: bool):
    """The collective's phases routed for ``size``, or None where the routes depend on the size
    (queue pairs filled message by message: collectives.qps_used). Elsewhere every flow's
    bytes are proportional to the size and its paths independent of it, so the first size's
    routes (kept in ``routes`` by algorithm) serve the others with their flows' bytes scaled."""
    if queue_pairs > 1 and not split_data_on_qps:
        return None
    if algo not in routes:
        routes[algo] = (size, route_phases(
            fabric, kind, [np.arange(gpus)], float(size), routing=routing,
            queue_pairs=queue_pairs, algorithm=algo, channels_per_nic=channels_per_nic,
            split_data_on_qps=split_data_on_qps))
    first, phases = routes[algo]
    return [replace(ph, size=ph.size * (size / first)) for ph in phases]


def _fabric_row(fabric, kind: str, gpus: int, size: int, tuner: AlphaBeta, group: Group, *,
                algorithm: str | None, protocol: str | None, routes: dict, **run) -> dict:
    """One size on the fabric: NCCL's algorithm and protocol choice (or the forced ones), its
    flows through ``run_collective`` (``run``: its settings; the routes of an earlier size
    reused, :func:`_routed`), and under the fluid model the congestion's summary."""
    algo = algorithm or tuner.algorithm(kind, group, float(size))
    proto = protocol or tuner.protocol_for(kind, group, float(size))
    routed = _routed(fabric, kind, gpus, size, algo, routes, routing=run["routing"],
                     queue_pairs=run["queue_pairs"], channels_per_nic=run["channels_per_nic"],
                     split_data_on_qps=run["split_data_on_qps"])
    res = run_collective(fabric, kind, [np.arange(gpus)], float(size), algorithm=algo,
                         protocol=proto, routed=routed, **run)
    algbw = size / res.time_s
    row = {"bytes": size, "time_s": res.time_s, "algbw_gbyte_per_s": algbw / 1e9,
           "busbw_gbyte_per_s": algbw * BUSBW_FACTOR[kind](gpus) / 1e9,
           "algorithm": algo, "protocol": res.protocol}
    if res.congestion is not None:
        c = res.congestion
        row.update(max_queue_bytes=float(c["max_queue_bytes"].max()),
                   pause_s=float(c["pause_s"].sum()),
                   marked_bytes=float(c["marked_bytes"].sum()),
                   dropped_bytes=float(c["dropped_bytes"].sum()))
    return row


def _screening_row(tuner: AlphaBeta, kind: str, group: Group, size: int,
                   algorithm: str | None) -> dict:
    """One size at screening fidelity: the alpha-beta model's time (NCCL's algorithm and
    protocol choice, a forced all-reduce algorithm as NCCL_ALGO), no fabric."""
    ab = replace(tuner, all_reduce=algorithm) if algorithm and kind == "all_reduce" else tuner
    t = ab.time_s(kind, group, float(size))
    if kind in PROTOCOL_KINDS:
        algo, proto = ab.choice(kind, group, float(size))
    else:
        algo = "ring"
        proto = all_to_all_protocol(group, float(size)) if kind == "all_to_all" else "Simple"
    algbw = size / t
    return {"bytes": size, "time_s": t, "algbw_gbyte_per_s": algbw / 1e9,
            "busbw_gbyte_per_s": algbw * BUSBW_FACTOR[kind](group.size) / 1e9,
            "algorithm": algo, "protocol": proto}
