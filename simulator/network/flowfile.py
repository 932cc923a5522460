"""Arbitrary flow sets on the fabric (``clustersim flows``): max-min sharing, or the DCQCN /
PFC fluid model, with per-link statistics and a Chrome trace."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator import congestion
from simulator.errors import ScenarioError
from simulator.network.fabric import Fabric, switch_buffers, switch_ids
from simulator.network.flows import simulate_flows


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


def validate_flows(frame: pd.DataFrame) -> None:
    """A flows table's columns and values (every rule but the fabric's size): one line naming
    the column, else nothing."""
    need = ["src_gpu", "dst_gpu", "bytes", "start_s"]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise ScenarioError(f"FLOWS: missing column(s) {', '.join(missing)}", field="FLOWS")
    if not len(frame):
        raise ScenarioError("FLOWS: no flows (the file has a header and no rows)", field="FLOWS")
    for c in need:
        if not pd.api.types.is_numeric_dtype(frame[c]) or frame[c].isna().any():
            raise ScenarioError(f"FLOWS.{c}: must be numbers on every row", field=f"FLOWS.{c}")
    for c in ("src_gpu", "dst_gpu"):
        v = frame[c].to_numpy(float)
        if not (np.isfinite(v) & (v == np.round(v)) & (v >= 0)).all():
            raise ScenarioError(f"FLOWS.{c}: GPU ids must be whole numbers >= 0",
                                field=f"FLOWS.{c}")
    src, dst = frame.src_gpu.to_numpy(np.int64), frame.dst_gpu.to_numpy(np.int64)
    if (src == dst).any():
        row = int(np.flatnonzero(src == dst)[0])
        raise ScenarioError(f"FLOWS: row {row + 1} sends from GPU {src[row]} to itself",
                            field="FLOWS.dst_gpu")
    nbytes, start = frame.bytes.to_numpy(float), frame.start_s.to_numpy(float)
    if (nbytes <= 0).any() or (start < 0).any() or not np.isfinite(nbytes).all() \
            or not np.isfinite(start).all():
        raise ScenarioError("FLOWS: bytes must be finite and > 0, start_s finite and >= 0",
                            field="FLOWS.bytes")


def run_flow_file(frame: pd.DataFrame, fabric: Fabric, *, routing: str = "ecmp",
                  queue_pairs: int = 1, net=None, buffer_mib: float = 32.0, seed: int = 0,
                  hops: np.ndarray | None = None, trace_links: int = 4,
                  dt: float | None = None,
                  ack_hops: np.ndarray | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Flows (src_gpu, dst_gpu, bytes, start_s) -> (flows with finish_s, per-link statistics).

    ``net`` (a NetworkConfig with DCQCN or PFC on) runs the DCQCN / PFC fluid model: flows
    gain ``retransmitted_bytes`` (and, with ``net.ack_bytes``, ``acked_s``: when the last
    acknowledgement reaches the sender, RDMA's completion at the requester, having waited in
    the data queues of its way back; under DCQCN ``first_cnp_s``: when its first CNP reached
    it, NaN if none did), links gain queue / pause / mark / drop columns, and
    ``links.attrs`` holds ``queue_trace`` (the ``trace_links`` deepest queues) and
    ``pause_trace`` (t_s, link, ...) for plotting.
    Otherwise flows share links max-min fairly. ``hops`` ([flow, hop] link ids, -1 padded)
    pins each flow to a path instead of routing it (one queue pair each; e.g. the paths a
    packet-level run took, validation/ns3_suite.py); ``ack_hops`` likewise pins the path of
    each flow's acknowledgements, receiver to sender (``net.ack_bytes``; None: the data path's
    cables in reverse). Routed under ``ecmp``, acknowledgements take their own path (their
    5-tuple hashed, or on InfiniBand the subnet manager's route to the sender; EFA's SRD
    sprays, and the ACKs come back as the data went). ``dt``: the fluid model's integration
    step (None: :func:`simulator.congestion.fluid.flows_step`, FLUID_STEP_S unless a switch
    link is a faster speed class than the NICs; for convergence checks)."""
    validate_flows(frame)
    src, dst = frame.src_gpu.to_numpy(np.int64), frame.dst_gpu.to_numpy(np.int64)
    for c, v in (("src_gpu", src), ("dst_gpu", dst)):
        if (v < 0).any() or (v >= fabric.gpus).any():
            raise ScenarioError(f"FLOWS.{c}: GPU ids must be in 0..{fabric.gpus - 1}",
                                field=f"FLOWS.{c}")
    nbytes, start = frame.bytes.to_numpy(float), frame.start_s.to_numpy(float)
    q = queue_pairs
    if hops is not None:
        q, parent, share = 1, np.arange(len(src)), np.ones(len(src))
    else:
        sport = np.tile(np.arange(q), len(src)) + np.repeat(np.arange(len(src)), q) * q
        hops, parent, share = fabric.route(np.repeat(src, q), np.repeat(dst, q), sport, routing)
        if ack_hops is None and net is not None and net.ack_bytes > 0 and \
                routing == "ecmp" and fabric.transport != "efa":   # each QP's ACKs hash apart
            ack_hops = fabric.route(np.repeat(dst, q), np.repeat(src, q), sport, routing)[0]
    owner = np.repeat(np.arange(len(src)), q)[parent]
    sizes, starts = np.repeat(nbytes / q, q)[parent] * share, np.repeat(start, q)[parent]
    if net is not None and (net.congestion_control == "dcqcn" or net.pfc):
        return _fluid_flow_file(frame, fabric, hops, sizes, starts, owner, net, buffer_mib, seed,
                                trace_links, dt, ack_hops)
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


def _fluid_flow_file(frame, fabric, hops, sizes, starts, owner, net, buffer_mib, seed,
                     trace_links, dt=None, ack_hops=None):
    src_sw, dst_sw, n_sw = switch_ids(fabric)
    if dt is None:
        dt = congestion.flows_step(fabric.capacity, src_sw, dst_sw)
    res = congestion.simulate_fluid(hops, sizes, fabric.capacity, fabric.latency, src_sw, dst_sw,
                                    switch_buffers(fabric, buffer_mib), net, start=starts,
                                    seed=seed, trace_links=trace_links,
                                    reverse=fabric.reverse_links(), ack_hops=ack_hops,
                                    dt=dt)
    finish = pd.Series(res.finish_s).groupby(owner).max().to_numpy()
    retx = pd.Series(res.flow_retransmitted_bytes).groupby(owner).sum().to_numpy()
    out = frame.assign(finish_s=finish, fct_s=finish - frame.start_s.to_numpy(float),
                       retransmitted_bytes=retx)
    if res.ack_s is not None:      # the sender's completion: its last ACK back
        out["acked_s"] = pd.Series(res.ack_s).groupby(owner).max().to_numpy()
    if res.first_cnp_s is not None:     # DCQCN's first reaction, on any of its queue pairs
        out["first_cnp_s"] = pd.Series(res.first_cnp_s).groupby(owner).min().to_numpy()
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
