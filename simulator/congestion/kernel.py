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

One step is a sequence of phases, each its own compiled function (:func:`_step_loop`): the
links' room left by acknowledgements (:func:`_ack_capacity`), hosts
offer (:func:`_offer`), arrivals (:func:`_arrive`, lossy :func:`_drop`), FIFO history and RED
(:func:`_fifo_history`, :func:`_red`, :func:`_fifo_targets`), dequeue and marks
(:func:`_dequeue`, the acknowledgements of what arrived :func:`_ack_load`,
:func:`_queue_stats`), PFC (:func:`_pfc`), completions
(:func:`_completions`) and the DCQCN reaction point (:func:`_dcqcn_sampled`,
:func:`_dcqcn_mean_field`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

HISTORY_LOST = -(1 << 62)
"""``Fifo.head`` of a queue whose oldest byte fell out of the arrival history. Not -1: at the
first step a queue with nothing served yet has head -1, and its FIFO order must hold."""
CALM, RAN, CHANGED, IDLE, FULL, GROW, MORE_CNPS = 2, 0, 1, 3, 4, 5, 6
"""Why :func:`run_steps` returned: calm (a jump may apply), ran its steps, the set of active
flows changed (completion or arrival), no active flow, the trace buffer is full, a queue's
oldest byte is about to fall out of the FIFO history (give it a longer one), the CNPs on
their way back may not fit their pool next step (give it a larger one)."""


AVAIL_FLOOR = 0.05
"""A queue's drain rate is taken as at least this share of its rate (a link paused all of
the recent past still drains when the pause lifts). A numerical floor, not a measurement: it
bounds the wait a mark is given behind a queue PAUSE held through the whole averaging window
(``fluid.DRAIN_TAU_S``)."""


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
    """Slots of the CNP / hazard ring (longest round trip + 1, and room for marks' lags)."""
    mean_field: bool
    fifo: bool
    can_grow: bool
    """The FIFO history may still grow (return GROW when a queue needs it)."""
    after: int
    """Steps to go on after a completion (0: return CHANGED at once)."""
    ack_frac: float = 0.0
    """Acknowledgement bytes per delivered payload byte, on the reverse path (0: none)."""
    avail_gain: float = 0.0
    """Per step, the weight of the step in ``Pfc.avail`` and ``Pfc.grow`` (dt / DRAIN_TAU_S)."""
    max_queue: float = np.inf
    """The largest switch buffer, payload bytes: no queue holds more."""
    cnp_acks: bool = False
    """A mark's CNP rides back in its ACK through the data's queues as they are when the ACK
    reaches each (:func:`_cnp_acks`), rather than with a wait foreseen when the mark is made
    (acknowledgements in the data's queues)."""


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
    """[flow] latency a completion adds to the step its last byte leaves the last queue (what
    the queue-to-queue steps did not already cover)."""
    rtt_steps: np.ndarray
    """[flow] the path's round trip, steps (go-back-N's window and NAK spacing)."""
    cnp_steps: np.ndarray
    """[flow, hop] steps from a mark at the hop's queue to its CNP at the sender: the marked
    packet's way on to the receiver (the hop's cable and those after it) and the ACK's whole
    way back (plus, at run time, the queues it waits behind both ways: ``lag_hop``)."""
    line: np.ndarray
    """[flow] line rate, wire bytes/s."""
    nbytes: np.ndarray
    start: np.ndarray
    rev: np.ndarray
    """[flow, k] the network links the flow's acknowledgements take, receiver to sender, from
    k = 0 (L: a link no data uses, none, or no acknowledgements)."""
    n_ack: np.ndarray
    """[flow] how many links the acknowledgements take (``rev``'s first entries)."""
    ack_lat: np.ndarray
    """[flow, k] the propagation of ``rev``'s link k, s."""
    onward_steps: np.ndarray
    """[flow, hop] steps of propagation from the hop (its cable on) to the receiver: when a
    byte leaving that hop's queue reaches each queue after it, and the receiver."""
    hop_steps: np.ndarray
    """[flow, hop] steps a byte takes to reach the queued hop: the propagation of the link
    from the queue before (at least one step), or, at the first queue, of the host-side
    links (what the host offers joins it that many steps later; 0: in the same step)."""


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
    alpha_in: np.ndarray
    """[link] dynamic PFC threshold factor of the switch ingress port the link enters."""
    hdrm_in: np.ndarray
    """[link] PFC headroom of the switch ingress port the link enters (lossy admission)."""


class FlowState(NamedTuple):
    unsent: np.ndarray
    delivered: np.ndarray
    backlog: np.ndarray
    """[flow, hop] bytes queued at the hop."""
    carry: np.ndarray
    """[slot, flow, hop] bytes on their way to the hop: a ring over the steps of the longest
    propagation (:data:`Paths.hop_steps`), slot ``step % len`` arriving at ``step``."""
    finish: np.ndarray
    retx: np.ndarray
    last_gbn: np.ndarray
    """[flow] step of the last go-back-N (lossy)."""
    gbn_left: np.ndarray
    """[flow] bytes of the last go-back's window not yet lost (lossy): a loss inside the
    window is among the bytes it sends again already."""
    ack_hop: np.ndarray
    """[flow] the ACK hop (index into ``Paths.rev``) the flow's last acknowledgement is at
    or on its way to (acknowledgements modelled; -1: not yet sent)."""
    ack_t: np.ndarray
    """[flow] when the last acknowledgement reaches that hop's queue (or, waiting there,
    reached it)."""
    ack_ahead: np.ndarray
    """[flow] bytes queued ahead of the last acknowledgement at its hop (FIFO)."""
    ack_done: np.ndarray
    """[flow] time the last acknowledgement reaches the sender (NaN: not yet)."""
    ack_pend: np.ndarray
    """Flows whose last acknowledgement is on its way (the first ``ack_n[0]``)."""
    ack_n: np.ndarray


class Reaction(NamedTuple):
    """DCQCN reaction point per flow: the state machine, or (``mean_field``) the expected
    dynamics (:func:`_mean_field_update`), where ``haz`` carries the expected marked packets
    to the sender as their CNPs would (:func:`_mark_delay`), ``seen`` the hazard a flow has
    had before its first CNP and ``pi`` the probability of each increase stage."""
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
    pend: np.ndarray
    """[flow] the last step something on its way (``cnp`` / ``haz``) reaches the flow."""
    ack_f: np.ndarray
    """[pool] with ``Params.cnp_acks``, the ACKs carrying a CNP on their way to the sender
    (the first ``ack_n[0]``): the flow."""
    ack_h: np.ndarray
    """[pool] the ACK hop (index into ``Paths.rev``) it is at or on its way to."""
    ack_t: np.ndarray
    """[pool] when it reaches that hop's queue (or, waiting there, reached it)."""
    ack_ahead: np.ndarray
    """[pool] bytes queued ahead of it at its hop (FIFO; NaN until it joins the queue)."""
    ack_w: np.ndarray
    """[pool] the marks it carries: 1 a drawn CNP, the mean field's expected marks."""
    ack_n: np.ndarray
    """[0]: how many of the pool's entries are on their way."""
    first_cnp: np.ndarray
    """[flow] the step its first CNP reached it (the mean field: its expected marks reached
    ``first_h``), -1 before."""


class Fifo(NamedTuple):
    """FIFO service history: each queue serves its bytes in arrival order. ``fifo_in`` /
    ``fifo_out`` [flow, hop] are cumulative bytes in and out of each queued hop, ``ring_in``
    [R, flow, hop] and ``ring_tot`` [R, link] the cumulative arrivals at the end of each of the
    last R steps, ``tot_in`` / ``tot_out`` [link] the totals and ``head`` [link] the last step
    all of whose bytes have left. A queue serving S bytes sends on what arrived up to where
    its cumulative departures reach (interpolated within the step, :func:`_fifo_targets`);
    with deeper history than R (a long pause) it falls back to shares of the backlog until it
    empties."""
    fifo_in: np.ndarray
    fifo_out: np.ndarray
    ring_in: np.ndarray
    ring_tot: np.ndarray
    tot_in: np.ndarray
    tot_out: np.ndarray
    head: np.ndarray


class Pfc(NamedTuple):
    """PFC: ``paused`` is the switch's XOFF state for each ingress port; the sender stops
    (``stopped``) ``pz_delay`` steps after the decision, once the PAUSE frame has crossed the
    link, and starts again as long after the RESUME; ``pz`` holds the decisions on their
    way."""
    paused: np.ndarray
    """[link] XOFF state of the switch for the ingress port."""
    stopped: np.ndarray
    """[link] ... in force at the sender."""
    pz: np.ndarray
    """[slot, link] decisions on their way (PAUSE / RESUME frames)."""
    pz_delay: np.ndarray
    hdrm: np.ndarray
    """[link] bytes the ingress port holds in its headroom: what arrived while it held its
    threshold (drained first)."""
    held_prev: np.ndarray
    """[link] bytes the ingress port held after the previous step (ports with headroom)."""
    shared: np.ndarray
    """[switch] shared-buffer use after the previous step: the dynamic threshold a step's
    arrivals are admitted against (kept across calls, as the ports' states are)."""
    avail: np.ndarray
    """[link] the share of recent time the link's sender was not paused (an average over
    DRAIN_TAU_S): a queue behind it drains at that share of its rate."""
    grow: np.ndarray
    """[link] how fast the queue has grown of late, bytes a step (an average over
    DRAIN_TAU_S): what a byte reaching it later finds there (:func:`_ahead_steps`)."""
    left_prev: np.ndarray
    """[link] bytes the queue held after the step ``left_step`` (for ``grow``)."""
    left_step: np.ndarray
    """[link] the step ``left_prev`` was taken at (a queue off the active list skips steps)."""
    grow_w: np.ndarray
    """[link] the weight of the history ``grow`` averages: 0 before the queue first held bytes,
    towards 1 as that history spans DRAIN_TAU_S (``grow / grow_w``: the average over the
    history there is, not one pulled towards 0 by the steps before it)."""


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
    ack_load: np.ndarray
    """[link] payload-equivalent bytes of acknowledgements the link carries this step (for
    the bytes delivered the step before): capacity data cannot use."""


class Trace(NamedTuple):
    sample: np.ndarray
    """[period in steps, step of the last sample, next row]."""
    tr_t: np.ndarray
    tr_q: np.ndarray
    tr_p: np.ndarray
    chg: np.ndarray
    """[0]: step after the last completion the call went on from (-1: none)."""


GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
"""SplitMix64's increment, 2^64 / the golden ratio (Steele et al., OOPSLA 2014): it steps the
generator and spreads a mark's lag over the CNP draws' keys."""


@njit(cache=True, nogil=True, _nrt=False)
def _splitmix(x):
    z = x + GOLDEN_GAMMA
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class Scratch(NamedTuple):
    """Per-step buffers of one set of active flows (:func:`_scratch`)."""
    flow_in: np.ndarray
    """[flow] bytes a flow puts on its path this step."""
    moving: np.ndarray
    """[flow] bytes leaving its last queue this step."""
    no_mark: np.ndarray
    """[flow] log of the chance that nothing it sent this step was marked."""
    arrive: np.ndarray
    """[flow, hop] bytes reaching the hop this step."""
    out: np.ndarray
    """[flow, hop] FIFO: what the queue's order would send of them."""
    total: np.ndarray
    """[link] bytes queued."""
    p: np.ndarray
    """[link] RED marking probability."""
    log_clear: np.ndarray
    """[link] log(1 - p)."""
    held: np.ndarray
    """[switch] bytes buffered (lossy)."""
    arriving: np.ndarray
    """[switch] bytes arriving (lossy)."""
    ingress: np.ndarray
    """[link] bytes each ingress port holds in its switch."""
    in_arr: np.ndarray
    """[link] bytes arriving through each ingress port (lossy)."""
    shared: np.ndarray
    """[switch] shared-buffer occupancy (lossy admission's dynamic threshold; PFC keeps its
    own across steps, :class:`Pfc`)."""
    want: np.ndarray
    """[link] FIFO: bytes the queue's order would send."""
    serve_l: np.ndarray
    """[link] bytes the queue serves this step."""
    q_on: np.ndarray
    """Links holding bytes (their first ``n_qon``) ..."""
    q_seen: np.ndarray
    in_on: np.ndarray
    """... and ingress ports holding bytes (their first ``n_inon``)."""
    in_seen: np.ndarray
    sent: np.ndarray
    """[flow] bytes put on its path in this call (what each link carried, once per set)."""
    cap_now: np.ndarray
    """[link] payload bytes the link can carry this step: its capacity less the
    acknowledgements' load (``Stats.ack_load``)."""
    nm_hop: np.ndarray
    """[flow, queued hop] log of the chance that nothing it sent this step was marked there."""
    lag_hop: np.ndarray
    """[flow, queued hop] steps a mark there waits in the queues after it on the way to the
    receiver and, in its ACK, in the data's queues on the way back (their bytes left behind
    over their rates, as far as PAUSE lets them drain: ``Pfc.avail``)."""
    fill_left: np.ndarray
    """[link] a host-side link's capacity not yet given out (:func:`_host_share`) ..."""
    fill_n: np.ndarray
    """[link] ... and how many of its flows still want more than an equal share of it."""


class ActiveSet(NamedTuple):
    """The flows of one pass (fixed until a completion or an arrival) and what they use."""
    active: np.ndarray
    """[flow] mask."""
    act: np.ndarray
    """Active flow ids (first ``n_act``)."""
    n_act: int
    next_start: float
    """Start of the next waiting flow (inf: none)."""
    n_lead: np.ndarray
    """[flow] host-side hops (a prefix)."""
    n_valid: np.ndarray
    n_qh: np.ndarray
    qh: np.ndarray
    """[flow, j] the j-th queued hop."""
    max_lead: int
    host_scale: bool
    """Some host-side link may be offered more than its capacity."""
    act_l: np.ndarray
    """Links in use (first ``n_l``), of them queues (``act_q``) and switch ingress ports."""
    act_q: np.ndarray
    act_in: np.ndarray
    n_l: int
    n_q: int
    n_in: int
    n_pz: int
    """PAUSE / RESUME decisions on their way at the start of the pass."""
    any_stopped: bool
    any_paused: bool


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

    Records: ``P`` :class:`Params`, ``path`` :class:`Paths`, ``lk`` :class:`Links`, ``fs``
    :class:`FlowState`, ``rp`` :class:`Reaction`, ``ff`` :class:`Fifo`, ``pf`` :class:`Pfc`,
    ``st`` :class:`Stats`, ``tr`` :class:`Trace`; their arrays change in place.

    The set of active flows is fixed for one pass (a completion starts the next pass, an
    arrival returns CHANGED), so every step runs over the active flows and the links they use
    (plus links still paused, stopped or with a PAUSE / RESUME on its way): finished flows
    hold nothing, unused links stay empty, and the late epochs of a collective cost what its
    remaining flows cost. One step is the phases of :func:`_step_loop`, each its own compiled
    function. They are compiled without Numba's reference counting (``_nrt=False``): they
    allocate nothing, and with counting on, every record or array they take costs two atomic
    operations per call, which measured 30-60 % of the run when the phases were first split.
    """
    F, H = path.hz.shape
    L1 = len(lk.cap_ext)
    n_sw = len(lk.buffer)
    taken = 0
    tr.chg[0] = -1
    while True:                           # once per set of active flows
        sc = _scratch(F, H, L1, n_sw)
        sc.cap_now[:] = lk.cap_ext
        a = _active_set(P.t0 + step * P.dt, step, P, path, lk, fs, ff, pf, st)
        if a.n_act == 0:
            return taken, IDLE if tr.chg[0] < 0 else CHANGED
        step, taken, n_max, why, restart = _step_loop(step, taken, n_max, stop_on_calm, P,
                                                      path, lk, fs, rp, ff, pf, st, tr, sc, a)
        for i in range(a.n_act):              # what went onto each link, once per set
            f = a.act[i]
            if sc.sent[f] != 0.0:
                for k in range(a.n_valid[f]):
                    st.bytes[path.hz[f, k]] += sc.sent[f]
        if not restart:
            return taken, why


@njit(cache=True, nogil=True)
def _active_set(t, step, P, path, lk, fs, ff, pf, st):
    """The :class:`ActiveSet` at time ``t``."""
    active, act, n_act, next_start = _active_flows(t, path.start, fs.finish)
    n_lead, n_valid, n_qh, qh, max_lead = _flow_hops(act, n_act, path.leading, path.valid,
                                                     path.qmask)
    host_scale = P.ack_frac > 0.0 or _host_links_oversubscribed(
        act, n_act, n_lead, path.hz, path.line, P.payload * P.dt, lk.cap_ext)
    (act_l, act_q, act_in, n_l, n_q, n_in, n_pz, any_stopped,
     any_paused) = _set_links(step, act, n_act, path.hz, path.valid, pf.pz, pf.paused,
                              pf.stopped, fs.backlog, st.q_link, lk.is_queue, lk.switch_dst,
                              P.fifo, ff.tot_in, ff.tot_out, ff.head)
    return ActiveSet(active, act, n_act, next_start, n_lead, n_valid, n_qh, qh, max_lead,
                     host_scale, act_l, act_q, act_in, n_l, n_q, n_in, n_pz, any_stopped,
                     any_paused)


@njit(cache=True, nogil=True, _nrt=False)
def _step_loop(step, taken, n_max, stop_on_calm, P, path, lk, fs, rp, ff, pf, st, tr, sc, a):
    """The steps of one set of active flows; returns (step, taken, n_max, why, restart):
    restart when a completion leaves flows that go on (``P.after`` > 0)."""
    n_pz, any_stopped, any_paused = a.n_pz, a.any_stopped, a.any_paused
    n_qon = n_inon = 0
    L = len(lk.cap_ext) - 1
    gain_a = 1 - (1 - P.g) ** (P.dt / P.tau_a)    # mean field: alpha's gain per step
    why = RAN
    while taken < n_max:
        t = P.t0 + step * P.dt
        if t + 1e-15 >= a.next_start:
            return step, taken, n_max, CHANGED, False
        if P.pfc and (n_pz > 0 or any_stopped):   # PAUSE / RESUME frames reaching senders now
            any_stopped = _frames_arrive(step, pf, a)
        if P.ack_frac > 0.0:
            _ack_capacity(lk, st, sc, a)
        _offer(P, path, lk, fs, rp, pf, sc, a)
        _arrive(step, P, path, fs, sc, a)
        if not P.pfc:
            _drop(step, P, path, lk, fs, rp, st, sc, a)
        if P.fifo:
            _fifo_history(step, path, lk, ff, pf, sc, a)
        _red(step, P, lk, pf, st, sc, a)
        for j in range(n_qon):         # (only the links listed can hold bytes)
            sc.q_seen[sc.q_on[j]] = False
        n_qon = 0
        if P.pfc:                      # what each ingress port holds in its switch
            sc.ingress[L] = 0.0
            for j in range(n_inon):
                sc.ingress[sc.in_on[j]] = 0.0
                sc.in_seen[sc.in_on[j]] = False
            n_inon = 0
        if P.fifo:
            _fifo_targets(step, path, fs, ff, sc, a)
        n_qon, n_inon = _dequeue(step, P, path, fs, ff, st, sc, a, L, pf)
        if fs.ack_n[0] > 0:
            _last_acks(t, P, path, lk, fs, pf, sc)
        if rp.ack_n[0] > 0:
            _cnp_acks(step, t, P, path, lk, pf, sc, rp, a)
        if P.ack_frac > 0.0:
            _ack_load(P, path, st, sc, a)
        any_q = _queue_stats(step, P, path, ff, st, sc, a, n_qon)
        if P.pfc:                      # (``few`` reads the last step's any_paused)
            any_paused, n_pz = _pfc(step, P, lk, pf, st, sc, a, n_inon, n_pz, any_paused)
        else:
            any_paused = False
        changed = _completions(t, P, path, fs, rp, sc, a)
        if P.dcqcn and P.mean_field:
            _dcqcn_mean_field(step, P, path, rp, sc, a, gain_a)
        elif P.dcqcn:
            _dcqcn_sampled(step, P, path, rp, sc, a)
        step += 1
        taken += 1
        if (any_q or any_paused) and step - tr.sample[1] >= tr.sample[0]:
            if _sample_queues(step, P, pf, st, tr):
                why = FULL
                break
        if changed and P.after == 0:
            why = CHANGED
            break
        if P.fifo and P.can_grow and _history_short(step, lk, ff, a):
            why = GROW                 # keep every queued byte's arrival in the history
            break
        if P.cnp_acks and rp.ack_n[0] + a.n_act * path.hz.shape[1] > len(rp.ack_f):
            why = MORE_CNPS            # a step may send a CNP per flow and hop
            break
        if (stop_on_calm or changed) and not any_q and not any_paused and \
                _calm(step, P, path, fs, rp, a):
            why = CALM
            break
        if changed:                  # go on with the flows left, for ``after`` steps
            tr.chg[0] = step
            return step, taken, taken + P.after, why, True
    return step, taken, n_max, why, False


@njit(cache=True, nogil=True, _nrt=False)
def _ack_capacity(lk, st, sc, a):
    """What each link in use can carry of data this step: its capacity less the
    acknowledgements it carries (served in the same queue, they take their share first)."""
    for j in range(a.n_l):
        ln = a.act_l[j]
        sc.cap_now[ln] = max(lk.cap_ext[ln] - st.ack_load[ln], 0.0)


@njit(cache=True, nogil=True, _nrt=False)
def _ack_load(P, path, st, sc, a):
    """The acknowledgements of the bytes delivered this step, on every link back along each
    flow's network hops, for the next step (a step's delay stands for their way back). They
    take their share of a link whether or not PAUSE holds it: a pause would only delay them,
    and with no window (the reference's DCQCN has none) a late ACK holds no sender back."""
    st.ack_load[:] = 0.0
    for i in range(a.n_act):
        f = a.act[i]
        x = sc.moving[f] * P.ack_frac
        if x > 0.0:
            for k in range(a.n_valid[f]):
                st.ack_load[path.rev[f, k]] += x
    st.ack_load[len(st.ack_load) - 1] = 0.0      # the sentinel carries nothing


@njit(cache=True, nogil=True, _nrt=False)
def _frames_arrive(step, pf, a):
    """PFC: the PAUSE / RESUME decisions whose frames reach the senders at ``step``; whether
    any sender is now stopped."""
    PR = pf.pz.shape[0]
    any_stopped = False
    for j in range(a.n_in):
        ln = a.act_in[j]
        pf.stopped[ln] = pf.pz[step % PR, ln]
        any_stopped = any_stopped or pf.stopped[ln]
    return any_stopped


@njit(cache=True, nogil=True, _nrt=False)
def _offer(P, path, lk, fs, rp, pf, sc, a):
    """Hosts: what each flow offers at its current rate, shared out on each host-side link
    (NIC, PCIe) it crosses (:func:`_host_share`) and held back by a paused one."""
    act, n_act, n_lead, hz = a.act, a.n_act, a.n_lead, path.hz
    unsent, rc, stopped, flow_in = fs.unsent, rp.rc, pf.stopped, sc.flow_in
    for i in range(n_act):
        f = act[i]
        w = min(unsent[f], rc[f] * P.payload * P.dt)
        for k in range(n_lead[f]):
            if stopped[hz[f, k]]:
                w = 0.0
        flow_in[f] = w
    for k in range(a.max_lead if a.host_scale else 0):
        _host_share(k, path, sc, a)
    for i in range(n_act):
        f = act[i]
        unsent[f] -= flow_in[f]
        sc.sent[f] += flow_in[f]


@njit(cache=True, nogil=True, _nrt=False)
def _host_share(k, path, sc, a):
    """The flows whose ``k``-th host-side link is shared get what they offer while it fits;
    a link they offer more than it carries gives each an equal share, capped at what it
    offers, the rest going to those that want more (max-min fair, water-filling): a NIC serves
    its queue pairs round robin among those their rate limiters let send (HPCC ns-3:
    ``RdmaEgressQueue::GetNextQindex``), so a flow DCQCN cut below that share still sends at
    its rate and the others take the rest."""
    act, n_act, n_lead, hz = a.act, a.n_act, a.n_lead, path.hz
    flow_in, total, left, n_want, cap = sc.flow_in, sc.total, sc.fill_left, sc.fill_n, \
        sc.cap_now
    for i in range(n_act):
        f = act[i]
        if k < n_lead[f]:
            ln = hz[f, k]
            total[ln] = 0.0
            left[ln] = cap[ln]
            n_want[ln] = 0.0
    for i in range(n_act):
        f = act[i]
        if k < n_lead[f]:
            total[hz[f, k]] += flow_in[f]
            n_want[hz[f, k]] += 1.0
    settled = False
    while not settled:      # a flow under its link's equal share keeps what it offers
        settled = True
        for i in range(n_act):
            f = act[i]
            if k < n_lead[f]:
                ln = hz[f, k]
                if total[ln] > cap[ln] and n_want[ln] > 0.0 and flow_in[f] >= 0.0 and \
                        flow_in[f] * n_want[ln] <= left[ln]:
                    left[ln] -= flow_in[f]
                    n_want[ln] -= 1.0
                    flow_in[f] = -1.0 - flow_in[f]          # (kept, marked as settled)
                    settled = False
    for i in range(n_act):
        f = act[i]
        if k < n_lead[f]:
            ln = hz[f, k]
            if flow_in[f] < 0.0:
                flow_in[f] = -1.0 - flow_in[f]
            elif total[ln] > cap[ln]:
                flow_in[f] = left[ln] / n_want[ln]


@njit(cache=True, nogil=True, _nrt=False)
def _arrive(step, P, path, fs, sc, a):
    """Arrivals at the first queue (what hosts offered this step, or as many steps before as
    the host-side links' propagation takes); carried bytes reach their next queue as many
    steps after they left the previous one as its link's propagation takes (``hop_steps``).
    Lossless, they join the queues now (lossy: :func:`_drop` first drops what the buffers
    cannot hold)."""
    act, n_qh, qh, hz = a.act, a.n_qh, a.qh, path.hz
    carry, backlog, arrive, total, flow_in = fs.carry, fs.backlog, sc.arrive, sc.total, sc.flow_in
    D = carry.shape[0]
    now = step % D
    for j in range(a.n_q):
        total[a.act_q[j]] = 0.0
    for i in range(a.n_act):
        f = act[i]
        for j in range(n_qh[f]):
            k = qh[f, j]
            x = carry[now, f, k]
            carry[now, f, k] = 0.0
            if j == 0:
                d = path.hop_steps[f, k]
                if d > 0:                  # on the host-side links for d steps
                    carry[(step + d) % D, f, k] = flow_in[f]
                else:
                    x += flow_in[f]
            arrive[f, k] = x
            if P.pfc:
                backlog[f, k] += x
                total[hz[f, k]] += backlog[f, k]


@njit(cache=True, nogil=True, _nrt=False)
def _threshold(P, lk, ln, shared):
    """XOFF threshold of ingress port ``ln`` (its share of the shared buffer): dynamic, alpha x
    the switch's free shared buffer (buffer - headroom - reserves - shared use), or static."""
    if not P.dynamic:
        return P.static_thr
    s = lk.switch_dst[ln]
    return lk.alpha_in[ln] * max(lk.buffer[s] - lk.sw_headroom[s] - lk.sw_reserve[s]
                                 - shared[s], 0.0)


@njit(cache=True, nogil=True, _nrt=False)
def _drop(step, P, path, lk, fs, rp, st, sc, a):
    """Lossy fabric: a switch admits what an ingress port brings while the port holds less
    than its reserve, its headroom and its (dynamic) PFC threshold, and the switch less than
    its buffer (the shared-buffer MMU of the packet-level reference, PAUSE frames not honoured:
    its ingress admission drops once the headroom is full). The sender goes back N, at most
    once per round trip: a base round trip of its rate is sent again, the bytes dropped in
    that window among them (``gbn_left``); a loss outside a window is sent again on its own."""
    act, n_act, n_qh, qh, hz, qsw = a.act, a.n_act, a.n_qh, a.qh, path.hz, path.qsw
    prev_hop, switch_dst = path.prev_hop, lk.switch_dst
    held, arriving, arrive, backlog, total = sc.held, sc.arriving, sc.arrive, fs.backlog, sc.total
    in_held, in_arr, shared = sc.ingress, sc.in_arr, sc.shared
    buffer, rc, delivered, unsent = lk.buffer, rp.rc, fs.delivered, fs.unsent
    rtt_steps, last_gbn = path.rtt_steps, fs.last_gbn
    held[:] = 0.0
    arriving[:] = 0.0
    shared[:] = 0.0
    for j in range(a.n_in):
        in_held[a.act_in[j]] = 0.0
        in_arr[a.act_in[j]] = 0.0
    for i in range(n_act):
        f = act[i]
        for j in range(n_qh[f]):
            k = qh[f, j]
            b, x, pl = backlog[f, k], arrive[f, k], prev_hop[f, k]
            held[qsw[f, k]] += b
            arriving[qsw[f, k]] += x
            in_held[pl] += b
            in_arr[pl] += x
    for j in range(a.n_in):
        ln = a.act_in[j]
        shared[switch_dst[ln]] += max(in_held[ln] - P.reserve, 0.0)
    for j in range(a.n_in):           # in_arr becomes the share of its arrivals a port keeps
        ln = a.act_in[j]
        lim = P.reserve + lk.hdrm_in[ln] + _threshold(P, lk, ln, shared)
        in_arr[ln] = min(1.0, max(lim - in_held[ln], 0.0) / max(in_arr[ln], 1e-30))
    for i in range(n_act):
        f = act[i]
        lost_f = 0.0
        for j in range(n_qh[f]):
            k = qh[f, j]
            s = qsw[f, k]
            keep = min(1.0, max(buffer[s] - held[s], 0.0) / max(arriving[s], 1e-30),
                       in_arr[prev_hop[f, k]])
            lost = arrive[f, k] * (1.0 - keep)
            if lost > 0:
                arrive[f, k] -= lost
                st.dropped[hz[f, k]] += lost
                lost_f += lost
        if lost_f > 0:
            again = 0.0
            if step - last_gbn[f] >= rtt_steps[f]:     # go back N, one NAK per round trip
                # the sender goes back to the lost byte: what it sends until the NAK
                # reaches it (a round trip of its rate) is sent again, whether the
                # receiver discards it or the switches drop it
                last_gbn[f] = step
                window = min(rc[f] * P.payload * rtt_steps[f] * P.dt, delivered[f])
                fs.gbn_left[f] = window
                again = window
                delivered[f] -= window
            covered = min(lost_f, fs.gbn_left[f])   # lost inside the window: not delivered,
            fs.gbn_left[f] -= covered               # and already to be sent again
            delivered[f] += covered
            again += lost_f - covered
            unsent[f] += again
            fs.retx[f] += again
    for i in range(n_act):
        f = act[i]
        for j in range(n_qh[f]):
            k = qh[f, j]
            backlog[f, k] += arrive[f, k]
            total[hz[f, k]] += backlog[f, k]


@njit(cache=True, nogil=True, _nrt=False)
def _fifo_history(step, path, lk, ff, pf, sc, a):
    """FIFO: record this step's arrivals, then how far back in them each queue's service
    reaches (``head``; HISTORY_LOST once it is lost: backlog shares until the queue empties)."""
    act, n_qh, qh, hz = a.act, a.n_qh, a.qh, path.hz
    fifo_in, ring_in, ring_tot, tot_in, tot_out, head = (ff.fifo_in, ff.ring_in, ff.ring_tot,
                                                         ff.tot_in, ff.tot_out, ff.head)
    arrive, serve_l, total, want = sc.arrive, sc.serve_l, sc.total, sc.want
    stopped, cap_ext = pf.stopped, sc.cap_now
    R = ring_tot.shape[0]
    r_now = step % R
    for i in range(a.n_act):
        f = act[i]
        for j in range(n_qh[f]):
            k = qh[f, j]
            fifo_in[f, k] += arrive[f, k]
            ring_in[r_now, f, k] = fifo_in[f, k]
            tot_in[hz[f, k]] += arrive[f, k]
    for j in range(a.n_q):
        ln = a.act_q[j]
        ring_tot[r_now, ln] = tot_in[ln]
        serve_l[ln] = 0.0 if stopped[ln] else min(total[ln], cap_ext[ln])
        want[ln] = 0.0
        new_out = tot_out[ln] + serve_l[ln]
        if head[ln] != HISTORY_LOST:
            while head[ln] < step and ring_tot[(head[ln] + 1) % R, ln] <= new_out:
                head[ln] += 1
            if step - head[ln] >= R:
                head[ln] = HISTORY_LOST


@njit(cache=True, nogil=True, _nrt=False)
def _track_growth(step, P, pf, ln, left):
    """``Pfc.grow``: the queue's growth a step, averaged over DRAIN_TAU_S, and the weight of
    the history it averages (``Pfc.grow_w``: none before the queue first held bytes, so that
    ``grow / grow_w`` is the average over the steps there are, unbiased from the first step);
    the steps it later sat empty (off the active list) count as steps it did not grow."""
    gap = step - pf.left_step[ln]
    prev = pf.left_prev[ln] if gap == 1 else 0.0
    if gap > 1:
        decay = (1.0 - P.avail_gain) ** min(gap - 1, 1 << 20)
        pf.grow[ln] *= decay
        if pf.left_step[ln] >= 0:                 # steps it sat empty: history that did not grow
            pf.grow_w[ln] = 1.0 - (1.0 - pf.grow_w[ln]) * decay
    pf.grow[ln] += P.avail_gain * ((left - prev) - pf.grow[ln])
    pf.grow_w[ln] += P.avail_gain * (1.0 - pf.grow_w[ln])
    pf.left_prev[ln] = left
    pf.left_step[ln] = step


@njit(cache=True, nogil=True, _nrt=False)
def _red(step, P, lk, pf, st, sc, a):
    """Every egress queue serves its capacity; RED marks on the queue a dequeued byte leaves
    behind (Kmin / Kmax / Pmax)."""
    serve_l, total, p, log_clear = sc.serve_l, sc.total, sc.p, sc.log_clear
    stopped, cap_ext, kmin, kmax = pf.stopped, sc.cap_now, lk.kmin, lk.kmax
    for j in range(a.n_q):
        ln = a.act_q[j]
        pf.avail[ln] += P.avail_gain * ((0.0 if stopped[ln] else 1.0) - pf.avail[ln])
        serve_l[ln] = 0.0 if stopped[ln] else min(total[ln], cap_ext[ln])
        left = total[ln] if stopped[ln] else max(total[ln] - cap_ext[ln], 0.0)
        _track_growth(step, P, pf, ln, left)
        if left > kmax[ln]:
            p[ln] = 1.0
        elif left <= kmin[ln]:
            p[ln] = 0.0
        else:
            x = (left - kmin[ln]) / max(kmax[ln] - kmin[ln], 1e-30)
            p[ln] = min(max(x, 0.0), 1.0) * P.pmax
        log_clear[ln] = np.log1p(-min(p[ln], 1 - 1e-12)) if p[ln] > 0.0 else 0.0
        st.q_link[ln] = 0.0


@njit(cache=True, nogil=True, _nrt=False)
def _fifo_targets(step, path, fs, ff, sc, a):
    """FIFO: what the queue's arrival order sends of each flow's bytes (``out``, and their
    sum per queue ``want``), interpolated within the step the service reaches."""
    act, n_qh, qh, hz = a.act, a.n_qh, a.qh, path.hz
    fifo_in, fifo_out, ring_in, ring_tot, tot_out, head = (ff.fifo_in, ff.fifo_out, ff.ring_in,
                                                           ff.ring_tot, ff.tot_out, ff.head)
    serve_l, total, out, want, backlog = sc.serve_l, sc.total, sc.out, sc.want, fs.backlog
    R = ring_tot.shape[0]
    for i in range(a.n_act):
        f = act[i]
        for j in range(n_qh[f]):
            k = qh[f, j]
            ln = hz[f, k]
            h = head[ln]
            if serve_l[ln] >= total[ln] or total[ln] <= 0.0:
                o = backlog[f, k]
            elif h == HISTORY_LOST:
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


@njit(cache=True, nogil=True, _nrt=False)
def _dequeue(step, P, path, fs, ff, st, sc, a, L, pf):
    """What leaves each queue (FIFO order, or backlog shares), the chance none of a flow's
    packets was marked (``no_mark``, a paced flow's whole packets then a part one), what moves
    on to the next queue or is delivered, and what each queue and ingress port then holds
    (listing the links and ports holding bytes); returns how many of each are listed."""
    act, n_qh, qh, hz, prev_hop = a.act, a.n_qh, a.qh, path.hz, path.prev_hop
    backlog, carry, delivered = fs.backlog, fs.carry, fs.delivered
    D = carry.shape[0]
    fifo_out, tot_out = ff.fifo_out, ff.tot_out
    out, want, serve_l, total, p, log_clear = sc.out, sc.want, sc.serve_l, sc.total, sc.p, \
        sc.log_clear
    q_seen, q_on, in_seen, in_on, ingress = sc.q_seen, sc.q_on, sc.in_seen, sc.in_on, sc.ingress
    q_link, s_marked = st.q_link, st.marked
    pkt, fifo, pfc = P.pkt, P.fifo, P.pfc
    n_qon = n_inon = 0
    in_arr, arrive = sc.in_arr, sc.arrive
    if pfc:                           # what each ingress port brings this step (PFC headroom)
        for j in range(a.n_in):
            in_arr[a.act_in[j]] = 0.0
    cap_now, nm_hop, lag_hop = sc.cap_now, sc.nm_hop, sc.lag_hop
    for i in range(a.n_act):
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
            if pfc:
                in_arr[prev_hop[f, k]] += arrive[f, k]
            nm_hop[f, j] = 0.0
            if p[ln] > 0.0:
                n_pk = o / pkt
                whole = np.floor(n_pk)
                nm_hop[f, j] = whole * log_clear[ln] + np.log1p(-(n_pk - whole) * p[ln])
                nm += nm_hop[f, j]
            s_marked[ln] += o * p[ln]
            if j + 1 < n_qh[f]:
                kn = qh[f, j + 1]
                carry[(step + path.hop_steps[f, kn]) % D, f, kn] = o
            else:
                mv += o
            b = backlog[f, k]
            if b != 0.0:
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
            mv += sc.flow_in[f]
        if nm < 0.0:
            for j in range(n_qh[f]):
                lag_hop[f, j] = int(_ahead_steps(P, path, pf, sc, a, f, j, L) + 0.5)
        sc.no_mark[f] = nm
        sc.moving[f] = mv
        delivered[f] += mv
    return n_qon, n_inon


@njit(cache=True, nogil=True, _nrt=False)
def _ahead_steps(P, path, pf, sc, a, f, j, L):
    """Steps a mark made at flow ``f``'s queued hop ``j`` waits in queues on its way to the
    sender: with its packet behind what each queue after its own holds when the packet gets
    there, then in its ACK behind what the data's queues on the way back hold when the ACK
    gets there (acknowledgements in the data's queues: ``path.rev``, L without them; with
    ``Params.cnp_acks`` the ACK's own way back is left to :func:`_cnp_acks`). Each queue
    holds what it holds now plus its recent growth over the time until then
    (:func:`_drain_at`)."""
    qh, hz, on = a.qh, path.hz, path.onward_steps
    k0 = qh[f, j]
    wait = 0.0
    for jj in range(j + 1, a.n_qh[f]):
        kk = qh[f, jj]
        wait += _drain_at(hz[f, kk], on[f, k0] - on[f, kk] + wait, P, pf, sc)
    if P.ack_frac > 0.0 and not P.cnp_acks:
        tau = on[f, k0] + wait                        # steps until the receiver's ACK leaves
        for k in range(hz.shape[1]):
            rl = path.rev[f, k]
            if rl < L:
                w = _drain_at(rl, tau, P, pf, sc)
                wait += w
                tau += w
            tau += path.ack_lat[f, k] / P.dt
    return wait


@njit(cache=True, nogil=True, _nrt=False)
def _drain_at(ln, ahead, P, pf, sc):
    """Steps a byte reaching link ``ln``'s queue ``ahead`` steps from now waits there (FIFO:
    behind what the queue holds when it arrives): what it holds after this step plus its
    growth (``Pfc.grow / Pfc.grow_w``) over ``ahead``, never below empty nor above a switch's
    buffer, drained at the link's rate times the share of recent time PAUSE let it send
    (``Pfc.avail``, at least AVAIL_FLOOR); 0 for a link that carries nothing."""
    if sc.cap_now[ln] <= 0.0:
        return 0.0
    grow = pf.grow[ln] / pf.grow_w[ln] if pf.grow_w[ln] > 0.0 else 0.0
    held = min(max(sc.total[ln] - sc.serve_l[ln] + grow * ahead, 0.0), P.max_queue)
    return held / (sc.cap_now[ln] * max(pf.avail[ln], AVAIL_FLOOR))


@njit(cache=True, nogil=True, _nrt=False)
def _queue_stats(step, P, path, ff, st, sc, a, n_qon):
    """FIFO: an empty queue starts its history afresh. Queue peaks and sums over the links
    holding bytes (the others hold exactly nothing); whether any holds bytes."""
    act, n_qh, qh, hz = a.act, a.n_qh, a.qh, path.hz
    q_link = st.q_link
    if P.fifo:
        for i in range(a.n_act):
            f = act[i]
            for j in range(n_qh[f]):
                k = qh[f, j]
                if q_link[hz[f, k]] == 0.0:
                    ff.fifo_out[f, k] = ff.fifo_in[f, k]
        for j in range(a.n_q):
            ln = a.act_q[j]
            if q_link[ln] == 0.0:
                ff.tot_out[ln] = ff.tot_in[ln]
                ff.head[ln] = step
    any_q = False
    for j in range(n_qon):
        ln = sc.q_on[j]
        st.qmax[ln] = max(st.qmax[ln], q_link[ln])
        st.qsum[ln] += q_link[ln]
        if q_link[ln] != 0.0:
            any_q = True
    return any_q


@njit(cache=True, nogil=True, _nrt=False)
def _pfc(step, P, lk, pf, st, sc, a, n_inon, n_pz, any_paused):
    """PFC: the switch's shared-buffer MMU per ingress port (the reference switch's): bytes
    a port brings are admitted to its share while it holds less than its reserve plus its
    XOFF threshold (dynamic: alpha x the switch's free shared buffer, whose use counts the
    ports' shares, not their headroom; static), beyond it to its headroom; departures drain
    the headroom first. XOFF while the port holds headroom or reaches its threshold, XON once
    the headroom is empty and its share is ``gap`` below the threshold. A decision reaches the
    sender ``pz_delay`` steps later. Returns (a port paused or stopped, decisions on their
    way)."""
    paused, stopped, pz, pz_delay = pf.paused, pf.stopped, pf.pz, pf.pz_delay
    hdrm, held_prev = pf.hdrm, pf.held_prev
    ingress, shared, in_on, in_arr = sc.ingress, pf.shared, sc.in_on, sc.in_arr
    switch_dst, reserve = lk.switch_dst, P.reserve
    PR = pz.shape[0]
    # nothing paused, stopped or on its way (so no headroom is held): only ports holding
    # bytes can change (taken in link order, as the full pass sums them)
    few = n_pz == 0 and not any_paused
    if few:
        for j in range(1, n_inon):
            x = in_on[j]
            i = j - 1
            while i >= 0 and in_on[i] > x:
                in_on[i + 1] = in_on[i]
                i -= 1
            in_on[i + 1] = x
    ports = in_on if few else a.act_in
    n_ports = n_inon if few else a.n_in
    # admission against the threshold of the step before (``shared`` still holds its use)
    for j in range(n_ports):
        ln = ports[j]
        thr = _threshold(P, lk, ln, shared)
        held = ingress[ln]
        h0 = hdrm[ln]
        arr = in_arr[ln]
        gone = max(held_prev[ln] + arr - held, 0.0)   # (held_prev is current while paused)
        if held <= 0.0:
            h2 = 0.0
        elif h0 > 0.0:                 # drain the headroom first, then admit
            dh = min(h0, gone)
            share = held_prev[ln] - h0 - (gone - dh)
            h2 = h0 - dh + max(arr - max(reserve + thr - share, 0.0), 0.0)
        elif held - arr > reserve + thr:     # its share is over: arrivals to headroom
            h2 = arr
        else:
            h2 = max(held - reserve - thr, 0.0)
        hdrm[ln] = min(h2, held)
        held_prev[ln] = held
        in_arr[ln] = gone              # from here: what left the port's bytes this step
    shared[:] = 0.0
    for j in range(n_ports):
        ln = ports[j]
        shared[switch_dst[ln]] += max(ingress[ln] - hdrm[ln] - reserve, 0.0)
    any_paused = False
    for j in range(n_ports):
        ln = ports[j]
        new = False
        over = ingress[ln] - hdrm[ln] - reserve       # the port's use of the shared buffer
        if hdrm[ln] > 0.0:
            new = True
        elif over > 0.0:
            lim = _threshold(P, lk, ln, shared)
            if paused[ln]:
                # the switch checks XON as it sends one of the port's packets: a port whose
                # bytes all wait stays paused however far its threshold rises
                new = over + P.gap > lim or in_arr[ln] <= 0.0
            else:
                new = over >= lim
        if new and not paused[ln]:
            st.pauses[ln] += 1
        paused[ln] = new
        if new or n_pz > 0:    # else no frame is on its way: the slot holds False
            slot = (step + 1 + pz_delay[ln]) % PR
            n_pz += int(new) - int(pz[slot, ln])
            pz[slot, ln] = new
        if stopped[ln]:
            st.pause[ln] += P.dt
        if new or stopped[ln]:
            any_paused = True
    return any_paused, n_pz


@njit(cache=True, nogil=True, _nrt=False)
def _completions(t, P, path, fs, rp, sc, a):
    """Flows whose last byte was delivered in this step: their finish time (within the step,
    plus the latency after the last queue); whether any finished."""
    unsent, delivered, backlog, carry = fs.unsent, fs.delivered, fs.backlog, fs.carry
    nbytes, moving = path.nbytes, sc.moving
    H = backlog.shape[1]
    changed = False
    for i in range(a.n_act):
        f = a.act[i]
        if unsent[f] > 1e-9 * nbytes[f] + 1e-9:
            continue
        # all delivered, or nothing left in the fabric (rounding over ~1e5 steps can leave
        # the delivered sum a few ulps short of the size)
        done = delivered[f] >= nbytes[f] * (1 - 1e-12)
        if not done:
            in_fabric = 0.0
            for k in range(H):
                in_fabric += backlog[f, k]
                for r in range(carry.shape[0]):
                    in_fabric += carry[r, f, k]
            done = in_fabric <= 1e-9 * nbytes[f] + 1e-9
        if done:
            frac = (delivered[f] - nbytes[f]) / max(moving[f], 1e-30) if moving[f] > 0 else 0.0
            fs.finish[f] = t + P.dt * (1 - min(max(frac, 0.0), 1.0)) + path.path_lat[f]
            changed = True
            for k in range(H):       # its last ulps of rounding leave the fabric with it,
                backlog[f, k] = 0.0  # and any CNP on its way has no one to reach
                for r in range(carry.shape[0]):
                    carry[r, f, k] = 0.0
            for r in range(P.ring):
                rp.cnp[r, f] = False
                rp.haz[r, f] = 0.0
            rp.pend[f] = -1
            if P.ack_frac > 0.0 and path.n_ack[f] > 0:   # its last ACK sets off at the finish
                fs.ack_hop[f] = 0
                fs.ack_t[f] = fs.finish[f]
                fs.ack_ahead[f] = np.nan
                fs.ack_pend[fs.ack_n[0]] = f
                fs.ack_n[0] += 1
    return changed


@njit(cache=True, nogil=True, _nrt=False)
def _last_acks(t, P, path, lk, fs, pf, sc):
    """The finished flows' last acknowledgements that reach a queue before this step ends
    move on (:func:`_ack_on`); past its last link one reaches the sender (``ack_done``).
    ``ack_ahead`` is NaN until it joins its queue."""
    i = 0
    while i < fs.ack_n[0]:
        f = fs.ack_pend[i]
        h, at, ahead, arrived = _ack_on(t, t + P.dt, P, path, lk, pf, sc, f, fs.ack_hop[f],
                                        fs.ack_t[f], fs.ack_ahead[f])
        fs.ack_hop[f], fs.ack_t[f], fs.ack_ahead[f] = h, at, ahead
        if arrived:
            fs.ack_done[f] = at
            fs.ack_n[0] -= 1
            fs.ack_pend[i] = fs.ack_pend[fs.ack_n[0]]
        else:
            i += 1


@njit(cache=True, nogil=True, _nrt=False)
def _ack_on(t, end, P, path, lk, pf, sc, f, h, at, ahead):
    """Flow ``f``'s acknowledgement at its ACK hop ``h`` (reaching it at ``at``, ``ahead``
    bytes queued before it there, NaN until it joins the queue) as far as it gets before
    ``end`` (in the step starting at ``t``): at a queue it waits behind the bytes queued there
    when it joined (FIFO: it leaves once the queue has served them, within the step as they
    run out, never later than the queue's backlog allows; a paused queue serves none), then
    takes its link's propagation. At the receiving NIC it waits only for a PAUSE to lift:
    the NIC sends acknowledgements before its own data (HPCC ns-3: ``RdmaEgressQueue``'s ACK
    queue).
    Returns (hop, time, ahead, whether it reached the sender: at ``time``)."""
    total, serve_l, stopped, is_queue = sc.total, sc.serve_l, pf.stopped, lk.is_queue
    L = len(total) - 1                  # a link no data uses (L) holds no queue
    while at < end:
        if h >= path.n_ack[f]:
            return h, at, ahead, True
        ln = path.rev[f, h]
        leave = at
        if ln < L and is_queue[ln]:
            first = total[ln] if np.isnan(ahead) else min(ahead, total[ln])
            ahead = first - serve_l[ln]
            if ahead > 0.0:
                return h, at, ahead, False          # still behind: the next step
            if first > 0.0:
                leave = max(leave, t + P.dt * first / serve_l[ln])
        elif ln < L and stopped[ln]:
            return h, at, 0.0, False                # (held: it leaves when the pause lifts)
        elif not np.isnan(ahead):
            leave = max(leave, t)
        at = leave + path.ack_lat[f, h]             # served: on along the link
        h += 1
        ahead = np.nan
    return h, at, ahead, False


@njit(cache=True, nogil=True, _nrt=False)
def _cnp_acks(step, t, P, path, lk, pf, sc, rp, a):
    """The ACKs carrying CNPs (``Params.cnp_acks``) move on through the data's queues on their
    way back as the last acknowledgements do (:func:`_ack_on`), each event at the step nearest
    its time (as a mark's fixed delay rounds to whole steps); one that reaches its sender
    delivers its CNP (the mean field: its expected marks) at that step, to a flow still
    active."""
    slot_now = step % P.ring
    i = 0
    while i < rp.ack_n[0]:
        f = rp.ack_f[i]
        h, at, ahead, arrived = _ack_on(t, t + P.dt / 2, P, path, lk, pf, sc, f, rp.ack_h[i],
                                        rp.ack_t[i], rp.ack_ahead[i])
        rp.ack_h[i], rp.ack_t[i], rp.ack_ahead[i] = h, at, ahead
        if arrived:
            if a.active[f]:
                if P.mean_field:
                    rp.haz[slot_now, f] += rp.ack_w[i]
                else:
                    rp.cnp[slot_now, f] = True
            n = rp.ack_n[0] - 1
            rp.ack_f[i], rp.ack_h[i], rp.ack_t[i] = rp.ack_f[n], rp.ack_h[n], rp.ack_t[n]
            rp.ack_ahead[i], rp.ack_w[i] = rp.ack_ahead[n], rp.ack_w[n]
            rp.ack_n[0] = n
        else:
            i += 1


@njit(cache=True, nogil=True, _nrt=False)
def _send_cnp(step, P, rp, f, delay, w):
    """A mark's CNP (the mean field: ``w`` expected marks) sent on its way: with
    ``Params.cnp_acks`` its ACK leaves the receiver ``delay`` steps from now and comes back
    through the queues (:func:`_cnp_acks`), else it reaches the sender ``delay`` steps from
    now."""
    if P.cnp_acks:
        n = rp.ack_n[0]
        rp.ack_f[n], rp.ack_h[n], rp.ack_t[n] = f, 0, P.t0 + (step + delay) * P.dt
        rp.ack_ahead[n], rp.ack_w[n] = np.nan, w
        rp.ack_n[0] = n + 1
    elif P.mean_field:
        rp.haz[(step + delay) % P.ring, f] += w
    else:
        rp.cnp[(step + delay) % P.ring, f] = True
    rp.pend[f] = max(rp.pend[f], step + delay)


@njit(cache=True, nogil=True, _nrt=False)
def _mark_delay(P, path, sc, a, f, j):
    """Steps from a mark at flow ``f``'s queued hop ``j`` to its CNP at the sender: the way
    on and back (``cnp_steps``) and the queues after the hop (``lag_hop``), within what the
    CNP ring holds; with ``Params.cnp_acks``, to the ACK leaving the receiver (the way on and
    its queues: :func:`_send_cnp`)."""
    k = a.qh[f, j]
    base = _onward_steps(P, path, f, k) if P.cnp_acks else path.cnp_steps[f, k]
    return base + min(sc.lag_hop[f, j], P.ring - 1 - base)


@njit(cache=True, nogil=True, _nrt=False)
def _onward_steps(P, path, f, k):
    """Whole steps (at least one) of propagation from flow ``f``'s hop ``k`` (its cable on) to
    the receiver."""
    return max(1, int(path.onward_steps[f, k] + 0.5))


@njit(cache=True, nogil=True, _nrt=False)
def _dcqcn_mean_field(step, P, path, rp, sc, a, gain_a):
    """Mean-field reaction point: expected marks reach the sender as their CNPs would (``haz``,
    :func:`_mark_delay`); the first CNP is expected once ``first_h`` marks were (``seen``);
    from then on :func:`_mean_field_update`."""
    haz, seen, cc_on, alpha, active = rp.haz, rp.seen, rp.cc_on, rp.alpha, a.active
    slot_now = step % P.ring
    for i in range(a.n_act):
        f = a.act[i]
        if sc.no_mark[f] < 0.0:
            j = 0
            while j < a.n_qh[f]:        # the marks that reach the sender in the same step
                delay = _mark_delay(P, path, sc, a, f, j)
                nm = 0.0
                while j < a.n_qh[f] and _mark_delay(P, path, sc, a, f, j) == delay:
                    nm += sc.nm_hop[f, j]
                    j += 1
                if nm < 0.0:
                    _send_cnp(step, P, rp, f, delay, -nm)
        h = haz[slot_now, f] if active[f] else 0.0
        haz[slot_now, f] = 0.0
        if not cc_on[f] and active[f]:
            seen[f] += h
            if seen[f] >= P.first_h:       # the first CNP: alpha = 1, stage 0
                cc_on[f] = True
                rp.first_cnp[f] = step
                alpha[f] = 1.0
        if cc_on[f] and active[f]:
            _mean_field_update(f, h / P.dt, P.dt, rp.rc, rp.rt, alpha, rp.pi, path.line[f],
                               gain_a, P.tau_a, P.tau_d, P.timer, P.bc, P.payload, P.ai,
                               P.hai, P.rmin)


@njit(cache=True, nogil=True, _nrt=False)
def _dcqcn_sampled(step, P, path, rp, sc, a):
    """DCQCN reaction point as a state machine (Zhu et al., SIGCOMM 2015): a CNP is drawn with
    the chance that something the flow sent was marked and reaches it once the marked packet
    has reached the receiver and its ACK come back (:func:`_mark_delay`); alpha updates, rate
    cuts and the timer / byte-counter increases with their stages."""
    rc, rt, alpha, cc_on, alpha_flag = rp.rc, rp.rt, rp.alpha, rp.cc_on, rp.alpha_flag
    dec_flag, stage, stage_b, bc_sent = rp.dec_flag, rp.stage, rp.stage_b, rp.bc_sent
    next_alpha, next_dec, next_inc, cnp = rp.next_alpha, rp.next_dec, rp.next_inc, rp.cnp
    g, bc, fr, seed_key = P.g, P.bc, P.fr, P.seed_key
    F = path.hz.shape[0]
    slot_now = step % P.ring
    for i in range(a.n_act):
        f = a.act[i]
        if sc.no_mark[f] < 0.0:             # nothing marked can reach it: no draw needed
            # one draw per delay: the marks whose CNPs reach the sender in the same step
            j = 0
            while j < a.n_qh[f]:
                delay = _mark_delay(P, path, sc, a, f, j)
                k = a.qh[f, j]        # the draw's key: the mark's round trip as propagation
                trip = delay + path.cnp_steps[f, k] - _onward_steps(P, path, f, k) \
                    if P.cnp_acks else delay          # sets it, whoever carries it back
                nm = 0.0
                while j < a.n_qh[f] and _mark_delay(P, path, sc, a, f, j) == delay:
                    nm += sc.nm_hop[f, j]
                    j += 1
                if nm < 0.0:
                    key = np.uint64(step) * np.uint64(F + 1) + np.uint64(f + 1) \
                        + np.uint64(trip) * GOLDEN_GAMMA
                    u = float(_splitmix(seed_key ^ key)) / 2.0 ** 64
                    if u < -np.expm1(nm):
                        _send_cnp(step, P, rp, f, delay, 1.0)
        got = cnp[slot_now, f] and a.active[f]
        cnp[slot_now, f] = False
        first = got and not cc_on[f]
        if first:
            cc_on[f] = True
            rp.first_cnp[f] = step
            alpha[f] = 1.0
            next_alpha[f] = step + P.alpha_steps
            next_dec[f] = step + P.dec_steps
        if got:
            dec_flag[f] = True
            if not first:
                alpha_flag[f] = True
        if cc_on[f] and step >= next_alpha[f]:
            alpha[f] = (1 - g) * alpha[f] + g * (1.0 if alpha_flag[f] else 0.0)
            alpha_flag[f] = False
            next_alpha[f] += P.alpha_steps
        cut = False
        if cc_on[f] and step >= next_dec[f]:
            next_dec[f] += P.dec_steps
            cut = dec_flag[f]
        if cut:
            if stage[f] != 0 or stage_b[f] != 0:
                rt[f] = rc[f]
            rc[f] = max(P.rmin, rc[f] * (1 - alpha[f] / 2))
            stage[f] = 0
            stage_b[f] = 0
            bc_sent[f] = 0.0
            dec_flag[f] = False
            next_inc[f] = step + P.inc_steps
        elif cc_on[f]:
            # increase events: the timer, and (if on) every `bc` bytes sent; the stage
            # follows the DCQCN paper: fast recovery while max(T, BC) < F, hyper once
            # min(T, BC) > F, additive between (one counter when the byte counter is off)
            bc_sent[f] += sc.flow_in[f]
            for src in range(2):
                if src == 0:
                    if step < next_inc[f]:
                        continue
                    next_inc[f] += P.inc_steps
                else:
                    if bc <= 0 or bc_sent[f] < bc:
                        continue
                    bc_sent[f] -= bc
                tc = stage[f]
                bcnt = stage_b[f] if bc > 0 else tc
                if max(tc, bcnt) < fr:
                    add = 0.0
                elif min(tc, bcnt) > fr:
                    add = P.hai
                else:
                    add = P.ai
                rt[f] = min(rt[f] + add, path.line[f])
                rc[f] = (rc[f] + rt[f]) / 2
                if src == 0:
                    stage[f] += 1
                else:
                    stage_b[f] += 1


@njit(cache=True, nogil=True, _nrt=False)
def _sample_queues(step, P, pf, st, tr):
    """One trace row: the time, every link's backlog and stopped flag; whether the trace
    buffer is now full."""
    row = tr.sample[2]
    tr.tr_t[row] = P.t0 + step * P.dt
    for ln in range(len(st.q_link)):
        tr.tr_q[row, ln] = st.q_link[ln]
        tr.tr_p[row, ln] = pf.stopped[ln]
    tr.sample[1] = step
    tr.sample[2] = row + 1
    return row + 1 >= len(tr.tr_t)


@njit(cache=True, nogil=True, _nrt=False)
def _history_short(step, lk, ff, a):
    """FIFO: a queue's oldest byte is about to fall out of the arrival history."""
    R = ff.ring_tot.shape[0]
    short = False
    for j in range(a.n_l):
        ln = a.act_l[j]
        if lk.is_queue[ln] and ff.head[ln] != HISTORY_LOST and step - ff.head[ln] >= R - 2:
            short = True
    return short


@njit(cache=True, nogil=True, _nrt=False)
def _calm(step, P, path, fs, rp, a):
    """Nothing queued or paused (the caller's test) and nothing on its way back to a sender
    (from ``step`` on), no rate cut pending, no mean-field flow still recovering, nothing
    between queues."""
    act, active, D, H = a.act, a.active, fs.carry.shape[0], fs.carry.shape[2]
    for i in range(a.n_act):
        f = act[i]
        if P.dcqcn and (rp.pend[f] >= step or rp.ack_n[0] > 0):
            return False
        if rp.dec_flag[f] and active[f]:
            return False
        if P.mean_field and rp.cc_on[f] and active[f] and \
                rp.rc[f] < path.line[f] * (1 - 1e-9):
            return False                 # still recovering, continuously
        for k in range(H):     # (a host's offer on its way to the first queue is steady
            if a.n_qh[f] > 0 and k == a.qh[f, 0] and fs.unsent[f] > 0.0:    # while it offers)
                continue
            for r in range(D):
                if fs.carry[r, f, k] != 0.0:
                    return False
    return True


@njit(cache=True, nogil=True)
def _scratch(F, H, L1, n_sw):
    """The :class:`Scratch` of one set of active flows: per flow, per flow and hop, per link
    (L1 with the sentinel) and per switch; and the lists of links / ingress ports holding
    bytes."""
    return Scratch(np.zeros(F), np.zeros(F), np.zeros(F),    # flow_in, moving, no_mark
                   np.zeros((F, H)), np.zeros((F, H)),      # arrive, out
                   np.zeros(L1), np.zeros(L1), np.zeros(L1),    # total, p, log(1 - p)
                   np.zeros(n_sw), np.zeros(n_sw),          # held, arriving
                   np.zeros(L1), np.zeros(L1), np.zeros(n_sw),    # ingress, in_arr, shared
                   np.zeros(L1), np.zeros(L1),              # FIFO: want, serve_l
                   np.empty(L1, np.int64), np.zeros(L1, np.bool_),    # links holding bytes
                   np.empty(L1, np.int64), np.zeros(L1, np.bool_),    # ... and ingress ports
                   np.zeros(F), np.zeros(L1),               # sent, cap_now
                   np.zeros((F, H)), np.zeros((F, H), np.int64),    # nm_hop, lag_hop
                   np.zeros(L1), np.zeros(L1))              # fill_left, fill_n


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


@njit(cache=True, nogil=True, _nrt=False)
def events_per_period(x):
    """Increase events per period of a timer (or byte counter) that a cut restarts, when x
    marks are expected per period: x / (e^x - 1) (Zhu et al.'s p / ((1-p)^-TR - 1)), 1 with
    no marks, 0 when a cut always comes first."""
    if x < 1e-9:
        return 1.0
    return x / np.expm1(x) if x < 700.0 else 0.0


@njit(cache=True, nogil=True, _nrt=False)
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

