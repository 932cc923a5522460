"""The fluid model's integration step, compiled (numba): what :mod:`simulator.congestion.fluid`
does per step (1 us; 2 us for a collective's shapes), as loops over flows x hops, links and
switches. Its state travels in named records (:class:`Params`, :class:`Paths`, ...), never in
arrays packed by position.

A collective's congested components are a few dozen flows; at that size a step is dominated by
the cost of issuing ~100 numpy calls, not by arithmetic, so the step runs compiled and returns
to Python only at trace samples, completions, arrivals or when the fabric is calm (for a
jump). Each call loops over the flows still active, their queued hops (listed per flow at
entry) and the links they use, so a collective's late, thinned-out epochs cost what their
remaining flows cost.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

CALM, RAN, CHANGED, IDLE, FULL, GROW = 2, 0, 1, 3, 4, 5
"""Why :func:`run_steps` returned: calm (a jump may apply), ran its steps, the set of active
flows changed (completion or arrival), no active flow, the trace buffer is full, a queue's
oldest byte is about to fall out of the FIFO history (give it a longer one)."""


class Params(NamedTuple):
    """Scalars of one run (named, so no index can slip; times in seconds, bytes in payload)."""
    t0: float
    """Time of step 0."""
    dt: float
    """Integration step."""
    payload: float
    """Payload fraction of a wire byte (MTU / (MTU + headers))."""
    pkt: float
    """Payload bytes per packet (MTU)."""
    pmax: float
    """RED's marking probability at Kmax."""
    alpha_pf: float
    """PFC dynamic-threshold factor."""
    static_thr: float
    """PFC static XOFF threshold, bytes."""
    reserve: float
    """Per-port reserve, bytes."""
    gap: float
    """XON this far below XOFF, bytes."""
    g: float
    """DCQCN alpha gain per update (rescaled to whole steps)."""
    ai: float
    """Additive increase, bytes/s."""
    hai: float
    """Hyper increase, bytes/s."""
    rmin: float
    """Minimum rate, bytes/s."""
    bc: float
    """Byte counter, bytes (0: off)."""
    tau_a: float
    """Alpha update period, seconds (whole steps)."""
    tau_d: float
    """Rate-decrease check period, seconds."""
    timer: float
    """Rate-increase timer, seconds."""
    first_h: float
    """Mean field: expected marks at the first CNP."""
    pfc: bool
    dynamic: bool
    """PFC threshold mode dynamic (else static)."""
    dcqcn: bool
    alpha_steps: int
    dec_steps: int
    inc_steps: int
    fr: int
    """Fast-recovery increase events."""
    seed_key: np.uint64
    """Hash key of the run's seed (the CNP draws)."""
    ring: int
    """Slots of the CNP / hazard ring (longest round trip + 1)."""
    mean_field: bool
    fifo: bool
    can_grow: bool
    """The FIFO history may still grow (return GROW when a queue needs it)."""
    after: int
    """Steps to go on after a completion (0: return CHANGED at once)."""


class Paths(NamedTuple):
    """Per flow and hop, fixed for a run (hops padded with the sentinel link L)."""
    hz: np.ndarray
    """[flow, hop] link id, L where there is no hop."""
    valid: np.ndarray
    leading: np.ndarray
    """[flow, hop] the host-side prefix (no queue)."""
    qmask: np.ndarray
    """[flow, hop] a switch egress queue."""
    prev_hop: np.ndarray
    """[flow, hop] the link that fed the hop (its ingress port)."""
    qsw: np.ndarray
    """[flow, hop] the switch of a queued hop."""
    path_lat: np.ndarray
    """[flow] latency a completion adds after the last queue."""
    rtt_steps: np.ndarray
    line: np.ndarray
    """[flow] line rate, wire bytes/s."""
    nbytes: np.ndarray
    start: np.ndarray


class Links(NamedTuple):
    """Per link (L + 1 with the sentinel) and per switch, fixed for a run."""
    is_queue: np.ndarray
    cap_ext: np.ndarray
    """[link] payload bytes per step."""
    kmin: np.ndarray
    kmax: np.ndarray
    switch_dst: np.ndarray
    buffer: np.ndarray
    sw_headroom: np.ndarray
    sw_reserve: np.ndarray


class FlowState(NamedTuple):
    unsent: np.ndarray
    delivered: np.ndarray
    backlog: np.ndarray
    """[flow, hop] bytes queued at the hop."""
    carry: np.ndarray
    """[flow, hop] bytes on their way to the hop (one step from the previous queue)."""
    finish: np.ndarray
    retx: np.ndarray
    last_gbn: np.ndarray
    """[flow] step of the last go-back-N (lossy)."""


class Reaction(NamedTuple):
    """DCQCN reaction point per flow (state machine, or the mean field's expectations)."""
    rc: np.ndarray
    rt: np.ndarray
    alpha: np.ndarray
    cc_on: np.ndarray
    alpha_flag: np.ndarray
    dec_flag: np.ndarray
    stage: np.ndarray
    stage_b: np.ndarray
    bc_sent: np.ndarray
    next_alpha: np.ndarray
    next_dec: np.ndarray
    next_inc: np.ndarray
    cnp: np.ndarray
    """[ring, flow] CNPs on their way."""
    haz: np.ndarray
    """[ring, flow] mean field: expected marks on their way."""
    seen: np.ndarray
    pi: np.ndarray
    """[flow, stage] mean field: probability of each increase stage."""


class Fifo(NamedTuple):
    """FIFO service history (see :func:`run_steps`)."""
    fifo_in: np.ndarray
    fifo_out: np.ndarray
    ring_in: np.ndarray
    ring_tot: np.ndarray
    tot_in: np.ndarray
    tot_out: np.ndarray
    head: np.ndarray


class Pfc(NamedTuple):
    paused: np.ndarray
    """[link] XOFF state of the switch for the ingress port."""
    stopped: np.ndarray
    """[link] ... in force at the sender."""
    pz: np.ndarray
    """[slot, link] decisions on their way (PAUSE / RESUME frames)."""
    pz_delay: np.ndarray


class Stats(NamedTuple):
    """Per link, summed over the run; ``q_link`` what each link holds now."""
    bytes: np.ndarray
    qmax: np.ndarray
    qsum: np.ndarray
    pause: np.ndarray
    pauses: np.ndarray
    marked: np.ndarray
    dropped: np.ndarray
    q_link: np.ndarray


class Trace(NamedTuple):
    sample: np.ndarray
    """[period in steps, step of the last sample, next row]."""
    tr_t: np.ndarray
    tr_q: np.ndarray
    tr_p: np.ndarray
    chg: np.ndarray
    """[0]: step after the last completion the call went on from (-1: none)."""


@njit(cache=True, nogil=True)
def _splitmix(x):
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def run_steps(step, n_max, stop_on_calm, P, path, lk, fs, rp, ff, pf, st, tr):
    """Advance up to ``n_max`` steps from ``step``; returns (steps taken, reason).

    Queue samples: every ``sample[0]`` steps while something is queued or paused, the time,
    every link's backlog and paused flag go to row ``sample[2]`` of ``tr_t`` / ``tr_q`` /
    ``tr_p`` (``sample[1]``: step of the last sample); a full buffer returns FULL.

    Completions: with ``P.after`` = 0 the call returns CHANGED at once; with n > 0 it goes
    on with the flows left (its per-call sets rebuilt) for n more steps, the transient window
    the caller would run next, and ``chg[0]`` holds the step after the last completion it
    went on from (-1: none). At a completion that leaves the fabric calm it returns CALM.

    ``path_lat`` is the latency a completion adds to the step its last byte leaves the last
    queue (what the queue-to-queue steps did not already cover).

    Records: ``P`` :class:`Params`, ``path`` :class:`Paths`, ``lk`` :class:`Links`, ``fs``
    :class:`FlowState`, ``rp`` :class:`Reaction`, ``ff`` :class:`Fifo`, ``pf`` :class:`Pfc`,
    ``st`` :class:`Stats`, ``tr`` :class:`Trace`; their arrays change in place. They are
    unpacked into locals once per call: a record's field read inside the step loop would cost a
    reference count every time (measured: the MegaScale step under DCQCN 2.3-4.0 s instead of
    1.8 s when the phases below are separate functions that take or unpack records).

    Mean-field reaction point (``mean_field``): instead of drawing CNPs, each flow integrates the
    expected dynamics (:func:`_mean_field_update`); ``haz`` [ring, flow] carries the expected
    marked packets to the sender one round trip later, ``seen`` the hazard a flow has had before
    its first CNP, ``pi`` [flow, stage] the probability of each increase stage.

    FIFO service (``fifo``): each queue serves its bytes in arrival order. ``fifo_in`` /
    ``fifo_out`` [flow, hop] are cumulative bytes in and out of each queued hop, ``ring_in``
    [R, flow, hop] and ``ring_tot`` [R, link] the cumulative arrivals at the end of each of the
    last R steps, ``tot_in`` / ``tot_out`` [link] the totals and ``head`` [link] the last step
    all of whose bytes have left. A queue serving S bytes sends on what arrived up to where
    its cumulative departures reach (interpolated within the step); with deeper history than
    R (a long pause) it falls back to shares of the backlog until it empties.

    PFC: ``paused`` [link] is the switch's XOFF state for each ingress port; the sender stops
    (``stopped``) ``pz_delay`` [link] steps after the decision, once the PAUSE frame has
    crossed the link, and starts again as long after the RESUME; ``pz`` [PR, link] holds the
    decisions on their way.
    """
    t0, dt, payload, pkt, pmax = P.t0, P.dt, P.payload, P.pkt, P.pmax
    alpha_pf, static_thr, reserve, gap, g = P.alpha_pf, P.static_thr, P.reserve, P.gap, P.g
    ai, hai, rmin, bc = P.ai, P.hai, P.rmin, P.bc
    tau_a, tau_d, timer, first_h = P.tau_a, P.tau_d, P.timer, P.first_h
    mean_field, fifo, can_grow = P.mean_field, P.fifo, P.can_grow
    gain_a = 1 - (1 - g) ** (dt / tau_a)    # mean field: alpha's gain per step
    pfc, dynamic, dcqcn = P.pfc, P.dynamic, P.dcqcn
    alpha_steps, dec_steps, inc_steps, fr = P.alpha_steps, P.dec_steps, P.inc_steps, P.fr
    seed_key = P.seed_key
    ring = P.ring
    hz, valid, leading, qmask, prev_hop, qsw = (path.hz, path.valid, path.leading, path.qmask,
                                                path.prev_hop, path.qsw)
    path_lat, rtt_steps, line, nbytes, start = (path.path_lat, path.rtt_steps, path.line,
                                                path.nbytes, path.start)
    is_queue, cap_ext, kmin, kmax = lk.is_queue, lk.cap_ext, lk.kmin, lk.kmax
    switch_dst, buffer, sw_headroom, sw_reserve = (lk.switch_dst, lk.buffer, lk.sw_headroom,
                                                   lk.sw_reserve)
    unsent, delivered, backlog, carry = fs.unsent, fs.delivered, fs.backlog, fs.carry
    finish, retx, last_gbn = fs.finish, fs.retx, fs.last_gbn
    rc, rt, alpha, cc_on, alpha_flag = rp.rc, rp.rt, rp.alpha, rp.cc_on, rp.alpha_flag
    dec_flag, stage, stage_b, bc_sent = rp.dec_flag, rp.stage, rp.stage_b, rp.bc_sent
    next_alpha, next_dec, next_inc, cnp = rp.next_alpha, rp.next_dec, rp.next_inc, rp.cnp
    haz, seen, pi = rp.haz, rp.seen, rp.pi
    fifo_in, fifo_out, ring_in, ring_tot = ff.fifo_in, ff.fifo_out, ff.ring_in, ff.ring_tot
    tot_in, tot_out, head = ff.tot_in, ff.tot_out, ff.head
    paused, stopped, pz, pz_delay = pf.paused, pf.stopped, pf.pz, pf.pz_delay
    s_bytes, s_qmax, s_qsum, s_pause = st.bytes, st.qmax, st.qsum, st.pause
    s_pauses, s_marked, s_dropped, q_link = st.pauses, st.marked, st.dropped, st.q_link
    sample, tr_t, tr_q, tr_p, chg = tr.sample, tr.tr_t, tr.tr_q, tr.tr_p, tr.chg
    R = ring_tot.shape[0]
    PR = pz.shape[0]
    F, H = hz.shape
    L1 = len(cap_ext)
    L = L1 - 1
    n_sw = len(buffer)
    taken = 0
    after = P.after
    chg[0] = -1
    while True:                           # once per set of active flows
        # The set of active flows is fixed for one pass of this loop (a completion starts the
        # next pass, an arrival returns CHANGED), so every step runs over the active flows and
        # the links they use (plus links still paused, stopped or with a PAUSE / RESUME on its
        # way): finished flows hold nothing, unused links stay empty, and the late epochs of a
        # collective cost what its remaining flows cost.
        (flow_in, moving, no_mark, arrive, out, total, p, log_clear, held, arriving, ingress,
         shared, want, serve_l, q_on, q_seen, in_on, in_seen) = _scratch(F, H, L1, n_sw)
        n_qon = n_inon = 0
        active, act, n_act, next_start = _active_flows(t0 + step * dt, start, finish)
        if n_act == 0:
            return taken, IDLE if chg[0] < 0 else CHANGED
        n_lead, n_valid, n_qh, qh, max_lead = _flow_hops(act, n_act, leading, valid, qmask)
        host_scale = _host_links_oversubscribed(act, n_act, n_lead, hz, line, payload * dt,
                                                cap_ext)
        (act_l, act_q, act_in, n_l, n_q, n_in, n_pz, any_stopped,
         any_paused) = _set_links(step, act, n_act, hz, valid, pz, paused, stopped, backlog,
                                  q_link, is_queue, switch_dst, fifo, tot_in, tot_out, head)
        sent = np.zeros(F)                    # bytes each flow put on its path in this call
        why = RAN
        restart = False
        while taken < n_max:
            t = t0 + step * dt
            if t + 1e-15 >= next_start:
                why = CHANGED
                break
            if pfc and (n_pz > 0 or any_stopped):   # PAUSE / RESUME frames reaching senders now
                any_stopped = False
                for j in range(n_in):
                    ln = act_in[j]
                    stopped[ln] = pz[step % PR, ln]
                    any_stopped = any_stopped or stopped[ln]
            # ---- hosts: what each flow offers, scaled down on shared host-side links ----
            for i in range(n_act):
                f = act[i]
                w = min(unsent[f], rc[f] * payload * dt)
                for k in range(n_lead[f]):
                    if stopped[hz[f, k]]:
                        w = 0.0
                flow_in[f] = w
            for k in range(max_lead if host_scale else 0):
                for i in range(n_act):
                    f = act[i]
                    if k < n_lead[f]:
                        total[hz[f, k]] = 0.0
                for i in range(n_act):
                    f = act[i]
                    if k < n_lead[f]:
                        total[hz[f, k]] += flow_in[f]
                for i in range(n_act):
                    f = act[i]
                    if k < n_lead[f]:
                        ln = hz[f, k]
                        flow_in[f] *= min(1.0, cap_ext[ln] / max(total[ln], 1e-30))
            for i in range(n_act):
                f = act[i]
                unsent[f] -= flow_in[f]
                sent[f] += flow_in[f]
            # ---- arrivals at the first queue; carried bytes reach their next queue; lossless,
            # they join the queues now (lossy, after what the buffers cannot hold is dropped) ----
            for j in range(n_q):
                total[act_q[j]] = 0.0
            for i in range(n_act):
                f = act[i]
                for j in range(n_qh[f]):
                    k = qh[f, j]
                    a = carry[f, k]
                    carry[f, k] = 0.0
                    if j == 0:
                        a += flow_in[f]
                    arrive[f, k] = a
                    if pfc:
                        backlog[f, k] += a
                        total[hz[f, k]] += backlog[f, k]
            if not pfc:                      # lossy: what a switch buffer cannot hold is dropped
                held[:] = 0.0
                arriving[:] = 0.0
                for i in range(n_act):
                    f = act[i]
                    for j in range(n_qh[f]):
                        k = qh[f, j]
                        held[qsw[f, k]] += backlog[f, k]
                        arriving[qsw[f, k]] += arrive[f, k]
                for i in range(n_act):
                    f = act[i]
                    lost_f = 0.0
                    for j in range(n_qh[f]):
                        k = qh[f, j]
                        s = qsw[f, k]
                        keep = min(1.0, max(buffer[s] - held[s], 0.0) / max(arriving[s], 1e-30))
                        lost = arrive[f, k] * (1.0 - keep)
                        if lost > 0:
                            arrive[f, k] -= lost
                            s_dropped[hz[f, k]] += lost
                            lost_f += lost
                    if lost_f > 0:
                        extra = 0.0
                        if step - last_gbn[f] >= rtt_steps[f]:     # go back N, one NAK per RTT
                            last_gbn[f] = step
                            extra = min(rc[f] * payload * rtt_steps[f] * dt, delivered[f])
                        delivered[f] -= extra
                        unsent[f] += lost_f + extra
                        retx[f] += lost_f + extra
                for i in range(n_act):
                    f = act[i]
                    for j in range(n_qh[f]):
                        k = qh[f, j]
                        backlog[f, k] += arrive[f, k]
                        total[hz[f, k]] += backlog[f, k]
            # ---- every egress queue serves its capacity, flows in proportion to backlog ----
            if fifo:                       # arrival history, then how far each queue serves
                r_now = step % R
                for i in range(n_act):
                    f = act[i]
                    for j in range(n_qh[f]):
                        k = qh[f, j]
                        fifo_in[f, k] += arrive[f, k]
                        ring_in[r_now, f, k] = fifo_in[f, k]
                        tot_in[hz[f, k]] += arrive[f, k]
                for j in range(n_q):
                    ln = act_q[j]
                    ring_tot[r_now, ln] = tot_in[ln]
                    serve_l[ln] = 0.0 if stopped[ln] else min(total[ln], cap_ext[ln])
                    want[ln] = 0.0
                    new_out = tot_out[ln] + serve_l[ln]
                    if head[ln] >= 0:
                        while head[ln] < step and ring_tot[(head[ln] + 1) % R, ln] <= new_out:
                            head[ln] += 1
                        if step - head[ln] >= R:
                            head[ln] = -1      # history lost: backlog shares until empty
            for j in range(n_q):           # RED on the queue a dequeued byte leaves behind
                ln = act_q[j]
                serve_l[ln] = 0.0 if stopped[ln] else min(total[ln], cap_ext[ln])
                left = total[ln] if stopped[ln] else max(total[ln] - cap_ext[ln], 0.0)
                if left > kmax[ln]:
                    p[ln] = 1.0
                elif left <= kmin[ln]:
                    p[ln] = 0.0
                else:
                    x = (left - kmin[ln]) / max(kmax[ln] - kmin[ln], 1e-30)
                    p[ln] = min(max(x, 0.0), 1.0) * pmax
                log_clear[ln] = np.log1p(-min(p[ln], 1 - 1e-12)) if p[ln] > 0.0 else 0.0
                q_link[ln] = 0.0
            for j in range(n_qon):         # (only the links listed can hold bytes)
                q_seen[q_on[j]] = False
            n_qon = 0
            if pfc:                        # what each ingress port holds in its switch
                ingress[L] = 0.0
                for j in range(n_inon):
                    ingress[in_on[j]] = 0.0
                    in_seen[in_on[j]] = False
                n_inon = 0
            if fifo:                       # what FIFO order sends of each flow's bytes
                for i in range(n_act):
                    f = act[i]
                    for j in range(n_qh[f]):
                        k = qh[f, j]
                        ln = hz[f, k]
                        h = head[ln]
                        if serve_l[ln] >= total[ln] or total[ln] <= 0.0:
                            o = backlog[f, k]
                        elif h < 0:
                            o = serve_l[ln] * backlog[f, k] / total[ln]
                        else:
                            new_out = tot_out[ln] + serve_l[ln]
                            if h >= step:
                                target = fifo_in[f, k]
                            else:
                                lo, hi = ring_tot[h % R, ln], ring_tot[(h + 1) % R, ln]
                                x = (new_out - lo) / (hi - lo) if hi > lo else 1.0
                                a0 = ring_in[h % R, f, k]
                                target = a0 + x * (ring_in[(h + 1) % R, f, k] - a0)
                            o = min(max(target - fifo_out[f, k], 0.0), backlog[f, k])
                        out[f, k] = o
                        want[ln] += o
            # ... what leaves, its marks, and what each queue and ingress port then holds
            for i in range(n_act):
                f = act[i]
                nm = 0.0
                mv = 0.0
                for j in range(n_qh[f]):
                    k = qh[f, j]
                    ln = hz[f, k]
                    if fifo:
                        o = out[f, k]
                        if want[ln] > serve_l[ln]:
                            o *= serve_l[ln] / want[ln]
                        fifo_out[f, k] += o
                        tot_out[ln] += o
                    elif serve_l[ln] >= total[ln]:   # it sends all it holds (exactly:
                        o = backlog[f, k]              # no rounding residue left queued)
                    else:
                        o = serve_l[ln] * backlog[f, k] / total[ln]
                    backlog[f, k] -= o
                    if p[ln] > 0.0:          # a paced flow's whole packets, then a part one
                        n_pk = o / pkt
                        whole = np.floor(n_pk)
                        nm += whole * log_clear[ln] + np.log1p(-(n_pk - whole) * p[ln])
                    s_marked[ln] += o * p[ln]
                    if j + 1 < n_qh[f]:
                        carry[f, qh[f, j + 1]] = o
                    else:
                        mv += o
                    b = backlog[f, k]
                    if b != 0.0:         # (and list the links and ports now holding bytes)
                        if not q_seen[ln]:
                            q_seen[ln] = True
                            q_on[n_qon] = ln
                            n_qon += 1
                        q_link[ln] += b
                        if pfc:
                            pl = prev_hop[f, k]
                            if not in_seen[pl] and pl < L:
                                in_seen[pl] = True
                                in_on[n_inon] = pl
                                n_inon += 1
                            ingress[pl] += b
                if n_qh[f] == 0:
                    mv += flow_in[f]
                no_mark[f] = nm
                moving[f] = mv
                delivered[f] += mv
            any_q = False
            if fifo:                       # an empty queue starts its history afresh
                for i in range(n_act):
                    f = act[i]
                    for j in range(n_qh[f]):
                        k = qh[f, j]
                        if q_link[hz[f, k]] == 0.0:
                            fifo_out[f, k] = fifo_in[f, k]
                for j in range(n_q):
                    ln = act_q[j]
                    if q_link[ln] == 0.0:
                        tot_out[ln] = tot_in[ln]
                        head[ln] = step
            for j in range(n_qon):         # the other links hold exactly nothing
                ln = q_on[j]
                s_qmax[ln] = max(s_qmax[ln], q_link[ln])
                s_qsum[ln] += q_link[ln]
                if q_link[ln] != 0.0:
                    any_q = True
            # ---- PFC: ingress ports against the (dynamic) threshold ----
            if pfc:
                # nothing paused, stopped or on its way: only ports holding bytes can change
                # (taken in link order, as the full pass sums them)
                few = n_pz == 0 and not any_paused
                if few:
                    for j in range(1, n_inon):
                        x = in_on[j]
                        i = j - 1
                        while i >= 0 and in_on[i] > x:
                            in_on[i + 1] = in_on[i]
                            i -= 1
                        in_on[i + 1] = x
                ports = in_on if few else act_in
                n_ports = n_inon if few else n_in
                shared[:] = 0.0
                for j in range(n_ports):
                    ln = ports[j]
                    shared[switch_dst[ln]] += max(ingress[ln] - reserve, 0.0)
            any_paused = False
            if pfc:
                for j in range(n_ports):
                    ln = ports[j]
                    new = False
                    over = ingress[ln] - reserve
                    if over > 0.0:
                        s = switch_dst[ln]
                        if dynamic:
                            room = buffer[s] - sw_headroom[s] - sw_reserve[s] - shared[s]
                            lim = alpha_pf * max(room, 0.0)
                        else:
                            lim = static_thr
                        if paused[ln]:
                            new = over + gap > lim
                        else:
                            new = over >= lim
                    if new and not paused[ln]:
                        s_pauses[ln] += 1
                    paused[ln] = new
                    if new or n_pz > 0:    # else no frame is on its way: the slot holds False
                        slot = (step + 1 + pz_delay[ln]) % PR
                        n_pz += int(new) - int(pz[slot, ln])
                        pz[slot, ln] = new
                    if stopped[ln]:
                        s_pause[ln] += dt
                    if new or stopped[ln]:
                        any_paused = True
            # ---- completions ----
            changed = False
            for i in range(n_act):
                f = act[i]
                if unsent[f] > 1e-9 * nbytes[f] + 1e-9:
                    continue
                # all delivered, or nothing left in the fabric (rounding over ~1e5 steps can
                # leave the delivered sum a few ulps short of the size)
                done = delivered[f] >= nbytes[f] * (1 - 1e-12)
                if not done:
                    in_fabric = 0.0
                    for k in range(H):
                        in_fabric += backlog[f, k] + carry[f, k]
                    done = in_fabric <= 1e-9 * nbytes[f] + 1e-9
                if done:
                    frac = (delivered[f] - nbytes[f]) / max(moving[f], 1e-30) \
                        if moving[f] > 0 else 0.0
                    finish[f] = t + dt * (1 - min(max(frac, 0.0), 1.0)) + path_lat[f]
                    changed = True
                    for k in range(H):       # its last ulps of rounding leave the fabric with it,
                        backlog[f, k] = 0.0  # and any CNP on its way has no one to reach
                        carry[f, k] = 0.0
                    for r in range(ring):
                        cnp[r, f] = False
                        haz[r, f] = 0.0
            # ---- DCQCN reaction points ----
            if dcqcn and mean_field:
                slot_now = step % ring
                for i in range(n_act):
                    f = act[i]
                    if no_mark[f] < 0.0:
                        haz[(step + rtt_steps[f]) % ring, f] -= no_mark[f]
                    h = haz[slot_now, f] if active[f] else 0.0
                    haz[slot_now, f] = 0.0
                    if not cc_on[f] and active[f]:
                        seen[f] += h
                        if seen[f] >= first_h:       # the first CNP: alpha = 1, stage 0
                            cc_on[f] = True
                            alpha[f] = 1.0
                    if cc_on[f] and active[f]:
                        _mean_field_update(f, h / dt, dt, rc, rt, alpha, pi, line[f], gain_a,
                                           tau_a, tau_d, timer, bc, payload, ai, hai, rmin)
            elif dcqcn:
                slot_now = step % ring
                for i in range(n_act):
                    f = act[i]
                    if no_mark[f] < 0.0:             # nothing marked can reach it: no draw needed
                        u = float(_splitmix(seed_key ^ (np.uint64(step) * np.uint64(F + 1) +
                                                        np.uint64(f + 1)))) / 2.0 ** 64
                        if u < -np.expm1(no_mark[f]):
                            cnp[(step + rtt_steps[f]) % ring, f] = True
                    got = cnp[slot_now, f] and active[f]
                    cnp[slot_now, f] = False
                    first = got and not cc_on[f]
                    if first:
                        cc_on[f] = True
                        alpha[f] = 1.0
                        next_alpha[f] = step + alpha_steps
                        next_dec[f] = step + dec_steps
                    if got:
                        dec_flag[f] = True
                        if not first:
                            alpha_flag[f] = True
                    if cc_on[f] and step >= next_alpha[f]:
                        alpha[f] = (1 - g) * alpha[f] + g * (1.0 if alpha_flag[f] else 0.0)
                        alpha_flag[f] = False
                        next_alpha[f] += alpha_steps
                    cut = False
                    if cc_on[f] and step >= next_dec[f]:
                        next_dec[f] += dec_steps
                        cut = dec_flag[f]
                    if cut:
                        if stage[f] != 0 or stage_b[f] != 0:
                            rt[f] = rc[f]
                        rc[f] = max(rmin, rc[f] * (1 - alpha[f] / 2))
                        stage[f] = 0
                        stage_b[f] = 0
                        bc_sent[f] = 0.0
                        dec_flag[f] = False
                        next_inc[f] = step + inc_steps
                    elif cc_on[f]:
                        # increase events: the timer, and (if on) every `bc` bytes sent; the stage
                        # follows the DCQCN paper: fast recovery while max(T, BC) < F, hyper once
                        # min(T, BC) > F, additive between (one counter when the byte counter is
                        # off)
                        bc_sent[f] += flow_in[f]
                        for src in range(2):
                            if src == 0:
                                if step < next_inc[f]:
                                    continue
                                next_inc[f] += inc_steps
                            else:
                                if bc <= 0 or bc_sent[f] < bc:
                                    continue
                                bc_sent[f] -= bc
                            tc = stage[f]
                            bcnt = stage_b[f] if bc > 0 else tc
                            if max(tc, bcnt) < fr:
                                add = 0.0
                            elif min(tc, bcnt) > fr:
                                add = hai
                            else:
                                add = ai
                            rt[f] = min(rt[f] + add, line[f])
                            rc[f] = (rc[f] + rt[f]) / 2
                            if src == 0:
                                stage[f] += 1
                            else:
                                stage_b[f] += 1
            step += 1
            taken += 1
            if (any_q or any_paused) and step - sample[1] >= sample[0]:
                row = sample[2]
                tr_t[row] = t0 + step * dt
                for ln in range(L1):
                    tr_q[row, ln] = q_link[ln]
                    tr_p[row, ln] = stopped[ln]
                sample[1] = step
                sample[2] = row + 1
                if row + 1 >= len(tr_t):
                    why = FULL
                    break
            if changed and after == 0:
                why = CHANGED
                break
            if fifo and can_grow:          # keep every queued byte's arrival in the history
                for j in range(n_l):
                    ln = act_l[j]
                    if is_queue[ln] and head[ln] >= 0 and step - head[ln] >= R - 2:
                        why = GROW
                if why == GROW:
                    break
            if (stop_on_calm or changed) and not any_q and not any_paused:
                calm = True
                if dcqcn:                          # nothing on its way back to a sender
                    for r in range(ring):
                        for i in range(n_act):
                            f = act[i]
                            if (mean_field and haz[r, f] > 0.0) or (not mean_field and cnp[r, f]):
                                calm = False
                                break
                        if not calm:
                            break
                for i in range(n_act):
                    f = act[i]
                    if dec_flag[f] and active[f]:
                        calm = False
                        break
                    if mean_field and cc_on[f] and active[f] and rc[f] < line[f] * (1 - 1e-9):
                        calm = False                 # still recovering, continuously
                        break
                    for k in range(H):
                        if carry[f, k] != 0.0:
                            calm = False
                            break
                    if not calm:
                        break
                if calm:
                    why = CALM
                    break
            if changed:                  # go on with the flows left, for ``after`` steps
                chg[0] = step
                n_max = taken + after
                restart = True
                break
        for i in range(n_act):                # what went onto each link, once per set
            f = act[i]
            if sent[f] != 0.0:
                for k in range(n_valid[f]):
                    s_bytes[hz[f, k]] += sent[f]
        if not restart:
            return taken, why


@njit(cache=True, nogil=True)
def _scratch(F, H, L1, n_sw):
    """Per-step buffers of one set of active flows: per flow, per flow and hop, per link
    (L1 with the sentinel) and per switch; and the lists of links / ingress ports holding
    bytes."""
    return (np.zeros(F), np.zeros(F), np.zeros(F),          # flow_in, moving, no_mark
            np.zeros((F, H)), np.zeros((F, H)),            # arrive, out
            np.zeros(L1), np.zeros(L1), np.zeros(L1),      # total, p, log(1 - p)
            np.zeros(n_sw), np.zeros(n_sw),                # held, arriving
            np.zeros(L1), np.zeros(n_sw),                  # ingress, shared
            np.zeros(L1), np.zeros(L1),                    # FIFO: want, serve_l
            np.empty(L1, np.int64), np.zeros(L1, np.bool_),    # links holding bytes
            np.empty(L1, np.int64), np.zeros(L1, np.bool_))    # ... and ingress ports


@njit(cache=True, nogil=True)
def _active_flows(t, start, finish):
    """(active mask, active flow ids, their count, the next start of a waiting flow)."""
    F = len(start)
    active = np.zeros(F, np.bool_)
    act = np.empty(F, np.int64)
    n_act = 0
    next_start = np.inf
    for f in range(F):
        active[f] = start[f] <= t + 1e-15 and np.isnan(finish[f])
        if active[f]:
            act[n_act] = f
            n_act += 1
        elif np.isnan(finish[f]):
            next_start = min(next_start, start[f])
    return active, act, n_act, next_start


@njit(cache=True, nogil=True)
def _flow_hops(act, n_act, leading, valid, qmask):
    """Per active flow: host-side hops (a prefix), valid hops (a prefix) and the queued hops
    in path order; and the longest host-side prefix."""
    F, H = valid.shape
    n_lead = np.zeros(F, np.int64)
    n_valid = np.zeros(F, np.int64)
    n_qh = np.zeros(F, np.int64)
    qh = np.zeros((F, H), np.int64)
    max_lead = 0
    for i in range(n_act):
        f = act[i]
        for k in range(H):
            if leading[f, k]:
                n_lead[f] = k + 1
            if valid[f, k]:
                n_valid[f] = k + 1
            if qmask[f, k]:
                qh[f, n_qh[f]] = k
                n_qh[f] += 1
        max_lead = max(max_lead, n_lead[f])
    return n_lead, n_valid, n_qh, qh, max_lead


@njit(cache=True, nogil=True)
def _host_links_oversubscribed(act, n_act, n_lead, hz, line, payload_dt, cap_ext):
    """Whether the active flows could offer some host-side link more than its capacity (else
    a flow's offer passes them unscaled, and the scaling passes are skipped): one flow at line
    rate is exact, several need a margin for the rounding of their sum."""
    L1 = len(cap_ext)
    offer = np.zeros(L1)                  # line rate the active flows offer a host-side link
    n_on = np.zeros(L1, np.int64)         # ... and how many they are
    for i in range(n_act):
        f = act[i]
        for k in range(n_lead[f]):
            offer[hz[f, k]] = 0.0
            n_on[hz[f, k]] = 0
    for i in range(n_act):
        f = act[i]
        for k in range(n_lead[f]):
            offer[hz[f, k]] += line[f] * payload_dt
            n_on[hz[f, k]] += 1
    host_scale = False
    for i in range(n_act):
        f = act[i]
        for k in range(n_lead[f]):
            ln = hz[f, k]
            if offer[ln] > cap_ext[ln] * (1.0 if n_on[ln] == 1 else 1 - 1e-9):
                host_scale = True
    return host_scale


@njit(cache=True, nogil=True)
def _set_links(step, act, n_act, hz, valid, pz, paused, stopped, backlog, q_link, is_queue,
               switch_dst, fifo, tot_in, tot_out, head):
    """The links a set of flows uses (plus links still paused, stopped or with a PAUSE /
    RESUME on its way), of those the queues and the ports into switches (the only ones PFC
    can pause); PAUSE frames on their way and whether a port is stopped or paused; what each
    link holds (finished flows left nothing); FIFO: an empty queue's history as its last step
    left it."""
    F, H = hz.shape
    L1 = len(q_link)
    L = L1 - 1
    PR = pz.shape[0]
    use = np.zeros(L1, np.bool_)
    for i in range(n_act):
        f = act[i]
        for k in range(H):
            if valid[f, k]:
                use[hz[f, k]] = True
    n_pz = 0                              # PAUSE frames (True entries) on their way
    any_stopped = False
    any_paused = False                    # a port paused or stopped (as of the last step)
    for ln in range(L):
        for r in range(PR):
            if pz[r, ln]:
                n_pz += 1
                use[ln] = True
        if paused[ln] or stopped[ln]:
            use[ln] = True
            any_paused = True
        any_stopped = any_stopped or stopped[ln]
    q_link[:] = 0.0
    for f in range(F):
        for k in range(H):
            if backlog[f, k] != 0.0:
                q_link[hz[f, k]] += backlog[f, k]
    act_l = np.empty(L, np.int64)
    act_q = np.empty(L, np.int64)
    act_in = np.empty(L, np.int64)
    n_l = n_q = n_in = 0
    for ln in range(L):
        if use[ln]:
            act_l[n_l] = ln
            n_l += 1
            if is_queue[ln]:
                act_q[n_q] = ln
                n_q += 1
            if switch_dst[ln] >= 0:
                act_in[n_in] = ln
                n_in += 1
        if fifo and is_queue[ln] and q_link[ln] == 0.0:
            tot_out[ln] = tot_in[ln]
            head[ln] = step - 1
    return act_l, act_q, act_in, n_l, n_q, n_in, n_pz, any_stopped, any_paused


@njit(cache=True, nogil=True)
def events_per_period(x):
    """Increase events per period of a timer (or byte counter) that a cut restarts, when x
    marks are expected per period: x / (e^x - 1) (Zhu et al.'s p / ((1-p)^-TR - 1)), 1 with
    no marks, 0 when a cut always comes first."""
    if x < 1e-9:
        return 1.0
    return x / np.expm1(x) if x < 700.0 else 0.0


@njit(cache=True, nogil=True)
def _mean_field_update(f, hr, dt, rc, rt, alpha, pi, line, gain_a, tau_a, tau_d, timer, bc,
                       payload, ai, hai, rmin):
    """One step of the DCQCN fluid equations (Zhu et al., CoNEXT 2016, eqs. 3-5) for flow f
    seeing ``hr`` marked packets per second, with the stage rule of the reaction point
    (fast recovery, additive, hyper) tracked as a probability per stage (``pi[f]``).

    Per second: a CNP reaches the decrease check with probability P_d = 1 - exp(-hr tau_d) per
    check (every tau_d), so a cut happens at rate P_d / tau_d, cutting R_C by alpha / 2 and
    clamping R_T to R_C if an increase came since the last cut (stage > 0, ConnectX); alpha
    moves toward P_a = 1 - exp(-hr tau_a) with gain g per tau_a. Increase events come from the
    timer at rate x / (e^x - 1) / T with x = hr T (no cut for a whole period; Zhu's
    p / ((1-p)^-TR - 1)) and likewise from the byte counter; each moves R_C half way to R_T,
    and adds AI or HAI to R_T in the additive or hyper stage. Without marks this is the state
    machine's recovery; at steady marks the stage probabilities are Zhu's (1-p)^(F T R)."""
    n_st = pi.shape[1]
    fr = n_st - 2
    if hr > 0.0:
        pa = -np.expm1(-hr * tau_a)
        cut = -np.expm1(-hr * tau_d) * dt / tau_d
    else:                                  # no marks: no cut
        pa = cut = 0.0
    ev = events_per_period(hr * timer) / timer
    if bc > 0 and rc[f] > 0:
        per = bc / (rc[f] * payload)           # seconds to send one byte-counter's worth
        ev += events_per_period(hr * per) / per
    ev = min(ev * dt, 1.0)
    add = ai * pi[f, fr] + hai * pi[f, fr + 1]
    gap = rt[f] - rc[f]
    new_rc = rc[f] - rc[f] * alpha[f] / 2 * cut + gap / 2 * ev
    new_rt = rt[f] - gap * cut * (1 - pi[f, 0]) + add * ev
    rt[f] = min(new_rt, line)
    rc[f] = min(max(new_rc, rmin), line)
    alpha[f] += gain_a * (pa - alpha[f])
    # stages: events move one stage up (hyper keeps its own), cuts send everything to 0
    for s in range(n_st - 1, 0, -1):
        pi[f, s] += ev * pi[f, s - 1] * (1 - cut)
        pi[f, s - 1] -= ev * pi[f, s - 1] * (1 - cut)
    for s in range(n_st):
        pi[f, s] *= 1 - cut
    pi[f, 0] += cut


@njit(cache=True, nogil=True)
def fifo_rebase(step, qmask, hz, backlog, fifo_in, fifo_out, ring_in, ring_tot, tot_in,
                tot_out, head):
    """Restart the FIFO history at ``step`` (the first step, or after a jump): what each queue
    holds counts as having arrived in the step before, so it leaves in backlog shares."""
    F, H = qmask.shape
    R = ring_tot.shape[0]
    r0, r1 = (step - 2) % R, (step - 1) % R
    tot_in[:] = 0.0
    tot_out[:] = 0.0
    for f in range(F):
        for k in range(H):
            if qmask[f, k]:
                fifo_out[f, k] = 0.0
                fifo_in[f, k] = backlog[f, k]
                ring_in[r0, f, k] = 0.0
                ring_in[r1, f, k] = backlog[f, k]
                tot_in[hz[f, k]] += backlog[f, k]
    for ln in range(ring_tot.shape[1]):
        ring_tot[r0, ln] = 0.0
        ring_tot[r1, ln] = tot_in[ln]
        head[ln] = step - 1 if tot_in[ln] == 0.0 else step - 2

