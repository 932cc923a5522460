"""Failures over a training run: Monte-Carlo against closed forms and published figures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulator.config.failure_catalogue import Component, JobCounts
from simulator.config.scenario import Scenario
from simulator.failures import failure_run
from simulator.reliability.closed_form import first_order_ettr, kokolis_ettr, young_interval
from simulator.reliability.costs import Costs
from simulator.reliability.montecarlo import simulate_run
from tests.simulator.test_bad_input import _cli

HOUR, DAY = 3600.0, 86400.0
LLAMA3 = "examples/llama3-405b-16384.yaml"
SELENE = "examples/gpt3-175b-1024-selene.yaml"


def costs(rate_per_h=1 / 12, restart=600.0, interval=3600.0, blocking=60.0, persist=0.0,
          spares=None, repair=HOUR, planned=False) -> Costs:
    """One component, every recovery stage folded into ``restart`` (Kokolis's u0)."""
    comp = (Component("node", "node", "node", "node", 1.0,
                      "planned" if planned else "heartbeat", True),)
    return Costs(components=comp, rates_per_s=np.array([rate_per_h / HOUR]),
                 detect_s=np.zeros(1), diagnose_s=np.zeros(1), replace=np.array([not planned]),
                 planned=np.array([planned]), swap_s=0.0, restart_s=restart, init_s=0.0,
                 reload_s=0.0, state_bytes=0.0, gpu_state_bytes=0.0, blocking_s=blocking,
                 persist_s=persist, planned_save_s=0.0, interval_s=interval, step_time_s=1.0,
                 spares=spares, repair_s=repair, counts=JobCounts(8, 1, 8, 1))


# ---------------- closed forms ----------------
@pytest.mark.parametrize("rate_per_h,restart,interval,blocking", [
    (1 / 12, 600, 3600, 60), (1 / 7.9, 900, 1800, 30), (1 / 48, 1200, 7200, 300)])
def test_monte_carlo_ettr_matches_kokolis_closed_form(rate_per_h, restart, interval, blocking):
    c = costs(rate_per_h, restart, interval, blocking)
    e = simulate_run(c, trials=4000, seed=1, horizon_s=54 * DAY).ettr.mean()
    assert e == pytest.approx(kokolis_ettr(rate_per_h / HOUR, restart, interval, blocking),
                              rel=0.01)


def test_optimum_interval_found_by_sweeping_is_young_sqrt_2w_over_lambda():
    rate, w = 1 / (24 * HOUR), 60.0
    young = young_interval(w, 1 / rate)
    grid = young * np.geomspace(0.25, 4, 17)
    ettr = np.array([simulate_run(costs(rate * HOUR, 600, iv, w), trials=3000, seed=7,
                                  horizon_s=60 * DAY).ettr.mean()
                     for iv in grid])                          # common random numbers
    top = np.argmax(ettr)
    assert 0 < top < len(grid) - 1                             # an interior optimum
    near = slice(top - 2, top + 3)                             # parabola in log(interval)
    a, b, _ = np.polyfit(np.log(grid[near]), ettr[near], 2)
    best = np.exp(-b / (2 * a))
    assert best == pytest.approx(young, rel=0.05)


def test_time_to_train_without_failures_is_work_plus_stalls():
    c = costs(rate_per_h=0.0, interval=1000.0, blocking=10.0)
    tr = simulate_run(c, trials=3, seed=0, work_s=10_500.0)
    # 10 intervals of 1000 s with a 10 s stall each, then the last 500 s
    assert tr.wall_s == pytest.approx(np.full(3, 10_500.0 + 100.0))
    assert tr.productive_s == pytest.approx(np.full(3, 10_500.0))


@given(rate=st.floats(0.01, 2.0), restart=st.floats(0, 7200), interval=st.floats(60, 20_000),
       blocking=st.floats(0, 600), persist=st.floats(0, 3000), spares=st.sampled_from(
           [None, 0, 1, 3]), work=st.booleans())
@settings(max_examples=40, deadline=None)
def test_every_wall_second_is_training_lost_work_stall_or_recovery(rate, restart, interval,
                                                                   blocking, persist, spares,
                                                                   work):
    c = costs(rate, restart, interval, blocking, persist, spares, repair=5 * HOUR)
    starved = spares is not None and rate * 5 > 0.5 * spares     # pool often empty: wait 5 h
    assume(not work or first_order_ettr(rate / HOUR, restart + starved * 5 * HOUR, interval,
                                        blocking, blocking + persist) > 0.3)
    kw = {"work_s": 5 * DAY} if work else {"horizon_s": 5 * DAY}
    tr = simulate_run(c, trials=50, seed=3, **kw)
    total = tr.productive_s + tr.lost_s + tr.stall_s + tr.down_s
    assert total == pytest.approx(tr.wall_s, rel=1e-9, abs=1e-6)
    assert (tr.lost_s >= -1e-9).all() and (tr.stall_s >= -1e-9).all()
    assert (tr.spare_wait_s <= tr.down_s + 1e-6).all()
    if work:
        assert tr.productive_s == pytest.approx(np.full(50, 5 * DAY), rel=1e-9)
    again = simulate_run(c, trials=50, seed=3, **kw)
    assert np.array_equal(again.wall_s, tr.wall_s)


def test_a_job_that_cannot_finish_says_so():
    from simulator.reliability.montecarlo import NeverFinishes
    with pytest.raises(NeverFinishes, match="does not finish"):
        simulate_run(costs(rate_per_h=4, restart=4 * HOUR), trials=10, seed=0, work_s=30 * DAY)


def test_spare_pool_waits_only_when_empty_and_planned_stops_lose_nothing():
    base = dict(rate_per_h=1 / 2, restart=300, interval=1800, blocking=10)
    free = simulate_run(costs(**base), trials=200, seed=2, horizon_s=10 * DAY)
    one = simulate_run(costs(**base, spares=1, repair=24 * HOUR), trials=200, seed=2,
                       horizon_s=10 * DAY)
    many = simulate_run(costs(**base, spares=500, repair=24 * HOUR), trials=200, seed=2,
                        horizon_s=10 * DAY)
    assert free.spare_wait_s.sum() == 0 and many.spare_wait_s.sum() == 0
    assert one.spare_wait_s.mean() > 5 * DAY * 0.5          # a failure every 2 h, repairs 24 h
    assert one.ettr.mean() < free.ettr.mean()
    planned = simulate_run(costs(**base, planned=True), trials=50, seed=2, horizon_s=10 * DAY)
    assert planned.lost_s.sum() == 0 and planned.down_s.sum() > 0


def test_weibull_interarrivals_keep_the_mean_rate():
    c = costs(rate_per_h=1 / 3, restart=300)
    exp = simulate_run(c, trials=500, seed=4, horizon_s=30 * DAY)
    wb = simulate_run(c, trials=500, seed=4, horizon_s=30 * DAY, distribution="weibull",
                      weibull_shape=0.7)
    expected = 30 * 24 / 3
    assert exp.interruptions.sum(axis=1).mean() == pytest.approx(expected, rel=0.02)
    assert wb.interruptions.sum(axis=1).mean() == pytest.approx(expected, rel=0.03)
    assert wb.interruptions.sum(axis=1).std() > exp.interruptions.sum(axis=1).std()  # clustered


# ---------------- presets against their sources ----------------
@pytest.fixture(scope="module")
def llama3_step():
    """At screening fidelity: these tests are about the failure model, which needs the step
    time only (the fabric's step is 2.4 % longer and takes 11 s more to simulate)."""
    from simulator.simulate import simulate
    return simulate(Scenario.load(LLAMA3, ["fidelity=screening"]))


def test_llama3_preset_gives_the_papers_effective_training_time(llama3_step):
    """Llama 3 (section 3.3.4): "higher than 90 % effective training time" over the 54 days
    whose interruptions the preset's rates come from: an outcome, not an input, of the model
    (detection, restart, checkpoint reload and lost work)."""
    rep = failure_run(Scenario.load(LLAMA3), days=54, trials=400, step=llama3_step)
    assert rep.summary["ettr"] > 0.9


def test_meta_rsc1_job_mttf_is_1_8_h_at_16384_gpus_and_halves_when_doubled(llama3_step):
    sc = Scenario.load(LLAMA3, ["failures.preset=meta-rsc1"])
    mttf = failure_run(sc, days=30, trials=200, step=llama3_step).summary["job_mttf_h"]
    assert mttf == pytest.approx(1.8, rel=0.05)
    big = Scenario.load(LLAMA3, ["failures.preset=meta-rsc1", "cluster.gpus=32768",
                                 "workload.global_batch=4096"])
    mttf2 = failure_run(big, days=30, trials=200, step=llama3_step).summary["job_mttf_h"]
    assert mttf2 == pytest.approx(mttf / 2, rel=0.03)


# ---------------- levers move ETTR by what their costs predict ----------------
def _predicted(rep) -> float:
    c = rep.costs
    lag = c.blocking_s + c.persist_s
    down = float((c.rates_per_s * (c.detect_s + c.diagnose_s + np.where(c.replace, c.swap_s, 0)
                                   )).sum() / c.rates_per_s.sum()) + c.restart_s
    return first_order_ettr(c.unexpected_rate_per_s, down, c.interval_s, c.blocking_s, lag)


@pytest.fixture(scope="module")
def selene_step():
    from simulator.simulate import simulate
    return simulate(Scenario.load(SELENE))


def test_two_stage_beats_sync_by_what_the_stalls_predict(selene_step):
    sets = ["failures.preset=meta-rsc1", "failures.scale=2", "checkpoint.interval_min=30"]
    sync = failure_run(Scenario.load(SELENE, sets + ["checkpoint.strategy=sync"]), days=30,
                       trials=1500, step=selene_step)
    two = failure_run(Scenario.load(SELENE, sets + ["checkpoint.strategy=two-stage"]), days=30,
                      trials=1500, step=selene_step)
    gain = two.summary["ettr"] - sync.summary["ettr"]
    assert sync.costs.blocking_s > 20 * two.costs.blocking_s
    assert gain > 0
    assert gain == pytest.approx(_predicted(two) - _predicted(sync), rel=0.1)


def test_barrier_free_init_raises_ettr_by_its_shorter_restart(selene_step):
    sets = ["failures.preset=meta-rsc1", "failures.scale=2", "checkpoint.interval_min=30"]
    slow = failure_run(Scenario.load(SELENE, sets + ["failures.recovery.init=tcpstore"]),
                       days=30, trials=1500, step=selene_step)
    fast = failure_run(Scenario.load(SELENE, sets + ["failures.recovery.init=barrier-free"]),
                       days=30, trials=1500, step=selene_step)
    assert slow.costs.init_s == pytest.approx(1047 / 4) and fast.costs.init_s == 2.5
    gain = fast.summary["ettr"] - slow.summary["ettr"]
    assert gain == pytest.approx(_predicted(fast) - _predicted(slow), rel=0.1)


# ---------------- CLI ----------------
def test_failures_cli_json_and_components():
    import json
    r = _cli("failures", SELENE, "--days", "7", "--trials", "50", "--json")
    code, out, err = r.returncode, r.stdout, r.stderr
    assert code == 0, err
    d = json.loads(out)
    for k in ("ettr", "effective_mfu", "interruptions_per_day", "job_mttf_h", "by_cause",
              "ettr_vs_interval", "checkpoint_interval_min", "restart_s"):
        assert k in d
    assert 0 < d["ettr"] < 1 and d["effective_mfu"] == pytest.approx(d["ettr"] * d["mfu"])
    r = _cli("failures", SELENE, "--components")
    assert r.returncode == 0 and "faulty_gpu" in r.stdout


@pytest.mark.parametrize("args,field", [
    (["--set", "failures.rates.faulty_gpu=-1"], "failures.rates"),
    (["--set", "failures.rates.flux_capacitor=1"], "failures.rates"),
    (["--set", "checkpoint.interval_min=0"], "checkpoint.interval_min"),
    (["--set", "failures.recovery.spares=-1"], "failures.recovery.spares"),
    (["--set", "failures.preset=nonsense"], "failures.preset"),
    (["--days", "0"], "--days"),
    (["--tokens", "lots"], "--tokens"),
])
def test_bad_failure_input_is_one_line_exit_2(args, field):
    r = _cli("failures", SELENE, *args)
    code, err = r.returncode, r.stderr
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert field in err


def test_productive_time_never_exceeds_running_time_at_whole_periods():
    """Found by the property above: at u = k x period (7,320.29 s), floor(u / period) and
    mod(u, period) computed apart disagreed for some k (17, 19, 23, ..., 46): the float
    quotient rounded up to k while the remainder kept a whole period, so k + 1 intervals of
    training were counted in k periods."""
    from simulator.reliability.montecarlo import productive
    c = costs(0.03125, 0.0, 7199.999999999999, 120.2914424407004)
    k = np.arange(1, 61)
    u = k * (c.interval_s + c.blocking_s)
    got = productive(u, c)
    assert (got <= u + 1e-6).all()
    assert got == pytest.approx(k * c.interval_s, abs=1e-6)
