"""The fluid PFC / DCQCN model against our packet-level reference suite
(validation/ns3_suite: the HPCC ns-3 RDMA model on cascades, incasts across spines, ECMP
permutations and rings, mixed flows; the flows pinned to the paths the packets took), and
against the same runs at exact serialization (validation/ns3_suite_exact: the simulator's
clock in picoseconds, so that a packet takes its serialization time rather than the whole
nanoseconds below it, as real ports and the fluid do), where issue 22's bars are held. One
module, so that each fluid run is compared with both references at once."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from simulator.config.network import NetworkConfig
from simulator.congestion.fluid import FLUID_STEP_S, flows_step, port_alpha
from simulator.network.fabric import switch_ids
from validation.ns3 import ns_rate
from validation.ns3_suite import (
    CASES,
    EXACT_SUITE_DIR,
    SUITE_DIR,
    _draw_used,
    _ref,
    case_runs,
    fluid_case,
    integration_step_table,
    jitter_tables,
    nic_pause_ratios,
    slowdowns,
    suite_table,
    suite_tables,
    trace_error,
)


@pytest.fixture(scope="module")
def tables() -> list[pd.DataFrame]:
    """The suite's table against the nanosecond runs and against the exact ones."""
    return suite_tables([SUITE_DIR, EXACT_SUITE_DIR])


@pytest.fixture(scope="module")
def table(tables) -> pd.DataFrame:
    return tables[0]


@pytest.fixture(scope="module")
def exact(tables) -> pd.DataFrame:
    return tables[1].set_index("case")


@pytest.fixture(scope="module")
def jitters() -> list[pd.DataFrame]:
    return [t.set_index(["case", "role"]) for t in jitter_tables([SUITE_DIR, EXACT_SUITE_DIR])]


def test_every_case_has_reference_runs():
    flows = pd.read_csv(SUITE_DIR / "flows.csv")
    for name, case in CASES.items():
        got = flows[flows.case == name]
        assert sorted(got.draw.unique()) == list(case.draws), name
        assert set(got.run) == ({"all", "alone"} if case.alone else {"all"}), name
        assert (got[got.run == "all"].groupby("draw").flow.count() == len(case.flows)).all()


def test_mean_fct_within_10_percent_on_every_case(table):
    bad = table[table.fct_err.abs() > 0.10]
    assert bad.empty, bad[["case", "mean_fct_us", "ref_mean_fct_us", "fct_err"]]


def test_p99_fct_within_10_percent_on_every_case(table):
    bad = table[table.p99_err.abs() > 0.10]
    assert bad.empty, bad[["case", "p99_fct_us", "ref_p99_fct_us", "p99_err"]]


def test_bundled_uplink_cascade_with_2_mib_leaves_the_victims_alone(table):
    """One 400 Gb/s leaf-spine cable over 100 Gb/s NICs: the reference's faster port holds 4x
    the alpha before it pauses. With 2 MiB the reference leaves every victim within ~1 % and
    pauses only the incast's own senders; the fluid must too (with one alpha for every port it
    paused the spine's port toward the congested leaf for 400 us and slowed victim 1 by
    20 %)."""
    r = table.set_index("case").loc["cascade-bundled-2MiB"]
    assert r.victim_gap_pp <= 3.0, r[["victim_gap_pp", "ref_gap_se_pp"]]
    assert r.pause_extra == "" and r.pause_missing == ""
    assert 1 / 1.5 <= r.pause_ratio_min and r.pause_ratio_max <= 1.5


def test_bundled_uplink_cascade_with_1_mib_pauses_where_the_packets_do(table):
    """With 1 MiB the pause climbs to the spine: the links the reference pauses, and no
    other, and every hop's pause time within a factor 1.5 (the XON rule matters here: checked
    as the switch dequeues one of the port's packets, a paused port none of whose bytes leave
    stays paused however far its threshold rises; resuming on the threshold alone put one
    link at 1.64x). One draw either forms the cascade or has DCQCN cut the incast first
    (13-86 % for victim 1 in the reference), so the bar (3 pp) is held on the difference of
    the two means over five hundred draws a side, within two of its standard errors: victim
    1 56.5 against 56.1 %, victims 2 and 3 9.5 against 7.1, 2.4 +- 0.5 pp, at the step that
    resolves the 400 Gb/s uplinks' pause loop (fluid.flows_step, 0.0625 us; at 0.25 us
    victim 1 read 52.0, 4.1 +- 1.1 pp, and against exact serialization 7.7). At the 1 us
    step, whose PFC stops lasted 1.26x the packets', it read 38 % (over thirty) and the
    spine's uplinks were paused 0.73x as long."""
    r = table.set_index("case").loc["cascade-bundled-1MiB"]
    assert r.pause_extra == "" and r.pause_missing == ""
    assert 1 / 1.5 <= r.hop_pause_ratio_min and r.hop_pause_ratio_max <= 1.5
    assert r.gap_se_pp <= 1.5, r[["draws", "gap_se_pp"]]
    assert r.victim_gap_pp <= 3.0 + 2 * r.gap_se_pp, r[["v1_pp", "ref_v1_pp", "gap_se_pp"]]


def test_one_mib_cascade_pauses_like_the_packets(table):
    """1 MiB buffers, where PFC acts alone (the queues never reach Kmin) and climbs three
    hops: every link's pause time within 10 % of the reference's and the victims within 12
    pp (2.2 measured; 10 at the 1 us step, and a microsecond of start time moves victim 1 by
    +-7 pp either side: test_one_mib_cascade_is_as_chaotic...). It was 14 pp, every victim
    4-5 % faster than in the packets, while a
    host's offer reached its first switch in the same step: PFC's loop at a host was then a
    microsecond shorter than the cable makes it, and the senders paused for 7-8 us at a time
    where the packets pause for 8-12."""
    r = table.set_index("case").loc["cascade-1MiB"]
    assert r.victim_gap_pp <= 12.0
    assert 0.90 <= r.pause_ratio_min and r.pause_ratio_max <= 1.10
    assert r.pause_extra == "" and r.pause_missing == ""


def test_pfc_alone_cascade_matches_the_packets(table):
    """PFC without DCQCN (nothing marks, so only pauses shape the flows), 4 MiB buffers: every
    victim's FCT within 2 % of the packets', with the incast and alone, and its slowdown
    within 4 percentage points (3.3); every link's pause time within 10 %, nothing paused
    that the packets do not pause. The slowdown magnifies the alone run: victim 1 alone
    takes 181.1 us against the packets' 178.2, all but 0.4 us of it the reference's whole-ns
    serialization (validation.ns3.ns_rate: a data packet 83 ns instead of 83.84, victim 2's
    ACKs that share victim 1's leaf uplink 4 ns instead of 4.8), 3 pp of a 207 % slowdown by
    itself: at that serialization every victim is within 3 pp (2.6). This needs FIFO order
    in queues busy from the first step and thresholds in the switch's own unit, wire bytes
    (the model's queues hold payload: 1,000 of every 1,048 bytes)."""
    r = table.set_index("case").loc["cascade-pfc-only-4MiB"]
    assert r.victim_fct_err <= 0.02
    assert r.victim_gap_pp <= 4.0
    at_ns = suite_table(cases=["cascade-pfc-only-4MiB"], ns_rates=True).iloc[0]
    assert at_ns.victim_gap_pp <= 3.0, at_ns[["v1_pp", "ref_v1_pp", "victim_gap_pp"]]
    assert 0.90 <= r.pause_ratio_min and r.pause_ratio_max <= 1.10
    assert r.pause_extra == "" and r.pause_missing == ""


def test_queue_traces_follow_the_packets_where_pfc_alone_acts(table):
    """PFC alone (no marking, so no DCQCN sawtooth) and the 1 MiB cascade: every queue's
    trace, every 10 us, within 10 % and 20 % of the reference's in sum |fluid - ref| / sum
    ref; every case within 80 % (the DCQCN cases keep a sawtooth in the packets that the
    fluid's rates smooth: 0.2-0.5, the ECMP ones 0.53-0.82 over integration steps of
    0.125-1 us, no PFC to pin them)."""
    t = table.set_index("case")
    assert t.loc["cascade-pfc-only-4MiB", "trace_err"] <= 0.10
    assert t.loc["cascade-1MiB", "trace_err"] <= 0.20
    assert (t.trace_err <= 0.85).all(), t.trace_err


def test_incast_across_spines_pauses_the_senders_as_the_packets_do():
    """Eight senders on two leaves into one host across two spines: the leaves' uplinks mark
    them, but a mark reaches a sender only once its packet has waited out the spines' queues
    to leaf 0 (0.8-1 MB) and reached the receiver, so the senders keep their rates, fill their
    leaves' ingress and are paused as long as in the packets: every NIC the reference pauses
    within a factor 2.5 (0.06-0.47 of the reference's time while marks came back after a bare
    round trip), the queue traces within 0.25 of the reference's depth."""
    res = case_runs(CASES["incast-spines-4MiB"], _ref(SUITE_DIR))
    ratio = nic_pause_ratios(res)
    assert len(ratio) == 8
    assert ((ratio >= 1 / 2.5) & (ratio <= 2.5)).all(), ratio
    assert res["drops"].trace_err.mean() <= 0.25


def test_trace_error_is_the_l1_distance_over_the_reference():
    ref = pd.DataFrame({"link": "a", "t_us": [0, 10, 20], "queue_bytes": [100, 200, 100]})
    fluid = pd.DataFrame({"t_s": [1e-6, 11e-6, 40e-6], "link": "a",
                          "queue_bytes": [100.0, 300.0, 0.0]})
    # grid 0, 10, 20, 30 us: before the first sample empty; 10 us between the samples at 1
    # and 11 us (interpolated: 280); 20 and 30 us after a 29 us gap (held: 300); against
    # 100, 200, 100, 0
    assert trace_error(fluid, ref, 40.0) == pytest.approx((100 + 80 + 200 + 300) / 400)


def test_cascade_victims_within_25_points_of_the_reference(table):
    """Every victim of every cascade (1-8 MiB, 100 and 400 Gb/s uplinks, with and without
    DCQCN) slows down within 25 percentage points of the packet-level run's slowdown. It was
    123 points on the 1 MiB cascade while the FIFO history of queues busy from the first step
    started lost: a victim's last bytes then left its queue in backlog shares, long after FIFO
    order sends them; and 30 (the bundled 1 MiB cascade) while a port's headroom bytes counted
    as shared-buffer use, lowering every other port's threshold. (The reference's own draws
    spread victim 1 of the 2 MiB cascade over 36-129 %: that cascade sits where a pause either
    climbs a hop or does not.)"""
    cascades = table[table.family.str.startswith(("cascade", "pfc"))]
    assert len(cascades) == 7
    assert cascades.victim_gap_pp.max() <= 25.0, cascades[["case", "victim_gap_pp"]]


def test_victims_untouched_with_large_buffers_as_in_the_reference(table):
    """4 and 8 MiB: the pause never climbs past leaf 0 on either side (victims 2 and 3 share no
    link with the incast and keep their speed). Victim 1 shares the spine's port into leaf 0
    with the incast's far sender; how many times DCQCN cuts it there (0 to 14) spreads its
    slowdown over 15-244 %, so the 3 pp bar is held on the difference of the means over a
    thousand draws a side (standard error 2.4 pp). The fluid reads 171 against 179 % (4 MiB,
    7.8 +- 2.4 pp; 8 MiB 7.2). Against the packets' traces: for a given number of cuts victim
    1's FCT with the incast matches within 1.8 %; the fluid marks it 5 % less (5.7 against
    6.0 per draw) and cuts it 4.13 against 4.26 times (3.9 pp of the gap); its alone run takes
    181.1 us against 178.2, the reference serializing in whole nanoseconds, 1 % faster (4.4
    pp; at that serialization the gap is 5.5 +- 2.4). Held within three standard errors of
    the bar."""
    for name in ("cascade-4MiB", "cascade-8MiB"):
        r = table.set_index("case").loc[name]
        assert abs(r.v2_pp) < 1.0 and abs(r.v3_pp) < 1.0
        assert abs(r.ref_v2_pp) < 1.0 and abs(r.ref_v3_pp) < 1.0
        assert r.gap_se_pp <= 2.5, r[["draws", "gap_se_pp"]]
        assert r.victim_gap_pp <= 3.0 + 3 * r.gap_se_pp, r[["v1_pp", "ref_v1_pp", "gap_se_pp"]]


def test_lossy_go_back_n_resends_a_window_once(table):
    """Without PFC a loss sends the sender back to the lost byte: it sends again what it sent
    until the NAK reached it, the bytes the switches dropped in that window among them. Every
    lossy case's mean and p99 FCT within 7 % of the reference's (lossy-incast-2MiB read +9.9
    % while a loss inside the window was sent a second time on top of the window)."""
    lossy = table[table.family == "lossy"]
    assert (lossy.fct_err.abs() <= 0.07).all(), lossy[["case", "fct_err"]]
    assert (lossy.p99_err.abs() <= 0.07).all(), lossy[["case", "p99_err"]]


def test_lossy_drops_where_and_as_much_as_the_reference(table):
    """DCQCN with PFC off: the switch drops what its ingress admission refuses. Over ten draws
    (one draw moves the count fivefold on either side), every lossy case the reference drops
    tens of packets per draw in (79-504) drops within a factor 1.5 of them, widened by two
    standard errors of the ratio over the draws: 1.47 (SE 9 %), 1.53 (31 %) and 0.81 (34 %).
    The one where it drops under one per draw (lossy-cascade-4MiB: 7 packets in one draw of
    ten) drops fewer than ten. Before, the fluid dropped only once a whole switch buffer was
    full: none of these cases dropped a packet."""
    lossy = table[table.family == "lossy"]
    assert len(lossy) == 4
    dropping = lossy[lossy.ref_drops >= 10]
    assert len(dropping) == 3
    off = np.log(dropping.drops / dropping.ref_drops).abs()
    assert (off <= np.log(1.5) + 2 * dropping.drop_ratio_se).all(), \
        dropping[["case", "drops", "ref_drops", "drop_ratio_se"]]
    assert (lossy[lossy.ref_drops < 1].drops < 10).all(), lossy[["case", "drops", "ref_drops"]]


def test_lossy_fabric_spares_victims_behind_no_shared_port(table):
    """Without PFC nothing climbs: victims 2 and 3 (no link, no ingress port shared with the
    incast) keep their speed on both sides; victim 1 shares the spine's port into the incast's
    leaf and loses packets there with the incast's (the ingress admission drops whatever that
    port brings): both sides slow it by more than 100 %, within 20 points of each other over
    ten draws (157 against 155 %, the reference's standard error 17 pp; 176 while a CNP came
    back a whole round trip after its mark, 192 at the 1 us step)."""
    r = table.set_index("case").loc["lossy-cascade-3MiB"]
    assert abs(r.v2_pp) < 1.0 and abs(r.ref_v2_pp) < 1.0
    assert abs(r.v3_pp) < 1.0 and abs(r.ref_v3_pp) < 1.0
    assert r.ref_v1_pp > 100 and abs(r.v1_pp - r.ref_v1_pp) <= 20.0


def test_slowdown_is_fct_with_over_fct_without_the_incast():
    flows = pd.DataFrame({"draw": 1, "run": ["all", "alone", "all"], "flow": [4, 4, 0],
                          "role": ["victim1", "victim1", "incast"],
                          "fct_us": [300.0, 200.0, 1.0], "ref_fct_us": [220.0, 200.0, 1.0]})
    s = slowdowns(flows)
    assert s.slowdown.tolist() == pytest.approx([0.5]) and s.ref_slowdown.tolist() == \
        pytest.approx([0.1])


def test_a_run_that_marks_and_drops_nothing_is_the_same_under_every_draw():
    """case_runs runs a victim's alone run once per set of paths when it marks and drops
    nothing (_draw_used): the draw then has nothing to act on. A run that marks is moved by
    its draw on the same paths."""
    case = CASES["cascade-4MiB"]
    flows = _ref(SUITE_DIR)["flows"]

    def run(draw, alone):
        r = flows[(flows.case == case.name) & (flows.draw == 1)
                  & (flows.run == ("alone" if alone else "all"))].sort_values("flow")
        return fluid_case(case, draw, alone=alone, paths=r.path.fillna("").to_list())
    (a1, l1), (a2, _) = run(1, True), run(2, True)
    assert not _draw_used(l1)
    pd.testing.assert_frame_equal(a1, a2)
    (m1, k1), (m2, _) = run(1, False), run(2, False)
    assert _draw_used(k1) and not np.allclose(m1.fct_s, m2.fct_s)


def test_pinned_paths_are_the_reference_paths():
    """The fluid runs every ECMP case on the switch egress links the packets took."""
    case = CASES["permutation-2tier"]
    ref = _ref(SUITE_DIR)
    res = case_runs(case, ref)
    assert len(res["flows"]) == len(case.draws) * len(case.flows)
    f = ref["flows"]
    f = f[(f.case == case.name) & (f.draw == 2)]
    # every reference path crosses a spine, and draws hash flows onto other spines
    assert f.path.str.contains("spine").all()
    d1 = ref["flows"][(ref["flows"].case == case.name) & (ref["flows"].draw == 1)].path
    assert (d1.to_numpy() != f.path.to_numpy()).any()


@pytest.mark.parametrize("gbps, alpha", [(100, 0.125), (200, 0.25), (150, 0.25), (400, 0.5),
                                         (800, 1.0), (1600, 1.0)])
def test_port_alpha_follows_the_reference_switch(gbps, alpha):
    """third.cc: shift 3 (1/8) at the NIC speed, one less per halving toward it (150 Gb/s
    halves once to 75), never below 0 (alpha 1)."""
    cap = np.array([100, gbps], float) * 1e9 / 8
    a = port_alpha(cap, np.array([-1, 0]), np.array([0, 1]), NetworkConfig())
    assert a[0] == pytest.approx(0.125) and a[1] == pytest.approx(alpha)
    flat = NetworkConfig.model_validate({"pfc_threshold": {"alpha_speed_scaling": False}})
    assert port_alpha(cap, np.array([-1, 0]), np.array([0, 1]), flat)[1] == 0.125


def test_port_alpha_keeps_the_speed_class_at_the_references_serialization():
    """The reference serializes in whole nanoseconds (validation.ns3.ns_rate: 1,048 B per 83
    ns at 100 Gb/s, per 20 ns at 400): its 400 Gb/s port then moves 4.15x a NIC's bytes but
    is configured, and paused, as 4x (alpha 1/2). Counting doublings of the measured ratio
    made it 1 and the bundled 1 MiB cascade never climbed to the spine (victim 1 9 % against
    the packets' 56)."""
    cap = ns_rate(np.array([100, 400], float) * 1e9 / 8, 1048)
    assert cap[1] / cap[0] > 4.1
    a = port_alpha(cap, np.array([-1, 0]), np.array([0, 1]), NetworkConfig())
    assert a[1] == pytest.approx(0.5)


@pytest.fixture(scope="module")
def jitter(jitters) -> pd.DataFrame:
    return jitters[0]


def test_pfc_alone_victims_over_jittered_starts(jitter):
    """Flows started up to 1 us late (100 runs each side): PFC alone holds still in the
    packets (every victim's standard deviation under 1 pp), and the fluid's mean slowdown of
    every victim is within 4.5 pp of the packets' (4.2 for victim 1, 1.9 against the runs at
    exact serialization: the exact-serialization tests below)."""
    pfc = jitter.loc["cascade-pfc-only-4MiB"]
    assert (pfc.ref_std_pp < 1.0).all()
    assert (pfc.fluid_mean_pp - pfc.ref_mean_pp).abs().max() <= 4.5, pfc


def test_one_mib_cascade_is_as_chaotic_in_the_fluid_as_in_the_packets(jitter):
    """The 1 MiB cascade, where PFC climbs three hops: a microsecond of start time moves
    victim 1 by +-7 pp in the packets (248-283 % over 100 runs) and the fluid as much (its
    standard deviation within a factor 2 of the packets', victim by victim); victim 1's
    means agree within two of the packets' standard deviations. That is not issue 22's bar:
    the fluid's jittered mean of victim 1 reads 7.2 +- 1.0 pp below the packets' (victims 2
    and 3: 1.5 and 0.8 below), where the one unjittered run reads 2.2 above; against the
    runs at exact serialization, 4.1 +- 0.9 below (the exact-serialization tests below)."""
    c = jitter.loc["cascade-1MiB"]
    assert (c.ref_std_pp > 1.0).all() and c.loc["victim1", "ref_std_pp"] > 5.0
    ratio = c.fluid_std_pp / c.ref_std_pp
    assert ratio.between(0.5, 2.0).all(), c
    v1 = c.loc["victim1"]
    assert abs(v1.fluid_mean_pp - v1.ref_mean_pp) <= 2 * v1.ref_std_pp


def test_pause_time_per_hop_within_1_5_and_only_where_the_packets_pause(table):
    """Issue 22's bar over the whole suite: at every hop (a tier's links summed: NIC -> leaf,
    leaf -> spine, spine -> leaf) the fluid's pause time within a factor 1.5 of the
    packet-level run's, and no link paused on one side only (>= 5 us averaged over draws).
    The mixed long / short case pauses each NIC with 1-5 PAUSE frames of 3-8 us per draw: over
    its first three draws the hop read 1.61 (48 against 83 us in draw 1); over ten, 1.24. One
    link misses: incast-spines' victim leaf uplink to spine 1 (leaf3->spine1), which the
    packets pause in 3 of 10 draws (56, 5 and 25 us: 8.6 over the ten) and the fluid in none,
    since a CNP comes back from the marking queue rather than a whole round trip after its
    mark: the victim slows before the spine's port fills. Named here until it is found."""
    hop = table.dropna(subset=["hop_pause_ratio_min"])
    assert len(hop) >= 6, hop.case
    assert ((hop.hop_pause_ratio_min >= 1 / 1.5) & (hop.hop_pause_ratio_max <= 1.5)).all(), \
        hop[["case", "hop_pause_ratio_min", "hop_pause_ratio_max"]]
    missing = table.set_index("case").pause_missing.drop("incast-spines-4MiB")
    assert (table.pause_extra == "").all() and (missing == "").all(), \
        table[["case", "pause_extra", "pause_missing"]]
    assert table.set_index("case").loc["incast-spines-4MiB", "pause_missing"] in \
        ("", "leaf3->spine1")


def test_pfc_stops_last_as_the_packets_do_at_the_default_step(table):
    """At the fluid's 0.25 us step the PFC loop over a 1 us cable (decision, PAUSE across the
    cable, the bytes still on it) takes eight steps: the median stop on each case's paused
    links lasts within 0.9-1.1 of the packets' (0.98-1.04)."""
    paused = table.dropna(subset=["pause_length_ratio"])
    assert len(paused) >= 6
    assert paused.pause_length_ratio.between(0.9, 1.1).all(), paused


def test_mean_fct_holds_and_pfc_stops_last_longer_at_coarser_steps(monkeypatch):
    """The PFC loop advances a whole integration step at a time: at 1 us every paused case's
    stops last longer than the packets' (1.13-1.54x) and at 0.5 us between (1.01-1.12x),
    while mean FCT stays within 10 % of the packet-level runs on every case at both (each
    case's first 20 draws: docs/validation.md has the table over 100)."""
    monkeypatch.setattr("validation.ns3_suite.STEPS_S", (1e-6, 0.5e-6))
    t = integration_step_table(max_draws=20)
    assert set(t.step_us) == {1.0, 0.5}
    assert (t.fct_err.abs() <= 0.10).all(), t[["case", "step_us", "fct_err"]]
    stop = t.dropna(subset=["pause_length_ratio"]).pivot_table(
        index="case", columns="step_us", values="pause_length_ratio")
    assert len(stop) >= 6
    assert (stop[1.0] > 1.1).all() and (stop[1.0] > stop[0.5]).all(), stop


def test_a_step_that_is_not_positive_is_refused():
    case = CASES["cascade-pfc-only-4MiB"]
    for dt in (0.0, -1e-6):
        with pytest.raises(ValueError, match="dt: the integration step must be positive"):
            suite_table(cases=[case.name], dt=dt)


def test_fewer_than_one_draw_is_refused():
    for n in (0, -3):
        with pytest.raises(ValueError, match="max_draws: a case needs at least one draw"):
            suite_table(cases=["cascade-pfc-only-4MiB"], max_draws=n)


# Against the runs at exact serialization (validation/ns3_suite_exact)

def test_the_exact_runs_are_the_suites_runs_with_exact_serialization():
    """Same cases, draws, flows and paths as the nanosecond runs; a victim alone takes 1.0 to
    1.4 % longer (1,048 B in 83.84 ns, not 83; a 60 B ACK in 4.8, not 4), and the fluid's
    alone victims, 1.0 to 1.7 % slower than the nanosecond runs', are within 0.3 % of these."""
    ns, ps = (_ref(d)["flows"] for d in (SUITE_DIR, EXACT_SUITE_DIR))
    key = ["case", "draw", "run", "flow"]
    assert (ns[key].to_numpy() == ps[key].to_numpy()).all()
    assert (ns.path.fillna("") == ps.path.fillna("")).all()
    alone = ps.run == "alone"
    ratio = ps.fct_ns[alone].to_numpy() / ns.fct_ns[alone].to_numpy()
    assert ratio.min() > 1.009 and ratio.max() < 1.015
    case = CASES["cascade-pfc-only-4MiB"]
    rounded, exact = ((f.fct_us / f.ref_fct_us - 1)[f.run == "alone"]
                      for f in (case_runs(case, _ref(d))["flows"]
                                for d in (SUITE_DIR, EXACT_SUITE_DIR)))
    assert rounded.between(0.010, 0.017).all(), rounded
    assert exact.abs().max() < 0.003, exact


def test_mean_and_p99_fct_within_10_percent_on_every_case(exact):
    """Issue 22's bar on every case (2.5 % and 4.6 % at worst)."""
    assert exact.fct_err.abs().max() <= 0.10, exact.fct_err
    assert exact.p99_err.abs().max() <= 0.10, exact.p99_err


def test_victims_within_3_pp_and_two_standard_errors_of_the_packets(exact):
    """Every victim within 3 pp of the packets, give or take two standard errors of the gap
    (both sides are means over draws): the 4 / 8 MiB cascades 3.3 / 3.5 +- 2.4 pp (7.8 / 7.2
    against the nanosecond runs, 4.4 pp of which their rounded alone run), behind the 400 Gb/s
    uplinks (bundled 1 MiB) 56.5 against 59.7 % (3.2 +- 1.0 pp; 7.7 at a 0.25 us step:
    test_the_step_resolves_a_fast_uplinks_pause_loop). The 1 MiB cascade repeats itself
    exactly over draws and is chaotic in its start times, so its gap is the one over
    start-time jitter: test_one_mib_cascade_over_jittered_starts."""
    v = exact.dropna(subset=["victim_gap_pp"]).drop(index="cascade-1MiB")
    bar = 3 + 2 * v.gap_se_pp.fillna(0)
    assert (v.victim_gap_pp <= bar).all(), v[["victim_gap_pp", "gap_se_pp"]]
    # and every victim, not only the one with the largest gap, within two of its own SEs
    assert (v.victim_beyond_pp <= 3).all(), v[["victim_beyond_role", "victim_beyond_pp"]]


def test_the_step_resolves_a_fast_uplinks_pause_loop():
    """flows_step halves the 0.25 us step per doubling of the fastest switch link's speed
    class over the NICs': behind 400 Gb/s uplinks over 100 Gb/s NICs it is 0.0625 us, where a
    step moves as many bytes through the uplink as 0.25 us through a NIC. There victim 1 of
    the bundled 1 MiB cascade has converged (halving the step moves its mean over 60 draws by
    under 1.5 pp), where at 0.25 us halving the step moved it by more than 3 pp."""
    case = replace(CASES["cascade-bundled-1MiB"], draws=tuple(range(1, 61)))
    fabric = case.fabric()
    src, dst, _ = switch_ids(fabric)
    step = flows_step(fabric.capacity, src, dst)
    assert step == pytest.approx(FLUID_STEP_S / 4)
    flat = CASES["cascade-1MiB"].fabric()
    assert flows_step(flat.capacity, *switch_ids(flat)[:2]) == FLUID_STEP_S
    ref = _ref(EXACT_SUITE_DIR)

    def victim1(dt):
        s = slowdowns(case_runs(case, ref, dt=dt)["flows"])
        return s[s.role == "victim1"].slowdown.mean() * 100

    assert abs(victim1(step) - victim1(step / 2)) < 1.5
    assert abs(victim1(FLUID_STEP_S) - victim1(FLUID_STEP_S / 2)) > 3.0


def test_one_mib_cascade_over_jittered_starts(jitters):
    """PFC alone over three hops, flows started up to 1 us late (100 runs a side): victim 1
    4.1 +- 0.9 pp below the packets (7.2 below the nanosecond runs), within 3 pp and two
    standard errors; victims 2 and 3 within 1 pp."""
    j = jitters[1].loc["cascade-1MiB"]
    assert (j.gap_pp.abs() <= 3 + 2 * j.gap_se_pp).all(), j
    assert j.loc[["victim2", "victim3"]].gap_pp.abs().max() <= 1.0


def test_pause_time_per_hop_at_exact_serialization(exact):
    """Every hop's pause time within a factor 1.5 of the packets' (0.94-1.02), and no link
    paused on one side only (>= 5 us averaged over a case's draws, under 1 us on the other).
    Closest: incast-spines' leaf 3 uplinks, the victim's, which the packets pause in one draw
    of ten each (34 us to spine 0, 13 us to spine 1: 3.4 and 1.3 us over the draws), the
    fluid in none."""
    hop = exact[["hop_pause_ratio_min", "hop_pause_ratio_max"]].dropna()
    assert hop.hop_pause_ratio_min.min() >= 1 / 1.5 and hop.hop_pause_ratio_max.max() <= 1.5
    assert (exact.pause_extra == "").all(), exact.pause_extra
    assert (exact.pause_missing == "").all(), exact.pause_missing
