"""The DCQCN fluid model against its own closed forms: N long flows through one port.

* Fairness: N flows start together at line rate into one 100 Gb/s port (the packet-level
  reference's parameters, mean-field reaction point); each flow's delivered rate over 4-5 ms
  against C / N.
* Fixed point: the fluid-model paper's setting (``ZHU_2016``); the bottleneck queue after
  150 ms against :func:`simulator.congestion.fixed_point.dcqcn_fixed_point`.

Used by tests/simulator/test_congestion.py and scripts/validation_report.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.config.network import NetworkConfig
from simulator.congestion.fixed_point import dcqcn_fixed_point
from simulator.congestion.fluid import FluidResult, simulate_fluid
from simulator.network.fabric import switch_buffers, switch_ids
from validation.ns3 import network, star

MEAN_FIELD = {"reaction_point": "mean_field"}
ZHU_2016 = {"ecn": {"kmin_kb": 12.5, "kmax_kb": 500, "pmax": 0.01},
            "dcqcn": {**MEAN_FIELD, "alpha_update_us": 55, "rate_decrease_us": 50,
                      "rate_increase_timer_us": 55, "byte_counter_kb": 10_000,
                      "fast_recovery_steps": 5, "ai_mbps": 40, "hai_mbps": 40,
                      "g": 1 / 256}}
"""The fluid-model paper's setting (Zhu et al., CoNEXT 2016, with the DCQCN paper's
parameters): 40 Gb/s ports, Kmin 5 KB, Kmax 200 KB (given here per 100 Gb/s), Pmax 1 %, CNP /
alpha / timer 50 / 55 / 55 us, byte counter 10 MB, 5 fast-recovery steps, R_AI 40 Mb/s (the
paper's equations have no hyper stage: HAI = AI)."""
FAIR_WINDOW_S = (0.004, 0.005)
FIXED_POINT_RUN_S = 0.15
"""Alpha's time constant under ZHU_2016 is 256 x 55 us = 14 ms; 150 ms is ten of them."""


def bottleneck(n: int, cfg: NetworkConfig, duration_s: float, *, nic_gbps: float = 100,
               stagger_s: float = 0.0, spare: float = 1.2
               ) -> tuple[FluidResult, float, float]:
    """N flows into one host through one switch, flow i starting at i x ``stagger_s``, each
    ``spare`` x its fair share's bytes over ``duration_s`` (so none ends early). Returns the
    fluid result, the port's payload and wire capacity (bytes/s)."""
    f = star(n + 1, nic_gbps=nic_gbps)
    hops, _, _ = f.route(np.arange(n), np.full(n, n), np.arange(n), "ecmp")
    src_sw, dst_sw, _ = switch_ids(f)
    wire = float(f.capacity[hops[0, 0]])
    cap = wire * cfg.mtu_bytes / (cfg.mtu_bytes + cfg.header_bytes)
    res = simulate_fluid(hops, np.full(n, spare * cap * (duration_s + n * stagger_s) / n),
                         f.capacity, f.latency, src_sw, dst_sw, switch_buffers(f), cfg,
                         start=np.arange(n) * stagger_s, seed=1, trace_links=1)
    return res, cap, wire


def throughput(res: FluidResult, t0: float, t1: float) -> np.ndarray:
    """Each flow's delivered payload bytes/s between t0 and t1 (rate-trace samples)."""
    d = res.rate_trace.pivot(index="t_s", columns="flow", values="delivered_bytes")
    before, upto = d[d.index <= t0 + 1e-9], d[d.index <= t1 + 1e-9]
    span = upto.index[-1] - before.index[-1]
    return (upto.iloc[-1] - before.iloc[-1]).to_numpy() / span


def fairness_table(ns=(2, 4, 8, 16, 32, 64)) -> pd.DataFrame:
    """Per N: the lowest and highest flow rate over FAIR_WINDOW_S, as fractions of C / N."""
    rows = []
    for n in ns:
        res, cap, _ = bottleneck(n, network(dcqcn=MEAN_FIELD), FAIR_WINDOW_S[1] + 1e-3)
        share = throughput(res, *FAIR_WINDOW_S) / (cap / n)
        rows.append({"N": n, "min_share": share.min(), "max_share": share.max()})
    return pd.DataFrame(rows)


def fixed_point_table(ns=(2, 4, 8)) -> pd.DataFrame:
    """Per N: the simulated queue over the last 10 ms of FIXED_POINT_RUN_S (mean, min, max)
    against the fixed point of the fluid equations, under ZHU_2016 at 40 Gb/s."""
    cfg = network(**ZHU_2016)
    rows = []
    for n in ns:
        res, _, wire = bottleneck(n, cfg, FIXED_POINT_RUN_S, nic_gbps=40)
        q = res.queue_trace
        late = q[(q.t_s > FIXED_POINT_RUN_S - 0.01) & (q.t_s < FIXED_POINT_RUN_S)].queue_bytes
        fp = dcqcn_fixed_point(n, wire, cfg)
        rows.append({"N": n, "queue_kb": late.mean() / 1e3, "queue_min_kb": late.min() / 1e3,
                     "queue_max_kb": late.max() / 1e3, "fixed_point_kb": fp.queue_bytes / 1e3,
                     "mark_probability": fp.mark_probability, "at_kmax": fp.at_kmax,
                     "rates_bps": throughput(res, FIXED_POINT_RUN_S - 0.01,
                                             FIXED_POINT_RUN_S) * 8})
    t = pd.DataFrame(rows)
    t["error"] = t.queue_kb / t.fixed_point_kb - 1
    return t
