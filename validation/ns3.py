"""The fluid model against the packet-level reference (../shared/validation/ns3, scenario S1).

Each S1 point (variant x N senders) is rebuilt from the reference's stated parameters: N hosts
send 10,000,000 bytes each to one more host through one switch, 100 Gb/s links with 1 us
propagation, 1000-byte payloads in 1048-byte packets, the network section printed in the
reference's README (``REFERENCE``), paper timers for ``paperTimers``, 4 MiB of buffer for
``buf4MB``. Five seeds per point, like the reference; the queue peak is seed 1's, as is the
reference's only queue trace.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator.config.network import NetworkConfig
from simulator.config.topology import topology_spec
from simulator.network.build import make_fabric
from simulator.network.flowfile import run_flow_file
from topologies.gpus import load_gpu

REFERENCE_ACK_BYTES = 60
"""The reference's acknowledgement: 60 B on the wire per data packet, in the data's queues
(README)."""
REFERENCE = {"congestion_control": "dcqcn", "pfc": True, "mtu_bytes": 1000, "header_bytes": 48,
             "ack_bytes": REFERENCE_ACK_BYTES,
             "ecn": {"kmin_kb": 400, "kmax_kb": 1600, "pmax": 0.2},
             "dcqcn": {"g": 0.00390625, "alpha_update_us": 1, "rate_decrease_us": 4,
                       "rate_increase_timer_us": 300, "byte_counter_kb": 0,
                       "fast_recovery_steps": 1, "ai_mbps": 20, "hai_mbps": 200,
                       "min_rate_mbps": 1000},
             "pfc_threshold": {"mode": "dynamic", "alpha": 0.125, "reserve_kb": 4,
                               "resume_gap_kb": 3}}


def ns_rate(bytes_per_s, packet_bytes: float):
    """The rate the reference serializes ``packet_bytes`` packets at: their time on a port of
    ``bytes_per_s`` truncated to whole nanoseconds (README: 1,048 B per 83 ns at 100 Gb/s)."""
    ns = np.floor(packet_bytes / np.asarray(bytes_per_s, float) * 1e9 + 1e-9)
    return packet_bytes / (ns * 1e-9)


PAPER_TIMERS = {"alpha_update_us": 50, "rate_decrease_us": 50, "rate_increase_timer_us": 55}
VARIANTS = {"default32MB": (32, {}), "buf4MB": (4, {}), "paperTimers": (32, PAPER_TIMERS)}
S1_SIZE = 10_000_000
S1_SEEDS = tuple(range(1, 11))
"""As the reference's (five ECN seeds per point), FCT and makespan are averaged over seeds:
ten, as the fluid's draws spread the makespan wider (paperTimers, 4 senders: 180-210 us
standard deviation against the packets' 25, so five seeds' mean moves by +-2.4 %)."""


def network(**over) -> NetworkConfig:
    data = {**REFERENCE, **{k: v for k, v in over.items() if k != "dcqcn"}}
    data["dcqcn"] = {**REFERENCE["dcqcn"], **over.get("dcqcn", {})}
    return NetworkConfig.model_validate(data)


def star(hosts: int, buffer_mib: float = 32, nic_gbps: float = 100):
    """One switch, ``hosts`` hosts with one ``nic_gbps`` NIC each, 1 us links."""
    spec = topology_spec(f"{{kind: spine-leaf, leaves: 1, spines: 0, hosts_per_leaf: {hosts}, "
                         f"nic_gbps: {nic_gbps}, link_latency_us: 1, buffer_mib: {buffer_mib}}}")
    return make_fabric(spec, gpus=hosts, gpus_per_node=1, gpu=load_gpu("h100-sxm"))


def run(fabric, src, dst, size, cfg: NetworkConfig, buffer_mib: float = 32, start=None,
        seed: int = 1):
    frame = pd.DataFrame({"src_gpu": src, "dst_gpu": dst, "bytes": size,
                          "start_s": 0.0 if start is None else start})
    return run_flow_file(frame, fabric, net=cfg, buffer_mib=buffer_mib, seed=seed)


def s1_table(ns3_dir: str | Path, dcqcn: dict | None = None) -> pd.DataFrame:
    """One row per (variant, N): fluid vs reference mean FCT, makespan, queue peak, PAUSE frames
    and paused time (us, summed over the senders) per run.
    ``dcqcn`` overrides reaction-point settings on top of every variant's (e.g. the
    mean-field reaction point)."""
    d = Path(ns3_dir)
    flows_ref = pd.read_csv(d / "S1_incast_flows.csv")
    pfc_ref = pd.read_csv(d / "S1_incast_pfc_summary.csv")
    queue_ref = pd.read_csv(d / "S1_incast_bottleneck_queue_10us.csv")
    rows = []
    for variant, (buf, timers) in VARIANTS.items():
        cfg = network(dcqcn={**timers, **(dcqcn or {})})
        for n in (2, 4, 8, 16):
            ref = flows_ref[(flows_ref.variant == variant) & (flows_ref.N == n)]
            fabric = star(n + 1, buf)
            runs = [run(fabric, np.arange(n), n, S1_SIZE, cfg, buffer_mib=buf, seed=sd)
                    for sd in S1_SEEDS]
            flows, links = runs[0]                  # seed 1: queue peak (the reference's trace)
            q = queue_ref[(queue_ref.variant == variant) & (queue_ref.N == n)]
            p = pfc_ref[(pfc_ref.variant == variant) & (pfc_ref.N == n)]
            rows.append({"variant": variant, "N": n,
                         "mean_fct_us": np.mean([f.fct_s.mean() for f, _ in runs]) * 1e6,
                         "ref_mean_fct_us": ref.fct_ns.mean() / 1e3,
                         "makespan_us": np.mean([f.fct_s.max() for f, _ in runs]) * 1e6,
                         "ref_makespan_us": ref.groupby("rng_run").fct_ns.max().mean() / 1e3,
                         "max_queue_mb": links.max_queue_bytes.max() / 1e6,
                         "ref_max_queue_mb": q.egress_bytes.max() / 1e6,
                         "pauses": float(np.mean([lk.pauses.sum() for _, lk in runs])),
                         "ref_pauses": p.pauses.sum() / ref.rng_run.nunique(),
                         "pause_us": float(np.mean([lk.pause_s.sum() for _, lk in runs])) * 1e6,
                         "ref_pause_us": p.paused_ns.sum() / ref.rng_run.nunique() / 1e3})
    t = pd.DataFrame(rows)
    t["fct_err"] = t.mean_fct_us / t.ref_mean_fct_us - 1
    t["makespan_err"] = t.makespan_us / t.ref_makespan_us - 1
    t["queue_ratio"] = t.max_queue_mb / t.ref_max_queue_mb
    return t
