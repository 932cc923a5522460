"""MoE steps out of sample: newer Megatron-Bridge runs of Qwen3-30B-A3B on 16 H100 with and
without Megatron-Core's all-to-all overlap, and of DeepSeek-V3 on 1,024 H100
(validation/moe_runs; only the host's per-expert issue time is fitted on them, with the other
Megatron-Core MoE runs: tests/simulator/test_host.py)."""

from __future__ import annotations

import pytest

from tests.conftest import VALIDATION
from validation.moe_runs import evaluate, overlap_gains


@pytest.fixture(scope="module")
def table():
    if not VALIDATION.exists():
        pytest.skip(f"{VALIDATION} not present (../shared is beside the repo in CI)")
    return evaluate(VALIDATION)


def test_hybridep_overlap_as_measured(table):
    """The controlled A/B (HybridEP, 32 SMs, CUDA graphs on the router and preprocessing):
    overlap takes the step from 24.7 to 21.0 s, 1.18x. The overlapped step reads within 5 %
    (hiding every all-to-all behind the other micro-batch's compute gave 1.29x; the
    dependencies between the two streams, the dispatcher's SMs and, once the all-to-alls
    hide, the host issuing both passes' kernels pace it). The gain reads lower than measured
    (1.08x) because the run without overlap reads 9 % fast, not the overlapped one; it must
    still be a gain, and no larger than measured."""
    by = table.set_index("id")
    run = by.loc["mb5094-qwen3-30b-16g-hybridep-overlap"]
    assert run.predicted_s == pytest.approx(run.published_s, rel=0.05)
    g = overlap_gains(table).set_index("id").loc["mb5094-qwen3-30b-16g-hybridep-overlap"]
    assert 1.05 < g.predicted <= g.published


def test_hybridep_steps_within_15_percent(table):
    """NeMo 26.06's HybridEP runs: Qwen3-30B-A3B on 16 H100 with and without overlap, and
    DeepSeek-V3 on 1,024 H100 (EP 64 over 8 nodes, 61.8 s; 65.8 s here)."""
    rows = table[table.dispatcher == "flex"]
    assert len(rows) == 4
    assert rows.error.abs().max() < 0.15


def test_delaying_the_weight_gradient_moves_the_overlapped_step_as_little_as_measured(table):
    """Pull 3862's smoke, cases A1 and A2: the same overlapped run without and with
    delay_wgrad_compute took 31.31 and 31.20 s (0.4 %). Here too the dispatch the delay lets
    start earlier hides behind compute either way: the two steps within 1 %, the delayed one
    never slower."""
    by = table.set_index("id")
    a1 = by.loc["mb3862-qwen3-30b-16g-alltoall-overlap"]
    a2 = by.loc["mb3862-qwen3-30b-16g-alltoall-overlap-dw"]
    assert a1.predicted_s * 0.99 <= a2.predicted_s <= a1.predicted_s
