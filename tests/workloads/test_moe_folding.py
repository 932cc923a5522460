"""MoE parallel folding (parallel.etp < tp; Liu et al. 2025, arXiv 2504.14960): expert groups
regroup a stage's tp x cp x dp ranks as etp x ep x edp."""

from __future__ import annotations

import pytest

from simulator import Scenario, ScenarioError, account, simulate
from simulator.config.resolve import resolve
from tests.conftest import small_scenario
from workloads.ranks import group_size, replica_groups

MOE = {"model": {"name": "moe-16", "num_layers": 8, "hidden_size": 2048,
                  "num_attention_heads": 16, "vocab_size": 32000, "activation": "swiglu",
                  "num_experts": 16, "moe_top_k": 2, "moe_ffn_hidden_size": 1024},
       "seq_len": 4096, "global_batch": 64, "micro_batch": 1}
"""A small MoE model (16 experts of width 1,024, top-2) on 32 H100: tp 2 x pp 2 x dp 8."""


def _scenario(**parallel) -> Scenario:
    return Scenario.from_dict(small_scenario(
        workload=MOE, fidelity="screening",
        parallel={"tp": 2, "pp": 2, "sequence_parallel": True, "zero": 1, **parallel},
        cluster={"gpu": "h100-sxm", "gpus": 32, "gpus_per_node": 8}))


def test_folded_expert_groups_span_tensor_parallel_ranks():
    """tp 2 x dp 8 on a 16-GPU stage, ep 8: unfolded, an expert group is every other GPU
    (one tp rank's data-parallel ranks) and edp 1; folded with etp 1, it is 8 consecutive
    GPUs across both tp ranks and edp 2 (the two halves of the stage hold the same experts)."""
    plain, folded = resolve(_scenario(ep=8)), resolve(_scenario(ep=8, etp=1))
    assert list(replica_groups(plain, "ep", 0)[0]) == [0, 2, 4, 6, 8, 10, 12, 14]
    assert group_size(plain, "edp") == 1
    assert list(replica_groups(folded, "ep", 0)[0]) == list(range(8))
    assert list(replica_groups(folded, "edp", 0)[0]) == [0, 8]
    # every rank of the stage in exactly one expert group and one edp group
    for role in ("ep", "edp"):
        ranks = sorted(int(g) for grp in replica_groups(folded, role, 0) for g in grp)
        assert ranks == list(range(16))


def test_folding_lets_ep_exceed_data_parallelism():
    """Qwen3-235B's 256-GPU layout has ep 32 on dp 16 x tp 2: refused unless the experts fold
    over the tensor-parallel ranks."""
    with pytest.raises(ScenarioError, match="parallel.ep"):
        _scenario(ep=16)
    lay = resolve(_scenario(ep=16, etp=1))
    assert group_size(lay, "ep") == 16 and group_size(lay, "edp") == 1


def test_folding_moves_expert_weights_and_tp_traffic_not_the_expert_work():
    """etp 1 keeps each expert whole on a rank (expert weights per GPU x tp) and drops the
    MLP side's TP collectives of every MoE layer (each rank dispatches its own sequence-
    parallel tokens), while the expert FLOPs per rank stay: the tokens of one rank instead of
    the gathered tp ranks', at the full width instead of 1 / tp of it. Only the GEMM shapes
    change, so the compute moves by a few percent at most."""
    plain, folded = _scenario(ep=4), _scenario(ep=4, etp=1)
    w_plain = account(plain).memory.weights_bytes.iloc[0]
    w_fold = account(folded).memory.weights_bytes.iloc[0]
    assert w_fold > w_plain
    a, b = simulate(plain, frames=False), simulate(folded, frames=False)
    assert b.breakdown_s["tp_comm"] < a.breakdown_s["tp_comm"]
    assert b.breakdown_s["forward_compute"] == pytest.approx(a.breakdown_s["forward_compute"],
                                                              rel=0.03)


@pytest.mark.parametrize("etp, why", [(3, "must divide parallel.tp")])
def test_bad_etp_is_one_line(etp, why):
    with pytest.raises(ScenarioError, match=why) as err:
        _scenario(ep=4, etp=etp)
    assert "\n" not in str(err.value)


def test_ep_overlap_leaves_only_the_unmerged_passes_exposed():
    """--overlap-moe-expert-parallel-comm merges one micro-batch's forward with another's
    backward. Without a pipeline the first forward and the last backward have no partner: with
    m micro-batches, all-to-alls far shorter than the compute they hide behind and their SMs
    held for the whole step anyway (comm_sms = NCCL's 16 p2p blocks), exactly 1 / m of the EP
    time stays exposed, and the compute does not move."""
    sc = lambda on: Scenario.from_dict(small_scenario(   # noqa: E731
        workload=MOE, fidelity="screening",
        optimizations={"ep_overlap": on, "comm_sms": 16},
        parallel={"tp": 1, "pp": 1, "ep": 8, "zero": 1, "sequence_parallel": False},
        cluster={"gpu": "h100-sxm", "gpus": 32, "gpus_per_node": 8}))
    off, on = simulate(sc(False), frames=False), simulate(sc(True), frames=False)
    m = off.num_micro_batches
    assert m > 1 and off.breakdown_s["ep_comm"] > 0
    assert on.breakdown_s["ep_comm"] == pytest.approx(off.breakdown_s["ep_comm"] / m, rel=1e-6)
    assert on.breakdown_s["forward_compute"] == off.breakdown_s["forward_compute"]
    assert on.step_time_s < off.step_time_s


@pytest.mark.parametrize("parallel, why", [
    ({"ep": 1}, "ep > 1"),
    ({"ep": 4, "pp": 2, "vpp": 1}, "vpp > 1"),
    ({"ep": 4, "recompute": "full"}, "full"),
])
def test_ep_overlap_follows_megatrons_rules(parallel, why):
    with pytest.raises(ScenarioError, match=why) as err:
        Scenario.from_dict(small_scenario(
            workload=MOE, optimizations={"ep_overlap": True},
            parallel={"tp": 2, "pp": 2, "vpp": 2, "sequence_parallel": True, **parallel},
            cluster={"gpu": "h100-sxm", "gpus": 32, "gpus_per_node": 8}))
    assert "\n" not in str(err.value)


def test_ep_overlap_with_vpp_auto_never_picks_one_chunk():
    """With a pipeline, Megatron-Core overlaps the EP all-to-alls only in the interleaved
    schedule: vpp auto chooses among vpp > 1 only."""
    from simulator.config.resolve import layout_choices

    def choices(on):
        return layout_choices(Scenario.from_dict(small_scenario(
            workload=MOE, optimizations={"ep_overlap": on},
            parallel={"tp": 2, "pp": 2, "vpp": "auto", "ep": 4, "sequence_parallel": True},
            cluster={"gpu": "h100-sxm", "gpus": 32, "gpus_per_node": 8})))
    assert {v for _, v in choices(False)} > {1}
    assert 1 not in {v for _, v in choices(True)}
