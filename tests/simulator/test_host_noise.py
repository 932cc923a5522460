"""OS noise on the hosts: network collectives stretched by exp(H sum rate (d - slack))."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import Scenario, ScenarioError, simulate
from simulator.calibration import NCCL_BUFFSIZE_BYTES
from simulator.config.scenario import HostDetour
from simulator.step.host_noise import slack_s, stall_factor
from tests.conftest import small_scenario

NIC_BYTES_PER_S = 400e9 / 8


def _run(noise):
    """tp 8 inside each node, dp 8 over 8 nodes (one GPU per node in each DP group); the DP
    all-reduce not overlapped, so its whole time is in the breakdown."""
    sc = Scenario.from_dict(small_scenario(
        parallel={"tp": 8, "pp": 1, "zero": 0},
        optimizations={"dp_overlap": False},
        cluster={"gpu": "h100-sxm", "topology": {"kind": "rail-optimized", "nic_gbps": 400},
                 "variability": {"host_noise": noise}},
        fidelity="screening"))
    return simulate(sc)


def test_a_daemon_stretches_the_network_allreduce_by_the_closed_form():
    rate, d = 5.0, 3000.0
    clean, noisy = _run([]), _run([{"rate_hz": rate, "duration_us": d}])
    slack = NCCL_BUFFSIZE_BYTES / NIC_BYTES_PER_S          # one channel per NIC by default
    expected = math.exp(8 * rate * (d * 1e-6 - slack))
    assert noisy.breakdown_s["dp_comm"] / clean.breakdown_s["dp_comm"] == \
        pytest.approx(expected, rel=1e-9)
    assert noisy.breakdown_s["tp_comm"] == clean.breakdown_s["tp_comm"]       # NVLink only


def test_detours_shorter_than_ncclss_slack_cost_nothing():
    """Kernel ticks and interrupts (microseconds) hide behind the posted buffer."""
    clean = _run([])
    ticks = _run([{"rate_hz": 1000.0, "duration_us": 5.0}])
    assert ticks.step_time_s == clean.step_time_s


@settings(max_examples=40, deadline=None)
@given(hosts=st.integers(1, 4096), rate=st.floats(0.01, 100.0), d_us=st.floats(1.0, 1e4))
def test_amplification_grows_with_hosts_and_never_shrinks_a_collective(hosts, rate, d_us):
    src = [HostDetour(rate_hz=rate, duration_us=d_us)]
    slack = slack_s(NIC_BYTES_PER_S, 2)
    f = stall_factor(src, hosts, slack)
    assert f >= 1.0 and stall_factor(src, 2 * hosts, slack) >= f
    assert stall_factor(src, 1, slack) == 1.0


def test_bad_host_noise_is_a_one_line_error():
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(small_scenario(
            cluster={"variability": {"host_noise": [{"rate_hz": -1, "duration_us": 10}]}}))
    assert "host_noise" in str(e.value) and "\n" not in str(e.value)
