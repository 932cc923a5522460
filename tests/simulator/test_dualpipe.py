"""DualPipe (DeepSeek-V3, arXiv 2412.19437 section 3.2.1; deepseek-ai/DualPipe): the order,
its memory and bubble against the paper's Table 2, and the layout of its two model copies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import Scenario, ScenarioError, simulate
from simulator.config.resolve import resolve
from simulator.engine.executor import run_step
from simulator.engine.schedules import dualpipe_pairs, peak_in_flight, stage_actions
from simulator.step.accounting import account
from tests.conftest import small_scenario
from tests.simulator.test_schedules import uniform_program
from workloads.layout import dualpipe_pairs as pairs_closed_form


@given(half=st.integers(1, 8), extra=st.integers(0, 10))
@settings(max_examples=60, deadline=None)
def test_every_rank_runs_each_directions_half_once_and_holds_pp_plus_1(half, extra):
    """Each rank runs F, B and W once for each of the m / 2 micro-batches of each direction;
    its activations peak at p + 1 chunks (Table 2: 'PP + 1'), and the pairs it overlaps match
    the closed form the step program uses."""
    p = 2 * half
    m = 2 * p + 2 * extra
    for i in range(p):
        acts = stage_actions("dualpipe", p, i, m, 2)
        assert sorted((k[0].upper(), j, c) for k, j, c in acts) == sorted(
            (k, j, c) for k in "FBW" for j in range(m // 2) for c in range(2))
        assert peak_in_flight(acts) == p + 1
        assert dualpipe_pairs(p, i, m) == pairs_closed_form(p, i, m)


@pytest.mark.parametrize("p,m", [(4, 8), (8, 16), (8, 24), (16, 32)])
@pytest.mark.parametrize("F,B,W", [(1.0, 1.0, 1.0), (1.0, 1.2, 0.8), (1.0, 1.5, 0.5)])
def test_bubble_below_the_papers_bound_and_zero_bubble_1p(p, m, F, B, W):
    """Uniform stages, no communication: the idle time of a rank lies below DeepSeek's
    (p/2 - 1)(F&B + B - 3W) (F&B = F + B here, B the full backward; Table 2), below ZB1P's
    (p - 1)(F + B - 2W), and above zero; the event run and the recurrence agree exactly."""
    prog = uniform_program("dualpipe", p, m, 2, F=2 * F, B=2 * B, W=2 * W)  # per chunk: / v
    trace, flow = run_step(prog), run_step(prog, timeline=False)
    assert trace.step_time_s == flow.step_time_s
    bubble = trace.step_time_s - m * (F + B + W)     # B here is the input-gradient half
    full = B + W
    assert 0 < bubble <= (p / 2 - 1) * ((F + full) + full - 3 * W) + 1e-9
    assert bubble < (p - 1) * (F + full - 2 * W)


def _scenario(**par):
    return Scenario.from_dict(small_scenario(
        workload={"model": "megatron-gpt-1.7b", "global_batch": 64, "micro_batch": 1},
        parallel={"tp": 2, "pp": 4, **par}, cluster={"gpu": "h100-sxm"}))


def test_two_copies_of_each_piece_and_the_ends_on_both_end_ranks():
    """Rank i runs piece i (chunk 0) and piece p - 1 - i (chunk 1): twice the parameters of
    1F1B on every rank, the embedding and the output layer on both rank 0 and rank p - 1."""
    dual, one = _scenario(schedule="dualpipe"), _scenario(schedule="1f1b")
    lay = resolve(dual)
    assert lay.vpp == 2 and [lay.piece(i, 1) for i in range(4)] == [3, 2, 1, 0]
    assert lay.chunk_layers == tuple((n, m) for n, m in zip((6, 6, 6, 6), (6, 6, 6, 6)))
    md, m1 = account(dual).memory, account(one).memory
    ends = (md.params.iloc[0] + md.params.iloc[-1])
    assert ends == pytest.approx(2 * (m1.params.iloc[0] + m1.params.iloc[-1]))
    assert md.params.sum() == pytest.approx(2 * m1.params.sum())
    r = simulate(dual)
    assert r.vpp == 2 and r.fits_memory and r.step_time_s > 0


@pytest.mark.parametrize("par,glob,field", [
    ({"pp": 3, "tp": 1, "sequence_parallel": False}, 48, "pp"),
    ({"vpp": 2}, 64, "vpp"),
    ({}, 48, "micro-batches"),          # m = 6 < 2 pp
])
def test_dualpipes_rules_are_one_line_errors(par, glob, field):
    data = small_scenario(workload={"model": "megatron-gpt-1.7b", "global_batch": glob,
                                    "micro_batch": 1},
                          parallel={"tp": 2, "pp": 4, "schedule": "dualpipe", **par},
                          cluster={"gpu": "h100-sxm", "gpus": 48 if par.get("pp") == 3 else 64})
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(data)
    assert field in str(e.value) and "\n" not in str(e.value)
