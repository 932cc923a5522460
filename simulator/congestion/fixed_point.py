"""Fixed point of the DCQCN fluid equations for N long flows through one bottleneck.

The equations are those the mean-field reaction point integrates
(:mod:`simulator.congestion.kernel`,
after Zhu et al., "ECN or Delay", CoNEXT 2016, eqs. 3-5, with the stage rule tracked per stage).
With h the marked packets per second a flow sees, per second:

* alpha:  d alpha / dt ~ P_a - alpha,            P_a = 1 - exp(-h tau_a)
* cuts at rate c = (1 - exp(-h tau_d)) / tau_d; increase events at rate
  e = x / (e^x - 1) / T with x = h T (timer; plus the same form for the byte counter)
* stages: pi_0 = c / (c + e), pi_s = pi_0 r^s for s <= F, pi_hyper = r^(F+1), r = e / (c + e)
* R_C:  0 = -R_C alpha c / 2 + (R_T - R_C) e / 2
* R_T:  0 = -(R_T - R_C) c (1 - pi_0) + e (AI pi_F + HAI pi_hyper)

At the fixed point every flow sends R_C = C / N, so the two rate equations leave one unknown, h;
the marking probability p follows from how the model counts marks (per integration step a paced
flow sends n = R_C dt / MTU packets: floor(n) whole ones and a part, so h dt = -floor(n)
ln(1 - p) - ln(1 - frac(n) p)), and RED gives the queue, Kmin + p / Pmax (Kmax - Kmin). If p
would exceed Pmax the queue sits at Kmax, where RED marks everything (Zhu et al. note the same
cliff).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.config.network import NetworkConfig, port_scale_bytes
from simulator.congestion.fluid import FLUID_STEP_S
from simulator.congestion.kernel import events_per_period
from workloads.units import KB

BISECTION_STEPS = 200
"""Bisection over log h, from 1e-6 to 1e12 marks/s: far below any float's resolution."""


def _mark_probability(hazard: float, packets: float) -> float:
    """The p at which a step of ``packets`` paced packets (floor whole, one part) goes
    unmarked with probability exp(-hazard); 1 if even p = 1 leaves it more likely."""
    whole, part = np.floor(packets), packets - np.floor(packets)

    def hz(p):
        return -whole * np.log1p(-p) - np.log1p(-part * p)

    if whole == 0 and hazard >= -np.log1p(-part):
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if hz(mid) > hazard:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class DcqcnFixedPoint:
    rate_bps: float
    """R_C = C / N, wire bits/s."""
    target_rate_bps: float
    alpha: float
    marks_per_s: float
    """h: marked packets per second per flow."""
    mark_probability: float
    queue_bytes: float
    at_kmax: bool
    """p would exceed Pmax: the queue sits at the RED cliff (Kmax)."""


def dcqcn_fixed_point(n_flows: int, capacity_bytes_s: float,
                      net: NetworkConfig) -> DcqcnFixedPoint:
    """The operating point of ``n_flows`` DCQCN flows sharing a link of ``capacity_bytes_s``
    (wire bytes/s) under ``net``'s ECN and DCQCN parameters."""
    d, e = net.dcqcn, net.ecn
    payload = net.mtu_bytes / (net.mtu_bytes + net.header_bytes)
    rc = capacity_bytes_s / n_flows                       # wire bytes/s
    rp = rc * payload                                     # payload bytes/s
    tau_a, tau_d = d.alpha_update_us * 1e-6, d.rate_decrease_us * 1e-6
    timer = d.rate_increase_timer_us * 1e-6
    ai, hai = d.ai_mbps * 1e6 / 8, d.hai_mbps * 1e6 / 8
    fr = d.fast_recovery_steps

    def events(h: float) -> float:
        ev = events_per_period(h * timer) / timer
        if d.byte_counter_kb > 0:
            per = d.byte_counter_kb * KB / rp
            ev += events_per_period(h * per) / per
        return ev

    def balance(h: float) -> float:
        """Cut minus increase in the R_T equation, divided by e (increasing in h)."""
        alpha = -np.expm1(-h * tau_a)
        c = -np.expm1(-h * tau_d) / tau_d
        ev = events(h)
        r = ev / (c + ev)
        pi0 = c / (c + ev)
        add = ai * pi0 * r ** fr + hai * r ** (fr + 1)
        # R_T - R_C = R_C alpha c / e, and (1 - pi_0) / e = 1 / (c + e)
        return rc * alpha * c * c / (c + ev) - ev * add

    lo, hi = np.log(1e-6), np.log(1e12)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if balance(np.exp(mid)) > 0:
            hi = mid
        else:
            lo = mid
    h = float(np.exp((lo + hi) / 2))
    alpha = float(-np.expm1(-h * tau_a))
    c = -np.expm1(-h * tau_d) / tau_d
    rt = rc + rc * alpha * c / events(h)
    p = _mark_probability(h * FLUID_STEP_S, rp * FLUID_STEP_S / net.mtu_bytes)
    scale = port_scale_bytes(capacity_bytes_s)
    kmin, kmax = e.kmin_kb * scale, e.kmax_kb * scale
    at_kmax = p > e.pmax
    q = kmax if at_kmax else kmin + p / e.pmax * (kmax - kmin) if e.pmax > 0 else kmin
    return DcqcnFixedPoint(rate_bps=rc * 8, target_rate_bps=rt * 8, alpha=alpha,
                           marks_per_s=h, mark_probability=p, queue_bytes=float(q),
                           at_kmax=bool(at_kmax))
