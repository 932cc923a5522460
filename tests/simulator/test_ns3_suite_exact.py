"""The fluid PFC / DCQCN model against the packet-level suite at exact serialization
(validation/ns3_suite_exact: the same ns-3 runs with the simulator's clock in picoseconds, so
that a packet takes its serialization time rather than the whole nanoseconds below it, as
real ports and the fluid do). Issue 22's bars where they hold; the cases where they do not
are named with their gaps."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from simulator.congestion.fluid import FLUID_STEP_S, flows_step
from simulator.network.fabric import switch_ids
from validation.ns3_suite import (
    CASES,
    EXACT_SUITE_DIR,
    SUITE_DIR,
    _ref,
    case_runs,
    jitter_table,
    slowdowns,
    suite_table,
)


@pytest.fixture(scope="module")
def exact() -> pd.DataFrame:
    return suite_table(EXACT_SUITE_DIR).set_index("case")


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


def test_one_mib_cascade_over_jittered_starts():
    """PFC alone over three hops, flows started up to 1 us late (100 runs a side): victim 1
    4.1 +- 0.9 pp below the packets (7.2 below the nanosecond runs), within 3 pp and two
    standard errors; victims 2 and 3 within 1 pp."""
    j = jitter_table(EXACT_SUITE_DIR).set_index(["case", "role"]).loc["cascade-1MiB"]
    assert (j.gap_pp.abs() <= 3 + 2 * j.gap_se_pp).all(), j
    assert j.loc[["victim2", "victim3"]].gap_pp.abs().max() <= 1.0


def test_pause_time_per_hop_within_1_5_and_only_where_the_packets_pause(exact):
    """Every hop's pause time within a factor 1.5 of the packets' (0.94-1.02), and no link
    paused on one side only (>= 5 us averaged over a case's draws, under 1 us on the other).
    Closest: incast-spines' leaf 3 uplinks, the victim's, which the packets pause in one draw
    of ten each (34 us to spine 0, 13 us to spine 1: 3.4 and 1.3 us over the draws), the
    fluid in none."""
    hop = exact[["hop_pause_ratio_min", "hop_pause_ratio_max"]].dropna()
    assert hop.hop_pause_ratio_min.min() >= 1 / 1.5 and hop.hop_pause_ratio_max.max() <= 1.5
    assert (exact.pause_extra == "").all(), exact.pause_extra
    assert (exact.pause_missing == "").all(), exact.pause_missing
