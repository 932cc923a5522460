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


@pytest.mark.parametrize("order,needle", [("tp-cp-pp", "leaves out dp, whose size is 4"),
                                          ("tp-ep-cp-dp-pp", "ep next to dp"),
                                          ("tp-tp-ep-dp-pp", "at most once"),
                                          ("tp-cp-xp-dp-pp", "at most once")])
def test_a_bad_order_is_one_line_naming_the_field(order, needle):
    with pytest.raises(ScenarioError) as err:
        _scenario(order)
    assert "parallel.order" in str(err.value) and needle in str(err.value)
    assert "\n" not in str(err.value)


def test_an_order_may_leave_out_dimensions_of_size_one():
    """As Megatron-Core's RankGenerator: tp-pp-dp (cp and ep of size 1) is tp-pp-dp-ep-cp, the
    dimensions left out appended in its order tp, pp, dp, ep, cp."""
    short, full = (resolve(_scenario(o)) for o in ("tp-pp-dp", "tp-pp-dp-ep-cp"))
    assert short.order == full.order == "tp-pp-dp-ep-cp"
    assert list(replica_groups(short, "pp", 0)[0]) == [0, 8]     # the stages side by side
    assert list(replica_groups(short, "dp", 0)[0]) == [0, 16, 32, 48]


MOE = {"model": {"num_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
                 "vocab_size": 32000, "activation": "swiglu", "num_experts": 16,
                 "moe_top_k": 2, "moe_ffn_hidden_size": 512},
       "seq_len": 4096, "global_batch": 64, "micro_batch": 1}
"""A MoE model small enough for 16 GPUs on two 8-GPU nodes."""


def _moe(order: str, **parallel):
    return Scenario.from_dict(small_scenario(
        workload=MOE, parallel={"tp": 1, "pp": 1, "ep": 8, "sequence_parallel": False,
                                "zero": 1, "order": order, **parallel},
        cluster={"gpu": "h100-sxm", "gpus": 16, "gpus_per_node": 8}, fidelity="screening"))


def test_dp_ep_puts_an_expert_groups_ranks_an_expert_data_parallel_group_apart():
    """Megatron-Core lays expert groups out by its order: under ep-dp an expert group is ep
    consecutive data-parallel ranks (one node here, its all-to-all on NVLink), under dp-ep its
    ranks are an expert-data-parallel group (2) apart, so it spans both nodes and its
    all-to-all crosses the network; the dense layers' groups do not move."""
    near, apart = (resolve(_moe(o)) for o in ("tp-cp-ep-dp-pp", "tp-cp-dp-ep-pp"))
    assert list(replica_groups(near, "ep", 0)[0]) == list(range(8))
    assert list(replica_groups(apart, "ep", 0)[0]) == list(range(0, 16, 2))
    assert list(replica_groups(apart, "edp", 0)[0]) == [0, 1]
    assert list(replica_groups(near, "edp", 0)[0]) == [0, 8]
    assert list(replica_groups(near, "dp", 0)[0]) == list(replica_groups(apart, "dp", 0)[0])
    a, b = (simulate(_moe(o), frames=False) for o in ("tp-cp-ep-dp-pp", "tp-cp-dp-ep-pp"))
    assert b.breakdown_s["ep_comm"] > 2 * a.breakdown_s["ep_comm"] > 0
    assert a.breakdown_s["forward_compute"] == b.breakdown_s["forward_compute"]


@pytest.mark.parametrize("order", ["tp-cp-ep-dp-pp", "tp-cp-dp-ep-pp", "tp-ep-dp-cp-pp"])
@pytest.mark.parametrize("parallel", [{"ep": 2, "cp": 2},
                                      {"tp": 2, "etp": 1, "ep": 4, "sequence_parallel": True}])
def test_the_first_expert_group_is_the_first_of_all_of_them(order, parallel):
    """first_group's expert roles (plain and folded over tensor-parallel ranks) are
    replica_groups' first under either side of ep-dp; every rank is in one group of each."""
    from workloads.ranks import ROLES, first_group
    lay = resolve(_moe(order, **parallel))
    for role in ROLES:
        groups = replica_groups(lay, role, 0)
        assert list(first_group(lay, role, 0)) == list(groups[0]), role
        if role in ("ep", "edp", "dp", "tp"):
            members = sorted(int(g) for grp in groups for g in grp)
            assert members == list(range(16)), role


def test_expert_groups_follow_the_global_rank_order_when_dp_is_faster_than_cp():
    """tp-ep-dp-cp-pp with cp 2: consecutive ranks are data-parallel neighbours, so an expert
    group of 2 is two of them ([0, 1]), not a rank and its context-parallel peer ([0, 8])."""
    lay = resolve(_moe("tp-ep-dp-cp-pp", ep=2, cp=2))
    assert list(replica_groups(lay, "ep", 0)[0]) == [0, 1]
    assert list(replica_groups(lay, "cp", 0)[0]) == [0, 8]


@pytest.mark.parametrize("order", ["tp-cp-ep-dp-pp", "tp-pp-ep-dp-cp", "pp-tp-cp-ep-dp",
                                   "tp-cp-dp-ep-pp", "tp-ep-dp-cp-pp"])
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
