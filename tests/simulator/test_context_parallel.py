"""Context parallelism's communication against closed forms computed here from the model's
dimensions: ring attention (Megatron-Core p2p) and DeepSpeed-Ulysses (all-to-all)."""

from __future__ import annotations

import pytest

from simulator import Scenario, ScenarioError
from simulator.config.resolve import resolve
from simulator.step.program import collective_requests

BF16 = 2
SCENARIO = {
    "name": "cp", "workload": {"model": "llama3-70b", "seq_len": 32768, "global_batch": 64,
                               "micro_batch": 1},
    "parallel": {"tp": 4, "pp": 4, "cp": 2, "sequence_parallel": True, "zero": 1},
    "cluster": {"gpu": "h100-sxm", "gpus": 256, "gpus_per_node": 8},
}
H, HEADS, KV_HEADS, HEAD_DIM = 8192, 64, 8, 128            # Llama 3 70B (its preset)


def _cp_requests(comm_type: str) -> list:
    sc = Scenario.from_dict(SCENARIO, [f"parallel.cp_comm_type={comm_type}"])
    assert sc.workload.model.hidden_size == H and sc.workload.model.query_groups == KV_HEADS
    return [r for r in collective_requests(sc, resolve(sc)) if r.group.role == "cp"]


def test_ring_attention_passes_k_and_v_chunks_between_neighbours():
    """Per ring step a rank sends its K and V for its s / cp tokens and kv_heads / tp heads."""
    reqs = _cp_requests("p2p")
    tokens = 32768 // 2 * 1
    kv = BF16 * tokens * 2 * KV_HEADS * HEAD_DIM / 4
    assert {(r.kind, r.nbytes) for r in reqs} == {("p2p", kv)}


def test_ulysses_moves_q_k_v_and_the_output_through_all_to_alls():
    """Ulysses (Jacobs et al. 2023): Q, K and V each go through an all-to-all (heads scattered,
    sequence gathered) and the attention output comes back through one; a rank's buffer for
    each is its s / cp tokens x its heads / tp x head size."""
    reqs = _cp_requests("all_to_all")
    tokens = 32768 // 2
    q = BF16 * tokens * HEADS * HEAD_DIM / 4
    k = BF16 * tokens * KV_HEADS * HEAD_DIM / 4
    assert {r.kind for r in reqs} == {"all_to_all"}
    assert sorted({r.nbytes for r in reqs}) == sorted({q, k})      # Q and output; K and V


def test_ulysses_needs_the_heads_of_a_tp_rank_divisible_by_cp():
    with pytest.raises(ScenarioError) as err:
        Scenario.from_dict(SCENARIO, ["parallel.cp_comm_type=all_to_all", "parallel.cp=4",
                                      "parallel.tp=8", "parallel.pp=1",
                                      "workload.global_batch=128"])
    assert "parallel.cp" in str(err.value) and "num_query_groups" in str(err.value)
