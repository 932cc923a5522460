"""Command-line front ends of the fabric: simulated nccl-tests and arbitrary flow sets."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import yaml
from pydantic import TypeAdapter, ValidationError

from simulator.collectives import run_collective
from simulator.comm import BUSBW_FACTOR
from simulator.errors import ScenarioError, from_validation_error
from simulator.fabric import Fabric, compile_fabric
from simulator.flowsim import simulate_flows
from topologies.builders import build_fabric
from topologies.gpus import GPUSpec, load_gpu
from topologies.spec import TopologySpec, topology_mapping

NCCL_OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
            "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all",
            "all_to_all": "all_to_all", "sendrecv": "p2p", "p2p": "p2p"}
"""nccl-tests binary names (all_reduce_perf, ...) to collective kinds."""
_TOPOLOGY = TypeAdapter(TopologySpec)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.I)


def parse_size(text: str, what: str) -> int:
    """nccl-tests style sizes: 8, 1K, 128M, 1G (binary multiples)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ScenarioError(f"{what}: expected a size like 8, 64K, 128M or 1G, got {text!r}",
                            field=what)
    mult = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[m.group(2).upper()]
    return int(float(m.group(1)) * mult)


def topology_spec(text: str, what: str = "--topology"):
    """A preset name or an inline YAML / JSON mapping, validated."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ScenarioError(f"{what}: not a preset name or a YAML mapping", field=what) from None
    try:
        if isinstance(data, str):
            data = topology_mapping(data)
        return _TOPOLOGY.validate_python(data)
    except ValidationError as err:
        inner = from_validation_error(err)
        raise ScenarioError(f"{what}: {inner}", field=what) from None
    except ValueError as err:
        raise ScenarioError(f"{what}: {err}", field=what) from None


def flows_per_link(fabric: Fabric, src, dst, routing: str = "ecmp", queue_pairs: int = 1
                   ) -> pd.DataFrame:
    """How many flows each link carries when ``src[i] -> dst[i]`` (GPU ids) all start at once
    with ``queue_pairs`` connections each: columns link, tier, flows (every link, zeros too)."""
    src = np.repeat(np.asarray(src, np.int64), queue_pairs)
    dst = np.repeat(np.asarray(dst, np.int64), queue_pairs)
    hops, _, _ = fabric.route(src, dst, np.arange(len(src)), routing)
    counts = np.bincount(hops[hops >= 0], minlength=fabric.num_links)
    return pd.DataFrame({"link": fabric.link_names(), "tier": fabric.link_tiers(),
                         "flows": counts})


def make_fabric(spec, *, gpus: int, gpus_per_node: int, gpu: GPUSpec, seed: int = 0) -> Fabric:
    graph = build_fabric(spec, gpus=gpus, gpus_per_node=gpus_per_node,
                         nvlink_gbyte_per_s=gpu.nvlink_gbyte_per_s)
    return compile_fabric(graph, rng=np.random.default_rng(seed))


def nccl_tests(op: str, *, gpus: int, gpu: str = "h100-sxm", topology: str = "{kind: spine-leaf}",
               gpus_per_node: int = 8, routing: str = "ecmp", queue_pairs: int = 1,
               min_bytes: int = 8, max_bytes: int = 128 * 2**20, factor: int = 2,
               seed: int = 0, net=None) -> pd.DataFrame:
    """One row per size: bytes, time_s, algbw_gbyte_per_s, busbw_gbyte_per_s (nccl-tests'
    definitions: algbw = S / t, busbw = algbw x factor). With ``net`` (the DCQCN / PFC fluid
    model) also max_queue_bytes (deepest egress queue), pause_s (PFC pause summed over
    links), marked_bytes (ECN-marked) and dropped_bytes (``pfc`` off)."""
    if op not in NCCL_OPS:
        raise ScenarioError(f"OP: unknown collective {op!r}; expected one of "
                            f"{', '.join(sorted(NCCL_OPS))}", field="OP")
    if gpus < 2:
        raise ScenarioError(f"--gpus: needs at least 2 GPUs, got {gpus}", field="--gpus")
    if factor < 2 or min_bytes < 1 or max_bytes < min_bytes:
        raise ScenarioError("-b/-e/-f: need 1 <= min <= max and factor >= 2", field="-f")
    if gpus_per_node < 1 or (gpus > gpus_per_node and gpus % gpus_per_node):
        raise ScenarioError(f"--gpus-per-node: {gpus} GPUs are not whole nodes of "
                            f"{gpus_per_node}", field="--gpus-per-node")
    try:
        spec_gpu = load_gpu(gpu)
    except ValueError as err:
        raise ScenarioError(f"--gpu: {err}", field="--gpu") from None
    fabric = make_fabric(topology_spec(topology), gpus=gpus, gpus_per_node=gpus_per_node,
                         gpu=spec_gpu, seed=seed)
    kind = NCCL_OPS[op]
    rows = []
    size = min_bytes
    while size <= max_bytes:
        res = run_collective(fabric, kind, [np.arange(gpus)], float(size), routing=routing,
                             queue_pairs=queue_pairs, net=net, seed=seed)
        algbw = size / res.time_s
        row = {"bytes": size, "time_s": res.time_s, "algbw_gbyte_per_s": algbw / 1e9,
               "busbw_gbyte_per_s": algbw * BUSBW_FACTOR[kind](gpus) / 1e9}
        if res.congestion is not None:
            c = res.congestion
            row.update(max_queue_bytes=float(c["max_queue_bytes"].max()),
                       pause_s=float(c["pause_s"].sum()),
                       marked_bytes=float(c["marked_bytes"].sum()),
                       dropped_bytes=float(c["dropped_bytes"].sum()))
        rows.append(row)
        size *= factor
    return pd.DataFrame(rows)


def run_flow_file(frame: pd.DataFrame, fabric: Fabric, *, routing: str = "ecmp",
                  queue_pairs: int = 1, net=None, buffer_mib: float = 32.0, seed: int = 0
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Flows (src_gpu, dst_gpu, bytes, start_s) -> (flows with finish_s, per-link statistics).

    ``net`` (a NetworkConfig with DCQCN or PFC on) runs the DCQCN / PFC fluid model: flows
    gain ``retransmitted_bytes``, links gain queue / pause / mark / drop columns, and
    ``links.attrs`` holds ``queue_trace`` and ``pause_trace`` (t_s, link, ...) for plotting.
    Otherwise flows share links max-min fairly."""
    need = ["src_gpu", "dst_gpu", "bytes", "start_s"]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise ScenarioError(f"FLOWS: missing column(s) {', '.join(missing)}", field="FLOWS")
    for c in need:
        if not pd.api.types.is_numeric_dtype(frame[c]) or frame[c].isna().any():
            raise ScenarioError(f"FLOWS.{c}: must be numbers on every row", field=f"FLOWS.{c}")
    src, dst = frame.src_gpu.to_numpy(np.int64), frame.dst_gpu.to_numpy(np.int64)
    for c, v in (("src_gpu", src), ("dst_gpu", dst)):
        if (v < 0).any() or (v >= fabric.gpus).any():
            raise ScenarioError(f"FLOWS.{c}: GPU ids must be in 0..{fabric.gpus - 1}",
                                field=f"FLOWS.{c}")
    nbytes, start = frame.bytes.to_numpy(float), frame.start_s.to_numpy(float)
    if (nbytes <= 0).any() or (start < 0).any():
        raise ScenarioError("FLOWS: bytes must be > 0 and start_s >= 0", field="FLOWS.bytes")
    q = queue_pairs
    sport = np.tile(np.arange(q), len(src)) + np.repeat(np.arange(len(src)), q) * q
    hops, parent, share = fabric.route(np.repeat(src, q), np.repeat(dst, q), sport, routing)
    owner = np.repeat(np.arange(len(src)), q)[parent]
    sizes, starts = np.repeat(nbytes / q, q)[parent] * share, np.repeat(start, q)[parent]
    if net is not None and (net.congestion_control == "dcqcn" or net.pfc):
        return _fluid_flow_file(frame, fabric, hops, sizes, starts, owner, net, buffer_mib, seed)
    res = simulate_flows(hops, sizes, fabric.capacity, fabric.latency, start=starts,
                         weight=share)
    finish = pd.Series(res.finish_s).groupby(owner).max().to_numpy()
    out = frame.assign(finish_s=finish, fct_s=finish - start)
    names = fabric.link_names()
    used = np.flatnonzero(res.link_bytes > 0)
    links = pd.DataFrame({"link": [names[i] for i in used],
                          "bytes": res.link_bytes[used], "busy_s": res.link_busy_s[used],
                          "max_flows": res.link_max_flows[used]})
    return out, links


def switch_ids(fabric: Fabric) -> tuple[np.ndarray, np.ndarray, int]:
    """Per link: the switch it leaves and the switch it enters (-1 for GPUs / NICs), and the
    number of switches."""
    is_sw = fabric.tier >= 0
    sw_of = np.full(len(fabric.tier), -1)
    sw_of[is_sw] = np.arange(int(is_sw.sum()))
    return sw_of[fabric.link_src], sw_of[fabric.link_dst], int(is_sw.sum())


def switch_buffers(fabric: Fabric, default_mib: float = 32.0) -> np.ndarray:
    """[switch] shared buffer bytes, in :func:`switch_ids` order."""
    from workloads.units import MIB
    buf = fabric.buffer[fabric.tier >= 0] if fabric.buffer is not None else None
    if buf is None or not (buf > 0).all():
        return np.full(int((fabric.tier >= 0).sum()), default_mib * MIB)
    return buf


def _fluid_flow_file(frame, fabric, hops, sizes, starts, owner, net, buffer_mib, seed):
    from simulator.fluid import simulate_fluid

    src_sw, dst_sw, n_sw = switch_ids(fabric)
    res = simulate_fluid(hops, sizes, fabric.capacity, fabric.latency, src_sw, dst_sw,
                         switch_buffers(fabric, buffer_mib), net, start=starts, seed=seed)
    finish = pd.Series(res.finish_s).groupby(owner).max().to_numpy()
    retx = pd.Series(res.flow_retransmitted_bytes).groupby(owner).sum().to_numpy()
    out = frame.assign(finish_s=finish, fct_s=finish - frame.start_s.to_numpy(float),
                       retransmitted_bytes=retx)
    used = np.flatnonzero((res.link_bytes > 0) | (res.link_pause_s > 0))
    names = fabric.link_names()
    with np.errstate(divide="ignore", invalid="ignore"):
        mark = np.where(res.link_bytes > 0, res.link_marked_bytes / res.link_bytes, 0.0)
    links = pd.DataFrame({
        "link": [names[i] for i in used], "tier": fabric.link_tiers()[used],
        "bytes": res.link_bytes[used], "max_queue_bytes": res.link_max_queue[used],
        "mean_queue_bytes": res.link_mean_queue[used], "pause_s": res.link_pause_s[used],
        "pauses": res.link_pauses[used].astype(int), "ecn_mark_rate": mark[used],
        "dropped_bytes": res.link_dropped_bytes[used]})
    for key in ("queue_trace", "pause_trace"):
        tr = getattr(res, key)
        links.attrs[key] = tr.assign(link=[names[i] for i in tr.link]) if len(tr) else tr
    return out, links


def flows_chrome_trace(flows: pd.DataFrame, links: pd.DataFrame) -> dict:
    """Chrome / Perfetto trace of a flow run: a span per flow on a track per source GPU, and,
    from the fluid model, queue-depth counters for the hottest links and the number of paused
    ports over time."""
    us = 1e6
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "flows"}},
              {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "fabric"}}]
    for r in flows.itertuples(index=False):
        events.append({"ph": "X", "name": f"{int(r.src_gpu)}->{int(r.dst_gpu)}",
                       "cat": "flow", "pid": 0, "tid": int(r.src_gpu), "ts": r.start_s * us,
                       "dur": max(r.finish_s - r.start_s, 0.0) * us,
                       "args": {"bytes": float(r.bytes)}})
    q = links.attrs.get("queue_trace")
    if q is not None and len(q):
        for r in q.itertuples(index=False):
            events.append({"ph": "C", "name": f"queue {r.link}", "pid": 1, "ts": r.t_s * us,
                           "args": {"MB": r.queue_bytes / 1e6}})
    pz = links.attrs.get("pause_trace")
    if pz is not None and len(pz):
        for t, n in pz.groupby("t_s").paused.sum().items():
            events.append({"ph": "C", "name": "ports paused", "pid": 1, "ts": t * us,
                           "args": {"ports": int(n)}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}
