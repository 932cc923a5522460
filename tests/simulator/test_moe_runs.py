"""The EP overlap model out of sample: published Qwen3-30B-A3B steps on 16 H100 with and
without Megatron-Core's all-to-all overlap (validation/moe_runs, fitted to nothing)."""

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
    dependencies between the two streams and the dispatcher's SMs leave 1.20x."""
    gains = overlap_gains(table).set_index("id")
    g = gains.loc["mb5094-qwen3-30b-16g-hybridep-overlap"]
    assert g.predicted == pytest.approx(g.published, rel=0.05)


def test_hybridep_steps_within_15_percent(table):
    rows = table[table.dispatcher == "flex"]
    assert len(rows) == 3
    assert rows.error.abs().max() < 0.15
