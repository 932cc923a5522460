"""The fluid model over a collective's flows, one distinct congested component at a time.

A collective at 10,000 GPUs is thousands of flows, but they fall apart into small components
(flows that share no link cannot touch each other's rates, queues or pauses), and ECMP
collisions make only a handful of component *shapes*: two flows on one uplink, a chain of
three, ... This module

1. splits off the flows of *quiet* components, where no switch egress can ever be offered more
   than its capacity (the line rates of its flows fit): no queue, mark or pause can form there,
   so they run alone through the fluid model, which jumps from completion to completion (exact);
2. gives every congested component a canonical form (flows sorted by size, line share and the
   capacity / queueing / sharing of each hop, refined Weisfeiler-Lehman style; links and
   switches numbered by first appearance), runs one representative per form on its own clock,
   and copies its finish times and link statistics to every component of that form.
   ``cache`` carries forms across calls, so the pipeline sends of every stage reuse the
   shapes the first one simulated.

Approximation (2 only): each representative gets private copies of its switches, so the shared
buffer of a switch is not shared *between* components (PFC's dynamic threshold and lossy
overflow see only the component's own queues). Under DCQCN queues stay near Kmin, far below
the buffer, and the coupling is small; ``clustersim flows`` (incasts, the ns-3 comparison)
runs every flow together and keeps it.

Forms are independent, so they run in FORM_WORKERS forked worker processes
(:class:`FormPool`). In a training step they start ahead: the step lists its fabric batches
before compiling (:meth:`simulator.network.comm.FabricComm.prefetch`), :func:`plan_forms`
queues every new form of every batch, costliest first, and each call later collects its own
(running itself, cheapest first, any form no worker has started yet), so the pipeline sends,
the data-parallel collectives and the workers' forms run at the same time.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import NamedTuple

import numpy as np
import pandas as pd

from simulator.arrays import components, splitmix64
from simulator.config.network import NetworkConfig
from simulator.congestion import kernel
from simulator.congestion.fluid import FluidResult, _simulate, simulate_fluid, switch_room
from simulator.procs import pool_kwargs

TRACE_FORMS = 4
"""Queue traces kept per call: the forms with the deepest queues (each its hottest links)."""
FORM_FIFO = False
"""The shapes of a collective are served in shares of each flow's backlog, not in arrival
order: their flows start together, so arrival order changes little (megascale-175b-12288 under
DCQCN: step 7.7673 s in shares vs 7.7622 s FIFO, 0.07 %) and FIFO costs 1.3-1.6x the wall time
there. ``clustersim flows`` (staggered flows, incasts) keeps FIFO."""
FORM_STEP_S = 2e-6
"""Integration step for the shapes of a collective (``clustersim flows`` keeps
:data:`simulator.congestion.fluid.FLUID_STEP_S`, 0.25 us). Every DCQCN timer of the defaults still
spans at
least one step (alpha's gain is rescaled to the step, the 4 us decrease check is two), a step
at 400 Gb/s moves 100 KB against a 1.6-6.4 MB marking band, and the round trip stays several
steps. Convergence, all 354 shapes of a megascale-175b-12288 step under DCQCN against 1 us:
mean completion time +0.47 % (seed 0) and -0.41 % (seed 1), inside the 0.45 % the seed alone
moves it; on the 124 shapes that last over 5 ms a small bias, +0.15 % (the seed: 0.07 %).
Against 0.25 us (``clustersim flows``' step since the cables' propagation is stepped, with
jumps; 2026-11-27): mean completion -0.24 % and +1.17 % by seed, the long shapes +0.25 and
+0.38 %, where the seed alone moves them 1.20 and 0.08 %, at 5x the stepped steps.
4 us is biased (+1.1 to +1.3 %, the last completion of a shape +2 %). It halves the stepped
microseconds (tests/simulator/test_congestion_step.py checks the agreement on an ECMP-collision
shape; benchmarks/congestion_shapes.py repeats the comparison on MegaScale's shapes)."""
FORK_MIN_FLOW_STEPS = 3e6
"""Forms go to worker processes only when their flows x steps (at line rate, a lower bound;
a call's forms, or all those a step has planned so far) reach this: about half a second of
compiled steps at ~0.15 us per flow and step, against ~0.1 s to fork and gather two
workers."""
FORM_QUEUE_SAMPLE_S = 100e-6
"""Queue-depth sample period of the shapes' traces (the step's Chrome trace counters; a
shape's queues swing over DCQCN's 300 us increase period, and a step lasts seconds)."""
FORM_WORKERS = os.cpu_count() or 1
"""Forms simulated at once, in worker processes forked from this one for the step (or for one
call); they inherit the fabric and the compiled step, only the forms and their results travel.
The calling process works too (on what no worker has started). Each form runs on its own
state and seed, so results are identical to one worker. Inside a
worker process already (a sweep's pool, a Dask worker) or without fork, forms run one after
another: the sweep parallelises across scenarios."""
LINK_STATS = ("link_bytes", "link_max_queue", "link_queue_byte_s", "link_pause_s",
              "link_pauses", "link_marked_bytes", "link_dropped_bytes")


def simulate_fluid_components(hops, nbytes, capacity, latency, switch_src, switch_dst,
                              buffer_bytes, net: NetworkConfig, *, seed: int = 0, line_share=None,
                              cache: dict | None = None, pool: FormPool | None = None,
                              split=None) -> FluidResult:
    """Same contract as :func:`simulator.congestion.fluid.simulate_fluid` (all flows start at 0).

    ``pool``: the step's worker processes; forms that :func:`plan_forms` left pending in
    ``cache`` are waited for, or run here if no worker has started them (``split``: what
    plan_forms returned for these same arguments)."""
    sp = split if split is not None else _split(hops, nbytes, capacity, latency, switch_src,
                                                switch_dst, buffer_bytes, net, line_share)
    hops, nbytes, capacity, latency, share = sp.hops, sp.nbytes, sp.capacity, sp.latency, sp.share
    F, L = hops.shape[0], len(capacity)
    cache = {} if cache is None else cache
    finish = np.full(F, np.nan)
    retx = np.zeros(F)
    stats = {k: np.zeros(L) for k in LINK_STATS}
    traces, steps, jumps = [], 0, 0
    own = None
    if sp.forms:                         # the new shapes start (in workers, if forked) ...
        items = _new_items(sp, cache, net, seed)
        if items and pool is None and len(items) > 1 and FORM_WORKERS > 1 and \
                sum(c for _, _, c in items) >= FORK_MIN_FLOW_STEPS and _can_fork():
            pool = own = FormPool()      # for this call only
        _submit(items, cache, pool)
    quiet = np.flatnonzero(~sp.congested)
    ok = False
    try:
        if len(quiet):                   # ... while the quiet flows run here
            q = _at_line_rate(hops[quiet], nbytes[quiet], capacity, latency, sp.switch_src,
                              share[quiet], net)
            if q is None:                # host links shared beyond their capacity
                q = simulate_fluid(hops[quiet], nbytes[quiet], capacity, latency,
                                   sp.switch_src, sp.switch_dst, buffer_bytes, net, seed=seed,
                                   line_share=share[quiet], jumps=True, fifo=FORM_FIFO,
                                   dt=FORM_STEP_S, traces=False)
            finish[quiet], retx[quiet] = q.finish_s, q.flow_retransmitted_bytes
            for k in LINK_STATS:
                stats[k] += getattr(q, k)
            steps = q.steps
        if sp.forms:
            steps_b, jumps = _resolve(sp.rep, cache)
            steps = max(steps, steps_b)
        ok = True
    finally:
        if own is not None:              # if this failed, the workers' queued shapes stop
            own.close(wait=ok)
    if sp.forms:
        # queue traces of the (up to) TRACE_FORMS forms with the deepest queues, on the links
        # of the first component of each form
        deepest = sorted(sp.rep, key=lambda k: -cache[k]["link_max_queue"].max(initial=0.0))
        for key in deepest[:TRACE_FORMS]:
            ts, hot, depth = cache[key]["trace"]
            if len(ts) and len(hot):
                traces.append(pd.DataFrame({"t_s": np.repeat(ts, len(hot)),
                                            "link": np.tile(sp.rep[key].links[hot], len(ts)),
                                            "queue_bytes": depth.ravel().astype(float)}))
        for fm in sp.forms:
            got = cache[fm.key]
            finish[fm.flows] = got["finish"]
            retx[fm.flows] = got["retx"]
        at = np.concatenate([fm.links for fm in sp.forms])
        for k in LINK_STATS:
            got = np.concatenate([cache[fm.key][k] for fm in sp.forms])
            (np.maximum if k == "link_max_queue" else np.add).at(stats[k], at, got)
    span = max(float(np.nanmax(finish)) if F else 0.0, 1e-30)
    queue_trace = pd.concat(traces) if traces else pd.DataFrame(
        columns=["t_s", "link", "queue_bytes"])
    empty = pd.DataFrame(columns=["t_s", "flow", "rate_bps", "target_rate_bps", "alpha",
                                  "delivered_bytes"])
    return FluidResult(finish_s=finish, link_mean_queue=stats["link_queue_byte_s"] / span,
                       flow_retransmitted_bytes=retx, queue_trace=queue_trace, rate_trace=empty,
                       pause_trace=pd.DataFrame(columns=["t_s", "link", "paused"]), steps=steps,
                       steady_jumps=jumps, **stats)


def _at_line_rate(hops, nbytes, capacity, latency, switch_src, share, net):
    """Quiet flows whose host-side links also fit their line rates: nothing ever queues,
    marks, pauses or scales them, so each sends at its line rate from start to end and
    finishes after size / (line x payload fraction) plus its path's latency (what the fluid
    model's jumps give, without its step rounding). None if some host-side link is shared
    beyond its capacity (their shares then change at completions: the fluid model runs)."""
    valid = hops >= 0
    hz = np.where(valid, hops, 0)
    lead = np.cumprod(valid & (switch_src[hz] < 0), axis=1).astype(bool)
    line = capacity[hz[:, 0]] * share
    L = len(capacity)
    offered = np.bincount(hz[lead], weights=np.broadcast_to(line[:, None], hz.shape)[lead],
                          minlength=L)
    if (offered > capacity * (1 + 1e-9)).any():
        return None
    payload = net.mtu_bytes / (net.mtu_bytes + net.header_bytes)
    finish = nbytes / (line * payload) + np.where(valid, latency[hz], 0.0).sum(axis=1)
    zeros = {k: np.zeros(L) for k in LINK_STATS}
    zeros["link_bytes"] = np.bincount(hz[valid], weights=np.broadcast_to(
        nbytes[:, None], hz.shape)[valid], minlength=L)
    return FluidResult(finish_s=finish, link_mean_queue=np.zeros(L),
                       flow_retransmitted_bytes=np.zeros(len(nbytes)), queue_trace=None,
                       rate_trace=None, pause_trace=None,
                       steps=int(np.ceil(finish.max(initial=0.0) / FORM_STEP_S)), **zeros)


def plan_forms(hops, nbytes, capacity, latency, switch_src, switch_dst, buffer_bytes,
               net: NetworkConfig, *, seed: int = 0, line_share=None, cache: dict,
               pool: FormPool | None = None) -> tuple:
    """Plan a later :func:`simulate_fluid_components` call with the same arguments: its forms
    that ``cache`` does not hold yet go into it as pending (queued in ``pool``, if given).
    Returns (split, cost): pass ``split`` to that call; cost is the new forms' flow-steps."""
    sp = _split(hops, nbytes, capacity, latency, switch_src, switch_dst, buffer_bytes, net,
                line_share)
    items = _new_items(sp, cache, net, seed) if sp.forms else []
    _submit(items, cache, pool)
    return sp, sum(c for _, _, c in items)


class _Split:
    """Flows split into quiet ones and congested components (their forms, one representative
    per form key)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _split(hops, nbytes, capacity, latency, switch_src, switch_dst, buffer_bytes, net,
           line_share) -> _Split:
    hops = np.asarray(hops)
    F = hops.shape[0]
    L = len(capacity)
    capacity = np.asarray(capacity, float)
    latency = np.broadcast_to(np.asarray(latency, float), (L,))
    switch_src, switch_dst = np.asarray(switch_src), np.asarray(switch_dst)
    nbytes = np.asarray(nbytes, float)
    share = np.ones(F) if line_share is None else np.asarray(line_share, float)
    valid = hops >= 0
    hz = np.where(valid, hops, 0)
    label = components(hops)
    line = capacity[hz[:, 0]] * share
    offered = np.bincount(hops[valid], weights=np.broadcast_to(line[:, None], hops.shape)[valid],
                          minlength=L)
    hot = (switch_src >= 0) & (offered > capacity * (1 + 1e-9))
    hot_comp = np.unique(label[(hot[hz] & valid).any(axis=1)])
    congested = np.isin(label, hot_comp)
    forms, rep, sw_room = [], {}, None
    if len(hot_comp):
        sw_room = switch_room(capacity, latency, switch_dst, buffer_bytes, net)
        forms = _canonical(hops, nbytes, share, capacity, latency, switch_src, switch_dst,
                           sw_room, label, np.flatnonzero(congested))
        for fm in forms:
            rep.setdefault(fm.key, fm)
    return _Split(hops=hops, nbytes=nbytes, capacity=capacity, latency=latency,
                  switch_src=switch_src, switch_dst=switch_dst, share=share,
                  congested=congested, forms=forms, rep=rep, sw_room=sw_room)


class _Form:
    """One congested component: its flows and links in canonical order, and its form key."""

    __slots__ = ("flows", "links", "switches", "key", "local_hops", "nbytes", "share")

    def __init__(self, flows, links, switches, key, local_hops, nbytes, share):
        self.flows, self.links, self.switches = flows, links, switches
        self.key, self.local_hops, self.nbytes, self.share = key, local_hops, nbytes, share


def _canonical(hops, nbytes, share, capacity, latency, switch_src, switch_dst, sw_room, label,
               idx) -> list[_Form]:
    """Canonical forms of the components of flows ``idx`` (vectorised sort, one slice each)."""
    sub = hops[idx]
    valid = sub >= 0
    hz = np.where(valid, sub, 0)
    color = _wl_colors(sub, valid, hz, nbytes[idx], share[idx], capacity, switch_src)
    order = np.lexsort((color, label[idx]))
    flows = idx[order]
    comp = label[flows]
    sh = hops[flows]
    # links numbered by first appearance in (component, flow order, hop) order
    flat = sh.ravel()
    pos = np.flatnonzero(flat >= 0)
    links, first = np.unique(flat[pos], return_index=True)
    link_comp = comp[pos[first] // sh.shape[1]]
    lorder = np.lexsort((pos[first], link_comp))
    links, link_comp = links[lorder], link_comp[lorder]
    bounds_f = np.flatnonzero(np.diff(comp, prepend=-1, append=-2))
    bounds_l = np.flatnonzero(np.diff(link_comp, prepend=-1, append=-2))
    local_of = np.full(len(capacity), -1)
    local_of[links] = np.arange(len(links)) - np.repeat(bounds_l[:-1], np.diff(bounds_l))
    local_hops = np.where(sh >= 0, local_of[np.maximum(sh, 0)], -1)
    # switches numbered by first appearance along each component's links (src, dst, src, ...)
    sw = np.stack([switch_src[links], switch_dst[links]], axis=1).ravel()
    sw_comp = np.repeat(link_comp, 2)
    on = np.flatnonzero(sw >= 0)
    pair = sw_comp[on].astype(np.int64) * (int(sw.max(initial=0)) + 1) + sw[on]
    uniq, first_sw, inv = np.unique(pair, return_index=True, return_inverse=True)
    by_first = np.argsort(first_sw, kind="stable")       # on is ordered by component
    u_comp = sw_comp[on][first_sw[by_first]]
    u_start = np.flatnonzero(np.diff(u_comp, prepend=-1))
    rank = np.empty(len(uniq), np.int64)
    rank[by_first] = np.arange(len(uniq)) - np.repeat(u_start, np.diff(np.append(u_start,
                                                                                len(uniq))))
    sw_local = np.full(sw.shape, -1)
    sw_local[on] = rank[inv]
    switches_all = sw[on][first_sw[by_first]]
    bounds_s = np.append(u_start, len(uniq))
    # every component's key is slices of these byte strings (one gather each, not per
    # component): its flows' hops, sizes and shares, its links' capacity, latency and switch
    # ends, its switches' room
    local_hops = np.ascontiguousarray(local_hops, np.int64)
    nb_all, sh_all = nbytes[flows], share[flows]
    room_all = np.ascontiguousarray(sw_room[switches_all], float)
    H = local_hops.shape[1]
    b_lh, b_nb, b_sh = local_hops.tobytes(), nb_all.tobytes(), sh_all.tobytes()
    b_cap, b_lat = capacity[links].tobytes(), latency[links].tobytes()
    b_sw, b_room = sw_local.astype(np.int64).tobytes(), room_all.tobytes()
    out = []
    for c in range(len(bounds_f) - 1):
        a, b = int(bounds_f[c]), int(bounds_f[c + 1])
        la, lb = int(bounds_l[c]), int(bounds_l[c + 1])
        sa, sb = int(bounds_s[c]), int(bounds_s[c + 1])
        key = (b - a, b_lh[8 * H * a:8 * H * b], b_nb[8 * a:8 * b], b_sh[8 * a:8 * b],
               b_cap[8 * la:8 * lb], b_lat[8 * la:8 * lb], b_sw[16 * la:16 * lb],
               b_room[24 * sa:24 * sb])
        out.append(_Form(flows[a:b], links[la:lb], switches_all[sa:sb], key,
                         local_hops[a:b], nb_all[a:b], sh_all[a:b]))
    return out


WL_ROUNDS = 3
"""Colour-refinement rounds that order a component's flows canonically (enough for the
depth of a collision tree in a 3-tier fabric)."""


def _mix(x: np.ndarray) -> np.ndarray:
    return splitmix64(np.asarray(x, np.uint64))


def _wl_colors(sub, valid, hz, size, share, capacity, switch_src) -> np.ndarray:
    """[flow] Weisfeiler-Lehman colour of each flow over the flow-link incidence: flows start
    coloured by size, line share and the capacity / queueing of each hop; a link's colour is a
    sum of hashes of (flow colour, hop position) over its flows (a multiset hash), a flow's
    the hashes of its links' colours by position. Flows of one colour are structurally alike,
    so ordering by colour numbers the links of same-shaped components alike."""
    H = sub.shape[1]
    pos = np.broadcast_to(np.arange(H, dtype=np.uint64), sub.shape)
    with np.errstate(over="ignore"):
        base = np.where(valid, _mix(capacity[hz].astype(np.uint64) * np.uint64(4) +
                                    (switch_src[hz] >= 0).astype(np.uint64)), np.uint64(0))
        flow = _mix(np.round(size).astype(np.uint64) ^ _mix(np.round(share * 1e6).astype(
            np.uint64)))
        flow = flow + (_mix(base + pos) * valid).sum(axis=1, dtype=np.uint64)
        L = len(capacity)
        for _ in range(WL_ROUNDS):
            link = np.zeros(L, np.uint64)
            np.add.at(link, sub[valid], _mix(flow[:, None] * np.uint64(31) + pos)[valid])
            lc = np.where(valid, link[hz], np.uint64(0))
            flow = _mix(flow + (_mix(lc ^ _mix(pos + base)) * valid).sum(axis=1,
                                                                          dtype=np.uint64))
    return flow


def _new_items(sp: _Split, cache, net, seed) -> list[tuple]:
    """(key, job, cost) of each form of ``sp`` not in ``cache``: a job is what a worker needs
    (the representative's flows on private switches), its cost the flow-steps of its longest
    transfer at line rate."""
    switch_src, switch_dst, capacity, latency = sp.switch_src, sp.switch_dst, sp.capacity, \
        sp.latency
    sw_pos = np.full(int(max(switch_src.max(), switch_dst.max())) + 2, -1)
    out = []
    for key, fm in sp.rep.items():
        if key in cache:
            continue
        sw_pos[fm.switches] = np.arange(len(fm.switches))
        room = sp.sw_room[fm.switches]
        job = FormJob(fm.local_hops, fm.nbytes, capacity[fm.links], latency[fm.links],
                      sw_pos[switch_src[fm.links]], sw_pos[switch_dst[fm.links]],
                      room[:, 0], room[:, 1], room[:, 2], fm.share, net, seed)
        sw_pos[fm.switches] = -1
        cost = len(fm.nbytes) * float(np.max(
            fm.nbytes / (capacity[fm.links][fm.local_hops[:, 0]] * fm.share))) / FORM_STEP_S
        out.append((key, job, cost))
    return out


class FormJob(NamedTuple):
    """What a worker needs to simulate one form's representative: its flows' local hops,
    sizes and line shares, its links (wire capacity, latency, private switch ends) and its
    private switches' buffer, headroom and reserve."""

    hops: np.ndarray
    nbytes: np.ndarray
    capacity: np.ndarray
    latency: np.ndarray
    switch_src: np.ndarray
    switch_dst: np.ndarray
    buffer: np.ndarray
    headroom: np.ndarray
    reserve: np.ndarray
    share: np.ndarray
    net: NetworkConfig
    seed: int


class _Pending:
    """A form submitted but not yet collected: its job, cost and (in a pool) future."""

    __slots__ = ("job", "cost", "future")

    def __init__(self, job, cost, future):
        self.job, self.cost, self.future = job, cost, future


class FormPool:
    """Worker processes forked for the congested forms of one training step (or one call).

    Forms go in costliest first; a call that needs a form no worker has started yet runs it
    itself (:func:`_resolve`), so the caller is never idle while work is queued and the
    workers take the long forms. Forking happens at the first submission; the
    workers inherit the fabric and the compiled step, only jobs and results travel."""

    def __init__(self, workers: int = 0):
        self.workers = workers or FORM_WORKERS
        self.ex = None

    def submit(self, job):
        if self.ex is None:
            _warm(job.net)               # compile in the parent, so workers inherit the step
            self.ex = ProcessPoolExecutor(self.workers,
                                          mp_context=multiprocessing.get_context("fork"),
                                          **pool_kwargs())
        return self.ex.submit(_simulate_form, job)

    def adopt(self, cache: dict) -> None:
        """Queue the entries of ``cache`` pending without a worker, costliest first."""
        pend = [p for p in cache.values() if isinstance(p, _Pending) and p.future is None]
        for p in sorted(pend, key=lambda p: -p.cost):
            p.future = self.submit(p.job)

    def close(self, wait: bool = True) -> None:
        """Stop the workers; forms still queued are dropped (their entries stay pending).
        ``wait=False`` (after a failure) does not wait for the forms being simulated."""
        if self.ex is not None:
            self.ex.shutdown(wait=wait, cancel_futures=True)
            self.ex = None


def _submit(items, cache, pool: FormPool | None) -> None:
    """Pending cache entries for new forms; with a pool, queued there costliest first."""
    for key, job, cost in sorted(items, key=lambda it: -it[2]):
        if key not in cache:
            cache[key] = _Pending(job, cost, pool.submit(job) if pool is not None else None)


def _resolve(keys, cache) -> tuple[int, int]:
    """Collect the forms ``keys`` into ``cache``: run here, cheapest first, those no worker has
    started (or that have no worker), then wait for the rest. Returns (steps, jumps) of the
    forms collected now (the most stepped, the jumps in all)."""
    pend = sorted((k for k in keys if isinstance(cache[k], _Pending)),
                  key=lambda k: cache[k].cost)
    steps = jumps = 0
    for k in pend:
        p = cache[k]
        if p.future is None or p.future.cancel():
            cache[k] = _entry(*_simulate_form(p.job))
    for k in pend:
        p = cache[k]
        if isinstance(p, _Pending):
            cache[k] = _entry(*p.future.result())
        steps, jumps = max(steps, cache[k]["steps"]), jumps + cache[k]["jumps"]
    return steps, jumps


def _entry(entry: dict, n_steps: int, n_jumps: int) -> dict:
    entry["steps"], entry["jumps"] = n_steps, n_jumps
    return entry


def _simulate_form(job: FormJob):
    """One form's representative (a worker's task): its cache entry, steps and jumps."""
    res = _simulate(job.hops, job.nbytes, job.capacity, job.latency, job.switch_src,
                    job.switch_dst, job.buffer, job.headroom, job.reserve, job.net, start=None,
                    seed=job.seed, trace_links=2, line_share=job.share, jumps=True,
                    traces=False, fifo=FORM_FIFO, dt=FORM_STEP_S,
                    queue_sample_s=FORM_QUEUE_SAMPLE_S, congested=True)
    entry = {"finish": res.finish_s, "retx": res.flow_retransmitted_bytes,
             "trace": res.queue_samples}
    for k in LINK_STATS:
        entry[k] = getattr(res, k)
    return entry, res.steps, res.steady_jumps


def pool_pays_off(flow_steps: float) -> bool:
    """Whether forms worth ``flow_steps`` (flows x steps planned so far) pay for forking
    workers (:data:`FORK_MIN_FLOW_STEPS`)."""
    return flow_steps >= FORK_MIN_FLOW_STEPS


def can_fork_workers() -> bool:
    """Whether a step's forms can run in forked worker processes here."""
    return FORM_WORKERS > 1 and _can_fork()


def _can_fork() -> bool:
    """Forked workers: on Linux, from a main process (not a worker of a pool already)."""
    return sys.platform.startswith("linux") and multiprocessing.parent_process() is None


def _warm(net: NetworkConfig) -> None:
    """Compile (or load) the fluid step in this process, on a two-flow incast of one byte
    each (a no-op once done)."""
    if kernel.run_steps.signatures:
        return
    _simulate(np.array([[0, 2], [1, 2]]), np.array([1.0, 1.0]), np.full(3, 1e9),
              np.full(3, 1e-6), np.array([-1, -1, 0]), np.array([0, 0, -1]), np.array([1e7]),
              np.zeros(1), np.zeros(1), net, start=None, seed=0, trace_links=2,
              line_share=np.ones(2), jumps=True, traces=False, fifo=FORM_FIFO, dt=FORM_STEP_S,
              queue_sample_s=FORM_QUEUE_SAMPLE_S)
