"""The packet-level reference's ECMP reproduced (validation/ns3_routing.py) and the
acknowledgements that take a path of their own (``ack_hops``): an ACK hashes its own header in
the reference, so behind a congested way back only the ACKs that hash into it wait."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.network.flowfile import run_flow_file
from validation.ns3_routing import murmur3_32
from validation.ns3_suite import (
    EXACT_SUITE_DIR,
    HELD_OUT,
    HELD_OUT_DIR,
    SUITE_DIR,
    Case,
    _topo,
    pinned_hops,
    recorded_path_mismatches,
    reference_ack_hops,
)
from workloads.units import MB


@pytest.mark.parametrize("data, seed, want", [
    (b"", 0, 0), (b"", 1, 0x514E28B7), (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\0\0\0\0", 0, 0x2362F9DE), (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"abcd", 0x9747B28C, 0xF0478627)])
def test_murmur3_matches_its_published_test_vectors(data, seed, want):
    """MurmurHash3 x86 32-bit on whole words: the verification values of its reference
    implementation's users (SMHasher's MurmurHash3_x86_32)."""
    words = np.frombuffer(data, "<u4").reshape(1, -1)
    assert int(murmur3_32(words, np.array([seed]))[0]) == want


def test_every_path_the_reference_recorded_is_reproduced():
    """The data paths of every stored run (78,020 flows over the suite, its exact twin and
    the held-out runs; two to eight equal-cost paths a hop) rebuilt from the case's cables,
    the draw's ports and `third`'s hash: none differs."""
    got = [recorded_path_mismatches(d) for d in (SUITE_DIR, EXACT_SUITE_DIR, HELD_OUT_DIR)]
    assert sum(total for total, _ in got) == 78_020
    assert [wrong for _, wrong in got] == [0, 0, 0]


def test_acknowledgements_hash_apart_from_their_data():
    """In the three-tier permutation the ACKs of most flows cross another aggregation or
    core switch than their data came through (reversed), and on the one-spine cascade,
    where there is one path, none does."""
    flows = pd.read_csv(HELD_OUT_DIR / "flows.csv")

    def apart(name):
        case = HELD_OUT[name]
        frame, fabric = case.frame(), case.fabric(1)
        ref = flows[(flows.case == name) & (flows.draw == 1) & (flows.run == "all")]
        data = pinned_hops(fabric, frame.src_gpu, frame.dst_gpu, ref.sort_values("flow").path)
        acks = reference_ack_hops(case, 1, frame, fabric)
        rev = fabric.reverse_links()
        back = [set(rev[h[h >= 0]].tolist()) for h in data]     # the data's cables reversed
        return sum(set(a[a >= 0].tolist()) != b for a, b in zip(acks, back)), len(frame)
    moved, n = apart("ho2-permutation-3tier-2to1")
    assert moved > n // 2
    assert apart("ho-cascade-late-victims-1MiB")[0] == 0


def _forward_peak(reverse: bool, ack_spine: int) -> float:
    """Two 8 MB flows from leaf 0 to leaf 1 over spine 0 (two 100 Gb/s flows into one
    100 Gb/s uplink), and with ``reverse`` two more from leaf 1 to leaf 0 over spine 0; the
    forward flows' ACKs pinned over ``ack_spine``: the peak of leaf 0's uplink queue, KB."""
    topo = _topo("spine-leaf", 32, leaves=2, spines=2, hosts_per_leaf=4, oversubscription=2)
    flows = [(0, 4, 8 * MB, 0.0, "flow"), (1, 5, 8 * MB, 0.0, "flow")]
    if reverse:
        flows += [(6, 2, 8 * MB, 0.0, "flow"), (7, 3, 8 * MB, 0.0, "flow")]
    case = Case("acks", "test", topo, 8, tuple(flows), draws=(1,))
    frame, fabric = case.frame(), case.fabric(1)
    src, dst = frame.src_gpu.to_numpy(), frame.dst_gpu.to_numpy()

    def via(s, d, spine):
        return f"leaf{s // 4}->spine{spine} spine{spine}->leaf{d // 4} leaf{d // 4}->nic{d}.0"
    hops = pinned_hops(fabric, src, dst, [via(s, d, 0) for s, d in zip(src, dst)])
    acks = pinned_hops(fabric, dst, src, [via(d, s, ack_spine if s < 4 else 0)
                                          for s, d in zip(src, dst)])
    _, links = run_flow_file(frame.drop(columns=["flow", "role"]), fabric, net=case.net(),
                             buffer_mib=case.buffer_mib, seed=1, hops=hops, ack_hops=acks,
                             trace_links=fabric.num_links)
    return float(links.set_index("link").max_queue_bytes["leaf0->spine0"]) / 1e3


def test_only_the_acks_that_hash_into_a_congested_way_back_wait():
    """With the forward flows' ACKs in the reverse flows' queue (leaf 1 -> spine 0) their
    CNPs come late and leaf 0's uplink overshoots (758 -> 1,291 KB); hashed onto the idle
    spine 1 they come back on time and the peak stays within 10 % of the run without
    reverse data, whichever way those ACKs go."""
    alone = _forward_peak(reverse=False, ack_spine=0)
    assert _forward_peak(reverse=False, ack_spine=1) == pytest.approx(alone, rel=1e-9)
    assert _forward_peak(reverse=True, ack_spine=0) > 1.4 * alone
    assert _forward_peak(reverse=True, ack_spine=1) < 1.1 * alone


def _victim_ack_wait_us(ack_spine: int) -> tuple[float, float]:
    """PFC alone on 32 MiB: two 8 MB flows from leaf 0 to leaf 1 over spine 0 (two line-rate
    flows into one line-rate uplink: its queue grows as fast as it drains) and, from 100 us, a
    1 MB flow back from leaf 1 over spine 1 whose acknowledgements are pinned over
    ``ack_spine``: (when it finished, us; how long its last ACK then took to its sender, us)."""
    topo = _topo("spine-leaf", 32, leaves=2, spines=2, hosts_per_leaf=4, oversubscription=2)
    flows = ((0, 4, 8 * MB, 0.0, "flow"), (1, 5, 8 * MB, 0.0, "flow"),
             (6, 2, 1 * MB, 100e-6, "victim"))
    case = Case("acks", "test", topo, 8, flows, draws=(1,),
                network={"congestion_control": "none"})
    frame, fabric = case.frame(), case.fabric(1)
    src, dst = frame.src_gpu.to_numpy(), frame.dst_gpu.to_numpy()

    def via(s, d, spine):
        return f"leaf{s // 4}->spine{spine} spine{spine}->leaf{d // 4} leaf{d // 4}->nic{d}.0"
    hops = pinned_hops(fabric, src, dst, [via(0, 4, 0), via(1, 5, 0), via(6, 2, 1)])
    acks = pinned_hops(fabric, dst, src, [via(4, 0, 1), via(5, 1, 1), via(2, 6, ack_spine)])
    f, _ = run_flow_file(frame.drop(columns=["flow", "role"]), fabric, net=case.net(),
                         buffer_mib=case.buffer_mib, seed=1, hops=hops, ack_hops=acks)
    return float(f.finish_s.iloc[2]) * 1e6, float(f.acked_s.iloc[2] - f.finish_s.iloc[2]) * 1e6


def test_the_senders_completion_waits_for_its_last_ack():
    """RDMA completes at the requester when the last ACK arrives: over the idle spine it takes
    the four 1 us cables back and nothing more; through leaf 0's uplink it waits behind the
    forward flows' backlog, which grew at the rate it drains since they started, so about as
    long as they have run (FIFO: backlog / rate = the time since 0), within 5 %."""
    finish, idle = _victim_ack_wait_us(ack_spine=1)
    assert idle == pytest.approx(4.0, abs=1e-6)
    finish, queued = _victim_ack_wait_us(ack_spine=0)
    assert queued - 4.0 == pytest.approx(finish, rel=0.05)
