"""Closed forms the Monte-Carlo is tested against (../shared/validation/reliability.md)."""

from __future__ import annotations

import math


def young_interval(blocking_s: float, mtbf_s: float) -> float:
    """Young (1974): tau = sqrt(2 delta M)."""
    return math.sqrt(2.0 * blocking_s * mtbf_s)


def daly_interval(blocking_s: float, mtbf_s: float) -> float:
    """Daly (2006), first order: sqrt(2 delta M) - delta for delta < M / 2, else M."""
    if blocking_s >= mtbf_s / 2:
        return mtbf_s
    return young_interval(blocking_s, mtbf_s) - blocking_s


def kokolis_ettr(failure_rate_per_s: float, restart_s: float, interval_s: float,
                 blocking_s: float) -> float:
    """Expected ETTR (Kokolis et al., HPCA 2025): (1 - N r_f (u0 + dt / 2)) / (1 + w / dt).

    ``failure_rate_per_s`` is the job's N_nodes x r_f, ``restart_s`` u0, ``interval_s`` dt and
    ``blocking_s`` w. First order in the failure rate: valid while failures are rare on the
    scale of a restart plus an interval."""
    return (1.0 - failure_rate_per_s * (restart_s + interval_s / 2)) / \
        (1.0 + blocking_s / interval_s)


def first_order_ettr(failure_rate_per_s: float, restart_s: float, interval_s: float,
                     blocking_s: float, lag_s: float) -> float:
    """Kokolis's form with the checkpoint's durability lag: a failure loses on average half an
    interval plus ``lag_s``, the time from the snapshot until it is durable (sync: the stall
    itself; two-stage: the stall plus the background write). ``lag_s = 0`` is
    :func:`kokolis_ettr`."""
    return kokolis_ettr(failure_rate_per_s, restart_s + lag_s, interval_s, blocking_s)
