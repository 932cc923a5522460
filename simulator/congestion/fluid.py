"""Fluid model of a lossless (PFC) or lossy RoCE fabric with DCQCN: queues, marks, pauses.

Time advances in fixed steps of ``FLUID_STEP_S`` while anything is out of equilibrium (a queue
holds bytes, a link is paused, a CNP is in flight, a flow is below line rate under DCQCN);
otherwise it jumps to the next flow arrival, completion or DCQCN timer event. With ``jumps``
it also jumps over a settled operating point (the halves of the averaging windows agree
beyond their scatter: rates, bytes in flight, queues) to where the first flow would send its
last byte, and steps its drain. The step itself is compiled
(:mod:`simulator.congestion.kernel`); setup, jumps and traces are numpy here.

Model (after Zhu et al., CoNEXT 2016, with the reaction point of NVIDIA ConnectX firmware as the
HPCC ns-3 model implements it, ../shared/validation/ns3/README.md):

* Host side (GPU -> NIC -> first switch) has no queue: flows sharing a host link split it in
  proportion to their DCQCN rates; what does not fit is simply not sent yet.
* Every switch egress link has a FIFO fluid queue; per step it serves its capacity in arrival
  order (each flow's cumulative arrivals are kept per step, and the bytes leaving are those
  that arrived up to where the cumulative departures reach), so a byte behind a deep queue is
  marked, and its sender hears of it, only once it reaches the head. With ``fifo=False`` each
  flow is served in proportion to its share of the backlog instead (cheaper; the training-step
  path uses it, :data:`simulator.congestion.shapes.FORM_FIFO`). Bytes cross each cable in as
  many steps as its propagation takes (at least one between switch queues; the host-side
  cables to the first queue, none if they round to none), so the bytes on the wire when PFC
  stops a sender are those of a real cable. Completion times add the rest of the path's
  latency.
* ECN: RED marking at dequeue between Kmin and Kmax (per 100 Gb/s, scaled with port speed) up
  to Pmax, 1 above Kmax, on the backlog a dequeued byte leaves behind (after the step's
  service). A flow gets a CNP in a step unless every packet it had dequeued goes
  unmarked: a paced flow sends n = bytes / MTU packets a step, floor(n) whole ones and one
  part (a packet with probability frac(n)), so the chance is 1 - prod over its hops of
  (1 - p)^floor(n) (1 - frac(n) p). A slow flow behind a full queue (p = 1) is marked only
  when one of its packets actually leaves. The draw is seeded (same seed, same result); the
  marked packet carries the mark to the receiver, which echoes it (HPCC ns-3:
  ``SwitchNotifyDequeue`` marks, ``ReceiveUdp`` sets the ACK's CNP flag), so the CNP reaches
  the sender after the rest of the path from the marking queue (its cable on) and the whole
  path back, plus the time the mark waits behind the queues after the one that marked it: a
  mark made at a leaf's uplink waits out the spine's and the last hop's queues (what each
  will hold when the mark gets there, its bytes now plus its growth over the last DRAIN_TAU_S
  carried forward, over its rate times the share of that time its sender was not paused;
  one draw per such delay). With
  acknowledgements in the data's queues (``network.ack_bytes``, the reference's ACK_HIGH_PRIO
  0: the CNP is a flag of the ACK) the ACK waits out the data queues of the links back too,
  the same way (along the ACK's own path where it is given, as its 5-tuple hashes apart from its
  data's; else the data path's cables in reverse); without them its way back is taken as
  unqueued (a NIC's CNPs on a priority of their own).
* DCQCN per flow: alpha update every ``alpha_update_us`` (g), rate-decrease check every
  ``rate_decrease_us`` (R_T <- R_C only if an increase happened since the last cut; R_C <-
  max(R_min, R_C (1 - alpha / 2))), increase timer ``rate_increase_timer_us``: fast recovery
  for ``fast_recovery_steps`` events, then additive (``ai_mbps``), then hyper (``hai_mbps``).
  The first CNP sets alpha = 1 and starts the timers.
* ``reaction_point: mean_field`` replaces the draws and the state machine by their expected
  dynamics (:func:`simulator.congestion.kernel._mean_field_update`, the fluid equations of Zhu et
  al. with a probability per increase stage): expected marks travel back as the draws' CNPs
  do, the flow starts DCQCN once they reach ln 2 (its median first CNP), then cuts, alpha and
  increase events are rates. Deterministic: N flows through one port converge to C / N and the queue
  to the equations' fixed point (:mod:`simulator.congestion.fixed_point`) where it is stable.
* PFC per switch ingress port, the reference switch's shared-buffer MMU: bytes that arrive
  through the port join its share of the shared buffer while it holds less than its reserve
  plus the dynamic threshold alpha x (buffer - headroom - reserves - shared use), beyond that
  its headroom (which departures drain first, and which shared use does not count); XOFF
  while it holds headroom or reaches the threshold, XON once the headroom is empty and its
  share ``resume_gap_kb`` below; the PAUSE and RESUME frames take the link's latency to reach
  the sender (bytes in flight meanwhile land in the headroom). A paused port stops its sender
  entirely (a NIC stops all of its flows, a switch egress stops its queue), so congestion
  spreads upstream and flows that never cross the hot port slow down.
* Without PFC the fabric is lossy: the same shared-buffer MMU admits what an ingress port
  brings up to its reserve, headroom and dynamic threshold (within the switch's buffer) and
  drops the rest, as the packet-level reference's switch does when PAUSE frames go unheeded.
  The sender goes back N, at most once per base round trip (one NAK per round trip): it sends
  again what it sends in the round trip from the lost byte to the NAK (HPCC ns-3's
  RecoverQueue: snd_nxt = snd_una), the bytes the switches drop inside that window among
  them, not on top of it; a loss outside a window is sent again on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulator.arrays import splitmix64
from simulator.config.network import HEADROOM_BDP_FACTOR, NetworkConfig, port_scale_bytes
from simulator.congestion.kernel import (
    CHANGED,
    GROW,
    MORE_CNPS,
    RAN,
    Fifo,
    FlowState,
    Links,
    Params,
    Paths,
    Pfc,
    Reaction,
    Stats,
    Trace,
    fifo_rebase,
    run_steps,
)
from simulator.errors import FabricError
from workloads.units import KB

FLUID_STEP_S = 0.25e-6
"""Integration step: a quarter of the DCQCN alpha-update period of ConnectX firmware (1 us),
so every reaction-point timer lands on a step and PFC's loop over a 1 us cable (the decision,
the PAUSE across the cable, the bytes still on it) takes eight. The loop moves a step at a
time: on the packet-level suite (validation/ns3_suite.py, 1 us cables) each stop lasted
1.13-1.54x the packets' at 1 us, 1.01-1.12x at 0.5 us, 0.98-1.04x at 0.25 us and 0.92-1.08x
at 0.125 us (``ns3_suite.integration_step_table``). ``clustersim flows`` halves it per
doubling of the fastest switch link's speed class over the NICs' (:func:`flows_step`). The
collectives' shapes in a training step take their own, coarser step
(:data:`simulator.congestion.shapes.FORM_STEP_S`)."""
QUEUE_SAMPLE_S = 10e-6
"""Queue-depth trace period for the hottest links (the ns-3 reference samples every 10 us)."""
PAUSE_TRACE_LINKS = 64
"""The pause trace keeps the most-paused links, at most this many."""
RATE_SAMPLE_S = 20e-6
"""DCQCN state trace period (the ns-3 reference's rate files use 20 us)."""
CNP_RING_BYTES = 64 * 2**20
"""Memory the CNP / hazard ring may take (a bool and a float per slot and flow): its slots
cover a round trip and the queueing a mark meets after the queue that marked it, up to this."""
RATE_TRACE_MAX_FLOWS = 64
"""Above this many flows the per-flow rate trace is not kept."""
STEADY_TOL = 0.02
"""Operating-point test (:func:`_moving`): a live flow's delivery rate and bytes in flight and
a link's throughput may differ by this fraction between the halves of the averaging windows
(plus TREND_Z standard errors of their scatter). The jump extrapolates the later half's
averages, so a finish time after a jump is off by about this fraction of the jumped span
(tested at 2x under PFC alone, tests/simulator/test_congestion_step.py)."""
STEADY_MIN_WINDOW_S = 50e-6
"""Shortest averaging window; under DCQCN a window is two rate-increase periods, so that the
sawtooth of cut and recovery averages out."""
JUMP_SPAN_FACTOR = 4
"""A jump extrapolates settled averages over at most this many times the span they were
measured over (an undetected slow trend then costs at most this multiple of its visible
effect)."""
TREND_Z = 3.0
"""A trend must exceed this many standard errors of the windows' scatter (beyond its
tolerance) to count (:func:`_moving`)."""
TOTAL_STEADY_TOL = 0.01
"""The halves of the averaging windows must agree this well in the component's total delivery
rate (:func:`_total_settled`; the total of MegaScale's shapes scatters ~1 % per window once
settled, so a start-up still climbing shows)."""
TOTAL_SCATTER_TOL = 0.03
"""... and its windows scatter by at most this fraction (standard deviation over mean; a
start-up oscillating window to window scatters 10 % and more on MegaScale's shapes)."""
STARTUP_WINDOWS = 8
"""Windows of transient before averaging starts while no flow has finished yet: flows that
start together at line rate settle over many increase periods (under DCQCN a window is two).
Against stepping every shape of a megascale-175b-12288 step, 5 windows left the mean
completion time +0.4 % late, 8 windows +0.2 %, one window (the value after a completion or a
jump) +0.6 %."""
TREND_MIN_WINDOWS = 4
"""Averaging windows (after one window of transient) before an operating point may count as
settled: two per half for the scatter."""
QUEUE_TOL_BYTES = 4096.0
"""Floor of the queue tolerance (one MTU) when Kmin is set to 0."""
QUEUE_STEADY_TOL = 0.1
"""A link's average queue may move this much in a window and still count as steady (a queue
swings more than a rate under DCQCN's sawtooth)."""
TRACE_BUFFER_SAMPLES = 64
"""Queue samples the compiled steps hold before handing them back."""
FIRST_CNP_HAZARD = np.log(2.0)
"""Mean-field reaction point: a flow starts DCQCN (alpha = 1, timers) once its expected marked
packets reach ln 2, the median time of its first CNP."""
FIFO_INITIAL_HISTORY_STEPS = 128
"""FIFO history to start with (128 us at 1 us: a 1.6 MB queue at 100 Gb/s); it doubles when a
queue's oldest byte gets near its end."""
FIFO_MAX_HISTORY_STEPS = 8192
"""Longest FIFO history kept (8 ms at 1 us); a queue whose oldest byte is older (a long
pause) serves in backlog shares until it empties."""
FIFO_HISTORY_BYTES = 256 * 2**20
"""Memory the FIFO history may grow to (its per-flow, per-hop arrivals, 8 B each per step).
Below it a run keeps FIFO order up to FIFO_MAX_HISTORY_STEPS, however long pauses hold its
queues; above it (a large collective's flows), the history stops at the time the deepest
buffer takes to drain at full rate."""
MAX_STEPS = 20_000_000
"""Simulated time in congested steps before the model gives up (20 s at 1 us): congestion
control at this resolution is for incasts and collectives, not whole training steps."""
LOSSY_STALL_S = 5e-3
"""Lossy fabric: simulated time in which no flow gets closer to done while the switches keep
dropping, after which the run stops as collapsed: go-back-N resends a round trip's worth per
loss and the senders never slow (congestion collapse of RoCE without PFC: Mittal et al.,
"Revisiting Network Support for RDMA", SIGCOMM 2018)."""


@dataclass
class FluidResult:
    finish_s: np.ndarray
    """[flow] time its last byte is delivered (plus its path's propagation), seconds."""
    link_bytes: np.ndarray
    link_max_queue: np.ndarray
    """[link] largest egress backlog, bytes (switch egress links; 0 elsewhere)."""
    link_mean_queue: np.ndarray
    """[link] time-average backlog over the simulated span, bytes."""
    link_queue_byte_s: np.ndarray
    """[link] backlog integrated over time, byte-seconds (sums across runs)."""
    link_pause_s: np.ndarray
    """[link] seconds the link's sender was paused by PFC (links into switches)."""
    link_pauses: np.ndarray
    """[link] number of XOFF events."""
    link_marked_bytes: np.ndarray
    link_dropped_bytes: np.ndarray
    flow_retransmitted_bytes: np.ndarray
    queue_trace: pd.DataFrame
    """t_s, link, queue_bytes: the hottest links' backlog every QUEUE_SAMPLE_S (None from the
    shapes' runs: see queue_samples)."""
    rate_trace: pd.DataFrame
    """t_s, flow, rate_bps, target_rate_bps, alpha, delivered_bytes (payload so far) every
    RATE_SAMPLE_S (DCQCN only; None from the shapes' runs, which keep no traces but queues)."""
    pause_trace: pd.DataFrame
    """t_s, link, paused (0/1) every QUEUE_SAMPLE_S for the (up to PAUSE_TRACE_LINKS)
    most-paused links (None from the shapes' runs)."""
    steps: int
    """Simulated span in integration steps (stepped or jumped)."""
    steady_jumps: int = 0
    """How many times the model found every flow at its operating point and jumped."""
    queue_samples: tuple | None = None
    """The queue trace as arrays: (t_s [sample], links [hot], queue_bytes [sample, hot]); the
    shapes' runs (``traces=False``) keep only these and the step builds frames for the
    shapes it shows."""
    ack_s: np.ndarray | None = None
    """[flow] time its last acknowledgement reaches the sender, having waited in the data
    queues of its way back (RDMA's completion at the requester; None without
    acknowledgements)."""
    first_cnp_s: np.ndarray | None = None
    """[flow] time its first CNP reached it, DCQCN's first reaction (NaN: none; None without
    DCQCN)."""


def simulate_fluid(hops: np.ndarray, nbytes: np.ndarray, capacity: np.ndarray,
                   latency: np.ndarray, switch_src: np.ndarray, switch_dst: np.ndarray,
                   buffer_bytes: np.ndarray, net: NetworkConfig, *, start=None, seed: int = 0,
                   trace_links: int = 4, line_share=None, jumps: bool = False,
                   fifo: bool = True, dt: float = FLUID_STEP_S,
                   traces: bool = True, reverse=None, ack_hops=None,
                   queue_sample_s: float = QUEUE_SAMPLE_S) -> FluidResult:
    """Run flows (rows of ``hops``, link ids, -1 padded) of ``nbytes`` payload bytes.

    ``capacity`` is wire bytes/s per link; ``switch_src`` / ``switch_dst`` give, per link, the
    switch it leaves / enters (-1 for GPUs and NICs); ``buffer_bytes`` the shared buffer of each
    switch. ``line_share`` scales each flow's line rate (a sprayed subflow of weight 1/k starts
    at 1/k of its NIC). ``jumps``: jump over settled operating points (extrapolating averages,
    within about STEADY_TOL of stepping; the training-step path uses them, ``clustersim
    flows`` steps every microsecond). ``fifo``: queues serve bytes in arrival order (else in
    shares of each flow's backlog, cheaper; see :data:`simulator.congestion.shapes.FORM_FIFO`).
    ``dt``: the integration step (:data:`simulator.congestion.shapes.FORM_STEP_S` for shapes).
    ``traces=False``: no queue, rate or pause frames (None; ``queue_samples`` holds the
    queue trace as arrays). ``reverse``: per link, the link back between the same nodes (-1:
    none; :meth:`simulator.network.fabric.Fabric.reverse_links`), for the acknowledgements
    ``net.ack_bytes`` puts on the reverse of every network hop (None: no acknowledgements).
    ``ack_hops``: [flow, hop] link ids (-1 padded) of each flow's acknowledgements, receiver
    to sender, where they take a path of their own (the ACK's 5-tuple hashes apart from its
    data's); their network hops carry the ACKs instead of ``reverse``'s.
    ``queue_sample_s``: the queue trace's period (the results do not depend on it).

    The model works on the links the flows use and the switches those links touch (every
    per-step pass is O(links) as well as O(flows x hops)); each switch's PFC headroom and
    reserves still count all of its ingress ports, as a switch reserves them per port.
    """
    if not dt > 0:
        raise ValueError(f"dt: the integration step must be positive seconds, not {dt}")
    hops = np.asarray(hops)
    L_all = len(capacity)
    switch_src, switch_dst = np.asarray(switch_src), np.asarray(switch_dst)
    buffer_bytes = np.asarray(buffer_bytes, float)
    n_sw = len(buffer_bytes)
    room = switch_room(np.asarray(capacity, float), latency, switch_dst, buffer_bytes, net)
    used, local = np.unique(hops[hops >= 0], return_inverse=True)
    lh = np.full(hops.shape, -1)
    lh[hops >= 0] = local
    ssw = np.concatenate([switch_src[used], switch_dst[used]])
    sw_used = np.unique(ssw[ssw >= 0])
    remap = np.full(n_sw + 1, -1)
    remap[sw_used] = np.arange(len(sw_used))
    acks = None
    if net.ack_bytes > 0 and (reverse is not None or ack_hops is not None):
        acks = _ack_links(hops, used, switch_src, switch_dst, reverse, ack_hops, latency)
    res = _simulate(lh, nbytes, np.asarray(capacity, float)[used], np.asarray(latency)[used],
                    remap[switch_src[used]], remap[switch_dst[used]], *room[sw_used].T, net,
                    start=start, seed=seed, trace_links=trace_links, line_share=line_share,
                    jumps=jumps, fifo=fifo, dt=dt, traces=traces, ack_links=acks,
                    queue_sample_s=queue_sample_s)
    for name in ("link_bytes", "link_max_queue", "link_mean_queue", "link_queue_byte_s",
                 "link_pause_s", "link_pauses", "link_marked_bytes", "link_dropped_bytes"):
        full = np.zeros(L_all)
        full[used] = getattr(res, name)
        setattr(res, name, full)
    for frame in (res.queue_trace, res.pause_trace):
        if frame is not None and len(frame):
            frame["link"] = used[frame["link"].to_numpy(int)]
    ts, hot, depth = res.queue_samples
    res.queue_samples = (ts, used[hot], depth)
    return res


def switch_room(capacity, latency, switch_dst, buffer_bytes, net: NetworkConfig) -> np.ndarray:
    """[switch, 3] shared buffer, PFC headroom and reserves, bytes. Headroom (per 100 Gb/s of
    port speed) and the reserve count every ingress port of the switch, used or not, as a
    switch sets them aside per lossless port."""
    n_sw = len(buffer_bytes)
    into = switch_dst >= 0
    headroom = np.bincount(switch_dst[into], weights=port_headroom(capacity, latency, switch_dst,
                                                                   net)[into], minlength=n_sw)
    reserve = np.bincount(switch_dst[into], minlength=n_sw) * net.pfc_threshold.reserve_kb * KB
    return np.stack([np.asarray(buffer_bytes, float), headroom, reserve], axis=1)


def port_headroom(capacity, latency, switch_dst, net: NetworkConfig) -> np.ndarray:
    """[link] PFC headroom of the switch ingress port each link enters, bytes (0 for a link
    into a host): ``headroom_kb`` per 100 Gb/s of the port's speed, or, unset,
    ``HEADROOM_BDP_FACTOR`` bandwidth-delay products of the link's cable."""
    capacity = np.asarray(capacity, float)
    kb = net.pfc_threshold.headroom_kb
    size = HEADROOM_BDP_FACTOR * capacity * np.asarray(latency, float) if kb is None else \
        kb * port_scale_bytes(capacity)
    return np.where(np.asarray(switch_dst) >= 0, size, 0.0)


def _ack_links(hops, used, switch_src, switch_dst, reverse, ack_hops, latency) -> tuple:
    """The links each flow's acknowledgements take, receiver to sender, first k: the network
    hops (a switch at either end) of ``ack_hops``, else the reverses of the data path's
    network hops. Returns ([flow, k] local ids, -1 for a link no data uses, whose queue stays
    empty, or none; [flow, k] their latency, s; [flow] how many)."""
    network = (np.asarray(switch_src) >= 0) | (np.asarray(switch_dst) >= 0)
    if ack_hops is None:                             # the data's network hops, last first
        back = np.asarray(reverse)[np.maximum(hops, 0)]
        g = np.where((hops >= 0) & network[np.maximum(hops, 0)], back, -1)[:, ::-1]
        g = np.take_along_axis(g, np.argsort(g < 0, axis=1, kind="stable"), axis=1)
    else:
        a = np.asarray(ack_hops, np.int64)
        keep = (a >= 0) & network[np.maximum(a, 0)]
        order = np.argsort(~keep, axis=1, kind="stable")          # network hops first
        g = np.take_along_axis(np.where(keep, a, -1), order, axis=1)
        if g.shape[1] < hops.shape[1]:
            g = np.pad(g, ((0, 0), (0, hops.shape[1] - g.shape[1])), constant_values=-1)
        if (g[:, hops.shape[1]:] >= 0).any():
            raise ValueError("ack_hops: an acknowledgement crosses more network hops than "
                             "the widest data path has hops")
        g = g[:, :hops.shape[1]]
    to_local = np.full(len(network) + 1, -1)          # the last entry: g's -1
    to_local[used] = np.arange(len(used))
    lat = np.where(g >= 0, np.append(np.asarray(latency, float), 0.0)[g], 0.0)
    return to_local[g], lat, (g >= 0).sum(axis=1)


def _cnp_ring(rtt_steps: np.ndarray, drain: float, queued_hops: int, acks: bool,
              flows: int) -> int:
    """Slots of the CNP ring: a round trip, and what a mark may wait behind the queues after
    the one that marked it and, in an ACK in the data's queues (``acks``), those on the way
    back (each at most ``drain`` steps, a full switch buffer), as far as CNP_RING_BYTES
    allows."""
    waits = max(queued_hops - 1 + (queued_hops if acks else 0), 0)
    ring = int(rtt_steps.max()) + 1
    slot = np.dtype(bool).itemsize + np.dtype(float).itemsize     # a CNP and a hazard
    return ring + min(int(np.ceil(drain)) * waits,
                      max(CNP_RING_BYTES // (slot * max(flows, 1)) - ring, 0))


DRAIN_TAU_S = 20e-6
"""Over how long the share of time a queue's sender was not paused, and how fast the queue
grew, are averaged, for the wait of a mark (or the ACK carrying it) behind the queue: a few
PFC cycles (PAUSEs in the packet-level suite last 10-30 us). Chosen, not fitted: when it was
chosen (before the growth was carried), at 10 or 40 us the three-tier held-out cases' NIC
hops read 0.71-0.79 of the packets' pause time (0.73-0.79 at 20), the two-way ring's busiest
hop 1.17 or 1.03 (1.07) (validation/ns3_held_out/README.md). A queue's growth is averaged
over the history it has when that is shorter (from when it first held bytes)."""


PORT_SPEED_SLACK = np.log2(1.1)
"""Ports run at power-of-two multiples of the NICs' speed (100 / 200 / 400 / 800 Gb/s), and
the switch counts doublings of the configured speed (ns-3 ``third``: halve the rate while it
exceeds the NIC's); a capacity up to 10 % above such a multiple (a serialization rounded to
whole nanoseconds, a calibrated efficiency) is the same speed class, not the next."""


def speed_doublings(capacity, switch_src, switch_dst) -> np.ndarray | None:
    """[link] doublings of each link's speed class over the NICs' (the slowest working
    host-to-switch link; PORT_SPEED_SLACK), 0 for the NICs' own; None without one."""
    capacity = np.asarray(capacity, float)
    host_in = (np.asarray(switch_src) < 0) & (np.asarray(switch_dst) >= 0) & (capacity > 0)
    if not host_in.any():                      # (a failed link has no speed)
        return None
    ratio = np.maximum(capacity / capacity[host_in].min(), 1.0)
    return np.maximum(np.ceil(np.log2(ratio) - PORT_SPEED_SLACK), 0.0)


def port_alpha(capacity, switch_src, switch_dst, net: NetworkConfig) -> np.ndarray:
    """[link] dynamic PFC threshold factor of the switch ingress port each link enters:
    ``pfc_threshold.alpha``, doubled per doubling of the port's speed over the NICs' (the
    slowest host-to-switch link here) when ``alpha_speed_scaling`` is on, at most 1."""
    pf = net.pfc_threshold
    alpha = np.full(len(capacity), float(pf.alpha))
    doublings = speed_doublings(capacity, switch_src, switch_dst)
    if pf.alpha_speed_scaling and doublings is not None:
        alpha = np.minimum(alpha * 2.0 ** doublings, max(float(pf.alpha), 1.0))
    return alpha


def flows_step(capacity, switch_src, switch_dst) -> float:
    """``clustersim flows``' integration step: FLUID_STEP_S, halved per doubling of the fastest
    switch-to-switch link's speed class over the NICs' (:func:`speed_doublings`), so that a
    step moves as many bytes through that port as through a NIC's. Its PAUSE loop fills it
    that many times faster than the NICs' egress drains it: at 0.25 us a 400 Gb/s uplink
    over 100 Gb/s NICs moved 12.5 KB a step, and on the packet-level suite's cascade behind
    such uplinks (validation/ns3_suite.py, cascade-bundled-1MiB, at exact serialization) victim
    1 read 52 % against the packets' 60 and the hops' pause times 0.91-1.00 of theirs; at
    0.125 us 56 %, at 0.0625 (this) 56.5 % and 1.00-1.01 (ns3_suite_exact, 500 draws). Every
    DCQCN timer still lands on a step (they are whole microseconds)."""
    src, dst = np.asarray(switch_src), np.asarray(switch_dst)
    d = speed_doublings(capacity, src, dst)
    inner = (src >= 0) & (dst >= 0)
    if d is None or not inner.any():
        return FLUID_STEP_S
    return FLUID_STEP_S / 2.0 ** float(d[inner].max())


@dataclass
class _Run:
    """One fluid run: the compiled steps' records and the loop's own state (operating-point
    windows, traces)."""
    prm: Params
    paths: Paths
    links: Links
    fs: FlowState
    rp: Reaction
    ff: list
    """The :class:`Fifo` arrays (a list: the history grows)."""
    pf: Pfc
    stats: dict
    """Per-link sums (:class:`Stats` fields but ``q_link`` and ``ack_load``)."""
    q_link: np.ndarray
    ack_load: np.ndarray
    """[link] acknowledgements' payload-equivalent bytes per step (:class:`Stats`)."""
    lead_hop: np.ndarray
    """[flow, hop] the first queue of a flow whose host-side links take steps (its carry is a
    steady offer in flight, not a transient: :data:`Paths.hop_steps`)."""
    tr: Trace
    cap: np.ndarray
    """[link] payload bytes per step."""
    hop_queue: np.ndarray
    kmin_q: np.ndarray
    """[link] queue tolerance of the operating-point test."""
    d: object
    """The run's DCQCN settings."""
    hist_max: int
    congested: bool
    jumps: bool
    trace_rates: bool
    win: int
    """Steps per averaging window."""
    startup_steps: int
    L: int
    last_start: float
    """The latest flow start, seconds."""
    step: int = 0
    stepped: int = 0
    steady_jumps: int = 0
    n_active: int = -1
    kernel_at: int | None = None
    """Where the compiled steps left off (the FIFO history is valid there)."""
    why: int | None = None
    snap: tuple | None = None
    base: tuple | None = None
    epoch: int = 0
    marks: list | None = None
    totals: list | None = None
    last_rate_sample: float = -np.inf
    trace_q: list = field(default_factory=list)
    trace_r: list = field(default_factory=list)

    def transient_steps(self) -> int:
        """Steps of transient before averaging: the start-up, or a window after a change."""
        return self.startup_steps if np.isnan(self.fs.finish).all() else self.win


def _simulate(hops, nbytes, capacity, latency, switch_src, switch_dst, buffer_bytes, sw_headroom,
              sw_reserve, net: NetworkConfig, *, start, seed, trace_links,
              line_share, jumps: bool = False, traces: bool = True,
              fifo: bool = True, dt: float = FLUID_STEP_S,
              queue_sample_s: float = QUEUE_SAMPLE_S, congested: bool = False,
              ack_links=None) -> FluidResult:
    """:func:`simulate_fluid` on compacted link and switch ids (``ack_links``: the links each
    flow's acknowledgements take, :func:`_ack_links`). ``traces=False``: no rate or
    pause trace (both None); the queue trace is sampled every ``queue_sample_s``.
    ``congested``: the flows' line rates overload a switch egress (a collective's congested
    form), so the start is not calm and its check is skipped."""
    r = _setup(hops, nbytes, capacity, latency, switch_src, switch_dst, buffer_bytes,
               sw_headroom, sw_reserve, net, start=start, seed=seed, line_share=line_share,
               jumps=jumps, traces=traces, fifo=fifo, dt=dt, queue_sample_s=queue_sample_s,
               congested=congested, ack_links=ack_links)
    start, finish, t0 = r.paths.start, r.fs.finish, r.prm.t0
    best, since = -1.0, t0          # lossy: the most delivered so far, and since when
    while True:
        t = t0 + r.step * dt
        # the compiled steps ran their course (RAN): flows are active and the fabric is not
        # calm (they would have returned), so only the window's bookkeeping is due
        ran = r.why == RAN
        if not ran:
            active = (start <= t + 1e-15) & np.isnan(finish)
        if not ran and not active.any():
            _settle_acks(r, t)
            later = start[np.isnan(finish) & (start > t)]
            if not len(later):
                break
            r.step = int(np.ceil((later.min() - t0) / dt - 1e-9))
            continue
        if not ran and _calm_jump(r, active, t):
            continue
        _compiled_steps(r, t)
        _steady_point(r)
        if not r.prm.pfc:
            _check_collapse(r, t0 + r.step * dt, best, since)
            got = float(r.fs.delivered.sum())
            if got > best + 1.0:
                best, since = got, t0 + r.step * dt
        if r.stepped > MAX_STEPS:
            raise FabricError(f"fluid model: still congested after {MAX_STEPS * dt:.0f} s of "
                              f"simulated time in {dt * 1e6:g} us steps; use "
                              f"congestion_control none (max-min) for transfers this long")
    res = _result(finish, r.fs.retx, r.stats, r.step, r.steady_jumps, dt, r.L, trace_links,
                  r.fs.ack_done if r.prm.ack_frac > 0 else None,
                  r.trace_q, r.trace_r if traces else None, r.prm.payload)
    if r.prm.dcqcn:
        first = r.rp.first_cnp
        res.first_cnp_s = np.where(first >= 0, r.prm.t0 + first * dt, np.nan)
    return res


def _settle_acks(r: _Run, t: float) -> None:
    """No flow is active, so no queue holds bytes: the last acknowledgements still on their
    way reach their senders after the propagation left on their paths."""
    fs, paths = r.fs, r.paths
    pend = fs.ack_pend[:fs.ack_n[0]]
    if not len(pend):
        return
    k = np.arange(paths.rev.shape[1])
    left = (k >= fs.ack_hop[pend, None]) & (k < paths.n_ack[pend, None])
    fs.ack_done[pend] = np.maximum(fs.ack_t[pend], t) + (paths.ack_lat[pend] * left).sum(axis=1)
    fs.ack_n[0] = 0


def _check_collapse(r: _Run, t: float, best: float, since: float) -> None:
    """Lossy: raise once LOSSY_STALL_S has passed with drops and no flow closer to done."""
    if t - since < LOSSY_STALL_S or r.fs.delivered.sum() > best + 1.0 or \
            not r.stats["dropped"].any():
        return
    hot = int(np.argmax(r.stats["dropped"]))
    held = r.stats["qmax"][hot] / r.prm.payload / KB                  # wire KB
    why = (f"the busiest dropping queue peaked at {held:.0f} KB against ECN Kmin "
           f"{r.links.kmin[hot] / r.prm.payload / KB:.0f} KB, so DCQCN barely slows the senders"
           if r.prm.dcqcn else "no congestion control slows the senders")
    raise FabricError(
        f"fluid model: lossy fabric collapsed: for {LOSSY_STALL_S * 1e3:g} ms of simulated time "
        f"no flow got closer to done while switches kept dropping (go-back-N resends a round "
        f"trip per loss; {why}): turn PFC on, lower ecn.kmin_kb or raise buffer_mib")


def _setup(hops, nbytes, capacity, latency, switch_src, switch_dst, buffer_bytes, sw_headroom,
           sw_reserve, net: NetworkConfig, *, start, seed, line_share, jumps, traces, fifo, dt,
           queue_sample_s, congested, ack_links=None) -> _Run:
    """Paths, links, parameters and the initial state of a run."""
    F, H = hops.shape
    L = len(capacity)
    nbytes = np.asarray(nbytes, float)
    start = np.zeros(F) if start is None else np.asarray(start, float)
    payload = net.mtu_bytes / (net.mtu_bytes + net.header_bytes)
    cap = np.asarray(capacity, float) * payload * dt            # payload bytes per step
    line = np.asarray(capacity, float)[np.maximum(hops[:, 0], 0)]  # wire bytes/s of the NIC
    if line_share is not None:
        line = line * np.asarray(line_share, float)
    valid = hops >= 0
    hz = np.where(valid, hops, L)                                # L = sentinel link
    is_queue = np.append(switch_src >= 0, False)                 # switch egress links queue
    hop_queue = is_queue[hz]
    # the host-side prefix (no queue) of every path, and the hop the payload leaves the host
    leading = np.cumprod(~hop_queue & valid, axis=1).astype(bool)
    path_lat = np.where(valid, np.asarray(latency)[np.maximum(hops, 0)], 0).sum(axis=1)
    # queues hold payload bytes; a switch counts its buffer, thresholds and queues in wire
    # bytes (headers too), so every byte threshold is taken in payload bytes here
    scale_kb = port_scale_bytes(np.asarray(capacity, float)) * payload
    kmin = np.append(net.ecn.kmin_kb * scale_kb, np.inf)
    kmax = np.append(net.ecn.kmax_kb * scale_kb, np.inf)
    dcqcn = net.congestion_control == "dcqcn"
    d = net.dcqcn
    step_of = lambda us: max(1, int(round(us * 1e-6 / dt)))      # noqa: E731
    alpha_steps, dec_steps, inc_steps = (step_of(d.alpha_update_us),
                                         step_of(d.rate_decrease_us),
                                         step_of(d.rate_increase_timer_us))
    rtt_steps = np.maximum(1, np.round(2 * path_lat / dt)).astype(np.int64)
    # a mark reaches its sender as its packet's ACK: the rest of the way to the receiver from
    # the marking queue (its cable on), then the whole way back (HPCC ns-3: the switch marks
    # at dequeue, the receiver echoes it in its ACK)
    hop_lat = np.where(valid, np.asarray(latency)[np.maximum(hops, 0)], 0.0)
    onward = np.cumsum(hop_lat[:, ::-1], axis=1)[:, ::-1]
    cnp_steps = np.maximum(1, np.round((onward + path_lat[:, None]) / dt)).astype(np.int64)
    qmask = hop_queue & valid
    n_queued = qmask.sum(axis=1)
    hop_steps, first_q = _wire_steps(hops, hz, valid, leading, qmask, latency, dt)
    # a completion adds only the latency the cables' steps did not already cover
    deliver_lat = np.maximum(path_lat - hop_steps.sum(axis=1) * dt, 0.0)
    # acknowledgements: the receiving NIC returns ack_bytes per data packet over the network
    # links of their way back (``ack_links``: their own path, or the data's reversed), in the
    # payload units the links' capacities are in (one packet's ACK per mtu payload bytes:
    # ack / (mtu + header))
    ack_frac = 0.0
    rev_hop, n_ack, ack_lat = np.full(hops.shape, L), np.zeros(F, np.int64), np.zeros(hops.shape)
    if ack_links is not None and net.ack_bytes > 0:
        ack_frac = net.ack_bytes / (net.mtu_bytes + net.header_bytes)
        local, ack_lat, n_ack = ack_links
        rev_hop = np.where(local >= 0, local, L)
    paths = Paths(hz=hz, valid=valid, leading=leading, qmask=qmask,
                  prev_hop=np.concatenate([np.full((F, 1), L), hz[:, :-1]], axis=1),
                  qsw=np.where(qmask, np.append(switch_src, -1)[hz], -1),  # queued hop's switch
                  path_lat=deliver_lat, rtt_steps=rtt_steps, cnp_steps=cnp_steps,
                  line=line, nbytes=nbytes,
                  start=start, rev=rev_hop.astype(np.int64), n_ack=n_ack.astype(np.int64),
                  ack_lat=np.asarray(ack_lat, float), onward_steps=onward / dt,
                  hop_steps=hop_steps)
    links = Links(is_queue=is_queue, cap_ext=np.append(cap, 0.0), kmin=kmin, kmax=kmax,
                  switch_dst=np.asarray(switch_dst, np.int64), buffer=buffer_bytes * payload,
                  sw_headroom=sw_headroom * payload, sw_reserve=sw_reserve * payload,
                  alpha_in=np.append(port_alpha(np.asarray(capacity, float), switch_src,
                                                switch_dst, net), 0.0),
                  hdrm_in=np.append(port_headroom(capacity, latency, switch_dst, net) * payload,
                                    0.0))
    # FIFO history: grows (doubling) as queues deepen, up to what the deepest queue a switch
    # here can hold needs to drain, or longer (paused queues drain slower) while it fits
    # FIFO_HISTORY_BYTES: with backlog shares instead, a flow's last bytes in a queue that
    # other flows keep filling leave only geometrically, long after FIFO order sends them
    slowest = cap[is_queue[:L]].min(initial=np.inf)       # payload bytes per step
    drain = np.max(buffer_bytes, initial=0.0) * payload / slowest if np.isfinite(slowest) \
        else 0.0
    affordable = FIFO_HISTORY_BYTES // (8 * max(F * H, 1))
    hist_max = int(min(FIFO_MAX_HISTORY_STEPS, max(np.ceil(drain) + 2, affordable)))
    n_hist = max(2, min(FIFO_INITIAL_HISTORY_STEPS, hist_max)) if fifo else 2
    ring = _cnp_ring(rtt_steps, drain, int(n_queued.max(initial=0)), ack_frac > 0, F) \
        if dcqcn else int(rtt_steps.max()) + 1
    # operating-point detection: rates over consecutive windows of `win` stepped steps
    win = max(int(round(STEADY_MIN_WINDOW_S / dt)), 2 * inc_steps if dcqcn else 0)
    trace_rates = traces and dcqcn and F <= RATE_TRACE_MAX_FLOWS
    pf = net.pfc_threshold
    mean_field = dcqcn and d.reaction_point == "mean_field"
    prm = Params(t0=float(start.min()) if F else 0.0, dt=dt, payload=float(payload),
                 pkt=float(net.mtu_bytes), pmax=float(net.ecn.pmax),
                 static_thr=float((pf.static_xoff_kb or 0.0) * KB * payload),
                 reserve=float(pf.reserve_kb * KB * payload),
                 gap=float(pf.resume_gap_kb * KB * payload),
                 # alpha's gain per update as the timer rounds to whole steps: the decay per
                 # second holds
                 g=float(1 - (1 - d.g) ** (alpha_steps * dt / (d.alpha_update_us * 1e-6))),
                 ai=float(d.ai_mbps * 1e6 / 8), hai=float(d.hai_mbps * 1e6 / 8),
                 rmin=float(d.min_rate_mbps * 1e6 / 8), bc=float(d.byte_counter_kb * KB),
                 tau_a=float(alpha_steps * dt), tau_d=float(dec_steps * dt),
                 timer=float(inc_steps * dt), first_h=float(FIRST_CNP_HAZARD),
                 pfc=bool(net.pfc), dynamic=pf.mode == "dynamic", dcqcn=bool(dcqcn),
                 alpha_steps=alpha_steps, dec_steps=dec_steps, inc_steps=inc_steps,
                 fr=int(d.fast_recovery_steps), seed_key=np.uint64(splitmix64(np.uint64(seed))),
                 ring=ring, mean_field=bool(mean_field), fifo=bool(fifo),
                 can_grow=n_hist < hist_max, ack_frac=float(ack_frac),
                 cnp_acks=bool(dcqcn and ack_frac > 0),
                 avail_gain=min(dt / DRAIN_TAU_S, 1.0),
                 max_queue=float(np.max(buffer_bytes) * payload) if len(buffer_bytes) else np.inf,
                 # after a completion the compiled steps go on through the transient window
                 # that follows (not when rates are traced on their own clock)
                 after=win if jumps and not trace_rates else 0)
    fs, rp, ff, pfc_state, stats, tr = _initial_state(F, H, L, n_hist, ring, line, nbytes, d,
                                                      latency, dt, queue_sample_s,
                                                      len(buffer_bytes),
                                                      int(hop_steps.max(initial=1)))
    return _Run(prm=prm, paths=paths, links=links, fs=fs, rp=rp, ff=ff, pf=pfc_state,
                stats=stats, q_link=np.zeros(L + 1), ack_load=np.zeros(L + 1),
                lead_hop=first_q & (hop_steps > 0), tr=tr,
                cap=cap, hop_queue=hop_queue,
                kmin_q=np.append(np.maximum(kmin[:L], QUEUE_TOL_BYTES), QUEUE_TOL_BYTES),
                d=d, hist_max=hist_max, congested=congested, jumps=jumps,
                trace_rates=trace_rates, win=win, startup_steps=STARTUP_WINDOWS * win, L=L,
                last_start=float(start.max()) if F else 0.0)


CNP_POOL_PER_HOP = 4
"""Starting room of the pool of CNP-carrying ACKs on their way back, per flow and hop (not a
model constant: the pool doubles whenever a step might overflow it, ``MORE_CNPS``)."""


def _cnp_ack_pool(n: int, rp: Reaction | None = None) -> dict:
    """The pool of ACKs carrying CNPs on their way back (:func:`kernel._cnp_acks`): room for
    ``n``, those of ``rp`` in it."""
    pool = {"ack_f": np.zeros(n, np.int64), "ack_h": np.zeros(n, np.int64),
            "ack_t": np.zeros(n), "ack_ahead": np.zeros(n), "ack_w": np.zeros(n),
            "ack_n": np.zeros(1, np.int64)}
    if rp is not None:
        for k in pool:
            old = getattr(rp, k)
            pool[k][:len(old)] = old
    return pool


def _nearest_steps(seconds, dt):
    """Whole steps nearest to ``seconds``, halves up (a latency of 1.5 steps takes 2)."""
    return np.floor(np.asarray(seconds, float) / dt + 0.5 - 1e-9)


def _wire_steps(hops, hz, valid, leading, qmask, latency, dt):
    """([flow, hop] steps a byte takes to reach each queued hop, [flow, hop] the first queued
    hop). A byte leaving one queue reaches the next as many steps later as its cable's
    propagation takes (at least one), so PFC's loop (PAUSE out, the bytes on the wire back)
    holds the bytes a real cable does at any step. The host-side cables (NIC -> first switch)
    take their steps too where their latency rounds to one or more: what a host offers
    reaches the first queue that much later, as the reference's packets do, so PFC's loop at
    a host is as long as at a switch (with 2 us steps, a collective's shapes, a 1 us cable
    rounds to none)."""
    L = len(latency)
    lat_steps = np.maximum(1, _nearest_steps(np.append(latency, 0.0), dt)).astype(np.int64)
    first_q = qmask & (np.cumsum(qmask, axis=1) == 1)
    # the queue before each queued hop is the hop before it (switch egress links chain)
    prev_link = np.concatenate([np.full((len(hz), 1), L), hz[:, :-1]], axis=1)
    hop_steps = np.where(qmask & ~first_q, lat_steps[prev_link], 0)
    lead_lat = np.where(leading & valid, np.asarray(latency)[np.maximum(hops, 0)], 0).sum(axis=1)
    lead_steps = np.where(qmask.any(axis=1), _nearest_steps(lead_lat, dt), 0)
    return np.where(first_q, lead_steps[:, None], hop_steps).astype(np.int64), first_q


def _initial_state(F, H, L, n_hist, ring, line, nbytes, d, latency, dt, queue_sample_s, n_sw,
                   wire_steps=1):
    """Every flow unsent at line rate, DCQCN off until its first CNP, queues empty, nothing
    paused, nothing on the wires (``wire_steps``: the longest propagation, in steps); the
    trace buffers."""
    never = np.iinfo(np.int64).max
    fs = FlowState(unsent=nbytes.copy(), delivered=np.zeros(F), backlog=np.zeros((F, H)),
                   carry=np.zeros((max(wire_steps, 1), F, H)), finish=np.full(F, np.nan),
                   retx=np.zeros(F), last_gbn=np.full(F, -(1 << 40)), gbn_left=np.zeros(F),
                   ack_hop=np.full(F, -1, np.int64), ack_t=np.full(F, np.nan),
                   ack_ahead=np.zeros(F), ack_done=np.full(F, np.nan),
                   ack_pend=np.zeros(F, np.int64), ack_n=np.zeros(1, np.int64))
    pi = np.zeros((F, d.fast_recovery_steps + 2))   # mean field: the stage probabilities
    pi[:, 0] = 1.0
    rp = Reaction(rc=line.copy(), rt=line.copy(), alpha=np.ones(F),
                  cc_on=np.zeros(F, dtype=bool), alpha_flag=np.zeros(F, dtype=bool),
                  dec_flag=np.zeros(F, dtype=bool), stage=np.zeros(F, dtype=np.int64),
                  stage_b=np.zeros(F, dtype=np.int64),
                  bc_sent=np.zeros(F),            # bytes sent since the last byte-counter event
                  next_alpha=np.full(F, never), next_dec=np.full(F, never),
                  next_inc=np.full(F, never), cnp=np.zeros((ring, F), dtype=bool),
                  haz=np.zeros((ring, F)),        # mean field: expected marks on their way back
                  seen=np.zeros(F),               # ... and before the first CNP
                  pi=pi, pend=np.full(F, -1, dtype=np.int64),
                  first_cnp=np.full(F, -1, dtype=np.int64),
                  **_cnp_ack_pool(CNP_POOL_PER_HOP * F * H))
    ff = [np.zeros((F, H)), np.zeros((F, H)), np.zeros((n_hist, F, H)),
          np.zeros((n_hist, L + 1)), np.zeros(L + 1), np.zeros(L + 1),
          np.zeros(L + 1, np.int64)]
    pz_delay = np.append(np.ceil(np.asarray(latency, float) / dt - 1e-9), 0).astype(np.int64)
    pfc_state = Pfc(paused=np.zeros(L + 1, dtype=bool),   # XOFF sent by the switch, per port
                    stopped=np.zeros(L + 1, dtype=bool),  # ... and in force at the sender
                    pz=np.zeros((int(pz_delay.max()) + 2, L + 1), dtype=bool), pz_delay=pz_delay,
                    hdrm=np.zeros(L + 1), held_prev=np.zeros(L + 1), shared=np.zeros(n_sw),
                    avail=np.ones(L + 1), grow=np.zeros(L + 1), left_prev=np.zeros(L + 1),
                    left_step=np.full(L + 1, -2, np.int64), grow_w=np.zeros(L + 1))
    stats = {k: np.zeros(L + 1) for k in ("bytes", "qmax", "qsum", "pause", "pauses",
                                          "marked", "dropped")}
    tr = Trace(sample=np.array([max(1, round(queue_sample_s / dt)), -(1 << 40), 0], np.int64),
               tr_t=np.zeros(TRACE_BUFFER_SAMPLES), tr_q=np.zeros((TRACE_BUFFER_SAMPLES, L + 1)),
               tr_p=np.zeros((TRACE_BUFFER_SAMPLES, L + 1), dtype=bool),
               chg=np.full(1, -1, np.int64))
    return fs, rp, ff, pfc_state, stats, tr


def _calm_jump(r: _Run, active, t) -> bool:
    """Jump while nothing is out of equilibrium: no queue, nothing in flight, no pause, no CNP
    on its way or waiting for its check, so every rate is constant until the next completion,
    arrival or DCQCN increase event. Whether it jumped."""
    fs, rp, pf, prm, paths = r.fs, r.rp, r.pf, r.prm, r.paths
    dt, L, cap = prm.dt, r.L, r.cap
    cc_on = rp.cc_on
    if prm.ack_frac > 0:    # the jump's rates leave the acknowledgements' load out
        return False
    calm = (not (r.congested and r.kernel_at is None)
            and not fs.backlog.any() and not fs.carry[:, ~r.lead_hop].any()
            # a host's offer in flight is steady while the host offers; its last bytes are not
            and not ((fs.carry[:, r.lead_hop] != 0).any(axis=0)
                     & (fs.unsent[np.nonzero(r.lead_hop)[0]] <= 0)).any()
            and not pf.paused.any()
            and not (rp.pend >= r.step).any() and not (rp.dec_flag & active).any()
            and not pf.stopped.any() and not pf.pz.any())
    if calm and prm.mean_field:               # the mean field recovers continuously
        calm = not (cc_on & active & (rp.rc < paths.line * (1 - 1e-9))).any()
    if not calm:
        return False
    want = np.where(active & (fs.unsent > 0), rp.rc * prm.payload, 0.0)   # payload bytes/s
    share = _host_scale(want * dt, paths.hz, paths.leading, cap, L) / dt
    rate = _first_queue_rate(share, paths.hz, r.hop_queue, paths.valid, cap, L, dt)
    calm = bool(np.allclose(rate, share, rtol=1e-9, atol=0.0))   # no queue would grow
    with np.errstate(divide="ignore", invalid="ignore"):
        left = np.where(rate > 0, fs.unsent / rate, np.inf)
    start, finish = paths.start, fs.finish
    nxt = start[np.isnan(finish) & (start > t)]
    horizon = min(left[active].min(), (nxt.min() - t) if len(nxt) else np.inf)
    k = int(np.floor(horizon / dt)) - 1 if np.isfinite(horizon) else 0
    if prm.dcqcn and not prm.mean_field and (cc_on & active).any():
        k = min(k, int(rp.next_inc[cc_on & active].min()) - r.step)
        if r.d.byte_counter_kb > 0:         # ... or the next byte-counter event
            on = cc_on & active & (rate > 0)
            if on.any():
                k = min(k, int(np.floor(((r.d.byte_counter_kb * KB - rp.bc_sent[on]) /
                                         (rate[on] * dt)).min())))
    if not (calm and k >= 2):
        return False
    r.snap = None
    moved = rate * k * dt
    rp.bc_sent[:] += np.where(cc_on, moved, 0.0)
    fs.unsent[:] -= moved
    fs.delivered[:] += moved
    hz, valid = paths.hz, paths.valid
    r.stats["bytes"] += np.bincount(hz[valid], weights=np.broadcast_to(
        moved[:, None], hz.shape)[valid], minlength=L + 1)
    g, alpha = prm.g, rp.alpha
    if prm.mean_field:       # alpha decays; at line rate nothing else moves
        alpha[:] = np.where(cc_on, alpha * (1 - g) ** (k / prm.alpha_steps), alpha)
    elif prm.dcqcn:          # alpha decays on every tick; decrease checks find no CNP
        end = r.step + k
        a_steps, d_steps = prm.alpha_steps, prm.dec_steps
        n_a = np.where(cc_on, np.maximum(0, -(-(end - rp.next_alpha) // a_steps)), 0)
        first = rp.alpha_flag & (n_a > 0)           # a CNP seen before the first tick
        alpha[:] = np.where(first, (1 - g) * alpha + g, alpha)
        alpha *= (1 - g) ** np.maximum(n_a - first, 0)
        rp.alpha_flag[:] &= ~first
        rp.next_alpha[:] += n_a * a_steps
        n_d = np.where(cc_on, np.maximum(0, -(-(end - rp.next_dec) // d_steps)), 0)
        rp.next_dec[:] += n_d * d_steps
    fs.carry[:] = np.roll(fs.carry, k % fs.carry.shape[0], axis=0)    # the hosts' offers
    r.step += k
    return True


def _compiled_steps(r: _Run, t) -> None:
    """The compiled steps, back here at a window's end, a change of flows or calm; then the
    samples they took and the rate trace."""
    prm, dt, tr, rp = r.prm, r.prm.dt, r.tr, r.rp
    if r.snap is None:
        n = r.win
    elif r.base is None:           # the transient, in one call
        n = r.epoch + r.transient_steps() - r.step
    else:
        n = r.win - (r.step - r.snap[0])
    due = r.last_rate_sample + RATE_SAMPLE_S - t
    if r.trace_rates and np.isfinite(due):
        n = min(n, max(1, round(due / dt)))
    if prm.fifo and r.step != r.kernel_at:   # first steps, or after a jump: restart history
        fifo_rebase(r.step, r.paths.qmask, r.paths.hz, r.fs.backlog, *r.ff)
    st = r.stats
    taken, r.why = run_steps(
        r.step, max(n, 1), True, prm, r.paths, r.links, r.fs, rp, Fifo(*r.ff), r.pf,
        Stats(st["bytes"], st["qmax"], st["qsum"], st["pause"], st["pauses"], st["marked"],
              st["dropped"], r.q_link, r.ack_load), tr)
    r.step += taken
    r.kernel_at = r.step
    r.stepped += taken
    if r.why == GROW:              # a deeper queue: twice the history, same step indexing
        n_new = min(2 * r.ff[2].shape[0], r.hist_max)
        r.ff[2] = _regrow(r.ff[2], r.step, n_new)
        r.ff[3] = _regrow(r.ff[3], r.step, n_new)
        r.prm = prm._replace(can_grow=n_new < r.hist_max)
    elif r.why == MORE_CNPS:       # more CNPs on their way back than their pool holds
        rp = r.rp = rp._replace(**_cnp_ack_pool(2 * len(rp.ack_f), rp))
    t = prm.t0 + r.step * dt
    sample, L = tr.sample, r.L
    if sample[2]:                             # queue samples taken by the compiled steps
        n_s = int(sample[2])
        r.trace_q.append((tr.tr_t[:n_s].copy(), tr.tr_q[:n_s, :L].copy(),
                          tr.tr_p[:n_s, :L].copy()))
        sample[2] = 0
    if r.trace_rates and t - r.last_rate_sample >= RATE_SAMPLE_S - 1e-12:
        r.last_rate_sample = t
        r.trace_r.append((t, rp.rc.copy(), rp.rt.copy(), rp.alpha.copy(),
                          r.fs.delivered.copy()))


def _steady_point(r: _Run) -> None:
    """Averaging windows over one set of flows; once they settle, jump over the operating
    point to where the first flow would send its last byte (within the drift bound)."""
    prm, fs, stats, paths = r.prm, r.fs, r.stats, r.paths
    dt, step, start, delivered, unsent = prm.dt, r.step, paths.start, fs.delivered, fs.unsent
    t = prm.t0 + step * dt
    unfinished = np.isnan(fs.finish)
    now_active = int(np.count_nonzero(unfinished if r.last_start <= t + 1e-15 else
                                      unfinished & (start <= t + 1e-15)))
    chg = r.tr.chg
    if r.why == CHANGED or now_active != r.n_active or chg[0] >= 0:
        r.snap = r.base = None                    # the flow set changed: start over
        r.n_active = now_active
    here = lambda: (r.step, delivered.copy(), fs.retx.copy(),   # noqa: E731
                    {k_: v.copy() for k_, v in stats.items()}, unsent.copy())
    live = unfinished & (start <= t + 1e-15)
    if r.snap is None:
        r.snap = here()
        # where this set of flows (or this operating point) began: a completion the
        # compiled steps went on from, or now
        r.epoch = step if chg[0] < 0 else int(chg[0])
        if step - r.epoch >= r.transient_steps():    # ... and its transient ran there too
            r.base = r.snap
            r.marks, r.totals = [r.base], [delivered[live].sum()]
        return
    if r.base is None:
        # a window of transient, more at the start (averages from there on)
        if step - r.epoch >= r.transient_steps():
            r.base = r.snap = here()
            r.marks, r.totals = [r.base], [delivered[live].sum()]
        return
    if step - r.snap[0] < r.win:
        return
    r.marks.append(here())
    r.totals.append(delivered[live].sum())
    k, rec = _jump_steps(r, live, t)
    if k >= r.win:
        _jump(r, k, rec)
    r.snap = here()


def _jump_steps(r: _Run, live, t) -> tuple[int, tuple | None]:
    """Steps the settled windows allow a jump over (to where the first flow would send its
    last byte, at most the drift bound, short of the next arrival), and the later half's
    rates: delivery, retransmission and the per-link sums."""
    fs, stats, marks = r.fs, r.stats, r.marks
    delivered, unsent, step = fs.delivered, fs.unsent, r.step
    k, rec = 0, None
    # a jump needs room: at the last window's rates no flow finishes within a window
    last = (delivered - marks[-2][1]) / max(step - marks[-2][0], 1)
    n_set = _settled_windows(marks, r.totals, live, r.kmin_q) \
        if (r.jumps and live.any() and (unsent[live] > 0).all()
            and (unsent[live] >= r.win * last[live]).all()) else 0
    if n_set:
        span = marks[-1 - n_set:]         # the settled windows, and their later half
        mid = span[len(span) // 2]
        h = step - mid[0]
        rec = ((delivered - mid[1]) / h, (fs.retx - mid[2]) / h,
               {k_: (stats[k_] - mid[3][k_]) / h for k_ in stats})
        if (rec[0][live] > 0).all():
            k = int(np.floor((unsent[live] / rec[0][live]).min())) - 1
            # whole steps: the drift bound is a float, the DCQCN timers int64
            k = min(k, int(max(JUMP_SPAN_FACTOR * (step - span[0][0]), _drift_bound(
                span, step, delivered, stats["qsum"], live, r.kmin_q))))
    start = r.paths.start
    nxt = start[np.isnan(fs.finish) & (start > t)]
    if len(nxt):
        k = min(k, int(np.floor((nxt.min() - r.prm.t0) / r.prm.dt)) - step - 1)
    return k, rec


def _jump(r: _Run, k: int, rec: tuple) -> None:
    """Jump ``k`` steps over an operating point. What enters the fabric leaves it: both ends
    move at the later half's delivery rate, so the bytes in flight are conserved; timers and
    the frames / CNPs on their way shift with the clock."""
    fs, rp, pf, stats, hz, valid = r.fs, r.rp, r.pf, r.stats, r.paths.hz, r.paths.valid
    moved = np.minimum(rec[0] * k, fs.unsent)
    fs.unsent[:] -= moved
    fs.delivered[:] += moved
    fs.retx[:] += rec[1] * k
    stats["bytes"] += np.bincount(hz[valid], weights=np.broadcast_to(
        moved[:, None], hz.shape)[valid], minlength=r.L + 1)
    for k_ in ("qsum", "pause", "pauses", "marked", "dropped"):
        stats[k_] += rec[2][k_] * k
    big = np.iinfo(np.int64).max
    for timer in (rp.next_alpha, rp.next_dec, rp.next_inc):
        timer[timer < big] += k
    fs.last_gbn[:] += k
    ring = r.prm.ring
    rp.cnp[:] = np.roll(rp.cnp, k % ring, axis=0)
    rp.haz[:] = np.roll(rp.haz, k % ring, axis=0)
    rp.pend[rp.pend >= r.step] += k
    pf.pz[:] = np.roll(pf.pz, k % pf.pz.shape[0], axis=0)
    fs.carry[:] = np.roll(fs.carry, k % fs.carry.shape[0], axis=0)    # the bytes on the wires
    r.step += k
    r.steady_jumps += 1
    r.base = None
    r.epoch = r.step


def _result(finish, retx, stats, step, steady_jumps, dt, L, trace_links, ack_done, trace_q,
            trace_r, payload: float = 1.0) -> FluidResult:
    """The run's result: per-link statistics, and the traces (frames only with ``trace_r``,
    the rate samples, not None; else the queue trace as arrays in ``queue_samples``). Queues
    are reported in wire bytes, as a switch counts them (the model's are payload bytes, the
    ``payload`` fraction of a wire byte)."""
    F = len(finish)
    wire = 1.0 / payload
    traces = trace_r is not None
    span = max(step, 1)
    hot = np.argsort(-stats["qmax"][:L], kind="stable")[:trace_links]
    hot = hot[stats["qmax"][hot] > 0]
    ts = np.concatenate([x[0] for x in trace_q]) if trace_q else np.zeros(0)
    qs = np.concatenate([x[1] for x in trace_q]) * wire if trace_q else np.zeros((0, L))
    ps = np.concatenate([x[2] for x in trace_q]) if trace_q else np.zeros((0, L), bool)
    queue_trace = pause_trace = rate_trace = None
    queue_samples = (ts, hot, qs[:, hot])
    if traces:
        queue_trace = pd.DataFrame({"t_s": np.repeat(ts, len(hot)),
                                    "link": np.tile(hot, len(ts)).astype(int),
                                    "queue_bytes": qs[:, hot].ravel().astype(float)})
        most = np.argsort(-stats["pause"][:L], kind="stable")[:PAUSE_TRACE_LINKS]
        most = most[stats["pause"][most] > 0]
        pause_trace = pd.DataFrame({"t_s": np.repeat(ts, len(most)),
                                    "link": np.tile(most, len(ts)).astype(int),
                                    "paused": ps[:, most].ravel().astype(int)})
        rate_trace = pd.DataFrame([(t, f, r[f] * 8, g[f] * 8, a[f], b[f])
                                   for t, r, g, a, b in trace_r for f in range(F)],
                                  columns=["t_s", "flow", "rate_bps", "target_rate_bps",
                                           "alpha", "delivered_bytes"])
    return FluidResult(finish_s=finish, link_bytes=stats["bytes"][:L],
                       link_max_queue=stats["qmax"][:L] * wire,
                       link_mean_queue=stats["qsum"][:L] * wire / span,
                       link_queue_byte_s=stats["qsum"][:L] * wire * dt,
                       steady_jumps=steady_jumps,
                       link_pause_s=stats["pause"][:L], link_pauses=stats["pauses"][:L],
                       link_marked_bytes=stats["marked"][:L],
                       link_dropped_bytes=stats["dropped"][:L], flow_retransmitted_bytes=retx,
                       queue_trace=queue_trace, rate_trace=rate_trace, pause_trace=pause_trace,
                       steps=step, queue_samples=queue_samples, ack_s=ack_done)


def _regrow(ring: np.ndarray, step: int, n_new: int) -> np.ndarray:
    """The last len(ring) steps of a history indexed by step % len, re-indexed by step % n_new."""
    n_old = ring.shape[0]
    out = np.zeros((n_new,) + ring.shape[1:])
    steps = np.arange(step - n_old, step)
    out[steps % n_new] = ring[steps % n_old]
    return out


def _settled_windows(marks, totals, live, kmin) -> int:
    """How many of the latest averaging windows (``marks``: one snapshot at the start and at
    the end of each; ``totals``: what the live flows had delivered at each) form a settled
    operating point, 0 if none: the longest of all of them,
    their latest three quarters or latest half (at least TREND_MIN_WINDOWS) in which
    :func:`_moving` finds nothing moving. Dropping the earliest windows drops what is left of a
    transient (flows starting together at line rate take a few windows to settle)."""
    n_all = len(marks) - 1
    if n_all < TREND_MIN_WINDOWS:
        return 0
    steps = np.array([m_[0] for m_ in marks], float)
    total = np.diff(totals) / np.diff(steps)
    candidates = [n for n in dict.fromkeys((n_all, (3 * n_all) // 4, n_all // 2))
                  if n >= TREND_MIN_WINDOWS and _total_settled(total[-n:])]
    if not candidates:                   # the cheap test first: the component's total rate
        return 0
    series = (steps,
              np.stack([m_[1] for m_ in marks])[:, live],           # delivered
              -np.stack([m_[4] for m_ in marks])[:, live],          # sent (minus what is left)
              np.stack([m_[3]["bytes"] for m_ in marks]),
              np.stack([m_[3]["qsum"] for m_ in marks]))
    for n in candidates:
        if not _moving(*(x[-1 - n:] for x in series), kmin):
            return n
    return 0


def _total_settled(total) -> bool:
    """The component's total delivery rate over windows is settled: its halves agree within
    TOTAL_STEADY_TOL (no allowance for scatter: the sum over flows is smooth, and a start-up
    that is still settling shows in it) and its windows within TOTAL_SCATTER_TOL (a start-up
    oscillating from window to window has halves that agree, at a level below the operating
    point's)."""
    h = len(total) // 2
    mean = total.mean()
    return (abs(total[h:].mean() - total[:h].mean()) <= TOTAL_STEADY_TOL * mean
            and total.std() <= TOTAL_SCATTER_TOL * mean)


def _moving(steps, delivered, sent, link_bytes, qsum, kmin) -> bool:
    """Whether the fabric is still moving over the averaging windows between the snapshots
    (at ``steps``: delivered and sent bytes per live flow, cumulative bytes and queue sums per
    link): the earlier and the later half of the windows differ, beyond their tolerance plus
    TREND_Z standard errors of the difference (estimated from the windows' own scatter), in

    * the component's total delivery rate (:func:`_total_settled`);
    * a live flow's delivery rate (STEADY_TOL of it);
    * a live flow's bytes in flight (STEADY_TOL of what it delivers in a window): the hosts
      send what arrives, so the jump, which moves both at one rate, conserves them;
    * a link's throughput (STEADY_TOL);
    * a link's mean queue (QUEUE_STEADY_TOL of it or of Kmin, whichever is larger: below Kmin
      nothing is marked).

    DCQCN's random cuts and its sawtooth make single windows noisy; a trend (a rate still
    climbing after a competitor left, a queue still filling) moves the halves apart beyond
    that scatter."""
    span = np.diff(steps)[:, None]
    rate = np.diff(delivered, axis=0) / span          # [window, flow] bytes per step
    n = len(rate)
    h = n // 2
    if not _total_settled(rate.sum(axis=1)):
        return True
    in_flight = (sent - delivered)[1:]
    link_rate = np.diff(link_bytes, axis=0) / span
    queue = np.diff(qsum, axis=0) / span
    for x, tol in ((rate, STEADY_TOL * rate.mean(axis=0)),
                   (in_flight, STEADY_TOL * rate.mean(axis=0) * span.mean()),
                   (link_rate, STEADY_TOL * link_rate.mean(axis=0) + 1.0),
                   (queue, QUEUE_STEADY_TOL * np.maximum(queue.mean(axis=0), kmin))):
        se = x.std(axis=0, ddof=1) * np.sqrt(1 / h + 1 / (n - h))
        if (np.abs(x[h:].mean(axis=0) - x[:h].mean(axis=0)) > tol + TREND_Z * se).any():
            return True
    return False


def _drift_bound(marks, step, delivered, qsum, live, kmin) -> float:
    """Steps over which the last two windows' drift stays within STEADY_TOL: the largest
    relative change, window to window, of a live flow's delivery rate or a link's mean queue
    (against Kmin, as in :func:`_moving`), extrapolated linearly. A settled mean-field
    operating point barely moves, so it can be jumped to its next completion; a noisy or
    oscillating one moves a lot and keeps the JUMP_SPAN_FACTOR bound."""
    if len(marks) < 3:                   # marks[-1] is now
        return 0.0
    (s0, d0, _, st0, _), (s1, d1, _, st1, _) = marks[-3], marks[-2]
    w0, w1 = s1 - s0, step - s1
    if w0 <= 0 or w1 <= 0:
        return 0.0
    r0, r1 = (d1 - d0)[live] / w0, (delivered - d1)[live] / w1
    q0, q1 = (st1["qsum"] - st0["qsum"]) / w0, (qsum - st1["qsum"]) / w1
    drift = max(np.max(np.abs(r1 - r0) / np.maximum(r1, 1e-30), initial=0.0),
                np.max(np.abs(q1 - q0) / np.maximum(q1, kmin), initial=0.0))
    return w1 * STEADY_TOL / max(drift, 1e-12)


def _host_scale(want: np.ndarray, hz: np.ndarray, leading: np.ndarray, cap: np.ndarray,
                L: int) -> np.ndarray:
    """What leaves the hosts: flows share each host-side link max-min fairly, each capped at
    its demand (:func:`max_min_share`; the compiled step's :func:`kernel._host_share`)."""
    out = want
    for k in range(hz.shape[1]):
        on = leading[:, k]
        if not on.any():
            break
        out = np.where(on, max_min_share(out, hz[:, k], np.append(cap, np.inf), on), out)
    return out


def max_min_share(want: np.ndarray, link: np.ndarray, cap: np.ndarray,
                  on: np.ndarray) -> np.ndarray:
    """[flow] what each flow ``on`` a link gets of ``cap[link]``: its demand ``want`` where
    the link carries all its flows want, else the water level (the equal share of what the
    flows below it leave), capped at its demand. Off ``on``: ``want``."""
    idx = np.flatnonzero(on)
    order = idx[np.lexsort((want[idx], link[idx]))]
    w, ln = want[order], link[order]
    first = np.r_[True, ln[1:] != ln[:-1]]
    start = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    size = np.diff(np.r_[start, len(order)])
    cum = np.cumsum(w)
    before = cum - w - np.r_[0.0, cum[start[1:] - 1]][group]      # this link's smaller demands
    left = size[group] - (np.arange(len(order)) - start[group])    # flows from here on
    level = (cap[ln] - before) / left
    over = w > level
    lam = np.full(len(start), np.inf)
    g_over, at = np.unique(group[over], return_index=True)          # the first over the level
    lam[g_over] = level[over][at]
    out = want.copy()
    out[order] = np.minimum(w, lam[group])
    return out


def _first_queue_rate(share: np.ndarray, hz, hop_queue, valid, cap, L, dt) -> np.ndarray:
    """Per-flow rate through the queued hops when nothing is queued: each switch egress
    splits its capacity in proportion to demand (used only to size a jump)."""
    rate = share.copy()
    for k in range(hz.shape[1]):
        on = hop_queue[:, k] & valid[:, k]
        if not on.any():
            continue
        lk = hz[:, k]
        total = np.bincount(lk[on], weights=rate[on], minlength=L + 1)
        scale = np.minimum(1.0, np.append(cap / dt, np.inf) / np.maximum(total, 1e-30))
        rate = np.where(on, rate * scale[lk], rate)
    return rate
