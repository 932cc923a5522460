"""FP8 training (Transformer Engine / torchao float8): what moves and what does not."""

from __future__ import annotations

import pytest

from simulator import Scenario, ScenarioError, simulate
from simulator.calibration import GEMM_FIXED_S, compute_calibration
from simulator.step.accounting import account
from simulator.step.compute import Device, gemm_time_s, layer_cost
from tests.conftest import small_scenario
from topologies.gpus import load_gpu
from workloads.layout import Layout
from workloads.presets import load_model


def _h100(precision: str, **parallel) -> Scenario:
    return Scenario.from_dict(small_scenario(
        workload={"model": "gpt3-175b", "global_batch": 64, "precision": precision},
        parallel={"tp": 8, "pp": 8, "sequence_parallel": True, **parallel},
        cluster={"gpu": "h100-sxm", "gpus": 64}))


def test_fp8_speeds_a_gemm_bound_step_by_less_than_the_peak_ratio():
    """Amdahl: the linear layers' GEMMs double their peak, attention, norms, communication and
    the bubble do not, and the casts add HBM traffic."""
    bf16, fp8 = simulate(_h100("bf16")), simulate(_h100("fp8"))
    ratio = fp8.step_time_s / bf16.step_time_s
    assert 0.5 < ratio < 0.85
    b, f = bf16.breakdown_s, fp8.breakdown_s
    assert f["tp_comm"] == pytest.approx(b["tp_comm"])
    assert f["optimizer"] > b["optimizer"]          # the weights are quantised once per step


def test_a_memory_bound_gemm_gains_only_its_operand_bytes():
    """A skinny GEMM (16 tokens) is bounded by reading the weight: FP8 halves those bytes, so
    it gains ~2x, never the compute ratio on top."""
    gpu = load_gpu("h100-sxm")
    dev = Device.of(gpu, compute_calibration(gpu.name))
    m, n, k = 16, 8192, 8192
    t16, t8 = gemm_time_s(dev, m, n, k), gemm_time_s(dev, m, n, k, fp8=True)
    over = GEMM_FIXED_S
    bytes16, bytes8 = 2 * (m * k + k * n + m * n), (m * k + k * n) + 2 * m * n
    assert (t8 - over) / (t16 - over) == pytest.approx(bytes8 / bytes16, rel=1e-9)


def test_fp8_on_a_gpu_without_fp8_is_a_one_line_error():
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(small_scenario(workload={"precision": "fp8"}))
    assert "precision" in str(e.value) and "\n" not in str(e.value)


def test_bf16_gradient_reduction_halves_the_bytes_and_the_buffer():
    """parallel.grad_reduce_dtype bf16: the DP reduction moves half the bytes of fp32 (the
    default for bf16 training, Megatron's main_grad), and the gradient buffer is half."""
    def run(dtype):
        sc = Scenario.from_dict(small_scenario(
            workload={"model": "gpt3-175b", "global_batch": 16},
            parallel={"tp": 8, "pp": 1, "sequence_parallel": True, "zero": 0,
                      "grad_reduce_dtype": dtype},
            optimizations={"dp_overlap": False},
            cluster={"gpu": "h100-sxm", "gpus": 64}))
        return simulate(sc), account(sc).memory
    (r32, m32), (r16, m16) = run("auto"), run("bf16")
    assert m16.grads_bytes.iloc[0] == pytest.approx(m32.grads_bytes.iloc[0] / 2)
    # large buckets: the ring reduction is bandwidth-bound, so time follows bytes
    assert r16.breakdown_s["dp_comm"] == pytest.approx(r32.breakdown_s["dp_comm"] / 2, rel=0.05)


def test_fp8_recipes_differ_only_in_their_cast_traffic():
    """workload.fp8_recipe moves one thing: the HBM bytes per quantised element. Against
    delayed scaling (read bf16, write FP8 and its transpose: 4 B), current scaling reads the
    tensor once more for its amax (+2 B) and MXFP8 writes one E8M0 scale per 32 elements of
    each copy (+1/16 B), so their extra forward times stand 32 : 1 whatever the layer."""
    gpu = load_gpu("b200")
    cal = compute_calibration(gpu.name)
    model = load_model("llama3-70b")
    lay = Layout(tp=4, pp=1, dp=1, cp=1, ep=1, vpp=1, micro_batch=1, num_micro_batches=1,
                 schedule="1f1b", stage_layers=(model.num_layers,), sequence_parallel=True,
                 zero=0, recompute="none")
    cost = {r: layer_cost(Device.of(gpu, cal, r), model, lay, seq_len=8192, moe=False,
                          flash=True, fused=True, fp8=True)
            for r in ("delayed", "tensorwise", "mxfp8")}
    extra_cs = cost["tensorwise"].fwd_s - cost["delayed"].fwd_s
    extra_mx = cost["mxfp8"].fwd_s - cost["delayed"].fwd_s
    assert extra_cs > 0 and extra_cs / extra_mx == pytest.approx(32, rel=1e-6)
    assert cost["mxfp8"].bwd_weight_s == cost["delayed"].bwd_weight_s     # GEMMs at FP8 rate


@pytest.mark.parametrize("over, field", [
    ({"workload": {"fp8_recipe": "mxfp8", "precision": "fp8"},
      "cluster": {"gpu": "h100-sxm"}}, "fp8_recipe"),
    ({"workload": {"fp8_recipe": "tensorwise"}, "cluster": {"gpu": "h100-sxm"}}, "fp8_recipe"),
])
def test_fp8_recipe_errors_are_one_line(over, field):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(small_scenario(**over))
    assert field in str(e.value) and "\n" not in str(e.value)


def test_sms_held_by_communication_stretch_gemm_waves():
    """optimizations.comm_sms: DeepSeek-V3 holds 20 of the H800's 132 SMs for its all-to-all,
    so a compute-bound GEMM whose tiles fill both SM counts' waves (231 of 2048 x 2048: 29,568
    tiles of 128 x 256 = 224 x 132 = 264 x 112) takes 132 / 112 as long at each SM's own
    rate."""
    gpu = load_gpu("h800")
    cal = compute_calibration(gpu.name)
    full, held = Device.of(gpu, cal), Device.of(gpu, cal, comm_sms=20)
    args = dict(m=2048, n=2048, k=1024, batch=231)
    t_full = gemm_time_s(full, **args) - GEMM_FIXED_S
    t_held = gemm_time_s(held, **args) - GEMM_FIXED_S
    assert t_held / t_full == pytest.approx(132 / 112, rel=1e-9)
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(small_scenario(optimizations={"comm_sms": 108}))
    assert "comm_sms" in str(e.value) and "\n" not in str(e.value)


def _linear_inputs(model, s: int) -> float:
    """Elements of the distinct linear-layer inputs of one dense layer (tp 1): the GEMMs of
    the FLOP model that read the same tensor (Q, K, V; gate and up) share one input."""
    from workloads.flops import layer_matmuls
    return sum({op.name: op.m * op.k for op in layer_matmuls(model, s, 1, False)}.values())


@pytest.mark.parametrize("recipe, element", [("delayed", 1.0), ("mxfp8", 1 + 1 / 32)])
def test_transformer_engine_keeps_each_linear_input_as_its_fp8_copy(recipe, element):
    """Transformer Engine saves the quantised input of every linear layer for its wgrad GEMM
    (one byte an element plus the recipe's scales) instead of the bf16 one: the layer's
    activations shrink by exactly the linear inputs' bytes saved, counted from the FLOP
    model's GEMM shapes; norms' inputs, Q / K / V and the activation's input stay bf16."""
    from workloads.memory import (
        ActivationOptions,
        layer_activation_bytes,
        saved_linear_input_bytes,
    )
    model, s = load_model("llama3-8b"), 8192
    lay = Layout(tp=1, pp=1, dp=1, cp=1, ep=1, vpp=1, micro_batch=1, num_micro_batches=1,
                 schedule="1f1b", stage_layers=(32,), sequence_parallel=False, zero=1,
                 recompute="none")
    L = saved_linear_input_bytes("fp8", recipe, "fp8")
    assert L == pytest.approx(element)
    bf16 = layer_activation_bytes(model, lay, ActivationOptions(s), moe=False)
    fp8 = layer_activation_bytes(model, lay, ActivationOptions(s, linear_input_bytes=L), False)
    assert bf16 - fp8 == pytest.approx((2 - element) * _linear_inputs(model, s), rel=1e-12)


def test_torchao_float8_keeps_the_bf16_inputs():
    """torchao's float8 linears save the bf16 input and cast again in backward: activations as
    in bf16 training; Transformer Engine's FP8 holds less."""
    acts = {}
    for precision, saved in (("bf16", "fp8"), ("fp8", "bf16"), ("fp8", "fp8")):
        w = {"precision": precision}
        if precision == "fp8":
            w["fp8_saved_inputs"] = saved
        sc = Scenario.from_dict(small_scenario(
            workload={"model": "llama3-8b", "global_batch": 8, "micro_batch": 1, **w},
            cluster={"gpu": "h100-sxm", "gpus": 8}))
        acts[precision, saved] = account(sc).memory.activations_bytes.iloc[0]
    assert acts["fp8", "bf16"] == acts["bf16", "fp8"]
    assert acts["fp8", "fp8"] < 0.85 * acts["bf16", "fp8"]


def test_fp8_saved_inputs_without_fp8_is_a_one_line_error():
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(small_scenario(workload={"fp8_saved_inputs": "bf16"}))
    assert "workload.fp8_saved_inputs" in str(e.value) and "\n" not in str(e.value)
