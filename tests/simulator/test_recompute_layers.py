"""Megatron's --recompute-method / --recompute-num-layers under full recomputation."""

from __future__ import annotations

import math

import pytest

from simulator import Scenario, account, simulate
from tests.conftest import llama_layout_error, small_scenario

L = 32                                   # Llama 3 8B's layers, all on one stage


def _sc(**parallel) -> Scenario:
    return Scenario.from_dict(small_scenario(
        workload={"model": "llama3-8b", "seq_len": 8192, "global_batch": 32, "micro_batch": 1},
        parallel={"tp": 1, "pp": 1, "sequence_parallel": False, **parallel},
        cluster={"gpu": "h100-sxm", "gpus": 8}))


@pytest.fixture(scope="module")
def ends():
    """No recomputation and full recomputation of every layer: the two ends."""
    out = {}
    for mode in ("none", "full"):
        sc = _sc(recompute=mode)
        out[mode] = (simulate(sc, frames=False), account(sc))
    return out


@pytest.mark.parametrize("n", [1, 8, 31])
def test_block_recomputes_only_the_first_n_layers(ends, n):
    """block, n: n of the L identical layers keep their input and run again, the others keep
    everything: recompute time, stored activations and hardware FLOPs interpolate the two
    ends by n / L exactly."""
    none, full = ends["none"], ends["full"]
    sc = _sc(recompute="full", recompute_method="block", recompute_num_layers=n)
    res, acc = simulate(sc, frames=False), account(sc)
    f = n / L
    assert res.breakdown_s["recompute"] == pytest.approx(f * full[0].breakdown_s["recompute"],
                                                         rel=1e-9)
    acts = {k: v[1].memory.activations_bytes.iloc[0] for k, v in ends.items()}
    assert acc.memory.activations_bytes.iloc[0] == pytest.approx(
        f * acts["full"] + (1 - f) * acts["none"], rel=1e-12)
    extra = full[1].flops.hardware - full[1].flops.model
    assert acc.flops.hardware - acc.flops.model == pytest.approx(f * extra, rel=1e-12)
    assert acc.flops.model == none[1].flops.model
    assert none[0].step_time_s < res.step_time_s < full[0].step_time_s


def test_block_over_every_layer_is_full_recomputation(ends):
    sc = _sc(recompute="full", recompute_method="block", recompute_num_layers=L + 5)
    res, acc = simulate(sc, frames=False), account(sc)
    assert res.step_time_s == ends["full"][0].step_time_s
    assert acc.memory_gib_per_gpu == ends["full"][1].memory_gib_per_gpu


@pytest.mark.parametrize("k", [2, 4, 5])
def test_uniform_groups_keep_one_input_per_group_and_rebuild_a_group_at_once(ends, k):
    """uniform, k: ceil(L / k) checkpoints instead of L, and the backward rebuilds k layers'
    activations at once; every layer still runs again, so the step is full recomputation's."""
    full_res, full_acc = ends["full"]
    sc = _sc(recompute="full", recompute_num_layers=k)
    res, mem = simulate(sc, frames=False), account(sc).memory.iloc[0]
    one = full_acc.memory.iloc[0]
    assert res.step_time_s == full_res.step_time_s
    assert mem.activations_bytes == pytest.approx(
        one.activations_bytes * math.ceil(L / k) / L, rel=1e-12)
    assert mem.recompute_working_bytes == pytest.approx(k * one.recompute_working_bytes,
                                                        rel=1e-12)


@pytest.mark.parametrize("parallel, field", [
    ({"recompute": "selective", "recompute_num_layers": 4}, "recompute_num_layers"),
    ({"recompute": "full", "recompute_method": "block"}, "recompute_method")])
def test_rules_are_one_line_errors(parallel, field):
    assert field in llama_layout_error(**parallel)
