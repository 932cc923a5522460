"""Megatron-Core's flexible pipeline layout (workloads/pipeline_layout.py) and the
multi-token-prediction layer it places."""

from __future__ import annotations

import pytest

from simulator import Scenario, ScenarioError, account, simulate
from tests.conftest import small_scenario
from workloads.flops import logits_op, step_flops
from workloads.pipeline_layout import parse, pipeline_layout

DSV3 = "Et|(tt|)*30mL"


def test_megatron_docstring_example_parses_as_megatron_says():
    """Megatron-Core's parse_str_to_list docstring: "Ettt|(tt|)*29,m|L" is
    [E t t t] + [t t] x 29 + [m] + [L]."""
    assert parse("Ettt|(tt|)*29,m|L", 8) == ["Ettt"] + ["tt"] * 29 + ["m", "L"]


def test_deepseek_v3_layout_on_8_ranks_of_4_chunks():
    """Megatron-Bridge's DeepSeek-V3 H100 layout: virtual stage k runs on rank k mod 8 as
    chunk k // 8, so rank 0 chunk 0 holds the embedding and one layer, every other virtual
    stage two, and rank 7's last chunk only the MTP layer and the loss."""
    pl = pipeline_layout(DSV3, pp=8, num_layers=61, mtp_layers=1)
    assert pl.vpp == 4
    assert pl.decoder[0] == (1, 2, 2, 2)
    assert pl.decoder[7] == (2, 2, 2, 0) and pl.mtp[7] == (0, 0, 0, 1)
    assert sum(map(sum, pl.decoder)) == 61 and sum(map(sum, pl.mtp)) == 1


@pytest.mark.parametrize("text, pp, why", [
    ("Et|tt|ttL", 2, "not a multiple of parallel.pp"),
    ("tE|ttL", 2, "embedding E must come first"),
    ("Et|ttLt", 2, "loss L last"),
    ("Et|tmtL", 2, "before MTP"),
    ("Et|tx|tL|tt", 2, "unknown symbol"),
    ("(Et*90000|)*90000L", 2, "unrolls past"),          # refused before it fills the memory
])
def test_malformed_layouts_name_the_rule(text, pp, why):
    with pytest.raises(ValueError, match=why):
        parse(text, pp)


def _scenario(layout=None, **parallel) -> Scenario:
    sc = small_scenario(fidelity="screening")          # 24 layers, tp 2, pp 2, 64 GPUs
    sc["parallel"] = {**sc["parallel"], **parallel}
    if layout is not None:
        sc["parallel"]["pipeline_layout"] = layout
    return Scenario.from_dict(sc)


def test_a_layout_that_is_the_even_split_changes_nothing():
    """24 layers on 2 ranks x 2 chunks: the layout string of Megatron's even split runs the
    very same step as no layout."""
    even = simulate(_scenario(vpp=2), frames=False)
    laid = simulate(_scenario("Et*6|t*6|t*6|t*6L"), frames=False)
    assert laid.vpp == 2
    assert laid.step_time_s == even.step_time_s
    assert laid.memory_gib_per_gpu == even.memory_gib_per_gpu


def test_an_uneven_layout_moves_the_work():
    """Layers moved between the two ranks move weights and time with them. The last rank
    also runs the output layer (vocabulary 51,200 x hidden 2,304: about two layers' GEMMs), so
    taking a layer off it shortens the step and giving it one more lengthens it, which is why
    Llama 3 and DeepSeek-V3 put fewer layers on the last stage."""
    def step(layout):
        return simulate(_scenario(layout), frames=False).step_time_s

    heavy = _scenario("Et*14|t*10L")
    assert account(heavy).layout.stage_layers == (14, 10)
    mem = account(heavy).memory.set_index("stage")
    base = account(_scenario("Et*12|t*12L")).memory.set_index("stage")
    assert mem.loc[0, "weights_bytes"] > base.loc[0, "weights_bytes"]
    assert mem.loc[1, "weights_bytes"] < base.loc[1, "weights_bytes"]
    assert step("Et*13|t*11L") < step("Et*12|t*12L") < step("Et*11|t*13L")


@pytest.mark.parametrize("layout, other, field", [
    ("Et*12|t*11L", {}, "num_layers"),
    ("Et*12|t*6|t*6L", {}, "not a multiple"),
    ("Et*6|t*6|t*6|t*6L", {"vpp": 3}, "vpp"),
    ("Et*12|t*12L", {"first_stage_layers": 12}, "pipeline_layout"),
])
def test_a_layout_that_does_not_fit_is_one_line(layout, other, field):
    with pytest.raises(ScenarioError, match=field) as err:
        _scenario(layout, **other)
    assert "\n" not in str(err.value)


def test_mtp_adds_a_layer_and_an_output_pass_where_the_layout_puts_it():
    """DeepSeek-V3's MTP module: one more transformer layer and one more pass through the
    output layer and loss. Model FLOPs grow by one layer's and one logits' worth (the logits
    counted independently here, from the output GEMM's shape); the rank holding m takes it."""
    model = {"model": {"name": "gpt-mtp", "num_layers": 24, "hidden_size": 2048,
                       "num_attention_heads": 16, "vocab_size": 51200}}
    base = step_flops(Scenario.from_dict(small_scenario(workload=model)).workload.model,
                      seq_len=2048, global_batch=64)
    one = Scenario.from_dict(small_scenario(
        workload={**model, "model": {**model["model"], "mtp_num_layers": 1}},
        parallel={"tp": 2, "pp": 2, "sequence_parallel": True, "zero": 1,
                  "pipeline_layout": "Et*12|t*12mL"}))
    more = step_flops(one.workload.model, seq_len=2048, global_batch=64)
    per_layer = (base.model - 3 * 64 * logits_op(one.workload.model, 2048, 1).flops) / 24
    assert more.model - base.model == pytest.approx(
        per_layer + 3 * 64 * 2 * 2048 * 51200 * 2048, rel=1e-9)
    lay = account(one).layout
    assert lay.mtp_chunk == (1, 0) and lay.stage_layers == (12, 13)
    with pytest.raises(ScenarioError, match="mtp_num_layers"):
        Scenario.from_dict(small_scenario(workload=model, parallel={
            "tp": 2, "pp": 2, "sequence_parallel": True, "pipeline_layout": "Et*12|t*12mL"}))
