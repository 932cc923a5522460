"""Flow-level fluid simulation: flows start, share links max-min fairly, finish.

Rates are recomputed only when the set of active flows changes (an arrival or a completion); in
between every flow drains at a constant rate, so time jumps from event to event. Completions due
within ``COMPLETION_BATCH`` of the elapsed time are handled as one event. A flow's finish
time adds the propagation latency of its path. Bytes are conserved: every flow's bytes are
drained exactly once (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.arrays import components
from simulator.errors import FabricError
from simulator.network.maxmin import link_loads, max_min_rates

COMPLETION_BATCH = 0.01
"""Flows due to finish within this fraction of the time elapsed since the first flow started
retire together at the current event (each stamped with its own exact finish time, its last
bytes still booked to its links). The bandwidth they free reaches the others at most that much
early, so no completion is early by more than 1 % of the batch's elapsed time, while the number
of rate recomputations is bounded by about ln(T_last / T_first) / 0.01 however many distinct
rates ECMP collisions create (at 32,768 GPUs: ~65 instead of ~140 per pipeline send)."""


@dataclass
class FlowResult:
    finish_s: np.ndarray
    """[flow] completion time (last byte delivered), seconds."""
    link_bytes: np.ndarray
    """[link] bytes carried."""
    link_busy_s: np.ndarray
    """[link] seconds with at least one flow on it."""
    link_max_flows: np.ndarray
    """[link] most flows on the link at once."""
    events: int


def simulate_flows(hops: np.ndarray, nbytes: np.ndarray, capacity: np.ndarray, latency: np.ndarray,
                   start: np.ndarray | None = None, group: np.ndarray | None = None,
                   weight: np.ndarray | None = None) -> FlowResult:
    """Run flows (rows of ``hops``, -1 padded) of ``nbytes`` from ``start`` to completion
    (``group`` / ``weight``: see :func:`simulator.network.maxmin.max_min_rates`).

    Flows that share no link and no group cannot change each other's rates, so an event
    re-solves only the components (:func:`components`) where a flow arrived or finished: a
    pipeline send at 32,768 GPUs is ~300 independent components, and each completion touches
    one or two of them. The result is the same as re-solving everything (tested).
    """
    L_all = len(capacity)
    # Work on the links these flows use only: a collective touches a small part of a large
    # fabric, and every per-event pass below is O(links) as well as O(flows x hops).
    used, inverse = np.unique(hops[hops >= 0], return_inverse=True)
    hops = np.where(hops >= 0, 0, -1)
    hops[hops == 0] = inverse
    capacity, latency = np.asarray(capacity)[used], np.asarray(latency)[used]
    F, L = hops.shape[0], len(used)
    start = np.zeros(F) if start is None else np.asarray(start, float)
    remaining = np.asarray(nbytes, float).copy()
    valid = hops >= 0
    path_latency = np.where(valid, latency[np.maximum(hops, 0)], 0.0).sum(axis=1)
    finish = np.full(F, np.nan)
    link_bytes = np.zeros(L)
    busy = np.zeros(L)
    max_flows = np.zeros(L, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    next_arrival = 0
    t = t0 = float(start[order[0]]) if F else 0.0
    active = np.zeros(F, dtype=bool)
    comp = components(hops, group)
    dirty = np.ones(F, dtype=bool)                       # by component label (a flow index)
    rate_all = np.zeros(F)
    events = 0
    while True:
        while next_arrival < F and start[order[next_arrival]] <= t:
            active[order[next_arrival]] = True
            dirty[comp[order[next_arrival]]] = True
            next_arrival += 1
        idx = np.flatnonzero(active)
        if not len(idx):
            if next_arrival >= F:
                break
            t = float(start[order[next_arrival]])
            continue
        events += 1
        sub = idx[dirty[comp[idx]]]
        if len(sub):
            rate_all[sub] = max_min_rates(hops[sub], capacity,
                                          None if group is None else group[sub],
                                          None if weight is None else weight[sub])
            dirty[:] = False
        h = hops[idx]
        rate = rate_all[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            left = np.where(rate > 0, remaining[idx] / rate, np.inf)
        dt = float(left.min())
        if next_arrival < F:
            dt = min(dt, float(start[order[next_arrival]]) - t)
        if not np.isfinite(dt):
            raise FabricError("flows with zero rate and nothing left to change it: a path "
                              "crosses a failed or zero-capacity link")
        finite = np.isfinite(rate)
        drained = np.where(finite, rate * dt, remaining[idx])
        loads = link_loads(h[finite], rate[finite], L)
        link_bytes += loads * dt
        on = loads > 0
        busy[on] += dt
        counts = np.bincount(h[h >= 0], minlength=L)
        np.maximum(max_flows, counts, out=max_flows)
        remaining[idx] -= drained
        t += dt
        with np.errstate(divide="ignore", invalid="ignore"):
            due = np.where(finite & (rate > 0), remaining[idx] / rate, np.inf)
        done_mask = (remaining[idx] <= 1e-9 * np.maximum(nbytes[idx], 1.0)) | ~finite | \
            (due <= COMPLETION_BATCH * (t - t0))
        done = idx[done_mask]
        # retire early finishers: book their last bytes, stamp their own finish time
        tail = np.where(finite[done_mask], remaining[done], 0.0)
        if tail.any():
            hd = h[done_mask]
            link_bytes += np.bincount(hd[hd >= 0], weights=np.broadcast_to(
                tail[:, None], hd.shape)[hd >= 0], minlength=L)
        finish[done] = t + np.where(np.isfinite(due[done_mask]), due[done_mask], 0.0)
        remaining[done] = 0.0
        active[done] = False
        dirty[comp[done]] = True
    return FlowResult(finish_s=finish + path_latency,
                      link_bytes=_scatter(link_bytes, used, L_all, float),
                      link_busy_s=_scatter(busy, used, L_all, float),
                      link_max_flows=_scatter(max_flows, used, L_all, np.int64), events=events)


def _scatter(values: np.ndarray, used: np.ndarray, n: int, dtype) -> np.ndarray:
    out = np.zeros(n, dtype=dtype)
    out[used] = values
    return out
