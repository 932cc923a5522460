"""Memory accounting against Korthikanti et al. 2022 (section 4) and ZeRO's state sizes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import validation_csv
from workloads.layout import Layout
from workloads.memory import (
    ActivationOptions,
    layer_activation_bytes,
    memory_table,
)
from workloads.model import ModelConfig

V = 51200


def table5_rows():
    return list(validation_csv("korthikanti2022_table5.csv").drop_duplicates("model")
                .query("dp == 1").itertuples())


def gpt(row) -> ModelConfig:
    return ModelConfig(num_layers=row.num_layers, hidden_size=row.hidden_size,
                       num_attention_heads=row.num_attention_heads, vocab_size=V,
                       max_position_embeddings=2048)


def layout_of(row, *, sp: bool, recompute: str, schedule: str | None = None) -> Layout:
    p, v = int(row.pp), int(row.vpp)
    m = row.global_batch // row.micro_batch
    return Layout(tp=8, pp=p, dp=1, cp=1, ep=1, vpp=v, micro_batch=int(row.micro_batch),
                  num_micro_batches=int(m),
                  schedule=schedule or ("interleaved" if v > 1 else "1f1b"),
                  stage_layers=(row.num_layers // p,) * p, sequence_parallel=sp, zero=0,
                  recompute=recompute)


def korthikanti_per_layer(row, *, sp: bool, recompute: str) -> float:
    """Korthikanti et al. 2022, Table 2 (bytes of one layer for one micro-batch)."""
    s, b, h, a, t = 2048, row.micro_batch, row.hidden_size, row.num_attention_heads, 8
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)
    attn = 5 * a * s / h if recompute == "none" else 0.0
    if sp:
        return sbh / t * (34 + attn)
    return sbh * (10 + 24 / t + attn / t)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("sp", [False, True])
def test_per_layer_activations_equal_korthikanti(recompute, sp):
    for row in table5_rows():
        lay = layout_of(row, sp=sp, recompute=recompute)
        got = layer_activation_bytes(gpt(row), lay,
                                     ActivationOptions(seq_len=2048, flash_attention=False),
                                     moe=False)
        assert got == pytest.approx(korthikanti_per_layer(row, sp=sp, recompute=recompute),
                                    rel=1e-12), row.model


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_first_stage_total_equals_korthikanti(recompute):
    """First stage of the interleaved schedule holds L (1 + (p-1)/(p v)) layers' activations
    (section 4.2.3); 1F1B holds L; plus s b h p / t for the embedding dropout mask."""
    for row in table5_rows():
        for schedule in ("interleaved", "1f1b"):
            if schedule == "interleaved" and row.vpp == 1:
                continue
            lay = layout_of(row, sp=True, recompute=recompute, schedule=schedule)
            if schedule == "1f1b":
                lay = replace(lay, vpp=1)
            mem = memory_table(gpt(row), lay, seq_len=2048, flash_attention=False)
            p, v, L = lay.pp, lay.vpp, row.num_layers
            factor = 1 + (p - 1) / (p * v) if schedule == "interleaved" else 1.0
            per = korthikanti_per_layer(row, sp=True, recompute=recompute)
            assert mem.activations_bytes[0] == pytest.approx(per * L * factor, rel=1e-12)
            sbh_t = 2048 * row.micro_batch * row.hidden_size / 8
            if p == 1:   # first stage is also the last: + 4 s b h / t (1 + v / h)
                extra = sbh_t + 4 * sbh_t * (1 + V / row.hidden_size)
                assert mem.io_activations_bytes[0] == pytest.approx(extra, rel=1e-12)
            elif schedule == "1f1b":
                assert mem.io_activations_bytes[0] == pytest.approx(sbh_t * p, rel=1e-12)


def test_pipeline_stages_hold_fewer_micro_batches_downstream():
    row = table5_rows()[1]          # 175B, p = 8
    lay = replace(layout_of(row, sp=True, recompute="selective", schedule="1f1b"), vpp=1)
    acts = memory_table(gpt(row), lay, seq_len=2048).activations_bytes.to_numpy()
    per_stage = acts / acts[-1]
    assert list(per_stage) == pytest.approx([8, 7, 6, 5, 4, 3, 2, 1])
    gp = memory_table(gpt(row), replace(lay, schedule="gpipe"), seq_len=2048)
    assert (gp.activations_bytes == acts[-1] * lay.num_micro_batches).all()


@pytest.mark.parametrize("zero,expect", [(0, lambda d: 18), (1, lambda d: 6 + 12 / d),
                                         (2, lambda d: 2 + 16 / d), (3, lambda d: 18 / d)])
def test_model_state_bytes_per_parameter(zero, expect):
    """Mixed-precision Adam: 2 (bf16 weight) + 4 (fp32 grad) + 12 (master, m, v) bytes, sharded
    over dp by ZeRO stage (Rajbhandari et al. 2020; Megatron distributed optimizer = stage 1)."""
    m = ModelConfig(num_layers=4, hidden_size=1024, num_attention_heads=16, vocab_size=1024)
    for dp in (1, 4, 32):
        lay = Layout(tp=1, pp=1, dp=dp, cp=1, ep=1, vpp=1, micro_batch=1, num_micro_batches=1,
                     schedule="1f1b", stage_layers=(4,), sequence_parallel=False, zero=zero,
                     recompute="none")
        mem = memory_table(m, lay, seq_len=128).iloc[0]
        state = mem.weights_bytes + mem.grads_bytes + mem.optimizer_bytes
        assert state / mem.params == pytest.approx(expect(dp), rel=1e-12)


def test_flash_attention_drops_the_quadratic_terms():
    row = table5_rows()[0]
    lay = layout_of(row, sp=True, recompute="none")
    unfused = layer_activation_bytes(gpt(row), lay, ActivationOptions(2048, False), False)
    flash = layer_activation_bytes(gpt(row), lay, ActivationOptions(2048, True), False)
    s, b, a = 2048, row.micro_batch, row.num_attention_heads
    lse = 4 * b * a * s / 8
    assert unfused - flash == pytest.approx(5 * a * s * s * b / 8 - lse, rel=1e-12)


@given(tp=st.sampled_from([1, 2, 4, 8]), b=st.integers(1, 8), cp=st.sampled_from([1, 2, 4]),
       gated=st.booleans(), groups=st.sampled_from([1, 2, 8]))
@settings(max_examples=60, deadline=None)
def test_activation_memory_orders_by_recompute_and_shrinks_with_sharding(tp, b, cp, gated, groups):
    m = ModelConfig(num_layers=8, hidden_size=2048, num_attention_heads=16, vocab_size=32000,
                    num_query_groups=max(groups, tp) if 16 % max(groups, tp) == 0 else 16,
                    activation="swiglu" if gated else "gelu")
    base = Layout(tp=tp, pp=1, dp=1, cp=cp, ep=1, vpp=1, micro_batch=b, num_micro_batches=1,
                  schedule="1f1b", stage_layers=(8,), sequence_parallel=tp > 1, zero=0,
                  recompute="none")
    opts = ActivationOptions(seq_len=4096, flash_attention=False)
    act = {r: layer_activation_bytes(m, replace(base, recompute=r), opts, False)
           for r in ("none", "selective", "full", "op")}
    assert act["none"] > act["selective"] > act["full"] > 0
    flash = ActivationOptions(seq_len=4096, flash_attention=True)
    assert layer_activation_bytes(m, base, flash, False) > act["op"] > act["full"]
    if cp > 1:
        whole = layer_activation_bytes(m, replace(base, cp=1), opts, False)
        assert act["none"] < whole
