"""HSDP / MiCS (parallel.zero_shard_size): ZeRO's states sharded inside groups of Z
data-parallel ranks and replicated across them. Memory and traffic between ZeRO over one rank
(replicated) and over the whole group, as the formulas say; the groups tile the ranks."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import Scenario, ScenarioError, simulate
from simulator.config.resolve import resolve
from simulator.step.program import collective_requests
from tests.conftest import small_scenario
from workloads.memory import BYTES_OPTIMIZER, BYTES_WEIGHT, memory_table
from workloads.ranks import replica_groups

DP = 32                                  # 64 GPUs, tp 2, pp 1
FP32 = 4


def _scenario(zero: int, z: int | None, *more) -> Scenario:
    over = [f"parallel.zero={zero}", "parallel.pp=1", "fidelity=screening", *more]
    if z is not None:
        over.append(f"parallel.zero_shard_size={z}")
    return Scenario.from_dict(small_scenario(), over)


def _states(zero: int, z: int | None):
    """Memory of the (only) pipeline stage's GPU."""
    sc = _scenario(zero, z)
    return memory_table(sc.workload.model, resolve(sc), seq_len=sc.workload.seq_len).iloc[0]


@pytest.mark.parametrize("zero", [1, 2, 3])
@pytest.mark.parametrize("z", [1, 4, 8, DP])
def test_states_shard_over_the_shard_group_as_zero_says(zero, z):
    """ZeRO-1 shards the optimizer state, ZeRO-2 also the gradients, ZeRO-3 also the weights
    (Rajbhandari et al. 2020), over Z ranks instead of dp."""
    row = _states(zero, z)
    n = row.params
    assert row.optimizer_bytes == pytest.approx(n * BYTES_OPTIMIZER["adam"] / z)
    assert row.grads_bytes == pytest.approx(n * FP32 / (z if zero >= 2 else 1))
    assert row.weights_bytes == pytest.approx(n * BYTES_WEIGHT / (z if zero == 3 else 1))


def test_a_shard_group_of_the_whole_dp_group_is_plain_zero():
    for zero in (1, 3):
        a = simulate(_scenario(zero, None), frames=False).to_dict()
        b = simulate(_scenario(zero, DP), frames=False).to_dict()
        for d in (a, b):
            d.pop("sim_wall_s")
        assert a == b


def test_memory_falls_as_the_shard_group_grows():
    totals = [_states(3, z).total_bytes for z in (1, 2, 8, DP)]
    assert totals == sorted(totals, reverse=True) and totals[0] > totals[-1]


def test_gradients_reduce_scatter_in_the_shard_and_all_reduce_their_shard_across_replicas():
    """HSDP's end of step with ZeRO-1: reduce-scatter of the full gradients over Z ranks,
    all-reduce of the 1/Z shard over the dp / Z replicas, all-gather of the weights over Z."""
    z = 8
    sc = _scenario(1, z)
    reqs = collective_requests(sc, resolve(sc))
    by_role = {}
    for r in reqs:
        by_role.setdefault(r.group.role, set()).add((r.kind, r.group.size, r.nbytes))
    params = memory_table(sc.workload.model, resolve(sc), seq_len=sc.workload.seq_len).params[0]
    (rs,) = [b for k, n, b in by_role["dps"] if k == "reduce_scatter"]
    (ag,) = [b for k, n, b in by_role["dps"] if k == "all_gather"]
    (ar,) = [(n, b) for k, n, b in by_role["dpr"] if k == "all_reduce"]
    assert rs == pytest.approx(params * FP32) and ag == pytest.approx(params * BYTES_WEIGHT)
    assert ar == (DP // z, pytest.approx(params * FP32 / z))
    assert "dp" not in by_role                      # nothing runs over the whole group


def test_shard_groups_are_consecutive_ranks_and_replicas_take_one_of_each():
    lay = resolve(_scenario(1, 4))
    shards = np.array(replica_groups(lay, "dps", 0))
    reps = np.array(replica_groups(lay, "dpr", 0))
    assert sorted(shards.ravel()) == sorted(reps.ravel()) == list(range(64))
    assert np.all(np.diff(shards, axis=1) == 2)      # dp ranks step by tp = 2
    for rep in reps:                                 # one member in each shard group
        owners = [np.flatnonzero((shards == g).any(axis=1))[0] for g in rep]
        assert sorted(owners) == sorted(set(owners)) and len(owners) == DP // 4


@pytest.mark.parametrize("overrides,needle", [
    (["parallel.zero=1", "parallel.zero_shard_size=5"], "zero_shard_size"),
    (["parallel.zero=0", "parallel.zero_shard_size=4"], "zero_shard_size"),
])
def test_bad_shard_sizes_are_one_line(overrides, needle):
    with pytest.raises(ScenarioError) as err:
        sc = Scenario.from_dict(small_scenario(), overrides)
        resolve(sc)
    assert needle in str(err.value) and "\n" not in str(err.value)
