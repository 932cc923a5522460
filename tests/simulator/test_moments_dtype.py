"""A precision-aware optimizer's bf16 moments: state memory and optimizer-step traffic."""

from __future__ import annotations

import pytest

from simulator import Scenario, account, simulate
from simulator.calibration import OPTIMIZER_BYTES_PER_PARAM, compute_calibration
from simulator.step.program import OPTIMIZER_KERNELS
from tests.conftest import small_scenario


def _sc(optimizer: str, moments: str) -> Scenario:
    return Scenario.from_dict(small_scenario(
        workload={"optimizer": optimizer, "moments_dtype": moments}))


@pytest.mark.parametrize("optimizer, moments, fp32_state", [("adam", 2, 12), ("sgd", 1, 8)])
def test_bf16_moments_halve_the_moments_and_nothing_else(optimizer, moments, fp32_state):
    """Master copy (4 B) plus each moment in 2 bytes instead of 4: Adam 12 -> 8 B a
    parameter, SGD 8 -> 6; weights and gradients keep their size. The optimizer step reads
    and writes every moment once, so its HBM traffic drops by 4 B per moment."""
    fp32, bf16 = account(_sc(optimizer, "fp32")), account(_sc(optimizer, "bf16"))
    a, b = fp32.memory.iloc[0], bf16.memory.iloc[0]
    assert b.optimizer_bytes / a.optimizer_bytes == pytest.approx(
        (4 + 2 * moments) / fp32_state, rel=1e-12)
    assert (b.weights_bytes, b.grads_bytes) == (a.weights_bytes, a.grads_bytes)
    overhead = OPTIMIZER_KERNELS * compute_calibration("a100-80gb").kernel_overhead_s
    t32 = simulate(_sc(optimizer, "fp32"), frames=False).breakdown_s["optimizer"] - overhead
    t16 = simulate(_sc(optimizer, "bf16"), frames=False).breakdown_s["optimizer"] - overhead
    full = OPTIMIZER_BYTES_PER_PARAM[optimizer]
    assert t16 / t32 == pytest.approx((full - 4 * moments) / full, rel=1e-9)
