"""MoE routing in the step: the skew, capacity and dispatcher models (workloads/routing.py)
reach the expert GEMMs and the all-to-alls with the volumes their closed forms give, the
balanced router is today's step exactly, and DeepEP's two legs stay on their rails / nodes."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import Scenario, ScenarioError, simulate
from simulator.config.resolve import resolve
from simulator.network.collectives import lower
from simulator.step.program import collective_requests
from workloads.routing import MoERouting, remote_nodes_per_token, routing_load

BF16 = 2
E, K, H, SEQ = 64, 4, 2048, 4096
SCENARIO = {
    "name": "moe", "fidelity": "screening",
    "workload": {"model": {"num_layers": 8, "hidden_size": H, "num_attention_heads": 16,
                           "vocab_size": 32000, "activation": "swiglu",
                           "num_experts": E, "moe_top_k": K, "moe_ffn_hidden_size": 1024,
                           "hidden_dropout": 0.0, "attention_dropout": 0.0},
                 "seq_len": SEQ, "global_batch": 128, "micro_batch": 1},
    "parallel": {"tp": 1, "pp": 1, "ep": 16, "zero": 1},
    "cluster": {"gpu": "h100-sxm", "gpus": 64, "gpus_per_node": 8},
}
"""Expert groups of 16 GPUs over two nodes, so the all-to-all crosses the network."""


def _run(*overrides):
    return simulate(Scenario.from_dict(SCENARIO, list(overrides)), frames=False)


def _ep_requests(*overrides):
    sc = Scenario.from_dict(SCENARIO, list(overrides))
    return {(r.kind, r.nbytes) for r in collective_requests(sc, resolve(sc))
            if r.group.role == "ep"}


def test_a_balanced_router_is_the_step_without_a_routing_section():
    plain = _run().to_dict()
    explicit = _run("workload.moe.imbalance=0", "workload.moe.dispatcher=alltoall").to_dict()
    for d in (plain, explicit):
        d.pop("sim_wall_s")
    assert explicit == plain
    assert plain["moe_routing"] == {"busiest_rank_load": 1.0, "busiest_expert_load": 1.0,
                                    "dropped_fraction": 0.0, "worst_rank_load": 1.0}


def test_the_all_to_all_carries_the_busiest_ranks_pairs():
    """Dispatch (and combine) move top_k x tokens x hidden per rank when balanced; the rank
    whose experts receive the most pairs receives that many times more."""
    busiest = routing_load(MoERouting(imbalance=0.4), E, 16).busiest
    assert busiest > 1.05
    balanced = BF16 * K * SEQ * H
    assert _ep_requests() == {("all_to_all", balanced)}
    assert _ep_requests("workload.moe.imbalance=0.4") == {("all_to_all", balanced * busiest)}


def test_skew_slows_the_experts_and_the_all_to_all():
    bal, skew = _run(), _run("workload.moe.imbalance=0.4")
    assert skew.breakdown_s["forward_compute"] > bal.breakdown_s["forward_compute"]
    assert skew.breakdown_s["ep_comm"] > bal.breakdown_s["ep_comm"]
    assert skew.moe_routing["busiest_rank_load"] > 1.05
    # the worst routing drawn loads some rank more than the average busiest one
    assert skew.moe_routing["worst_rank_load"] > skew.moe_routing["busiest_rank_load"]


def test_padding_to_the_balanced_share_is_the_balanced_step_whatever_the_skew():
    """Capacity 1 with padding: every expert computes exactly its balanced share; the skew
    only decides which pairs are dropped."""
    bal = _run()
    padded = _run("workload.moe.imbalance=0.6", "workload.moe.capacity_factor=1.0",
                  "workload.moe.pad_to_capacity=true")
    assert padded.step_time_s == bal.step_time_s
    assert padded.moe_routing["dropped_fraction"] > 0.1


def test_flex_sends_each_token_once_per_other_node_and_forwards_over_nvlink():
    """DeepEP: the network leg moves tokens x hidden x the other nodes a token's experts
    occupy; the NVLink leg forwards every pair to the experts of the node off the GPU."""
    for limit in (None, 1):
        args = ["workload.moe.dispatcher=flex"] + \
            ([f"workload.moe.max_nodes_per_token={limit}"] if limit else [])
        remote = remote_nodes_per_token(E, K, 2, limit)
        assert _ep_requests(*args) == {("rail_all_to_all", BF16 * SEQ * H * remote),
                                       ("node_all_to_all", BF16 * K * SEQ * H * 7 / 8)}
    assert remote_nodes_per_token(E, K, 2, 1) < remote_nodes_per_token(E, K, 2)


def test_flex_beats_the_all_to_all_of_pairs_across_nodes():
    base, flex = _run(), _run("workload.moe.dispatcher=flex")
    assert flex.breakdown_s["ep_comm"] < base.breakdown_s["ep_comm"]


def test_deepeps_legs_stay_on_their_rails_and_in_their_nodes():
    gpn, S = 8, 2**20
    group = np.arange(32)                                    # 4 nodes x 8
    (rail,) = lower("rail_all_to_all", [group], S, gpus_per_node=gpn)
    assert np.all(rail.src % gpn == rail.dst % gpn) and np.all(rail.src // gpn != rail.dst // gpn)
    (node,) = lower("node_all_to_all", [group], S, gpus_per_node=gpn)
    assert np.all(node.src // gpn == node.dst // gpn) and np.all(node.src != node.dst)
    for ph in (rail, node):                  # each rank sends S in all, to distinct peers
        sent = np.bincount(ph.src, weights=ph.nbytes, minlength=32)
        assert sent == pytest.approx(np.full(32, S))
        assert len(set(zip(ph.src.tolist(), ph.dst.tolist()))) == len(ph.src)


@pytest.mark.parametrize("overrides,needle", [
    (["workload.model=llama3-8b", "parallel.ep=1", "workload.moe.imbalance=0.2"],
     "num_experts"),
    (["workload.moe.imbalance=9"], "imbalance"),
    (["workload.moe.pad_to_capacity=true"], "capacity_factor"),
    (["workload.moe.dispatcher=deepep"], "dispatcher"),
])
def test_bad_routing_is_one_line_naming_the_field(overrides, needle):
    with pytest.raises(ScenarioError) as err:
        Scenario.from_dict(SCENARIO, overrides)
    msg = str(err.value)
    assert "\n" not in msg and "workload" in msg and needle in msg


def test_flex_over_an_expert_group_split_unevenly_over_nodes_is_one_line():
    """ep 16 on 6-GPU nodes: 6, 6 and 4 of a group on three nodes."""
    with pytest.raises(ScenarioError) as err:
        _run("workload.moe.dispatcher=flex", "cluster.gpus=48", "cluster.gpus_per_node=6",
             "workload.global_batch=96")
    assert "\n" not in str(err.value) and err.value.field == "workload.moe.dispatcher"
