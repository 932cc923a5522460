"""Acknowledgements on the reverse path (``network.ack_bytes``): the load they put on the links
back, against its closed form, and the reference's ACKs and serialization against its runs;
and the fluid's results independent of its trace."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.congestion import simulate_fluid
from simulator.network.fabric import switch_buffers
from simulator.network.flowfile import switch_ids
from validation import ns3
from validation.ns3_suite import CASES, SUITE_DIR, _ref, case_runs


def _pair(ack_bytes: int, both_ways: bool):
    """4 MB host 0 -> 1 (and 1 -> 0) through one switch, 32 MiB buffers (no pause, no mark)."""
    fabric = ns3.star(2)
    src, dst = ([0, 1], [1, 0]) if both_ways else ([0], [1])
    flows, _ = ns3.run(fabric, src, dst, 4_000_000, ns3.network(ack_bytes=ack_bytes))
    return flows.fct_s.to_numpy()


def test_every_link_has_its_reverse():
    fabric = CASES["ring-2tier"].fabric()
    rev = fabric.reverse_links()
    names = fabric.link_names()
    net = rev >= 0
    assert (rev[rev[net]] == np.flatnonzero(net)).all()
    for i in np.flatnonzero(net):
        a, b = names[i].split("->")
        assert names[rev[i]] == f"{b}->{a}"


def test_two_way_flows_share_each_link_with_the_others_acks():
    """Each host's NIC and each switch port carries one flow's data and the other's ACKs, f =
    ack / (mtu + header) bytes per data byte: both run at C / (1 + f), so the transfer takes
    1 + f times as long (the latencies aside)."""
    net = ns3.network(ack_bytes=60)
    f = 60 / (net.mtu_bytes + net.header_bytes)
    without, with_acks = _pair(0, True), _pair(60, True)
    lat = without - 4_000_000 / (12.5e9 * net.mtu_bytes / (net.mtu_bytes + net.header_bytes))
    assert np.allclose((with_acks - lat) / (without - lat), 1 + f, rtol=2e-3)


def test_acks_cost_nothing_where_no_data_goes_back():
    assert _pair(60, False) == pytest.approx(_pair(0, False), rel=1e-12)


def test_pfc_alone_flow_by_flow_at_the_references_rates():
    """PFC alone, with the reference's 60 B ACKs (51 B at its rate) and its whole-nanosecond
    serialization (+1 % at 100 Gb/s): every flow, with the incast and without it, finishes
    within 1.5 % of the packets (0.96 % measured). Without the ACKs the victims alone were
    1.1-1.2 % off and their slowdowns agreed only because two errors cancelled; with them,
    while a host's offer reached its first switch in the same step, victim 1 finished 2.6 %
    early."""
    f = case_runs(CASES["cascade-pfc-only-4MiB"], _ref(SUITE_DIR), ns_rates=True)["flows"]
    assert (f.fct_us / f.ref_fct_us - 1).abs().max() <= 0.015, f


def test_the_trace_period_changes_no_result():
    """The queue trace's period sets where the compiled steps hand back to Python; each PFC
    port's threshold must carry across those calls. (It did not: the switches' shared-buffer
    use restarted from zero at every call, and PFC alone with the reference's ACKs finished
    two flows 1 us apart with 1 us and 10 us traces.)"""
    case = CASES["cascade-pfc-only-4MiB"]
    fabric, frame, net = case.fabric(1, ns_rates=True), case.frame(), case.net(True, True)
    hops = fabric.route(frame.src_gpu.to_numpy(), frame.dst_gpu.to_numpy(),
                        np.arange(len(frame)), "ecmp")[0]
    src_sw, dst_sw, _ = switch_ids(fabric)
    finish = [simulate_fluid(hops, frame.bytes.to_numpy(float), fabric.capacity,
                             fabric.latency, src_sw, dst_sw,
                             switch_buffers(fabric, case.buffer_mib), net, seed=1,
                             reverse=fabric.reverse_links(), queue_sample_s=q).finish_s
              for q in (10e-6, 1e-6)]
    assert np.array_equal(*finish)
