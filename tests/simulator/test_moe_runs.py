"""MoE steps out of sample: newer Megatron-Bridge runs of Qwen3-30B-A3B on 16 H100 with and
without Megatron-Core's all-to-all overlap, and of DeepSeek-V3 on 1,024 H100
(validation/moe_runs, fitted to nothing)."""

from __future__ import annotations

import pytest

from tests.conftest import VALIDATION
from validation.moe_runs import evaluate, overlap_gains


@pytest.fixture(scope="module")
def table():
    if not VALIDATION.exists():
        pytest.skip(f"{VALIDATION} not present (../shared is beside the repo in CI)")
    return evaluate(VALIDATION)


def test_hybridep_overlap_gain_as_measured(table):
    """The controlled A/B (HybridEP, 32 SMs): overlap takes the step from 24.7 to 21.0 s,
    1.18x. Hiding every all-to-all behind the other micro-batch's compute gave 1.29x; the
    dependencies between the two streams and the dispatcher's SMs leave 1.20x, and the host,
    which now issues both passes in the time the overlap left them, 1.13x."""
    gains = overlap_gains(table).set_index("id")
    g = gains.loc["mb5094-qwen3-30b-16g-hybridep-overlap"]
    assert g.predicted == pytest.approx(g.published, rel=0.05)


def test_hybridep_steps_within_15_percent(table):
    """NeMo 26.06's HybridEP runs: Qwen3-30B-A3B on 16 H100 with and without overlap, and
    DeepSeek-V3 on 1,024 H100 (EP 64 over 8 nodes, 61.8 s; 65.8 s here)."""
    rows = table[table.dispatcher == "flex"]
    assert len(rows) == 4
    assert rows.error.abs().max() < 0.15
