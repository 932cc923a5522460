"""GPU speed variability at scale: the step pays the expected slowest GPU of each group."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import Scenario, ScenarioError, simulate
from simulator.step.variability import expected_max_z, slowest_of
from tests.conftest import small_scenario


@pytest.mark.parametrize("n", [2, 8, 64, 1024, 16384])
def test_expected_maximum_matches_sampled_normals(n):
    """Blom's order statistic against the mean of many sampled maxima (seeded)."""
    rng = np.random.default_rng(7)
    draws = max(200, 2_000_000 // n)
    sampled = rng.standard_normal((draws, n)).max(axis=1).mean()
    assert expected_max_z(n) == pytest.approx(sampled, rel=0.05)
    assert expected_max_z(1) == 0.0


def _weak(gpus: int, cv: float) -> Scenario:
    """Same work per pipeline replica (4 micro-batches) at any scale."""
    dp = gpus // 4
    return Scenario.from_dict(small_scenario(
        workload={"global_batch": 4 * dp},
        cluster={"gpus": gpus, "variability": {"gpu_speed_cv": cv}}, fidelity="analytic"))


def test_weak_scaling_loses_what_the_slowest_gpu_costs_and_no_more():
    """Without variability a replica's step does not depend on how many replicas there are
    (beyond the gradient reduction); with it, the step grows with the job's size by at least
    what the slowest of a TP group costs on the compute and at most what the slowest of all N
    GPUs costs on the whole step (compute and the bubbles it paces)."""
    cv = 0.015
    steps = {}
    for gpus in (64, 1024, 16384):
        off, on = simulate(_weak(gpus, 0.0)), simulate(_weak(gpus, cv))
        compute = off.breakdown_s["forward_compute"] + off.breakdown_s["backward_compute"]
        added = on.step_time_s - off.step_time_s
        assert compute * (slowest_of(2, cv) - 1) < added
        assert added <= off.step_time_s * (slowest_of(gpus, cv) - 1)
        steps[gpus] = (off.step_time_s - off.breakdown_s["dp_comm"], on.mfu)
    assert steps[64][0] == pytest.approx(steps[16384][0], rel=0.01)
    assert steps[64][1] > steps[1024][1] > steps[16384][1]          # MFU falls with scale


def test_a_straggler_slower_than_the_expected_slowest_still_sets_the_pace():
    base = small_scenario(cluster={"variability": {"gpu_speed_cv": 0.015}}, fidelity="analytic")
    varied = simulate(Scenario.from_dict(base)).step_time_s
    slow = simulate(Scenario.from_dict({**base, "faults": {"stragglers": [
        {"gpu": 5, "slowdown": 1.5}]}})).step_time_s
    assert slow > 1.2 * varied


def test_variability_off_on_one_gpu_changes_nothing():
    one = {"tp": 1, "pp": 1, "sequence_parallel": False}
    a, b = (simulate(Scenario.from_dict(small_scenario(
        parallel=one, workload={"global_batch": 4},
        cluster={"gpus": 1, "gpus_per_node": 1, "variability": {"gpu_speed_cv": cv}},
        fidelity="analytic"))).step_time_s for cv in (0.0, 0.1))
    assert a == b


def test_negative_variability_is_a_one_line_error():
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(small_scenario(cluster={"variability": {"gpu_speed_cv": -0.1}}))
    assert "cluster.variability.gpu_speed_cv" in str(e.value) and "\n" not in str(e.value)
