"""Megatron-Core's recompute_modules under selective recomputation: what each module stops
storing and runs again, against closed forms."""

from __future__ import annotations

import pytest

from simulator import Scenario, ScenarioError, account, simulate
from tests.conftest import small_scenario
from workloads.flops import step_flops

GPT = {"model": {"name": "gpt-2k", "num_layers": 24, "hidden_size": 2048,
                 "num_attention_heads": 16, "vocab_size": 51200},
       "seq_len": 2048, "global_batch": 64, "micro_batch": 1}
"""A GELU GPT (MLP 4h, no gate), so the MLP's forward is 16 s h^2 FLOPs per sequence."""


def _scenario(recompute="selective", modules=None) -> Scenario:
    par = {"tp": 2, "pp": 2, "sequence_parallel": True, "zero": 1, "recompute": recompute}
    if modules is not None:
        par["recompute_modules"] = modules
    return Scenario.from_dict(small_scenario(workload=GPT, parallel=par, fidelity="screening"))


def test_recomputed_mlp_flops_are_the_mlps_forward():
    """Hardware FLOPs count what runs again: with the MLP recomputed, 16 s h^2 per layer and
    sequence on top of the model FLOPs (fc1 2 s h 4h, fc2 the same)."""
    model = _scenario().workload.model
    f = step_flops(model, seq_len=2048, global_batch=64, recompute="selective",
                   recompute_modules=("mlp",))
    assert f.hardware - f.model == pytest.approx(64 * 24 * 16 * 2048 * 2048**2, rel=1e-12)


def test_each_module_stops_storing_its_tensors_and_runs_again():
    """Per layer and micro-batch (b 1, s 2048, h 2048, tp 2 with sequence parallelism, bf16):
    recomputed norms keep only their inputs, dropping the two norm outputs (2 x 2 T h / tp);
    a recomputed MLP drops fc1's output and fc2's input (2 x 2 T 4h / tp). Both cost backward
    time and shrink the activation memory by exactly those bytes times the layers in
    flight."""
    T, h = 2048, 2048
    base = account(_scenario())
    acts0 = base.memory.set_index("stage").activations_bytes
    for mods, saved in ((["layernorm"], 2 * 2 * T * h / 2),
                        (["mlp"], 2 * 2 * T * 4 * h / 2)):
        acc = account(_scenario(modules=["core_attn", *mods]))
        mem = acc.memory.set_index("stage")
        lay = acc.layout
        per_stage = [lay.in_flight(i) * lay.stage_layers[i] * saved for i in range(lay.pp)]
        assert list(acts0 - mem.activations_bytes) == pytest.approx(per_stage, rel=1e-9)
        r0 = simulate(_scenario(), frames=False)
        r1 = simulate(_scenario(modules=["core_attn", *mods]), frames=False)
        assert r1.breakdown_s["recompute"] > r0.breakdown_s["recompute"]
        assert r1.step_time_s > r0.step_time_s


@pytest.mark.parametrize("recompute, modules, why", [
    ("none", ["mlp"], "needs recompute: selective"),
    ("selective", ["mla_up_proj"], "multi-latent attention"),
    ("selective", ["moe_act"], "an MoE model"),
])
def test_modules_the_model_lacks_are_one_line(recompute, modules, why):
    with pytest.raises(ScenarioError, match=why) as err:
        _scenario(recompute, modules)
    assert "\n" not in str(err.value)
