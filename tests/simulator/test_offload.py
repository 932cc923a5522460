"""CPU activation offloading (Megatron-Core cpu_offloading_num_layers): memory and copies."""

from __future__ import annotations

import pytest

from simulator import Scenario, account, simulate
from simulator.step.offload import module_stalls_s, offload_stalls_s
from tests.conftest import VALIDATION, llama_layout_error, small_scenario


def _llama(n: int, **gpu) -> Scenario:
    """Llama 3 8B on 8 GPUs, one micro-batch of 4 x 8192 tokens each (pp 1, FSDP-free)."""
    return Scenario.from_dict(small_scenario(
        workload={"model": "llama3-8b", "seq_len": 8192, "global_batch": 32, "micro_batch": 4},
        parallel={"tp": 1, "pp": 1, "sequence_parallel": False, "cpu_offloading_num_layers": n},
        cluster={"gpu": "h100-sxm", "gpus": 8, **gpu}))


def test_offloaded_layers_leave_the_gpu_but_one_in_transit():
    """Offloading N of L identical layers keeps L - N of them plus the one being copied
    (double buffering): activations scale by (L - N + 1) / L, host memory holds N / L of
    them (outside the device total), nothing else moves."""
    base = account(_llama(0)).memory.iloc[0]
    assert base.host_offload_bytes == 0
    for n in (1, 8, 31):
        mem = account(_llama(n)).memory.iloc[0]
        assert mem.activations_bytes == pytest.approx(base.activations_bytes * (33 - n) / 32,
                                                      rel=1e-12)
        assert mem.host_offload_bytes == pytest.approx(base.activations_bytes * n / 32,
                                                       rel=1e-12)
        assert mem.total_bytes - base.total_bytes == pytest.approx(
            mem.activations_bytes - base.activations_bytes, rel=1e-9)
        assert mem.weights_bytes == base.weights_bytes
        assert mem.io_activations_bytes == base.io_activations_bytes


def test_copies_hide_behind_the_next_layer_and_stall_beyond_it():
    """Each offloaded layer's copy overlaps the next layer's compute: stall = max(0, copy -
    compute), forward and backward, summed over the offloaded layers (closed form)."""
    act, f, b = {False: 1e9}, {False: 0.004}, {False: 0.008}
    rate = 1e9 / 0.006                                   # a copy takes 6 ms
    fwd, bwd = offload_stalls_s([False] * 6, act, f, b, rate)
    assert fwd == pytest.approx(5 * 0.002) and bwd == 0.0
    assert offload_stalls_s([False], act, f, b, rate) == (0.0, 0.0)   # nothing offloaded


def test_the_step_pays_the_stalls_it_cannot_hide():
    """Llama 3 8B at 4 x 8192 tokens keeps GBs a layer: over PCIe Gen5 a copy outlasts the
    next layer's compute, so every offloaded layer stalls the step; the breakdown's offload
    part is exactly what the step grew by."""
    off, base = simulate(_llama(16)), simulate(_llama(0))
    assert off.breakdown_s["offload"] > 0 and base.breakdown_s["offload"] == 0
    assert off.step_time_s - base.step_time_s == pytest.approx(off.breakdown_s["offload"],
                                                               rel=1e-6)
    assert off.memory_gib_per_gpu < base.memory_gib_per_gpu


@pytest.mark.parametrize("change, field", [
    ({"pp": 2}, "pp"), ({"recompute": "selective"}, "recompute"),
    ({"cpu_offloading_num_layers": 32}, "num_layers")])
def test_megatron_rules_are_one_line_errors(change, field):
    msg = llama_layout_error(**{"cpu_offloading_num_layers": 4, **change})
    assert "cpu_offloading_num_layers" in msg and field in msg


def test_megatron_bridges_gb200_llama3_70b_fits_with_its_offloaded_layers():
    """Megatron-Bridge runs Llama 3 70B on 64 GB200 with Megatron-FSDP, micro-batch 2 x 8192
    and no recomputation by offloading 40 of the 80 layers (llama3_workload_base_configs.py,
    GB200 FP8-CS): the run exists, so it fits 186 GiB with them, and would not without."""
    if not VALIDATION.exists():
        pytest.skip("no validation data")
    from validation.public_runs import GB200_RUNS, cases
    sc = {r.id: s for r, s, _ in cases(VALIDATION, csv=GB200_RUNS)}["mb2511-gb200-llama3-70b-64g"]
    assert sc.parallel.cpu_offloading_num_layers == 40
    assert account(sc).fits_memory
    none = sc.model_copy(update={"parallel": sc.parallel.model_copy(
        update={"cpu_offloading_num_layers": 0})})
    assert not account(none).fits_memory


def _moe(**parallel) -> Scenario:
    """Qwen3-30B-A3B on 16 H100 (tp 2, pp 2, ep 4), bf16."""
    return Scenario.from_dict(small_scenario(
        workload={"model": "qwen3-30b-a3b", "seq_len": 4096, "global_batch": 64,
                  "micro_batch": 1, "precision": "bf16"},
        parallel={"tp": 2, "pp": 2, "ep": 4, "sequence_parallel": True, **parallel},
        cluster={"gpu": "h100-sxm", "gpus": 16, "gpus_per_node": 8}))


@pytest.mark.parametrize("modules", [["attn_norm"], ["expert_fc1", "moe_act"],
                                     ["attn_norm", "qkv_linear", "core_attn", "attn_proj",
                                      "mlp_norm", "expert_fc1", "moe_act"]])
def test_fine_grained_offload_moves_bytes_and_keeps_one_layer_in_transit(modules):
    """Fine-grained offloading moves what the modules keep to host memory and nothing else:
    device plus host equals the activations kept without it, plus one layer's worth in
    transit (one, however many micro-batches the stage holds), on every stage."""
    base = account(_moe()).memory
    off = account(_moe(offload_modules=modules)).memory
    lay = account(_moe(offload_modules=modules)).layout
    for i in range(len(base)):
        transit = off.activations_bytes[i] + off.host_offload_bytes[i] - base.activations_bytes[i]
        one_layer = off.host_offload_bytes[i] / (lay.in_flight(i) * lay.stage_layers[i])
        assert transit == pytest.approx(one_layer, rel=1e-9)    # stage 0 holds 2 micro-batches
        assert off.weights_bytes[i] == base.weights_bytes[i]


def test_offloading_attention_norms_moves_each_layer_input():
    """attn_norm's input is the layer's input: 2 bytes x tokens x hidden / tp (sequence
    parallel) a layer and micro-batch, for every layer and micro-batch in flight."""
    sc = _moe(offload_modules=["attn_norm"])
    acc = account(sc)
    lay, mem = acc.layout, acc.memory
    per_layer = 2 * 4096 * 2048 / 2
    for i in range(lay.pp):
        assert mem.host_offload_bytes[i] == pytest.approx(
            lay.in_flight(i) * lay.stage_layers[i] * per_layer, rel=1e-12)


def test_fine_grained_copies_beyond_the_layer_stall_the_step():
    """Over PCIe the dispatched tokens of a small-expert layer take longer to copy than the
    layer computes: the step grows by at least the critical stage's offload part (with pp 2
    the other stage's stalls widen its bubble too), and each layer's stall is its copy less
    its compute (module_stalls_s)."""
    off, base = simulate(_moe(offload_modules=["expert_fc1"]), frames=False), \
        simulate(_moe(), frames=False)
    assert off.breakdown_s["offload"] > 0
    assert off.step_time_s - base.step_time_s >= off.breakdown_s["offload"] - 1e-9
    assert module_stalls_s(3.0, 1.0, 5.0) == (2.0, 0.0)


@pytest.mark.parametrize("parallel, field", [
    ({"offload_modules": ["expert_fc1"]}, "expert_fc1"),
    ({"offload_modules": ["attn_norm"], "cpu_offloading_num_layers": 2}, "offload_modules"),
    ({"offload_modules": ["attn_norm"], "recompute": "full"}, "offload_modules")])
def test_fine_grained_rules_are_one_line_errors(parallel, field):
    assert field in llama_layout_error(**parallel)
