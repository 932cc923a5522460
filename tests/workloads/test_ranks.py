"""The rank map (workloads/ranks.py) and Megatron's rank order (parallel.order)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulator import Scenario, ScenarioError, simulate
from simulator.config.resolve import resolve
from tests.conftest import small_scenario
from workloads.ranks import replica_groups, stage_and_replica

FABRIC = {"kind": "spine-leaf", "hosts_per_leaf": 16, "spines": 2, "nic_gbps": 200}


def _scenario(order: str, **over) -> Scenario:
    return Scenario.from_dict(small_scenario(
        parallel={"tp": 8, "pp": 2, "sequence_parallel": True, "zero": 1, "order": order},
        cluster={"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8, "topology": FABRIC},
        optimizations={"dp_overlap": False}, network={"congestion_control": "none"},
        fidelity="flow", **over))


def test_the_order_places_each_dimension_by_its_stride():
    """gpu = sum of coordinate x stride, strides the running product of the dimensions before
    it in the order: tp-cp-ep-dp-pp puts stage 1 after every rank of stage 0, tp-pp-ep-dp-cp
    puts it right after one tensor-parallel group."""
    default = resolve(_scenario("tp-cp-ep-dp-pp"))
    pp_near = resolve(_scenario("tp-pp-ep-dp-cp"))
    assert stage_and_replica(default, 8) == (0, 1) and stage_and_replica(default, 32) == (1, 0)
    assert stage_and_replica(pp_near, 8) == (1, 0) and stage_and_replica(pp_near, 16) == (0, 1)
    assert list(replica_groups(default, "dp", 0)[0]) == [0, 8, 16, 24]
    assert list(replica_groups(pp_near, "dp", 0)[0]) == [0, 16, 32, 48]
    assert list(replica_groups(pp_near, "pp", 0)[0]) == [0, 8]


def test_the_order_moves_data_parallel_traffic_on_the_fabric_and_nothing_else():
    a, b = (simulate(_scenario(o)) for o in ("tp-cp-ep-dp-pp", "tp-pp-ep-dp-cp"))
    assert a.memory_gib_per_gpu == b.memory_gib_per_gpu
    for part in ("forward_compute", "backward_compute", "recompute"):
        assert a.breakdown_s[part] == b.breakdown_s[part]
    load = [dict(zip(r.links.link, r.links.bytes)) for r in (a, b)]
    assert load[0] != load[1]                     # the links carry other traffic


@pytest.mark.parametrize("order,needle", [("tp-cp-dp-pp", "each of"),
                                          ("tp-cp-dp-ep-pp", "ep right before dp"),
                                          ("tp-tp-ep-dp-pp", "each of")])
def test_a_bad_order_is_one_line_naming_the_field(order, needle):
    with pytest.raises(ScenarioError) as err:
        _scenario(order)
    assert "parallel.order" in str(err.value) and needle in str(err.value)


@pytest.mark.parametrize("order", ["tp-cp-ep-dp-pp", "tp-pp-ep-dp-cp", "pp-tp-cp-ep-dp"])
def test_the_first_group_is_the_first_of_all_the_groups(order):
    """first_group (what ranks-per-node is counted from) builds one group without the
    others: it is replica_groups' first, for every role and stage, under any order."""
    from workloads.ranks import ROLES, first_group
    lay = resolve(Scenario.from_dict(small_scenario(
        parallel={"tp": 2, "pp": 4, "cp": 2, "order": order},
        cluster={"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8})))
    for stage in range(lay.pp):
        for role in ROLES:
            assert list(first_group(lay, role, stage)) == \
                list(replica_groups(lay, role, stage)[0]), (role, stage)


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 3, 4]), pp=st.sampled_from([1, 2, 4]),
       cp=st.sampled_from([1, 2]), gpn=st.sampled_from([2, 4, 6, 8]),
       order=st.sampled_from(["tp-cp-ep-dp-pp", "tp-pp-ep-dp-cp", "pp-tp-cp-ep-dp",
                              "tp-cp-pp-ep-dp"]))
def test_every_stages_groups_sit_as_when_placed_one_stage_at_a_time(tp, pp, cp, gpn, order):
    """pipeline_groups places stage 0's groups and moves them by whole stages where a stage
    spans whole nodes: the same groups, for every stage and role, as placing each stage
    (48 GPUs, so that 6 to a node and tp 3 put groups across node boundaries)."""
    from simulator.step.groups import pipeline_groups, stage_groups
    try:
        lay = resolve(Scenario.from_dict(small_scenario(
            workload={"global_batch": 96},
            parallel={"tp": tp, "pp": pp, "cp": cp, "order": order,
                      "sequence_parallel": tp > 1},
            cluster={"gpu": "a100-80gb", "gpus": 48, "gpus_per_node": gpn})))
    except ScenarioError:
        assume(False)
    assert pipeline_groups(lay, gpn) == [stage_groups(lay, gpn, i) for i in range(lay.pp)]
