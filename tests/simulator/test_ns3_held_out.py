"""The fluid PFC / DCQCN model against packet-level runs it was not tuned on
(validation/ns3_held_out: the suite's geometries with the victims' timing and size, the
incast's size and fan-in, the buffer, the spines and the oversubscription moved; same
simulator, build and parameters as validation/ns3_suite_exact), the mechanism their first
comparison found missing (a CNP rides in an ACK that waits in the data's queues on the way
back) and three cases run after it was added, with data both ways through congested links;
five on S1's other conventions (paper timers, 2 us and 400 Gb/s cables) and the PFC headroom
their first comparison found sized from the wrong thing; twelve on production-like settings
(ECN at 100-400 KB, a 4,000 B MTU, 25 Gb/s and 5 us cables); one victim stays open (joining a
cascade already formed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dataclasses import replace

from validation.ns3 import REFERENCE
from validation.ns3_suite import (
    HELD_OUT,
    HELD_OUT_DIR,
    HELD_OUT_JITTER_CASES,
    JITTERS,
    Case,
    _topo,
    fluid_case,
    jitter_tables,
    suite_table,
)
from workloads.units import MB


LOW_K_RING = "ho5-ring-lowk-3tier-2to1"
LONG_CABLES = "ho5-cascade-5us-4MiB"


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return suite_table(HELD_OUT_DIR, cases=list(HELD_OUT)).set_index("case")


@pytest.fixture(scope="module")
def jitter() -> pd.DataFrame:
    return jitter_tables([HELD_OUT_DIR], HELD_OUT_JITTER_CASES)[0].set_index(["case", "role"])


def test_every_held_out_case_has_its_runs():
    """Every case's draws, with and without the incast where it has victims, and the
    jittered runs of the three whose draws repeat exactly."""
    flows = pd.read_csv(HELD_OUT_DIR / "flows.csv")
    for name, case in HELD_OUT.items():
        got = flows[flows.case == name].groupby(["draw", "run"]).size()
        runs = ("all", "alone") if case.alone else ("all",)
        assert set(got.index) == {(d, r) for d in case.draws for r in runs}, name
        assert (got.xs("all", level="run") == len(case.flows)).all(), name
    jit = pd.read_csv(HELD_OUT_DIR / "jitter.csv")
    assert set(jit.case) == set(HELD_OUT_JITTER_CASES)
    assert set(jit.jitter) == set(JITTERS)


def test_held_out_fct_and_pauses_meet_issue_22s_bars(table):
    """On every held-out case, those run after each change included (ho2-* to ho6-*): mean
    and p99 FCT within 10 % of the packets' (they come out within 6.1 and 3.1 %), pauses
    where and only where the packets pause, and each hop's pause time within a factor 1.5 of
    theirs (0.80-1.49). Before the CNPs waited the ho2-* cases read -5.0 to -16 % with their
    hops paused 0.14-0.69 of the packets' time; before a mark's wait counted the pauses of
    the queues it waits behind, the three-tier ring's and permutation's NIC hops read 0.64
    and 0.70 (validation/ns3_held_out/README.md)."""
    assert len(table) == 33
    assert (table.fct_err.abs() < 0.10).all(), table.fct_err
    assert (table.p99_err.abs() < 0.10).all(), table.p99_err
    assert (table.pause_extra == "").all() and (table.pause_missing == "").all()
    hop = table.dropna(subset=["hop_pause_ratio_min"])
    assert len(hop) == 31
    assert (hop.hop_pause_ratio_min > 1 / 1.5).all() and (hop.hop_pause_ratio_max < 1.5).all()


def test_held_out_victims_that_vary_over_draws(table):
    """The victims of the cases whose draws differ (DCQCN marks, two spines, ECMP on a
    three-tier Clos) or that repeat the same run (PFC cycles alone at 1 MiB) within 3 pp of
    the packets' slowdown, or within two standard errors of the gap beyond it (on the
    three-tier Clos, whose victims' slowdowns spread 100-200 pp over draws, within 7 and 3 pp
    +- 23 and 14; 14 and 6 pp before CNPs rode back in ACKs through the queues as they are).
    A victim's slowdown holds its last ACK's wait in the paused queues of its way back (the
    reference's FCT ends there): before the fluid followed it, the three-tier cascade's
    victim 2 read 195 against 244 pp, 0 against about 200 in the draws whose ACKs hash
    into a paused uplink."""
    for name in ("ho-cascade-long-victims-1MiB", "ho-cascade-short-incast-1MiB",
                 "ho-cascade-2spine-2MiB", "ho-incast11-spines-2MiB",
                 "ho3-cascade-3tier-1MiB", "ho3-incast12-3tier-2MiB",
                 "ho3-cascade-short-victims-2MiB", "ho4-cascade-2us-2MiB",
                 "ho4-incast-spines-400g-4MiB", "ho5-cascade-lowk-2MiB",
                 "ho5-cascade-4k-mtu-2MiB", "ho5-incast-spines-25g-1MiB",
                 "ho6-incast-spines-lowk-2MiB", "ho6-cascade-lowk-5us-4MiB"):
        r = table.loc[name]      # every victim, each within 3 pp and two of its own SEs
        assert r.victim_beyond_pp <= 3.0, (name, r.victim_beyond_role, r.victim_beyond_pp)
        assert r.victim_gap_pp <= 3.0 + 2 * r.gap_se_pp, (name, r.victim_gap_pp, r.gap_se_pp)
    assert table.loc["ho3-cascade-short-victims-2MiB", "victim_gap_pp"] < 3.0


def test_held_out_victims_over_start_jitter(jitter):
    """Cases whose draws repeat exactly, over 100 runs with every flow started up to 1 us
    late: PFC alone on 2 MiB, every victim within 3 pp (1.6 at most); the cascade the victims
    join 50 us late, victims 2 and 3 within 3 pp."""
    pfc = jitter.loc["ho-cascade-pfc-only-2MiB"]
    assert (pfc.gap_pp.abs() < 3.0).all(), pfc.gap_pp
    late = jitter.loc["ho-cascade-late-victims-1MiB"]
    assert (late.loc[["victim2", "victim3"]].gap_pp.abs() < 3.0).all(), late.gap_pp
    paper = jitter.loc["ho4-cascade-paper-timers-1MiB"]    # the suite's cascade-1MiB's runs
    assert (paper.gap_pp.abs() < 3.0).all(), paper.gap_pp


def test_pfc_headroom_grows_with_the_cable(table):
    """The reference sets aside three bandwidth-delay products of each port's cable as its PFC
    headroom (75 KB a 100 Gb/s port on 2 us cables), which lowers every port's dynamic
    threshold. Sized from the cable, the 2 us cascade reads within 1 % and its hops paused
    0.98-0.99 of the packets' time; held at 37.5 KB a port (the 1 us cable's, as the fluid had
    it before this case was run), it read +7.4 % with its hops paused 0.67-0.81."""
    got = table.loc["ho4-cascade-2us-2MiB"]
    assert abs(got.fct_err) < 0.01 and got.hop_pause_ratio_min > 0.9, got
    case = HELD_OUT["ho4-cascade-2us-2MiB"]
    fixed = replace(case, network={"pfc_threshold": {**REFERENCE["pfc_threshold"],
                                                     "headroom_kb": 37.5}})
    old = suite_table(HELD_OUT_DIR, cases=[fixed], max_draws=20).iloc[0]
    assert old.fct_err > 0.05 and old.hop_pause_ratio_max < 0.85, old


@pytest.mark.xfail(strict=True, reason="issue 22: victim 1 behind a formed 1 MiB cascade "
                   "reads -9.8 +- 1.1 pp (every link's pause time within 2 %)")
def test_a_victim_joining_a_formed_cascade(jitter):
    """Victim 1 of the cascade its victims join 50 us late, within 3 pp and two standard
    errors over start-time jitter: not yet. Over ten traced jittered runs the fluid delivers
    its first 99 % when the packets do (685.4 against 685.5 us after its start) and the same
    PAUSEs hold its path (nic8: 16.8 against 17.0 a run); the packets' last 20 KB mostly wait
    out one more PFC cycle (22.5 us from 99 to 100 %, the fluid's 7.8). Over 11 traced jitters
    its sender, ON 168 us on both sides, finishes 10-41 us later in the packets: host 8's
    PAUSE cycles (ON ~10 us every 37.5 us) fragment into 2.5-7 us ON windows from about 500 us
    after its start, where the fluid's keep their 10 us every 39.4 us to the end."""
    r = jitter.loc[("ho-cascade-late-victims-1MiB", "victim1")]
    assert abs(r.gap_pp) <= 3.0 + 2 * r.gap_se_pp


def _two_way_uplink(reverse: bool, acks: bool) -> tuple[np.ndarray, float]:
    """Two 8 MB flows from leaf 0 to leaf 1 through one 100 Gb/s uplink each way (4:1), and
    with ``reverse`` two more from leaf 1 to leaf 0: (the first two's FCTs in us, the peak of
    leaf 0's uplink queue in KB)."""
    topo = _topo("spine-leaf", 32, leaves=2, spines=1, hosts_per_leaf=4, oversubscription=4)
    flows = [(0, 4, 8 * MB, 0.0, "flow"), (1, 5, 8 * MB, 0.0, "flow")]
    if reverse:
        flows += [(6, 2, 8 * MB, 0.0, "flow"), (7, 3, 8 * MB, 0.0, "flow")]
    f, links = fluid_case(Case("two-way", "test", topo, 8, tuple(flows), draws=(1,)), 1,
                          acks=acks)
    peak = links.set_index("link").max_queue_bytes["leaf0->spine0"] / 1e3
    return f.ref_def_fct_s.to_numpy()[:2] * 1e6, float(peak)


def test_acknowledgements_in_the_data_queues_delay_the_congestion_feedback():
    """A CNP is a flag of the ACK, which the reference queues with the data: when the way back
    is itself congested (leaf 1's uplink carrying two flows of its own), the forward flows'
    CNPs wait out that queue, DCQCN reacts tens of us late and the forward uplink's queue
    overshoots (758 -> 1,291 KB, the flows 19 % slower). Without acknowledgements modelled
    (their way back unqueued) the reverse flows leave the forward queue's peak within 10 %,
    and with them but no reverse data nothing waits (the same run as without)."""
    fct_alone, peak_alone = _two_way_uplink(reverse=False, acks=True)
    fct_both, peak_both = _two_way_uplink(reverse=True, acks=True)
    assert peak_both > 1.4 * peak_alone
    assert fct_both.mean() > 1.1 * fct_alone.mean()
    fct_none, peak_none = _two_way_uplink(reverse=True, acks=False)
    assert peak_none < 1.1 * peak_alone
    fct_plain, peak_plain = _two_way_uplink(reverse=False, acks=False)
    np.testing.assert_allclose(fct_plain, fct_alone, rtol=1e-12)
    assert peak_plain == pytest.approx(peak_alone, rel=1e-12)


def test_a_low_kmin_ring_pauses_its_hosts_as_the_packets_do(table):
    """Every hop's pause time within a factor 1.5 of the packets' on the ring whose flows all
    cross the 2:1 core with ECN marking from 100 KB (0.79-1.04). Its NIC hop read 0.25 while
    a mark's wait took the queues as the mark found them, and 0.62 while it took their growth
    as an average pulled towards zero by the steps before each queue first held bytes: the
    first marks, made 7-10 us in, came back with the queues after them taken to grow 2-3 KB a
    microsecond where they grew 12, and cut the senders 10-50 us before the packets' marks
    did (validation/ns3_held_out/README.md)."""
    r = table.loc[LOW_K_RING]
    assert r.hop_pause_ratio_min > 1 / 1.5 and r.hop_pause_ratio_max < 1.5
    assert abs(r.fct_err) < 0.03


def test_a_cnp_comes_back_when_the_packets_do(table):
    """When each flow's first CNP reaches its sender, against the packets' (cnps.csv: the
    ACKs flagged CNP leaving the last switch): on the 5 us cascade victim 2's first CNPs fall
    in the packets' two clusters (160-180 us, 200-220) and lie 8 us from theirs (the
    Wasserstein distance of the two sides' times over 100 draws; 44 us, a median of 124
    against 200, while a CNP's wait on its way back was foreseen when its mark was made: its
    ACK waits in leaf 2's uplink, which the spine pauses after the mark), in 57 of 100 draws
    against 69; every other flow there and on the low-Kmin 5 us cascade within 1.3 us, on
    the 2 us cascade within 11. (On the three-tier cascade a flow's first CNP comes in 6-26 %
    of draws, hundreds of us apart: too few to compare.)"""
    r = table.loc[LONG_CABLES]
    assert r.cnp_shift_flow == 5 and r.cnp_shift_us < 15 and r.cnp_share_gap < 0.15
    assert table.loc["ho6-cascade-lowk-5us-4MiB", "cnp_shift_us"] < 3
    assert table.loc["ho4-cascade-2us-2MiB", "cnp_shift_us"] < 15
    assert table.loc["ho4-cascade-2us-2MiB", "cnp_share_gap"] < 0.15


def test_a_mark_waits_behind_the_queues_as_they_will_be(table):
    """A marked packet reaches each queue after its own later than it is marked, and waits
    behind what that queue holds then: while queues grow, as when every flow starts at line
    rate, more than they hold now; its ACK then waits in each data queue of the way back
    behind what that queue holds when the ACK gets there, as long as PAUSE keeps it. Counted
    so, the three-tier 2:1 cases' NIC hops read 1.05 (the ring across the core) and 1.07
    (the permutation) of the packets' pause time, 0.73 and 0.79 when the wait took each queue
    as the mark found it; and the 4 MiB cascade on 5 us cables, its feedback loop four times
    as long, reads -2.6 % with victim 2 within 3 pp and two standard errors (3.8 +- 3.6),
    -5.0 % and 9.7 +- 1.3 when the marks' waits took the queues as they found them."""
    for name in ("ho3-ring-core-3tier-2to1", "ho2-permutation-3tier-2to1"):
        assert table.loc[name, "hop_pause_ratio_min"] > 0.9, name
    r = table.loc[LONG_CABLES]
    assert abs(r.v2_pp - r.ref_v2_pp) <= 3.0 + 2 * r.gap_se_pp and abs(r.fct_err) < 0.03


def test_a_victim_sharing_its_nic_with_a_cascade_victim_on_long_cables(table):
    """Victim 3 of the 5 us cascade (host 5 to host 7, inside leaf 1) shares host 5's NIC with
    victim 2, which crosses the paused uplink: every victim within 3 pp and two standard errors
    (victim 3 +1.1 against +2.2 pp). It read -3.5 while the NIC split its line in proportion to
    the two flows' DCQCN rates: a victim 2 cut to 50 Gb/s then left victim 3 two thirds of the
    NIC, where the packets' NIC serves its queue pairs round robin and each keeps half; and
    while a CNP's wait on the way back was foreseen when its mark was made, victim 2's came
    back 40-80 us early (median 124 us after the start against the packets' 200: its ACK waits
    in leaf 2's uplink, which the spine pauses after the mark is made)."""
    r = table.loc[LONG_CABLES]
    assert r.victim_beyond_pp <= 3.0
    assert abs(r.v3_pp - r.ref_v3_pp) < 3.0
