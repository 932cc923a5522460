"""ZeRO-3 / FSDP under a pipeline (parallel.zero 3 with pp > 1), as torchtitan runs FSDP2 with
pipeline parallelism: each stage's weights gathered once per step and kept over its
micro-batches, its gradients reduce-scattered once after the last backward."""

from __future__ import annotations

from simulator import Scenario, simulate
from simulator.config.resolve import resolve
from simulator.step.program import collective_requests
from tests.conftest import small_scenario


def _scenario(zero: int, pp: int) -> Scenario:
    d = small_scenario(parallel={"tp": 2, "pp": pp, "zero": zero},
                       workload={"global_batch": 128})
    return Scenario.from_dict(d, ["fidelity=screening"])


def _requests(sc: Scenario) -> dict[tuple[str, str, int], float]:
    return {(r.kind, r.group.role, r.group.stage): r.nbytes
            for r in collective_requests(sc, resolve(sc))}


def test_no_per_micro_batch_gathers_under_a_pipeline():
    """Without a pipeline ZeRO-3 gathers every layer's weights per micro-batch (role zdp);
    under one it gathers each stage's weights once per step (role dp)."""
    flat = _requests(_scenario(3, 1))
    piped = _requests(_scenario(3, 2))
    assert any(role == "zdp" for _, role, _ in flat)
    assert not any(role == "zdp" for _, role, _ in piped)
    assert {k for k in piped if k[1] == "dp"} == {
        (kind, "dp", stage) for kind in ("reduce_scatter", "all_gather") for stage in (0, 1)}


def test_once_per_step_volumes_are_the_stages_weights_and_gradients():
    """The step's gather moves each stage's bf16 weights (2 B / parameter) and its reduction
    the fp32 gradients (4 B / parameter); over the two stages and tp 2 that is every
    parameter of the model once (the tied word embedding twice: Megatron keeps a copy on the
    last stage for the output layer)."""
    sc = _scenario(3, 2)
    req = _requests(sc)
    for stage in (0, 1):
        assert req[("reduce_scatter", "dp", stage)] == 2 * req[("all_gather", "dp", stage)]
    per_gpu = sum(req[("all_gather", "dp", s)] for s in (0, 1)) / 2
    m = sc.workload.model
    h, L, V = m.hidden_size, m.num_layers, m.vocab_size
    # GPT: 12 h^2 per layer (+ biases, norms), word embeddings on both ends, positions
    params = L * 12 * h * h + 2 * V * h + sc.workload.seq_len * h
    assert abs(per_gpu * 2 / params - 1) < 0.01


def test_memory_is_the_distributed_optimizers():
    """In-step memory: the stage's weights and gradients whole, Adam's states sharded over dp
    (ZeRO-1's layout), far below the unsharded step."""
    mem = {z: simulate(_scenario(z, 2), frames=False).memory_gib_per_gpu for z in (0, 1, 3)}
    assert mem[3] == mem[1] < mem[0]
