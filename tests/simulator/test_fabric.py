"""The fabric: closed forms, max-min certificate, conservation, ECMP statistics, failures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from simulator.calibration import (
    NCCL_CHANNELS_PER_NIC,
    NET_BUSBW_EFFICIENCY,
    NVLINK_BUSBW_EFFICIENCY,
)
from simulator.errors import FabricError
from simulator.network.alpha_beta import BUSBW_FACTOR
from simulator.network.collectives import btree_parent, run_collective
from simulator.network.fabric import compile_fabric
from simulator.network.flows import simulate_flows
from simulator.network.maxmin import link_loads, max_min_rates
from simulator.network.nccl_tests import nccl_tests
from topologies.builders import build_fabric
from topologies.spec import TopologySpec

SPEC = TypeAdapter(TopologySpec)


def fabric(spec: dict, gpus: int, gpn: int = 1, seed: int = 0, nvlink: float = 300):
    g = build_fabric(SPEC.validate_python(spec), gpus=gpus, gpus_per_node=gpn,
                     nvlink_gbyte_per_s=nvlink)
    return compile_fabric(g, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("n", [8, 64, 512, 4096, 16384])
def test_ring_all_reduce_closed_form_on_a_non_blocking_fabric(n):
    f = fabric({"kind": "spine-leaf", "nic_gbps": 400}, n)
    S = 2**30
    B = 50e9 * NET_BUSBW_EFFICIENCY["roce"]
    r = run_collective(f, "all_reduce", [np.arange(n)], S)
    assert r.bandwidth_s == pytest.approx(2 * (n - 1) / n * S / B, rel=0.01)
    assert r.latency_s > 0 and r.time_s == pytest.approx(r.bandwidth_s + r.latency_s)


@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter", "all_to_all"])
def test_other_collectives_closed_forms(kind):
    n, S = 32, 2**28
    f = fabric({"kind": "spine-leaf", "nic_gbps": 200}, n)
    r = run_collective(f, kind, [np.arange(n)], S)
    B = 25e9 * NET_BUSBW_EFFICIENCY["roce"]
    assert r.bandwidth_s == pytest.approx((n - 1) / n * S / B, rel=0.01)
    assert BUSBW_FACTOR[kind](n) == pytest.approx((n - 1) / n)


def test_intra_node_ring_runs_at_nvlink_bus_bandwidth():
    f = fabric({"kind": "spine-leaf"}, 8, gpn=8, nvlink=300)
    S = 2**30
    r = run_collective(f, "all_reduce", [np.arange(8)], S)
    busbw = 2 * 7 / 8 * S / r.bandwidth_s
    assert busbw == pytest.approx(300e9 * NVLINK_BUSBW_EFFICIENCY["h100"], rel=1e-6)


def test_tree_and_halving_doubling_move_the_right_volume():
    n, S = 16, 2**28
    f = fabric({"kind": "spine-leaf", "nic_gbps": 200}, n)
    ring = run_collective(f, "all_reduce", [np.arange(n)], S)
    tree = run_collective(f, "all_reduce", [np.arange(n)], S, algorithm="tree")
    hd = run_collective(f, "all_reduce", [np.arange(n)], S, algorithm="halving_doubling")
    B = 25e9 * NET_BUSBW_EFFICIENCY["roce"]
    # each tree carries S/2 up and S/2 down every edge; a node interior in one tree (parent + 2
    # children) and a leaf in the other sends 4 x S/2 = 2S: NCCL's tree ratio of 0.5
    assert tree.bandwidth_s == pytest.approx(2 * S / B, rel=0.02)
    assert hd.bandwidth_s == pytest.approx(2 * (n - 1) / n * S / B, rel=0.01)
    assert ring.bandwidth_s < tree.bandwidth_s
    m = 64
    p1 = btree_parent(np.arange(m), m)
    assert (p1[1::2] >= 0).all() and not np.isin(np.arange(1, m, 2), p1).any()   # odd = leaves


# ---------------- max-min certificate, conservation, determinism ----------------
topos = st.fixed_dictionaries({
    "kind": st.just("spine-leaf"),
    "leaves": st.integers(1, 5), "spines": st.integers(1, 4),
    "hosts_per_leaf": st.integers(2, 6),
    "nic_gbps": st.sampled_from([25, 100, 200, 400]),
    "uplink_gbps": st.sampled_from([25, 100, 400]),
})


@given(spec=topos, data=st.data(), routing=st.sampled_from(["ecmp", "spray", "adaptive"]))
@settings(max_examples=60, deadline=None)
def test_max_min_certificate_capacity_and_conservation(spec, data, routing):
    gpus = spec["leaves"] * spec["hosts_per_leaf"]
    f = fabric(spec, gpus, seed=data.draw(st.integers(0, 1000)))
    n = data.draw(st.integers(1, 40))
    src = np.array(data.draw(st.lists(st.integers(0, gpus - 1), min_size=n, max_size=n)))
    dst = np.array(data.draw(st.lists(st.integers(0, gpus - 1), min_size=n, max_size=n)))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if not len(src):
        return
    hops, parent, share = f.route(src, dst, np.arange(len(src)), routing)
    rate = max_min_rates(hops, f.capacity)
    load = link_loads(hops, rate, f.num_links)
    assert (load <= f.capacity * (1 + 1e-9)).all()                       # no link over capacity
    sat = load >= f.capacity * (1 - 1e-9)
    for i in range(len(rate)):                                           # bottleneck certificate
        links = hops[i][hops[i] >= 0]
        ok = False
        for ln in links[sat[links]]:
            on = (hops == ln).any(axis=1)
            if rate[i] >= rate[on].max() * (1 - 1e-9):
                ok = True
        assert ok, (i, rate[i])
    size = np.full(len(src), 1e6)[parent] * share
    res = simulate_flows(hops, size, f.capacity, f.latency)
    hop_count = (hops >= 0).sum(axis=1)
    assert res.link_bytes.sum() == pytest.approx((size * hop_count).sum(), rel=1e-9)
    again = simulate_flows(hops, size, f.capacity, f.latency)
    assert np.array_equal(again.finish_s, res.finish_s)


def test_hierarchical_all_reduce_adds_nvlink_phases_to_a_rail_ring():
    f = fabric({"kind": "spine-leaf", "nic_gbps": 400}, 32, gpn=8, nvlink=450)
    S = 2**30
    r = run_collective(f, "all_reduce", [np.arange(32)], S, algorithm="hierarchical")
    nv = 450e9 * NVLINK_BUSBW_EFFICIENCY["h100"]
    net = 50e9 * NET_BUSBW_EFFICIENCY["roce"]
    expect = 2 * (7 / 8 * S / nv) + 2 * 3 / 4 * (S / 8) / net
    assert r.bandwidth_s == pytest.approx(expect, rel=0.01)


def test_same_seed_same_paths_other_seed_other_hashes():
    spec = {"kind": "spine-leaf", "leaves": 4, "spines": 8, "hosts_per_leaf": 8}
    src, dst = np.arange(16), np.arange(16, 32)
    a = fabric(spec, 32, seed=7).route(src, dst, np.zeros(16, int))[0]
    b = fabric(spec, 32, seed=7).route(src, dst, np.zeros(16, int))[0]
    c = fabric(spec, 32, seed=8).route(src, dst, np.zeros(16, int))[0]
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_coupled_ring_moves_at_its_slowest_edge_and_frees_the_rest():
    cap = np.array([10.0, 4.0, 10.0])
    hops = np.array([[0, -1], [1, -1], [2, -1], [0, -1]])
    group = np.array([0, 0, 1, 2])         # flows 0, 1 are one ring; 2 and 3 are alone
    rate = max_min_rates(hops, cap, group)
    assert rate[0] == rate[1] == pytest.approx(4.0)       # ring held by link 1
    assert rate[3] == pytest.approx(6.0)                  # takes what the ring leaves on link 0
    assert rate[2] == pytest.approx(10.0)


# ---------------- ECMP ----------------
def _uplink_counts(n: int, seed: int, qps: int = 1, routing: str = "ecmp"):
    f = fabric({"kind": "spine-leaf", "leaves": 2, "spines": n, "hosts_per_leaf": n,
                "nic_gbps": 100, "uplink_gbps": 100}, 2 * n, seed=seed)
    src = np.repeat(np.arange(n), qps)
    dst = src + n
    hops, parent, share = f.route(src, dst, np.arange(len(src)), routing)
    leaf0 = f.node_id("leaf0")
    ups = f.up_links[leaf0][f.up_links[leaf0] >= 0]
    return f, hops, parent, share, ups


def test_ecmp_leaves_one_over_e_of_uplinks_idle():
    n, trials = 16, 300
    idle = []
    for seed in range(trials):
        _, hops, _, _, ups = _uplink_counts(n, seed)
        used = np.isin(ups, hops)
        idle.append(1 - used.mean())
    assert np.mean(idle) == pytest.approx((1 - 1 / n) ** n, abs=0.02)


def test_spray_removes_and_queue_pairs_reduce_the_collision_penalty():
    n = 16
    ideal = 1e9 / 12.5e9
    slow = {}
    for label, qps, routing in (("ecmp1", 1, "ecmp"), ("ecmp4", 4, "ecmp"),
                                ("ecmp16", 16, "ecmp"), ("spray", 1, "spray")):
        times = []
        for seed in range(40):
            f, hops, parent, share, _ = _uplink_counts(n, seed, qps, routing)
            size = np.full(n * qps, 1e9 / qps)[parent] * share
            res = simulate_flows(hops, size, f.capacity, np.zeros(f.num_links))
            times.append(np.nanmax(res.finish_s))
        slow[label] = np.mean(times) / ideal
    assert slow["spray"] == pytest.approx(1.0, rel=1e-6)
    assert slow["ecmp1"] > slow["ecmp4"] > slow["ecmp16"] > 1.0
    assert slow["ecmp1"] > 2.0          # max of 16 balls in 16 bins is ~3 on average


def test_core_oversubscription_slows_cross_pod_traffic_by_the_ratio():
    def cross_pod_time(ratio):
        f = fabric({"kind": "clos3", "nic_gbps": 100, "hosts_per_leaf": 4, "pod_gpus": 28,
                    "core_oversubscription": ratio}, 56)
        src = np.arange(28)
        res = run_collective(f, "p2p", [np.array([s, s + 28]) for s in src], 1e9,
                             routing="spray")
        local = run_collective(f, "p2p", [np.array([s, (s + 4) % 28]) for s in src], 1e9,
                               routing="spray")
        return res.bandwidth_s, local.bandwidth_s

    full, local_full = cross_pod_time(1)
    over, local_over = cross_pod_time(7)
    assert over / full == pytest.approx(7.0, rel=0.02)
    assert local_over == pytest.approx(local_full, rel=1e-9)      # in-pod traffic unaffected


def test_failed_spine_reroutes_and_costs_its_share():
    spec = {"kind": "spine-leaf", "leaves": 4, "spines": 4, "hosts_per_leaf": 8,
            "nic_gbps": 100, "uplink_gbps": 100}
    f = fabric(spec, 32)
    broken = f.with_failures(switches=["spine0"])
    groups = [np.array([i, i + 8, i + 16, i + 24]) for i in range(8)]
    a = run_collective(f, "all_reduce", groups, 2**28, routing="spray")
    b = run_collective(broken, "all_reduce", groups, 2**28, routing="spray")
    spine0 = f.node_id("spine0")
    assert b.link_bytes[(broken.link_src == spine0) | (broken.link_dst == spine0)].sum() == 0
    # leaves lose 1 of 4 uplinks (8 x 100G down, 4 x 100G up: already 2:1) -> 4/3 slower
    assert b.bandwidth_s / a.bandwidth_s == pytest.approx(4 / 3, rel=0.02)
    with pytest.raises(FabricError):
        f.with_failures(switches=["spine0", "spine1", "spine2", "spine3"]).route(
            np.array([0]), np.array([9]), np.array([0]))


def test_dp_groups_of_a_tp8_job_are_rail_aligned():
    f = fabric({"kind": "rail-optimized", "nic_gbps": 400, "hosts_per_leaf": 8}, 64, gpn=8)
    groups = [np.arange(r, 64, 8) for r in range(8)]       # tp-major: DP peers share a rail
    res = run_collective(f, "all_reduce", groups, 2**28)
    tiers = f.tier[f.link_dst]
    spine_bytes = res.link_bytes[(tiers == 1)].sum()
    assert spine_bytes == 0                                # 8 nodes on one leaf per rail


def test_batched_completions_stay_within_the_stated_bound_of_exact(monkeypatch):
    """Retiring near-simultaneous finishers together moves no finish time by more than
    COMPLETION_BATCH of the elapsed time, against an event-per-completion run."""
    import simulator.network.flows as flowsim

    spec = {"kind": "spine-leaf", "leaves": 16, "spines": 8, "hosts_per_leaf": 8,
            "nic_gbps": 100, "uplink_gbps": 100}
    f = fabric(spec, 128, seed=3)
    rng = np.random.default_rng(0)
    src = rng.integers(0, 128, 600)
    dst = (src + rng.integers(1, 128, 600)) % 128
    hops, parent, share = f.route(src, dst, np.arange(600), "ecmp")
    size = rng.uniform(1e5, 4e6, 600)[parent] * share
    start = rng.uniform(0, 1e-4, len(size))
    batched = simulate_flows(hops, size, f.capacity, f.latency, start=start)
    bound = flowsim.COMPLETION_BATCH
    monkeypatch.setattr(flowsim, "COMPLETION_BATCH", 0.0)
    exact = simulate_flows(hops, size, f.capacity, f.latency, start=start)
    assert exact.events > batched.events
    elapsed = exact.finish_s.max() - start.min()
    assert np.abs(batched.finish_s - exact.finish_s).max() <= bound * elapsed
    assert batched.link_bytes.sum() == pytest.approx(exact.link_bytes.sum(), rel=1e-9)


@given(spec=st.one_of(topos, st.fixed_dictionaries({
    "kind": st.just("clos3"), "hosts_per_leaf": st.integers(2, 6),
    "pod_gpus": st.sampled_from([8, 16, 32]), "nic_gbps": st.sampled_from([100, 400]),
    "core_oversubscription": st.sampled_from([1, 2, 7])}), st.fixed_dictionaries({
        "kind": st.just("rail-optimized"), "hosts_per_leaf": st.integers(1, 4),
        "nic_gbps": st.just(400)})), gpus=st.integers(1, 96), gpn=st.sampled_from([1, 4, 8]))
@settings(max_examples=40, deadline=None)
def test_switch_count_without_building_equals_the_built_graph(spec, gpus, gpn):
    from topologies.builders import fabric_size
    s = SPEC.validate_python(spec)
    g = build_fabric(s, gpus=gpus, gpus_per_node=gpn, nvlink_gbyte_per_s=300)
    built = sum(1 for _, a in g.nodes(data=True) if a["tier"] >= 0)
    assert fabric_size(s, gpus=gpus, gpus_per_node=gpn).switches == built


def test_a_sprayed_flow_gets_one_flows_share_and_rings_never_lose_to_ecmp():
    """Spraying splits a flow into subflows of weight 1/k: on a link it shares with an unsplit
    flow, together they get half, as two queue pairs would; a ring whose cross-leaf members are
    sprayed is never slower than under ECMP (it was k times slower when subflows were coupled
    at equal rates)."""
    spec = {"kind": "spine-leaf", "leaves": 8, "spines": 8, "hosts_per_leaf": 4,
            "nic_gbps": 400}
    f = fabric(spec, 32, gpn=1)
    hops, parent, share = f.route(np.array([0, 0]), np.array([20, 1]), np.array([0, 1]),
                                  "spray")
    rate = max_min_rates(hops, f.capacity, weight=share)
    split = np.bincount(parent, weights=rate)
    assert (share[parent == 0] < 1).all() and split[0] == pytest.approx(split[1])
    assert split.sum() == pytest.approx(f.capacity[f.gpu_links[0, 2]])
    big = fabric({**spec, "hosts_per_leaf": 32}, 256, gpn=8)
    for kind in ("all_reduce", "all_gather"):
        e = run_collective(big, kind, [np.arange(256)], 2**30, routing="ecmp").time_s
        s = run_collective(big, kind, [np.arange(256)], 2**30, routing="spray").time_s
        assert s <= e * 1.001


@pytest.mark.parametrize("spines", [2, 8, 16])
def test_oversubscription_holds_whatever_the_number_of_spines(spines):
    """A leaf's uplink capacity is its NIC capacity / oversubscription, also when more spines
    were asked for than the uplink budget has cables (each cable then runs slower)."""
    spec = {"kind": "spine-leaf", "hosts_per_leaf": 8, "spines": spines, "nic_gbps": 400,
            "oversubscription": 2}
    f = fabric(spec, 64, gpn=8)
    leaf = f.node_id("leaf0")
    up = (f.link_src == leaf) & (f.tier[f.link_dst] == 1)
    down_nics = (f.link_dst == leaf) & (f.tier[f.link_src] == -1)
    assert f.capacity[up].sum() == pytest.approx(f.capacity[down_nics].sum() / 2)


def test_re_solving_only_touched_components_changes_nothing(monkeypatch):
    """Events re-solve only the components where flows arrived or finished; forcing one
    component (everything re-solved every event) gives the same finish times and link bytes."""
    import simulator.network.flows as flowsim

    spec = {"kind": "spine-leaf", "leaves": 8, "spines": 4, "hosts_per_leaf": 8,
            "nic_gbps": 100, "uplink_gbps": 100}
    f = fabric(spec, 64, seed=5)
    rng = np.random.default_rng(1)
    src = rng.integers(0, 64, 120)
    inside = src // 8 * 8 + (src % 8 + rng.integers(1, 8, 120)) % 8     # same leaf
    dst = np.where(np.arange(120) < 100, inside, (src + 8) % 64)         # + 20 cross-leaf
    hops, parent, share = f.route(src, dst, np.arange(120), "ecmp")
    size = rng.uniform(1e5, 3e6, 120)[parent] * share
    start = rng.uniform(0, 5e-5, len(size))
    group = np.where(rng.random(len(size)) < 0.3, rng.integers(0, 20, len(size)),
                     1000 + np.arange(len(size)))
    comp = flowsim.components(hops, group)
    for a in range(len(size)):                        # labels are exactly the components
        same_link = np.isin(hops, hops[a][hops[a] >= 0]).any(axis=1) | (group == group[a])
        assert (comp[same_link] == comp[a]).all()
    assert len(np.unique(comp)) > 1
    fast = simulate_flows(hops, size, f.capacity, f.latency, start=start, group=group)
    monkeypatch.setattr(flowsim, "components", lambda h, g=None: np.zeros(len(h), np.int64))
    slow = simulate_flows(hops, size, f.capacity, f.latency, start=start, group=group)
    np.testing.assert_allclose(fast.finish_s, slow.finish_s, rtol=1e-9)
    np.testing.assert_allclose(fast.link_bytes, slow.link_bytes, rtol=1e-9)
    np.testing.assert_allclose(fast.link_busy_s, slow.link_busy_s, rtol=1e-9)


@pytest.mark.parametrize("gpus", [32, 128])
def test_rail_aligned_rings_keep_a_rail_optimized_fabric_off_its_spines(gpus):
    """NCCL's rings enter and leave each node through the same NIC rail (PXN carries the last
    GPU's data over NVLink to that rail's GPU): on a rail-optimized fabric whose rails each
    sit under one leaf, an all-reduce of whole nodes puts no byte on a leaf-spine link, and
    every NIC carries the ring's 2 (n - 1) / n x S / 8 per channel."""
    from simulator.config.topology import topology_spec
    from simulator.network.build import make_fabric
    from topologies.gpus import load_gpu
    f = make_fabric(topology_spec("dgx-h100-rail"), gpus=gpus, gpus_per_node=8,
                    gpu=load_gpu("h100-sxm"))
    size = 2.0**30
    res = run_collective(f, "all_reduce", [np.arange(gpus)], size)
    tiers = f.link_tiers()
    assert res.link_bytes[tiers == "leaf-spine"].sum() == 0
    nic_up = f.nic_links[:, 0]
    assert res.link_bytes[nic_up] == pytest.approx(2 * (gpus - 1) / gpus * size / 8)


@pytest.mark.parametrize("kind", ["p2p", "all_to_all"])
def test_cross_rail_sends_take_pxn_and_stay_on_their_rails(kind):
    """NCCL routes send / receive and all-to-all through PXN by default
    (NCCL_P2P_PXN_LEVEL=2): GPU 4 of node 0 sending to GPU 0 of node 1 hands its data over
    NVLink to GPU 0 of node 0, whose NIC is on the destination's rail. On a rail-optimized
    fabric (each rail its own leaf) no byte reaches a spine, and a cross-rail send runs at a
    same-rail send's NIC-bound speed (a spine hop with other sends would share it)."""
    from simulator.config.topology import topology_spec
    from simulator.network.build import make_fabric
    from topologies.gpus import load_gpu
    f = make_fabric(topology_spec("dgx-h100-rail"), gpus=16, gpus_per_node=8,
                    gpu=load_gpu("h100-sxm"))
    tiers = f.link_tiers()
    size = 2.0**28
    if kind == "p2p":            # tp 4 x cp 4 ring attention: cp ranks 4 GPUs apart
        groups = [np.arange(t, 16, 4) for t in range(4)]
        same = [np.array([0, 8]), np.array([1, 9])]        # same rail, for the closed form
        cross = run_collective(f, "p2p", groups, size)
        rail = run_collective(f, "p2p", same, size)
        assert cross.bandwidth_s == pytest.approx(rail.bandwidth_s, rel=0.02)
    else:
        cross = run_collective(f, "all_to_all", [np.arange(16)], size)
    assert cross.link_bytes[tiers == "leaf-spine"].sum() == 0
    assert cross.link_bytes[tiers == "nvlink"].sum() > 0      # the PXN hops
    # conservation: every byte sent to another node leaves through exactly one NIC
    sent = size if kind == "p2p" else size / 16
    inter = 8 if kind == "p2p" else 16 * 8                     # sends that change node
    assert cross.link_bytes[f.nic_links[:, 0]].sum() == pytest.approx(inter * sent)


def test_adaptive_routing_spreads_a_spines_flows_over_all_its_core_uplinks():
    """Flows that start together and go through one spine leave it over every core uplink
    evenly (they all took the same one when the spine reused the leaf's round-robin slot and
    the fan-outs shared a factor); ECMP's hashing collides more."""
    f = fabric({"kind": "clos3", "nic_gbps": 100, "hosts_per_leaf": 8, "pod_gpus": 64},
               gpus=128)
    src = np.arange(64)
    dst = src + 64                                     # every flow crosses the core
    up = (f.tier[f.link_src] == 1) & (f.tier[f.link_dst] == 2)
    peak = {}
    for mode in ("adaptive", "ecmp"):
        hops, _, _ = f.route(src, dst, np.zeros(64, np.int64), mode)
        per_link = np.bincount(hops[hops >= 0], minlength=f.num_links)[up]
        peak[mode] = per_link.max()
        if mode == "adaptive":
            assert per_link.max() - per_link.min() <= 1      # as even as the count allows
    assert peak["adaptive"] <= peak["ecmp"]


def test_infiniband_routes_by_destination():
    """On InfiniBand the subnet manager gives each switch one port per destination: queue pairs
    of one connection share a path (no 5-tuple hashing), and a leaf's flows to distinct
    destinations leave over its uplinks evenly (d-mod-k), where RoCE's ECMP hashing collides."""
    spec = {"kind": "spine-leaf", "nic_gbps": 100, "hosts_per_leaf": 8, "leaves": 2,
            "spines": 8}
    ib = fabric({**spec, "transport": "ib"}, gpus=16)
    roce = fabric(spec, gpus=16)
    hops, _, _ = ib.route(np.zeros(4, np.int64), np.full(4, 9), np.arange(4), "ecmp")
    assert (hops == hops[0]).all()                    # four queue pairs, one path
    up = (ib.tier[ib.link_src] == 0) & (ib.tier[ib.link_dst] == 1)
    src, dst = np.arange(8), np.arange(8) + 8
    peaks = {}
    for name, f in (("ib", ib), ("roce", roce)):
        hops, _, _ = f.route(src, dst, np.zeros(8, np.int64), "ecmp")
        per_link = np.bincount(hops[hops >= 0], minlength=f.num_links)[up]
        peaks[name] = per_link.max()
    assert peaks["ib"] == 1 and peaks["roce"] >= peaks["ib"]


@pytest.mark.parametrize("nodes", [64, 62])
def test_infiniband_spreads_a_rails_destinations_over_every_spine(nodes):
    """Fat-tree routing numbers destinations by their port below the leaf, so on a
    rail-optimized fabric a shift permutation along one rail (node i's NIC 3 to node i + 32's)
    puts one flow on each leaf uplink, a partly filled last scalable unit included. Numbered by
    GPU id (a rail's ids step by 8) the 32 destinations below a leaf shared 4 of its 32
    uplinks."""
    f = fabric({"kind": "rail-optimized", "transport": "ib", "nic_gbps": 400, "nics_per_node": 8,
                "hosts_per_leaf": 32}, gpus=8 * nodes, gpn=8)
    node = np.arange(nodes)
    src = node * 8 + 3
    dst = ((node + 32) % nodes) * 8 + 3
    hops, _, _ = f.route(src, dst, np.zeros(nodes, np.int64), "ecmp")
    up = (f.tier[f.link_src] == 0) & (f.tier[f.link_dst] == 1)
    per_link = np.bincount(hops[hops >= 0], minlength=f.num_links)[up]
    assert per_link.max() == 1
    crossing = (node // 32 != (node + 32) % nodes // 32).sum()
    assert (per_link == 1).sum() == crossing           # every flow between leaves, none shares


def test_nvlstree_keeps_to_its_rails_and_leaves_nvlink_to_the_switch():
    """NVLSTree (NCCL_ALGO=NVLSTree): the reduction inside a node runs in the NVSwitch, so no
    flow crosses NVLink; across nodes the double binary trees join the same rail of every
    node: on a rail-optimized fabric nothing reaches a spine. Each of the 2 x 8 trees has
    (nodes - 1) edges carrying S / 16 up and S / 16 down, each through two NIC links (out of one
    node, into the other): 4 (nodes - 1) S on the NIC links in all."""
    from simulator.config.topology import topology_spec
    from simulator.network.build import make_fabric
    from topologies.gpus import load_gpu
    gpus, size = 64, 2.0**30
    f = make_fabric(topology_spec("dgx-h100-rail"), gpus=gpus, gpus_per_node=8,
                    gpu=load_gpu("h100-sxm"))
    res = run_collective(f, "all_reduce", [np.arange(gpus)], size, algorithm="nvlstree")
    tiers = f.link_tiers()
    assert res.link_bytes[tiers == "nvlink"].sum() == 0
    assert res.link_bytes[tiers == "leaf-spine"].sum() == 0
    nic_bytes = res.link_bytes[f.nic_links[:, 0]] + res.link_bytes[f.nic_links[:, 1]]
    assert nic_bytes.sum() == pytest.approx(4 * (gpus // 8 - 1) * size, rel=1e-9)


@pytest.mark.parametrize("nbytes, chunk", [(2**20, 32 * 1024), (2**24, 64 * 1024),
                                           (2**26, 128 * 1024), (2**28, 128 * 1024),
                                           (2**30, 256 * 1024), (2**32, 512 * 1024)])
def test_nvlstree_chunk_follows_ncclss_halving_rules(nbytes, chunk):
    """NCCL's calcCollChunking for NVLSTree with 16 channels x 8 heads in flight, worked by
    hand from enqueue.cc: 512 KiB (4 MiB buffer / 8 steps) unless the message is shorter than
    32 x 128 x 512 KiB = 2 GiB (256 KiB), 16 x 128 x 256 KiB = 512 MiB (128 KiB),
    4 x 128 x 128 KiB = 64 MiB (64 KiB), 128 x 64 KiB = 8 MiB (32 KiB)."""
    from simulator.network.alpha_beta import nvls_tree_chunk_bytes
    assert nvls_tree_chunk_bytes(nbytes, 128) == chunk


def test_nvlstree_fill_weighs_on_small_messages_at_scale_and_vanishes_for_large_ones():
    """A pipelined tree pays its fill once per message: on 1,024 DGX H100 nodes it outweighs
    the transfer of a 16 MiB all-reduce, yet stays within a few per cent of a 16 GiB one; the
    shallow tree of 4 nodes pays a fraction of it, one node none."""
    from simulator.network.alpha_beta import nvls_tree_fill_s
    nic = 50e9                                        # 400 Gb/s per GPU
    def transfer(s):                                  # the tree's transfer over 8 NICs
        return s / (8 * nic * NET_BUSBW_EFFICIENCY["ib"] * 0.5)
    assert nvls_tree_fill_s(2**24, 1024, 8, nic) > transfer(2**24)
    assert nvls_tree_fill_s(2**34, 1024, 8, nic) < 0.05 * transfer(2**34)
    assert nvls_tree_fill_s(2**24, 4, 8, nic) < nvls_tree_fill_s(2**24, 1024, 8, nic) / 5
    assert nvls_tree_fill_s(2**24, 1, 8, nic) == 0


def test_network_nccl_algorithm_forces_all_reduces_across_nodes_at_every_fidelity():
    """network.nccl.algorithm is NCCL_ALGO for all-reduces across nodes: the cost model (and so
    the fabric, which asks it) runs the forced algorithm there and keeps its own choice inside a
    node; NVLSTree needs NVLink SHARP GPUs, and asking it of A100s is a one-line error."""
    from simulator import Scenario, simulate
    from simulator.errors import ScenarioError
    from simulator.network.alpha_beta import AlphaBeta
    from simulator.step.groups import Group
    from tests.conftest import small_scenario
    ab = AlphaBeta(nvlink_bytes_per_s=450e9, nic_bytes_per_s=50e9, all_reduce="nvlstree")
    assert ab.algorithm("all_reduce", Group(64, 8), 2**28) == "nvlstree"
    assert ab.algorithm("all_reduce", Group(8, 8), 2**28) == "ring"
    assert ab.algorithm("all_gather", Group(64, 8), 2**28) == "ring"
    auto = AlphaBeta(nvlink_bytes_per_s=450e9, nic_bytes_per_s=50e9)
    assert ab.time_s("all_reduce", Group(64, 8), 2**28) > auto.time_s("all_reduce",
                                                                       Group(64, 8), 2**28)
    with pytest.raises(ScenarioError, match="network.nccl.algorithm"):
        Scenario.from_dict(small_scenario(network={"nccl": {"algorithm": "nvlstree"}}))
    h100 = small_scenario(cluster={"gpu": "h100-sxm", "gpus": 64, "gpus_per_node": 8,
                                   "topology": "dgx-h100-rail"},
                          parallel={"tp": 8, "pp": 1, "sequence_parallel": True, "zero": 0},
                          optimizations={"dp_overlap": False})
    steps = {}
    for algo in ("ring", "nvlstree"):
        for fid in ("screening", "flow"):
            sc = Scenario.from_dict({**h100, "fidelity": fid,
                                     "network": {"congestion_control": "none",
                                                 "nccl": {"algorithm": algo}}})
            steps[algo, fid] = simulate(sc, frames=False).step_time_s
    assert steps["nvlstree", "screening"] != steps["ring", "screening"]
    assert steps["nvlstree", "flow"] != steps["ring", "flow"]
    # the same algorithm at both fidelities: the step agrees to a few per cent
    assert steps["nvlstree", "flow"] == pytest.approx(steps["nvlstree", "screening"], rel=0.05)


def test_ecmp_collisions_and_queue_pair_scaling_match_published_effect_sizes():
    """A ring all-reduce on a 400G RoCE spine-leaf under 5-tuple ECMP, against spraying
    (no collisions). Published (../shared/validation/network_scale/ecmp_lb_adaptive_routing.csv):
    hash collisions left Baidu's links at ~70 % of line rate, OCI's untuned all-reduce at ~1/2;
    more queue pairs recovered ~95 % (Baidu) and up to +40 % all-reduce (Meta), +70 % (OCI).
    With NCCL's two channels per NIC and one queue pair the ring runs at 0.5-0.8 of spraying;
    8 queue pairs recover >= 95 %; one channel per NIC (no doubling) collides more."""
    def busbw(**kw):
        df = nccl_tests("all_reduce", gpus=256, topology="{kind: spine-leaf, nic_gbps: 400}",
                        min_bytes=2**30, max_bytes=2**30, algorithm="ring", **kw)
        return float(df.busbw_gbyte_per_s.iloc[0])
    spray = busbw(routing="spray")
    default = busbw(routing="ecmp", channels_per_nic=NCCL_CHANNELS_PER_NIC)
    scaled = busbw(routing="ecmp", channels_per_nic=NCCL_CHANNELS_PER_NIC, queue_pairs=8)
    single = busbw(routing="ecmp", channels_per_nic=1)
    assert 0.5 <= default / spray <= 0.8
    assert scaled / spray >= 0.95
    assert 1.1 <= scaled / default <= 1.7
    assert single < default


def test_split_data_on_qps_decides_whether_one_message_spreads():
    """NCCL_IB_SPLIT_DATA_ON_QPS (net_ib.cc, NCCL 2.28): with 0, its default, each message of a
    connection rides one queue pair whole and the next message the next one; with 1 every
    message is cut over all of them. The 256-GPU ECMP ring above with 8 queue pairs: at 4 MiB
    a connection carries one 512 KiB message, which under 0 collides as with one queue pair
    and under 1 runs as fast as spraying (no collisions); at 1 GiB, 256 messages a connection,
    both run as spraying."""
    def time_us(size, **kw):
        df = nccl_tests("all_reduce", gpus=256, topology="{kind: spine-leaf, nic_gbps: 400}",
                        min_bytes=size, max_bytes=size, algorithm="ring", protocol="Simple",
                        channels_per_nic=NCCL_CHANNELS_PER_NIC, **kw)
        return float(df.time_s.iloc[0]) * 1e6
    for size in (4 * 2**20, 2**30):
        spray, one = time_us(size, routing="spray"), time_us(size)
        whole = time_us(size, queue_pairs=8)
        cut = time_us(size, queue_pairs=8, split_data_on_qps=True)
        assert one > spray                                   # ECMP collides
        assert cut == pytest.approx(spray, rel=1e-3)
        if size == 2**30:
            assert whole == pytest.approx(spray, rel=1e-3)
        else:
            assert whole == pytest.approx(one, rel=0.01) and whole > cut


def test_spraying_past_the_sub_flow_cap_thins_each_flow_and_keeps_the_spread(monkeypatch):
    """Past MAX_SPRAYED_FLOWS sub-flows a sprayed flow takes k < paths sub-flows on k
    consecutive leaf uplinks, a leaf's flows dealt in turn: each flow's shares still sum to
    one, the uplinks of a leaf carry equal loads, and on a 2:1 oversubscribed fabric (uplinks
    bind) the all-to-all takes what full spraying takes (hashing each flow's first uplink
    instead read 21 % slower at two sub-flows). A 1,024-GPU all-to-all on aws-p5 ran out of
    memory unthinned."""
    import simulator.network.fabric as fabric_mod
    spec = {"kind": "spine-leaf", "leaves": 8, "spines": 8, "hosts_per_leaf": 8,
            "nic_gbps": 400, "oversubscription": 2}
    f = fabric(spec, 64)
    src, dst = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    off = src != dst
    src, dst = src[off], dst[off]
    full = run_collective(f, "all_to_all", [np.arange(64)], 2**28, routing="spray").time_s
    monkeypatch.setattr(fabric_mod, "MAX_SPRAYED_FLOWS", 2 * len(src))
    hops, parent, share = f.route(src, dst, np.arange(len(src)), "spray")
    cross = f.gpu_leaf[src] != f.gpu_leaf[dst]
    per = np.bincount(parent, minlength=len(src))
    assert (per[cross] == 2).all() and (per[~cross] == 1).all()
    assert np.bincount(parent, weights=share) == pytest.approx(np.ones(len(src)))
    ups = f.up_links[f.node_id("leaf0")]
    ups = ups[ups >= 0]
    load = np.array([(hops == u).any(axis=1) @ share for u in ups])
    assert load == pytest.approx(np.full(len(ups), load.mean()))
    thin = run_collective(f, "all_to_all", [np.arange(64)], 2**28, routing="spray").time_s
    assert thin == pytest.approx(full, rel=1e-9)
