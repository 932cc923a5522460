"""Variability of GPU speed at scale: the step waits for its slowest GPU.

Each GPU's compute runs ``1 + cv z`` times its nominal time, z standard normal, drawn once per
GPU (Sinha et al., SC'22; :data:`simulator.calibration.GPU_SPEED_CV`). Synchronising groups pay
their slowest member: a stage's TP / CP / EP peers meet every layer, so each stage of a
pipeline runs at the pace of the slowest of its ``tp x cp x ep`` GPUs; the pipeline with the
slowest GPU of the whole job runs that stage at the slowest of all N, and the data-parallel
gradient reduction waits for that pipeline. Expected maxima are analytic (Blom's 1958 order
statistic of a normal: 0.589 against the exact 0.564 for n = 2, 3.234 against 3.235 for
n = 1,024), so there is no draw per GPU and the result is deterministic.
"""

from __future__ import annotations

from statistics import NormalDist

BLOM_ALPHA = 0.375
"""Blom's plotting position: E[max of n standard normals] ~ Phi^-1((n - a) / (n - 2a + 1))."""


def expected_max_z(n: int) -> float:
    """Expected largest of ``n`` standard normal draws (Blom's approximation; 0 for n = 1)."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - BLOM_ALPHA) / (n - 2 * BLOM_ALPHA + 1))


def slowest_of(n: int, cv: float) -> float:
    """Expected compute-time factor of the slowest of ``n`` GPUs whose speeds vary by ``cv``."""
    return 1.0 + cv * expected_max_z(n)
