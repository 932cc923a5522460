"""The DCQCN / PFC fluid model: fairness, incast with and without PFC, victims, and the
packet-level reference (../shared/validation/ns3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.config.topology import topology_spec
from simulator.congestion.fixed_point import dcqcn_fixed_point
from simulator.errors import FabricError
from simulator.network.build import make_fabric
from simulator.network.flowfile import run_flow_file
from topologies.gpus import load_gpu
from tests.conftest import VALIDATION
from validation.dcqcn import ZHU_2016, bottleneck, fairness_table, fixed_point_table, throughput
from validation.ns3 import REFERENCE, network, run, s1_table, star

NS3 = VALIDATION / "ns3"


def net(**over):
    return network(**over)


def test_incast_with_pfc_pauses_upstream_and_slows_a_victim_without_drops():
    """16 -> 1 incast into a 2 MiB switch, plus a victim flow from one of the senders to an idle
    host (it never crosses the hot port, only the sender's uplink) and a bystander between two
    other idle hosts (it shares no port with the incast)."""
    n, buf = 16, 2
    f = star(n + 4, buffer_mib=buf)
    src = np.append(np.arange(n), [0, n + 2])
    dst = np.append(np.full(n, n), [n + 1, n + 3])
    size = np.append(np.full(n, 4e6), [4e6, 4e6])
    alone, _ = run(f, [0, n + 2], [n + 1, n + 3], 4e6, net(), buffer_mib=buf)
    lossless, links = run(f, src, dst, size, net(), buffer_mib=buf)
    up = links[links.link.str.startswith("nic") & links.link.str.contains("->leaf")]
    assert links.dropped_bytes.sum() == 0 and (up.pause_s > 0).sum() >= n // 2
    victim, victim_alone = lossless.fct_s.iloc[-2], alone.fct_s.iloc[0]
    assert victim > 1.1 * victim_alone                             # PFC's victim
    lossy, lossy_links = run(f, src, dst, size, net(pfc=False), buffer_mib=buf)
    assert lossy_links.pause_s.sum() == 0
    assert lossy_links.dropped_bytes.sum() > 0 and lossy.retransmitted_bytes.sum() > 0
    # lossy, the switch's ingress admission drops what the victim's port brings beyond the
    # port's threshold and headroom, the victim's bytes with the incast's (as the packet-level
    # reference does: validation/ns3_suite, lossy-cascade-3MiB); the bystander keeps its rate
    assert lossy.retransmitted_bytes.iloc[-2] > 0
    assert lossy.retransmitted_bytes.iloc[-1] == 0
    assert lossy.fct_s.iloc[-1] == pytest.approx(alone.fct_s.iloc[1], rel=0.02)
    pfc_only_flows, pfc_only = run(f, src, dst, size, net(congestion_control="none"),
                                   buffer_mib=buf)
    assert pfc_only.pause_s.sum() > 3 * links.pause_s.sum()       # DCQCN cuts pause time
    assert pfc_only_flows.fct_s.iloc[-2] > 5 * victim_alone       # and spares the victim


@pytest.fixture(scope="module")
def s1():
    if not (NS3 / "S1_incast_flows.csv").exists():
        pytest.skip(f"{NS3} not present")
    return s1_table(NS3)


def test_s1_incast_completion_times_within_10_percent_of_ns3(s1):
    assert s1.fct_err.abs().max() < 0.10, s1[["variant", "N", "fct_err"]]
    assert s1.makespan_err.abs().max() < 0.10, s1[["variant", "N", "makespan_err"]]


def test_s1_bottleneck_queue_peaks_within_a_factor_of_1_5(s1):
    assert ((s1.queue_ratio > 1 / 1.5) & (s1.queue_ratio < 1.5)).all(), \
        s1[["variant", "N", "max_queue_mb", "ref_max_queue_mb"]]


def test_s1_pauses_only_where_the_reference_pauses(s1):
    big = s1[s1.variant != "buf4MB"]
    assert (big.pauses == 0).all() and (big.ref_pauses == 0).all()
    small = s1[(s1.variant == "buf4MB") & (s1.N >= 8)]
    assert (small.pauses > 0).all() and (small.ref_pauses > 0).all()


def test_s1_pause_time_within_15_percent_where_the_reference_pauses(s1):
    """4 MiB, 8 and 16 senders: the senders' paused time per run within 15 % of the
    reference's (-1 % and +4 %: 107 against 108 us, 1,843 against 1,771) and PAUSE frames
    within 25 % (10.9 against 11.4; 84 against 69). While a CNP came back a whole round trip
    after its mark, the 16 senders drew 101 frames at the 0.25 us step (shorter stops, 18 us
    against the packets' 26); while a port's headroom bytes counted as shared-buffer use,
    every other port's dynamic threshold sat lower and they drew 107 at 1 us."""
    small = s1[(s1.variant == "buf4MB") & (s1.N >= 8)]
    time_ratio = small.pause_us / small.ref_pause_us
    assert time_ratio.between(1 / 1.15, 1.15).all(), small[["N", "pause_us", "ref_pause_us"]]
    ratio = small.pauses / small.ref_pauses
    assert ratio.between(1 / 1.25, 1.25).all(), small[["N", "pauses", "ref_pauses"]]


def test_nccl_tests_under_dcqcn_never_beat_ideal_sharing_and_move_the_same_bytes():
    from simulator.config.topology import topology_spec
    from simulator.network.build import make_fabric
    from simulator.network.collectives import run_collective
    from topologies.gpus import load_gpu

    f = make_fabric(topology_spec("{kind: spine-leaf, hosts_per_leaf: 8, spines: 4, "
                                  "nic_gbps: 400}"), gpus=64, gpus_per_node=8,
                    gpu=load_gpu("h100-sxm"))
    cfg = network(mtu_bytes=4096, header_bytes=62)
    for kind in ("all_reduce", "all_gather"):
        ideal = run_collective(f, kind, [np.arange(64)], 64 * 2**20)
        fluid = run_collective(f, kind, [np.arange(64)], 64 * 2**20, net=cfg)
        assert ideal.time_s <= fluid.time_s * 1.01 < 2 * ideal.time_s
        assert fluid.link_bytes.sum() == pytest.approx(ideal.link_bytes.sum(), rel=1e-6)


@pytest.mark.parametrize("pfc", [True, False])
def test_multi_tier_incast_finishes_every_flow_and_pauses_spread_upstream(pfc):
    """Two leaves, 12 senders on leaf 0 and 4 on leaf 1 into one host on leaf 1: every flow
    completes, no faster than the port's line rate allows (lossless, or lossy DCQCN after
    retransmissions); with PFC the pauses reach the spine links."""
    from simulator.config.topology import topology_spec
    from simulator.network.build import make_fabric
    from topologies.gpus import load_gpu

    buf = 1 if pfc else 4      # lossy on 1 MiB collapses (test_lossy_collapse_is_reported)
    f = make_fabric(topology_spec("{kind: spine-leaf, leaves: 2, spines: 2, hosts_per_leaf: 16, "
                                  f"nic_gbps: 100, buffer_mib: {buf}}}"), gpus=32,
                    gpus_per_node=1, gpu=load_gpu("h100-sxm"))
    src = np.r_[np.arange(12), np.arange(16, 20)]
    flows, links = run(f, src, 31, 1e6,
                       network(pfc=pfc, congestion_control="none" if pfc else "dcqcn"),
                       buffer_mib=buf)
    assert flows.finish_s.notna().all() and (flows.fct_s > 0).all()
    assert flows.finish_s.max() >= 16e6 / (100e9 / 8 * 1000 / 1048)
    if pfc:
        assert links.dropped_bytes.sum() == 0
        spine = links[links.link.str.startswith("spine") & (links.pause_s > 0)]
        assert len(spine) > 0
    else:
        assert links.dropped_bytes.sum() > 0 and flows.retransmitted_bytes.sum() > 0


def test_lossy_collapse_is_reported():
    """2 -> 1 without PFC on one 12-port switch with 2 MiB: each ingress port may hold its
    threshold and headroom (~190 KB), below ECN Kmin (400 KB), so nothing marks, DCQCN never
    slows the senders and go-back-N resends a round trip per loss. The packet-level reference
    takes 115 ms for two 4 MB flows there (668 us with PFC; validation/ns3_suite/README.md);
    the fluid makes no progress and stops with an error naming the cause, instead of running
    its 20 s cap. With PFC the same flows finish as the port's line rate allows."""
    f = star(12, buffer_mib=2)
    lossless, _ = run(f, [0, 11], [1, 1], 4e6, net(), buffer_mib=2)
    assert lossless.fct_s.max() == pytest.approx(8e6 / (100e9 / 8 * 1000 / 1048), rel=0.05)
    with pytest.raises(FabricError, match="lossy fabric collapsed.*Kmin 400 KB"):
        run(f, [0, 11], [1, 1], 4e6, net(pfc=False), buffer_mib=2)


def test_the_byte_counter_speeds_recovery_after_competitors_leave():
    """Three short flows and one long one into a host: once the short ones finish, the long
    flow climbs back by increase events; a byte counter (ConnectX rpg_byte_reset) adds events
    every so many bytes, so the smaller it is the sooner the long flow ends."""
    f = star(5)
    size = np.array([2e6, 2e6, 2e6, 20e6])
    end = {bc: run(f, np.arange(4), 4, size, net(dcqcn={"byte_counter_kb": bc}))[0]
           .fct_s.iloc[-1] for bc in (0, 1000, 32.767)}
    assert end[32.767] < end[1000] < end[0]
    alone = run(f, [3], [4], 20e6, net())[0].fct_s.iloc[0]
    assert end[32.767] > alone



@pytest.mark.parametrize("n", [2, 4, 8, 16, 32, 64])
def test_mean_field_flows_converge_to_the_fair_share_within_5_percent_in_5_ms(n):
    """N flows start together at line rate into one 100 Gb/s port (reference parameters): the
    initial incast cuts every rate far below C / N, and within 5 ms the expected dynamics have
    brought every flow back to within 5 % of C / N (delivered bytes over 4-5 ms)."""
    t = fairness_table([n])
    assert t.min_share.iloc[0] > 0.95 and t.max_share.iloc[0] < 1.05, t


@pytest.mark.parametrize("n", [2, 4, 8])
def test_mean_field_staggered_flows_converge_to_fairness(n):
    """Flows join one by one over 1 ms, each at line rate (Zhu et al.'s setting, 40 Gb/s):
    multiplicative decrease in proportion to marks (more packets, more marks) and rate-blind
    increase bring them together; every flow is within 5 % of C / N by 20 ms."""
    res, cap, _ = bottleneck(n, net(**ZHU_2016), 0.02, nic_gbps=40, stagger_s=1e-3 / n, spare=2)
    late = throughput(res, 0.019, 0.020) / (cap / n)
    assert np.all(np.abs(late - 1) < 0.05), late


def test_fifo_queue_serves_in_arrival_order():
    """Flow 0 fills a port alone, flow 1 joins at 100 us (no DCQCN reaction, no PFC): the queue
    they build is served in arrival order, so flow 0's last byte leaves once the bytes ahead of
    it have, not when flow 1 has drained too (as sharing the backlog would have it). Every byte
    is served at line rate, so the pair ends as one 8 MB transfer would."""
    from simulator.congestion.fluid import simulate_fluid
    from simulator.network.fabric import switch_buffers, switch_ids

    f = star(3)
    hops, _, _ = f.route(np.array([0, 1]), np.array([2, 2]), np.arange(2), "ecmp")
    src_sw, dst_sw, _ = switch_ids(f)
    cfg = net(ecn={"kmin_kb": 1e5, "kmax_kb": 2e5, "pmax": 0.1}, pfc=False)
    args = (hops, np.array([4e6, 4e6]), f.capacity, f.latency, src_sw, dst_sw,
            switch_buffers(f), cfg)
    fifo = simulate_fluid(*args, start=np.array([0, 100e-6]), seed=1)
    shares = simulate_fluid(*args, start=np.array([0, 100e-6]), seed=1, fifo=False)
    payload = f.capacity[hops[0, 0]] * 1000 / 1048
    one = 8e6 / payload
    assert fifo.finish_s.max() == pytest.approx(one, rel=0.01)
    assert shares.finish_s.max() == pytest.approx(one, rel=0.01)
    # flow 0 sent 4 MB by ~(100 us alone + the rest at half rate); FIFO frees it well before
    assert fifo.finish_s[0] < 0.9 * shares.finish_s[0]
    assert shares.finish_s[0] == pytest.approx(shares.finish_s[1], rel=0.01)


def test_a_queue_busy_from_the_first_step_keeps_fifo_order():
    """Both flows start at once at line rate into one port, which never empties while the
    long one lasts: the queue holds their bytes half and half in arrival order, so the short
    flow's last byte leaves once twice its size has been served. (Its FIFO history used to
    start as lost at step 0, so its last bytes left in backlog shares, exponentially slowly,
    behind the long flow: 0.5 MB took ~0.4 ms instead of 84 us.)"""
    from simulator.congestion.fluid import simulate_fluid
    from simulator.network.fabric import switch_buffers, switch_ids

    f = star(3)
    hops, _, _ = f.route(np.array([0, 1]), np.array([2, 2]), np.arange(2), "ecmp")
    src_sw, dst_sw, _ = switch_ids(f)
    cfg = net(ecn={"kmin_kb": 1e5, "kmax_kb": 2e5, "pmax": 0.1}, pfc=False)
    res = simulate_fluid(hops, np.array([0.5e6, 4e6]), f.capacity, f.latency, src_sw, dst_sw,
                         switch_buffers(f), cfg, start=np.zeros(2), seed=1)
    payload = f.capacity[hops[0, 0]] * 1000 / 1048
    assert res.finish_s[0] == pytest.approx(2 * 0.5e6 / payload, rel=0.05)
    assert res.finish_s[1] == pytest.approx(4.5e6 / payload, rel=0.02)


def test_mean_field_queue_settles_at_the_fixed_point_of_the_fluid_equations():
    """Zhu et al.'s setting: after 150 ms the bottleneck queue is flat and equals the fixed
    point solved from the equations alone, and every flow sends C / N."""
    t = fixed_point_table((2, 4, 8))
    assert not t.at_kmax.any()
    assert ((t.queue_max_kb - t.queue_min_kb) < 0.01 * t.fixed_point_kb).all()     # settled
    assert t.error.abs().max() < 0.02, t
    for r in t.itertuples():
        assert r.rates_bps == pytest.approx(np.full(r.N, 40e9 * 1000 / 1048 / r.N), rel=1e-3)


def test_fixed_point_queue_grows_with_n_and_hits_the_red_cliff():
    """More flows need more marks per flow-packet to hold each at C / N: the fixed-point queue
    rises with N (Zhu et al., Fig. 5) until p would pass Pmax and the queue sits at Kmax."""
    cfg = net(**ZHU_2016)
    fps = [dcqcn_fixed_point(n, 40e9 / 8, cfg) for n in (2, 4, 8, 16, 64)]
    qs = [fp.queue_bytes for fp in fps]
    assert qs == sorted(qs) and qs[0] > 5e3
    assert fps[-1].at_kmax and qs[-1] == pytest.approx(200e3)
    for fp in fps:
        assert fp.target_rate_bps > fp.rate_bps and 0 < fp.alpha < 1


def test_a_mark_reaches_the_sender_only_after_its_packet_reaches_the_receiver(monkeypatch):
    """Causality of ECN: a switch marks a packet as it leaves the queue, the receiver echoes
    the mark, so no CNP can reach a sender before its first bytes have reached the receiver.
    On the suite's cascade fabric three hosts of leaf 0 fill leaf0 -> host0 from t = 0; at
    30 us four hosts of leaf 1 start to host 0 and congest their leaf's one uplink, which
    marks them at once, but their packets then wait behind leaf0 -> host0's queue (tens of
    us). Their first rate cut must come after their first delivery. (Before marks waited
    behind the queues after theirs, the cut came 26-38 us before any byte arrived.)"""
    from simulator.congestion import fluid
    from simulator.network.fabric import switch_buffers, switch_ids
    from validation.ns3_suite import CASES

    monkeypatch.setattr(fluid, "RATE_SAMPLE_S", 1e-6)
    case = CASES["cascade-4MiB"]
    f = case.fabric(1)
    src = np.arange(1, 8)
    hops = f.route(src, np.zeros(7, np.int64), np.arange(7), "ecmp")[0]
    src_sw, dst_sw, _ = switch_ids(f)
    start = np.where(src >= 4, 30e-6, 0.0)
    res = fluid.simulate_fluid(hops, np.full(7, 2e6), f.capacity, f.latency, src_sw, dst_sw,
                               switch_buffers(f, 4), case.net(), start=start, seed=1,
                               reverse=f.reverse_links())
    rt = res.rate_trace
    for flow in range(7):
        r = rt[rt.flow == flow]
        first_cut = r.t_s[r.rate_bps < 0.99 * r.rate_bps.max()].min()
        first_delivered = r.t_s[r.delivered_bytes > 0].min()
        assert first_cut >= first_delivered, flow
    late = rt[rt.flow >= 3]
    # and the leaf-1 senders were cut at all (their uplink marks them)
    assert (late.groupby("flow").rate_bps.min() < 0.5 * late.rate_bps.max()).all()


@pytest.mark.parametrize("dt", [1e-6, 0.5e-6, 0.25e-6])
def test_a_longer_cable_lets_more_bytes_in_after_xoff_at_every_step(dt):
    """PFC alone, 4 -> 1 at line rate into a 1 MiB switch. After XOFF a sender keeps sending
    until the PAUSE crosses its cable, and what it sent is still on the wire: each paused port
    takes about 2 x latency x line rate more. Cables of 3 us instead of 1 us add 4 x 2 x 2 us
    x 12.5 GB/s = 200 KB to the peak; at least half of it at every step (a byte crossing a
    cable in one step whatever its length added 50-90 KB), and the lone flow's FCT grows by
    the 4 us of cable its path gained, to the step. (The ports' headroom is held at the 1 us
    cable's here: sized from the cable, as by default, it would also lower the threshold.)"""
    frame = pd.DataFrame({"src_gpu": [0, 1, 2, 3], "dst_gpu": 4, "bytes": 4e6, "start_s": 0.0})
    peak, alone = {}, {}
    for lat in (1, 3):
        fabric = make_fabric(topology_spec(
            f"{{kind: spine-leaf, leaves: 1, spines: 0, hosts_per_leaf: 5, nic_gbps: 100, "
            f"link_latency_us: {lat}, buffer_mib: 1}}"), gpus=5, gpus_per_node=1,
            gpu=load_gpu("h100-sxm"))
        # the headroom held at the 1 us cable's, so that only the bytes in flight move
        cfg = net(congestion_control="none", pfc_threshold={**REFERENCE["pfc_threshold"],
                                                           "headroom_kb": 37.5})
        _, links = run_flow_file(frame, fabric, net=cfg, buffer_mib=1, seed=1, dt=dt)
        one, _ = run_flow_file(frame.head(1), fabric, net=cfg, buffer_mib=1, seed=1, dt=dt)
        peak[lat], alone[lat] = links.max_queue_bytes.max(), one.fct_s.iloc[0]
    assert links.pause_s.sum() > 0
    assert peak[3] - peak[1] >= 0.5 * 4 * 2 * 2e-6 * 100e9 / 8
    assert alone[3] - alone[1] == pytest.approx(4e-6, abs=dt)


@pytest.mark.parametrize("dt", [1e-6, 0.5e-6, 0.25e-6])
def test_a_flow_that_shares_nothing_finishes_as_alone_at_every_step(dt):
    """Two flows share a sender's NIC; a third shares no link with them. Its FCT is its line-
    rate serialization plus its path's latency whatever the others do, at every step (its
    last bytes on the host-side cable are not a steady offer: a jump over the others' long
    tail must wait for them)."""
    fabric = make_fabric(topology_spec(
        "{kind: spine-leaf, leaves: 3, spines: 1, hosts_per_leaf: 4, oversubscription: 4, "
        "nic_gbps: 100, link_latency_us: 1, buffer_mib: 4}"), gpus=12, gpus_per_node=1,
        gpu=load_gpu("h100-sxm"))
    frame = pd.DataFrame({"src_gpu": [8, 5, 5], "dst_gpu": [1, 9, 7], "bytes": 2e6,
                          "start_s": 0.0})
    cfg = net(ack_bytes=0)
    flows, _ = run_flow_file(frame, fabric, net=cfg, buffer_mib=4, seed=1, dt=dt)
    alone, _ = run_flow_file(frame.head(1), fabric, net=cfg, buffer_mib=4, seed=1, dt=dt)
    wire = 2e6 * (cfg.mtu_bytes + cfg.header_bytes) / cfg.mtu_bytes / (100e9 / 8)
    assert flows.fct_s.iloc[0] == pytest.approx(alone.fct_s.iloc[0], abs=dt)
    assert alone.fct_s.iloc[0] == pytest.approx(wire + 4e-6, abs=2 * dt)
    assert flows.fct_s.iloc[1:].min() > 1.9 * wire                 # the NIC's two halves


def test_a_failed_link_sets_no_speed_class():
    """Speed classes count over the NICs' working links: a failed (0 B/s) NIC link leaves a
    400 Gb/s uplink over 100 Gb/s NICs two doublings up (alpha x4, a quarter step), where
    dividing by its zero made every port infinitely fast and the step zero."""
    from simulator.config.network import NetworkConfig
    from simulator.congestion.fluid import FLUID_STEP_S, flows_step, port_alpha

    cap = np.array([0.0, 12.5e9, 50e9])            # failed NIC, NIC, uplink (bytes/s)
    src, dst = np.array([-1, -1, 0]), np.array([0, 0, 1])
    assert flows_step(cap, src, dst) == pytest.approx(FLUID_STEP_S / 4)
    alpha = port_alpha(cap, src, dst, NetworkConfig())
    assert alpha[1] == pytest.approx(0.125) and alpha[2] == pytest.approx(0.5)


def _growth_run(rises: list[float | None], gain: float):
    """``kernel._track_growth`` over a queue's steps: each entry what it held after that step,
    None a step it sat empty off the active list. Returns the kernel's state."""
    from collections import namedtuple
    from simulator.congestion.kernel import _track_growth
    P = namedtuple("P", "avail_gain")(gain)
    pf = namedtuple("Growth", "grow grow_w left_prev left_step")(
        np.zeros(1), np.zeros(1), np.zeros(1), np.full(1, -2, np.int64))
    for step, left in enumerate(rises, start=40):     # the queue first holds bytes at step 40
        if left is not None:
            _track_growth(step, P, pf, 0, left)
    return pf


@pytest.mark.parametrize("n", [1, 4, 30, 400])
def test_a_queues_growth_is_its_average_over_the_history_it_has(n):
    """A queue filling at a steady 3 KB a step from when it first holds bytes grows 3 KB a
    step, whatever the averaging window: the average is over the steps the queue has been
    seen (an average that counted the steps before as still would read 3 KB x (1 - (1 - g)^n),
    a tenth of it after four steps at g = 1/80, and the marks made then would be fed back as
    if the queues after them stopped growing). The steps it later sits empty count as
    steps it did not grow."""
    g = 1 / 80
    pf = _growth_run([3e3 * (i + 1) for i in range(n)], g)
    assert pf.grow[0] / pf.grow_w[0] == pytest.approx(3e3, rel=1e-12)
    assert pf.grow[0] == pytest.approx(3e3 * (1 - (1 - g) ** n), rel=1e-12)
    idle = _growth_run([3e3 * (i + 1) for i in range(n)] + [None] * 80 + [0.0], g)
    assert idle.grow[0] / idle.grow_w[0] < 3e3 * (1 - g) ** 80


def _kernel_host_share(want: np.ndarray, link: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """``kernel._host_share`` on one host-side hop: flows offering ``want`` on ``link`` of
    capacity ``cap[link]``."""
    from collections import namedtuple
    from simulator.congestion.kernel import _host_share
    n, L1 = len(want), len(cap)
    path = namedtuple("Path", "hz")(link.reshape(-1, 1).astype(np.int64))
    a = namedtuple("Act", "act n_act n_lead")(np.arange(n, dtype=np.int64), n,
                                              np.ones(n, np.int64))
    sc = namedtuple("Sc", "flow_in total fill_left fill_n cap_now")(
        want.astype(float).copy(), np.zeros(L1), np.zeros(L1), np.zeros(L1),
        cap.astype(float))
    _host_share(0, path, sc, a)
    return sc.flow_in


def _assert_max_min(got, want, link, cap):
    """Each flow gets at most what it wants, each link carries what its flows want up to its
    capacity, and a flow that gets less than it wants gets its link's largest share."""
    assert (got >= -1e-9).all() and (got <= want + 1e-9).all()
    for ln in np.unique(link):
        on = link == ln
        assert got[on].sum() == pytest.approx(min(cap[ln], want[on].sum()), rel=1e-9, abs=1e-9)
        short = on & (got < want - 1e-9)
        assert (got[short] >= got[on].max() - 1e-9).all()


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_nic_shares_its_line_max_min_among_its_rate_limited_queue_pairs(data):
    """Flows leaving one NIC (queue pairs the NIC serves round robin among those their DCQCN
    rate limiters let send: HPCC ns-3 ``RdmaEgressQueue::GetNextQindex``) share its line
    max-min fairly, each capped at its rate: the compiled step and the jump's numpy form."""
    from simulator.congestion.fluid import max_min_share
    n = data.draw(st.integers(1, 9))
    want = np.array(data.draw(st.lists(st.floats(0, 100), min_size=n, max_size=n)))
    link = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    cap = np.array(data.draw(st.lists(st.floats(1, 150), min_size=3, max_size=3)))
    for got in (max_min_share(want, link, cap, np.ones(n, bool)),
                _kernel_host_share(want, link, cap)):
        _assert_max_min(got, want, link, cap)


def test_a_queue_pair_dcqcn_cut_to_its_fair_share_loses_nothing_to_its_neighbour():
    """Two queue pairs on a 100 Gb/s NIC, one cut by DCQCN to 50 Gb/s: round robin still
    gives each 50 (a split in proportion to their rates gave 33 and 67, and a victim sharing
    its NIC with a cut flow took NIC time the packets never give it); cut to 20, the other
    takes the remaining 80."""
    from simulator.congestion.fluid import max_min_share
    cap = np.array([100.0])
    for want, share in (([50.0, 100.0], [50.0, 50.0]), ([20.0, 100.0], [20.0, 80.0])):
        w = np.array(want)
        np.testing.assert_allclose(_kernel_host_share(w, np.zeros(2, np.int64), cap), share)
        np.testing.assert_allclose(max_min_share(w, np.zeros(2, np.int64), cap,
                                                 np.ones(2, bool)), share)
