"""Fused attention kernels by name (optimizations.attention_kernel) against their measurements."""

from __future__ import annotations

import pytest

from simulator import Scenario, ScenarioError, simulate
from simulator.calibration import HOPPER_FLASH_SCALE
from tests.conftest import small_scenario

L, H, A, S, B, M = 4, 4096, 32, 8192, 1, 2
"""Layers, hidden, heads (head dim 128), sequence, micro-batch, micro-batches."""


def _one_gpu(kernel: str, gpu: str = "h100-sxm") -> Scenario:
    model = {"name": "probe", "num_layers": L, "hidden_size": H, "num_attention_heads": A,
             "vocab_size": 32000, "max_position_embeddings": S}
    return Scenario.from_dict(small_scenario(
        workload={"model": model, "seq_len": S, "global_batch": B * M, "micro_batch": B},
        parallel={"tp": 1, "pp": 1, "sequence_parallel": False},
        optimizations={"attention_kernel": kernel},
        cluster={"gpu": gpu, "gpus": 1, "gpus_per_node": 1}, fidelity="analytic"))


def test_kernels_differ_by_the_attention_flops_at_their_measured_rates():
    """Causal attention runs 2 x 2 b h s(s+1)/2 FLOPs forward per layer (QK^T and PV over the
    lower triangle with its diagonal):
    between FlashAttention-2 (333 TFLOP/s) and FlashAttention-3 (602) on an H100 at head dim
    128, sequence 8k (Shah et al. 2024, Fig. 2) the forward differs by exactly those FLOPs at
    the two rates, each times the one fraction of its paper rate that attention sustains
    inside published Hopper training steps (calibration.HOPPER_FLASH_SCALE, fitted once for
    every kernel); nothing else in the forward moves."""
    fa2, fa3 = (simulate(_one_gpu(k)).breakdown_s["forward_compute"]
                for k in ("flash2", "flash3"))
    flops = 4 * B * H * S * (S + 1) / 2 * L * M
    scale = HOPPER_FLASH_SCALE
    assert fa2 - fa3 == pytest.approx(flops / (333e12 * scale) - flops / (602e12 * scale),
                                      rel=1e-6)


def test_auto_is_transformer_engines_choice_by_generation():
    """auto: cuDNN's fused attention on Hopper, flash-attn 2 on Ampere."""
    def step(kernel, gpu="h100-sxm"):
        return simulate(_one_gpu(kernel, gpu)).step_time_s
    assert step("auto") == step("cudnn") != step("flash2")
    assert step("auto", "a100-80gb") == step("flash2", "a100-80gb")


@pytest.mark.parametrize("changes, field", [
    ({"cluster": {"gpu": "a100-80gb", "gpus": 64}}, "optimizations.attention_kernel"),
    ({"optimizations": {"attention_kernel": "flash2", "flash_attention": False}},
     "optimizations.attention_kernel"),
])
def test_a_kernel_that_cannot_run_is_a_one_line_error(changes, field):
    d = small_scenario(optimizations={"attention_kernel": "flash3"},
                       cluster={"gpu": "h100-sxm", "gpus": 64})
    for k, v in changes.items():
        d[k] = {**d[k], **v}
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(d)
    assert field in str(e.value) and "\n" not in str(e.value)
