"""Pipeline schedules: bubbles emerge from the order and the dependencies and match the closed
forms in the uniform, communication-free case."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.executor import run_step
from simulator.engine.schedules import peak_in_flight, schedule_table, stage_actions
from simulator.step.program import PARTS, Program
from workloads.layout import Layout


def uniform_program(schedule, p, m, v=1, F=1.0, B=2.0, W=0.0) -> Program:
    def arr(x):
        return {k: np.full((p, v), x if k == "compute" else 0.0) for k in PARTS}
    z = np.zeros((p, v))
    return Program(p=p, v=v, m=m, schedule=schedule, F=arr(F / v), B=arr(B / v), W=arr(W / v),
                   p2p_s=0.0, p2p_blocking=False, dp_bucket_s=z, dp_buckets=np.ones((p, v), int),
                   dp_overlap=True, param_gather_s=np.zeros(p), embedding_sync_s=np.zeros(p),
                   optimizer_s=np.zeros(p))


def bubble_over_ideal(prog: Program) -> float:
    trace = run_step(prog)
    ideal = prog.m * float(sum(prog.duration(k)[0].sum() for k in "FBW"))
    return (trace.step_time_s - ideal) / ideal


@given(p=st.integers(1, 16), v=st.integers(1, 4), k=st.integers(1, 4),
       schedule=st.sampled_from(["gpipe", "1f1b", "interleaved"]),
       F=st.floats(0.5, 2.0), B=st.floats(0.5, 3.0))
@settings(max_examples=120, deadline=None)
def test_bubble_fraction_is_p_minus_1_over_v_m(p, v, k, schedule, F, B):
    if schedule != "interleaved" or p == 1:
        v = 1
    m = p * k
    if m > 64:
        m = p * (64 // p)
    prog = uniform_program("1f1b" if schedule == "interleaved" and v == 1 else schedule,
                           p, m, v, F, B)
    assert bubble_over_ideal(prog) == pytest.approx((p - 1) / (v * m), rel=1e-9, abs=1e-12)


@given(p=st.integers(2, 12), k=st.integers(1, 5), F=st.floats(0.5, 2.0),
       B=st.floats(0.5, 2.0), w_frac=st.floats(0.05, 1.0))
@settings(max_examples=80, deadline=None)
def test_zb_h1_bubble_is_p_minus_1_times_f_plus_b_minus_w(p, k, F, B, w_frac):
    """DeepSeek-V3 Table 2: ZB1P bubble (PP-1)(F + B - 2W) with B the whole backward, i.e.
    (p-1)(F + B_input - W) with B split into B_input and W. The deferred W passes fill the
    gaps left by the forward and backward chains, so it holds while W <= min(F, B_input), the
    paper's regime (T_F ~ T_B ~ T_W for GEMM-bound layers)."""
    W = w_frac * min(F, B)
    m = p * k
    prog = uniform_program("zb-h1", p, m, 1, F, B, W)
    trace = run_step(prog)
    ideal = m * (F + B + W)
    assert trace.step_time_s - ideal == pytest.approx((p - 1) * (F + B - W), rel=1e-9)
    one = run_step(uniform_program("1f1b", p, m, 1, F, B + W, 0.0))
    assert trace.step_time_s < one.step_time_s


@pytest.mark.parametrize("p,m,v", [(4, 8, 1), (8, 32, 1), (4, 8, 2), (8, 16, 3), (2, 2, 4)])
def test_in_flight_micro_batches_as_megatron_holds_them(p, m, v):
    for i in range(p):
        if v == 1:
            assert peak_in_flight(stage_actions("1f1b", p, i, m)) == min(p - i, m)
            assert peak_in_flight(stage_actions("gpipe", p, i, m)) == m
            assert peak_in_flight(stage_actions("zb-h1", p, i, m)) == min(p, m)
        else:
            acts = stage_actions("interleaved", p, i, m, v)
            expect = min(2 * (p - i - 1) + (v - 1) * p + 1, m * v)
            assert peak_in_flight(acts) == expect


@pytest.mark.parametrize("schedule,v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2),
                                        ("interleaved", 3), ("zb-h1", 1)])
def test_every_stage_runs_every_micro_batch_once(schedule, v):
    p, m = 4, 8
    for i in range(p):
        acts = stage_actions(schedule, p, i, m, v)
        kinds = "FBW" if schedule == "zb-h1" else "FB"
        assert sorted(acts) == sorted((k, j, c) for k in kinds for j in range(m)
                                      for c in range(v))


@pytest.mark.parametrize("schedule,v", [("1f1b", 1), ("interleaved", 2), ("gpipe", 1)])
def test_p2p_latency_lengthens_the_step_at_least_by_the_fill_and_drain(schedule, v):
    p, m, d = 4, 8, 0.1
    base = run_step(uniform_program(schedule, p, m, v)).step_time_s
    times = []
    for delay in (d, 2 * d):
        prog = uniform_program(schedule, p, m, v)
        prog.p2p_s = delay
        times.append(run_step(prog).step_time_s)
    # the first micro-batch crosses p-1 boundaries forward and p-1 backward
    assert times[0] >= base + 2 * (p - 1) * d - 1e-12
    assert times[1] > times[0]


def test_schedule_table_is_megatrons():
    """Megatron-Core's own example (schedules.py, get_schedule_table): PP 2, N 3, M 5, VP 2."""
    assert schedule_table(5, 2, 3) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1),
                                       (3, 0), (4, 0), (3, 1), (4, 1)]


@given(p=st.integers(2, 8), v=st.integers(2, 4), extra=st.integers(0, 12),
       n_off=st.integers(0, 12), F=st.floats(0.5, 2.0), B=st.floats(0.5, 3.0))
@settings(max_examples=80, deadline=None)
def test_any_valid_microbatch_group_keeps_the_interleaved_bubble(p, v, extra, n_off, F, B):
    """Megatron's tunable interleaved schedule (microbatch_group_size_per_vp_stage N, Llama
    3's flexible N): for m micro-batches, not necessarily a multiple of p, and any valid N the
    uniform pipeline's bubble is still (p-1)/(v m), and stage i holds
    min(2 (p-i-1) + (v-1) N + 1, m v) chunks at its peak."""
    m = p + extra
    n = p + n_off % (m - p + 1)
    if 0 < m % n < p:
        return
    prog = uniform_program("interleaved", p, m, v, F=F, B=B)
    prog.group = n
    assert bubble_over_ideal(prog) == pytest.approx((p - 1) / (v * m), rel=1e-9)
    for i in range(p):
        acts = stage_actions("interleaved", p, i, m, v, n)
        assert sorted(acts) == sorted((k, j, c) for k in "FB" for j in range(m)
                                      for c in range(v))
        assert peak_in_flight(acts) == min(2 * (p - i - 1) + (v - 1) * n + 1, m * v)


@pytest.mark.parametrize("rs_total,expect_tail", [(0.4, 0.1), (4.0, None)])
def test_zero_reduce_scatters_queue_layer_by_layer_behind_the_backward(rs_total, expect_tail):
    """One stage, one micro-batch, a backward of 2 s over 4 layers: each layer's
    reduce-scatter (rs_total / 4) is released as that layer's backward ends and queues on the
    gradient stream. Short ones hide but the last, which ends rs_total / 4 after the backward;
    long ones run back to back from the first layer's release: 0.5 + rs_total after the
    backward starts. The stream carries exactly rs_total (bytes are conserved)."""
    prog = uniform_program("1f1b", 1, 1, F=1.0, B=2.0)
    prog.zero_rs_s = np.full((1, 1), rs_total)
    prog.zero_rs_layers = np.full((1, 1), 4)
    trace = run_step(prog)
    rows = [r for r in trace.rows if r[3] == "zero"]
    assert sum(r[6] - r[5] for r in rows) == pytest.approx(rs_total)
    bwd_start, bwd_end = 1.0, 3.0
    if expect_tail is not None:
        assert trace.dp_end[0] == pytest.approx(bwd_end + expect_tail)
    else:
        assert trace.dp_end[0] == pytest.approx(bwd_start + 0.5 + rs_total)
    assert run_step(prog, timeline=False).step_time_s == trace.step_time_s


@pytest.mark.parametrize("schedule,p,m,v", [("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1),
                                            ("1f1b", 8, 4, 1), ("zb-h1", 4, 8, 1),
                                            ("zb-h1", 8, 4, 1), ("interleaved", 4, 8, 2),
                                            ("interleaved", 4, 12, 3), ("dualpipe", 4, 8, 2)])
def test_memory_holds_what_the_executed_schedule_holds(schedule, p, m, v):
    """The memory model's in-flight activations (whole-stage units) are the peak the
    executed order holds (chunks forwarded, weight gradients not yet done) on every stage."""
    lay = Layout(tp=1, pp=p, dp=1, cp=1, ep=1, vpp=v, micro_batch=1, num_micro_batches=m,
                 schedule=schedule, stage_layers=(v,) * p, sequence_parallel=False, zero=0,
                 recompute="none")
    for i in range(p):
        assert lay.in_flight(i) == peak_in_flight(stage_actions(schedule, p, i, m, v)) / v


@pytest.mark.parametrize("p,m,v", [(4, 8, 2), (4, 12, 3), (8, 16, 4)])
def test_ep_overlap_warms_up_with_one_more_forward_held_in_memory(p, m, v):
    """Megatron-LM runs one more warm-up forward under EP all-to-all overlap
    (get_pp_rank_microbatches: w = 2 (p - i - 1) + (v - 1) N + 1), so each merged 1F1B
    step's forward and backward are independent: stage i's first backward comes after those
    w forwards and the first steady step's, and the memory model holds the extra chunk as the
    executed order does."""
    lay = Layout(tp=1, pp=p, dp=1, cp=1, ep=8, vpp=v, micro_batch=1, num_micro_batches=m,
                 schedule="interleaved", stage_layers=(v,) * p, sequence_parallel=False,
                 zero=0, recompute="none", overlap_warmup=1)
    for i in range(p):
        acts = stage_actions("interleaved", p, i, m, v, None, 1)
        first_b = next(k for k, a in enumerate(acts) if a[0] == "B")
        assert first_b == min(2 * (p - i - 1) + (v - 1) * p + 1 + 1, m * v)
        assert sorted(acts) == sorted(stage_actions("interleaved", p, i, m, v))
        assert lay.in_flight(i) == peak_in_flight(acts) / v
