"""The sweep's pipeline evaluator (simulator.engine.dataflow) gives the simpy executor's numbers
bit for bit, on random non-uniform programs of every schedule and on compiled scenarios."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import Scenario
from simulator.engine import dataflow, executor
from simulator.engine.dataflow import dataflow_pipeline
from simulator.engine.executor import _run_pipeline, run_step
from simulator.engine.schedules import stage_actions
from simulator.network.alpha_beta import AlphaBeta
from simulator.step.accounting import account
from simulator.step.program import PARTS, Program, compile_program
from tests.simulator.test_schedules import uniform_program


def _same(a, b) -> None:
    assert a.end.tolist() == b.end.tolist()
    assert a.blocked.tolist() == b.blocked.tolist()
    assert a.busy.tolist() == b.busy.tolist()
    assert a.last_bwd == b.last_bwd


def _random_program(rng, schedule, p, v, m, p2p, blocking) -> Program:
    def parts():
        return {k: rng.uniform(0.0, 1.0, (p, v)) * (rng.random() < 0.7) for k in PARTS}
    z = np.zeros((p, v))
    return Program(p=p, v=v, m=m, schedule=schedule, F=parts(), B=parts(), W=parts(),
                   p2p_s=p2p, p2p_blocking=blocking, dp_bucket_s=z,
                   dp_buckets=np.ones((p, v), int), dp_overlap=True,
                   param_gather_s=np.zeros(p), embedding_sync_s=np.zeros(p),
                   optimizer_s=np.zeros(p))


@given(schedule=st.sampled_from(["gpipe", "1f1b", "interleaved", "zb-h1"]),
       p=st.integers(1, 9), v=st.integers(1, 4), k=st.integers(1, 4),
       p2p=st.sampled_from([0.0, 1e-3, 0.37]), blocking=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
@settings(max_examples=150, deadline=None)
def test_recurrence_equals_the_simpy_run_exactly(schedule, p, v, k, p2p, blocking, seed):
    if schedule != "interleaved":
        v = 1
    prog = _random_program(np.random.default_rng(seed), schedule, p, v, p * k, p2p, blocking)
    _same(dataflow_pipeline(prog), _run_pipeline(prog))


@pytest.mark.parametrize("overrides", [
    ["parallel.pp=8", "parallel.vpp=3", "parallel.schedule=interleaved"],
    ["parallel.pp=4", "parallel.schedule=zb-h1", "optimizations.pp_overlap=false"],
    ["parallel.pp=16", "parallel.schedule=1f1b", "workload.micro_batch=2"],
])
def test_compiled_steps_are_identical_with_and_without_the_event_loop(overrides):
    sc = Scenario.load("examples/megascale-175b-12288.yaml",
                       overrides + ["fidelity=screening"])
    acc = account(sc)
    c = sc.cluster
    comm = AlphaBeta.for_cluster(c.gpu, c.topology, c.gpus_per_node, sc.network.nccl)
    prog = compile_program(sc, acc.layout, comm)
    simpy_step = run_step(prog, timeline=True)
    fast = run_step(prog, timeline=False)
    assert fast.step_time_s == simpy_step.step_time_s
    assert fast.dp_end.tolist() == simpy_step.dp_end.tolist()
    _same(dataflow_pipeline(prog), _run_pipeline(prog))


def test_both_engines_refuse_a_deadlocked_order(monkeypatch):
    """A stage that runs a backward before the forward it needs never proceeds: the event
    run and the recurrence both say so instead of ending with stages unfinished."""
    def backwards_first(schedule, p, stage, m, v=1, group=None, extra_warmup=0):
        acts = stage_actions(schedule, p, stage, m, v, group, extra_warmup)
        return acts[::-1] if stage == p - 1 else acts

    monkeypatch.setattr(executor, "stage_actions", backwards_first)
    monkeypatch.setattr(dataflow, "stage_actions", backwards_first)
    prog = uniform_program("1f1b", 4, 8)
    for timeline in (True, False):
        with pytest.raises(RuntimeError, match="deadlocks"):
            run_step(prog, timeline=timeline)
