"""Scenario loading: presets, aliases, overrides, and every cross-field rule's error."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from simulator import Scenario, ScenarioError
from simulator.config.resolve import layout_choices, resolve
from simulator.errors import SECTIONS
from simulator.step.accounting import account
from tests.conftest import REPO, small_scenario


def load(data, overrides=()):
    return Scenario.from_dict(data, overrides)


def error_of(data, overrides=()) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load(data, overrides)
    return info.value


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_examples_load(path):
    sc = Scenario.load(path)
    assert sc.dp * sc.parallel.tp * sc.parallel.pp * sc.parallel.cp == sc.cluster.gpus


def test_design_md_example_and_dp_auto():
    sc = Scenario.load(REPO / "examples" / "megascale-175b-12288.yaml")
    assert (sc.parallel.tp, sc.parallel.pp, sc.dp) == (8, 8, 192)
    assert sc.workload.model.hidden_size == 12288          # preset resolved
    assert sc.cluster.gpu.bf16_tflops == 312
    assert sc.cluster.topology.kind == "clos3"
    assert sc.network.dcqcn.rate_increase_timer_us == 300  # design.md defaults
    assert sc.network.ecn.kmin_kb == 400


def test_megatron_long_names_are_aliases():
    data = small_scenario()
    data["parallel"] = {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2,
                        "sequence_parallel": True, "recompute_granularity": "selective"}
    data["workload"] = {"model": "megatron-gpt-1.7b", "seq_length": 2048,
                        "global_batch_size": 64, "micro_batch_size": 2}
    sc = load(data)
    assert (sc.parallel.tp, sc.parallel.pp, sc.parallel.recompute) == (2, 2, "selective")
    assert (sc.workload.seq_len, sc.workload.global_batch, sc.workload.micro_batch) == (
        2048, 64, 2)


def test_inline_model_and_topology_mappings():
    data = small_scenario(workload={"model": {"num_layers": 4, "hidden_size": 512,
                                              "num_attention_heads": 8, "vocab_size": 1000,
                                              "num_moe_experts": 8, "moe_router_topk": 2}})
    data["cluster"]["topology"] = {"kind": "spine-leaf", "leaves": 4, "spines": 4,
                                   "hosts_per_leaf": 16, "nic_gbps": 100}
    sc = load(data)
    assert sc.workload.model.num_experts == 8 and sc.workload.model.moe_top_k == 2
    assert sc.cluster.topology.leaves == 4


def test_a_model_mapping_may_start_from_a_preset():
    """``preset`` names the base and the other keys change it (DeepSeek-V3 with its MTP
    module); an unknown preset is a one-line error naming the field."""
    data = small_scenario(workload={"model": {"preset": "llama3-8b", "num_layers": 16}})
    model, base = load(data).workload.model, load(small_scenario(
        workload={"model": "llama3-8b"})).workload.model
    assert model.num_layers == 16 and model.hidden_size == base.hidden_size == 4096
    assert model.vocab_size == base.vocab_size
    err = error_of(small_scenario(workload={"model": {"preset": "gpt9", "num_layers": 4}}))
    assert err.field == "workload.model" and "gpt9" in str(err) and "\n" not in str(err)


def test_overrides_set_values_and_expand_presets():
    sc = load(small_scenario(), ["parallel.tp=4", "workload.model.num_layers=48",
                                 "cluster.topology.nic_gbps=200", "network.ecn.pmax=0.1"])
    assert sc.parallel.tp == 4
    assert sc.workload.model.num_layers == 48 and sc.workload.model.hidden_size == 2304
    assert sc.network.ecn.pmax == 0.1


def test_same_input_same_scenario():
    assert load(small_scenario()) == load(copy.deepcopy(small_scenario()))


# ---- every cross-field rule: (mutation, field the message must name, words of the reason) ----
RULES = [
    ({"parallel": {"tp": 16, "pp": 1}}, "parallel.tp", "num_attention_heads"),
    ({"workload": {"model": "llama3-8b", "seq_len": 4096}, "parallel": {"tp": 16, "pp": 1},
      "cluster": {"gpus": 64}}, "parallel.tp", "num_query_groups"),
    ({"parallel": {"pp": 5}}, "cluster.gpus", "divisible"),
    ({"parallel": {"dp": 8}}, "cluster.gpus", "must equal"),
    ({"parallel": {"pp": 4, "vpp": 4}}, "workload.model.num_layers", "pp x vpp"),
    ({"workload": {"global_batch": 48, "micro_batch": 4}}, "workload.global_batch",
     "micro_batch x parallel.dp"),
    ({"parallel": {"vpp": 2}, "workload": {"global_batch": 48}}, "parallel.pp",
     "interleaved"),
    ({"parallel": {"tp": 1, "sequence_parallel": True}}, "parallel", "sequence_parallel"),
    ({"parallel": {"cp": 2}, "workload": {"seq_len": 2050}}, "workload.seq_len", "parallel.cp"),
    ({"parallel": {"ep": 2}}, "parallel.ep", "MoE"),
    ({"parallel": {"pp": 8, "first_stage_layers": 5, "last_stage_layers": 5}},
     "workload.model.num_layers", "first_stage_layers"),
    ({"cluster": {"gpus": 60}, "parallel": {"tp": 2, "pp": 2, "dp": 15}}, "cluster.gpus",
     "gpus_per_node"),
    ({"parallel": {"schedule": "gpipe", "vpp": 2}}, "parallel", "vpp"),
    ({"workload": {"precision": "fp8"}}, "workload.precision", "FP8"),
    ({"parallel": {"cp": 2}, "optimizations": {"flash_attention": False}}, "parallel.cp",
     "flash_attention"),
    ({"cluster": {"gpus_per_node": 16}}, "cluster.gpus_per_node", "NVLink domain"),
    ({"network": {"nccl": {"channels": 12}}}, "network.nccl.channels", "multiple"),
    ({"network": {"queue_pairs": 8, "nccl": {"qps_per_connection": 4}}},
     "network.nccl.qps_per_connection", "set one"),
]


@pytest.mark.parametrize("mutation,field,reason", RULES, ids=[r[1] + ":" + r[2] for r in RULES])
def test_cross_field_rules_name_the_fields(mutation, field, reason):
    err = error_of(small_scenario(**mutation))
    assert field in str(err) and reason in str(err), str(err)
    assert "\n" not in str(err)
    assert err.field and err.field.split(".")[0] in SECTIONS


def test_moe_expert_parallel_rules():
    moe = {"model": "mixtral-8x7b", "seq_len": 4096, "global_batch": 64, "micro_batch": 1}
    ok = load(small_scenario(workload=moe, parallel={"tp": 2, "pp": 1, "ep": 8}))
    assert ok.parallel.ep == 8
    err = error_of(small_scenario(workload=moe, parallel={"tp": 2, "pp": 1, "ep": 16}))
    assert "parallel.ep" in str(err) and "num_experts" in str(err)
    err = error_of(small_scenario(workload=moe, parallel={"tp": 8, "pp": 4, "ep": 4}))
    assert "parallel.ep" in str(err) and "dp x cp" in str(err)
    err = error_of(small_scenario(workload=moe, parallel={"tp": 2, "pp": 1, "ep": 8,
                                                          "sequence_parallel": False}))
    assert "sequence_parallel" in str(err)


def test_uneven_pipeline_like_llama3():
    """Llama 3 405B as published: 126 layers, pp 16, interleaved, 7 layers on the first and
    last stages (the embedding and the loss each take one of 128 slots)."""
    sc = Scenario.load(REPO / "examples" / "llama3-405b-16384.yaml")
    lay = resolve(sc)
    assert lay.schedule == "interleaved" and lay.vpp == 2
    assert lay.stage_layers[0] == lay.stage_layers[-1] == 7
    assert set(lay.stage_layers[1:-1]) == {8} and sum(lay.stage_layers) == 126
    assert lay.chunk_layers[0] == (3, 4) and lay.chunk_layers[-1] == (4, 3)
    # Megatron's interleaved order: chunk 0 of every stage, then chunk 1
    assert lay.first_layer(0, 1) == 3 + 4 * 15 and lay.first_layer(15, 1) == 63 + 4 * 15
    assert lay.first_layer(15, 1) + lay.layers(15, 1) == 126


@pytest.mark.parametrize("layers,pp,vpp,emb,loss,ok", [
    (126, 16, 2, True, True, True), (126, 8, 8, True, True, True),
    (94, 8, 2, True, True, True), (61, 8, 4, True, True, False),
    (127, 16, 2, True, False, True), (126, 16, 8, True, True, True),
    (125, 16, 8, True, True, False)])
def test_accounted_pipeline_split(layers, pp, vpp, emb, loss, ok):
    """Every layer placed once; only the first / last virtual stage is one short, and at one
    slot per virtual stage holds the embedding or the loss alone (Megatron-Bridge ran Llama
    3.1 405B so on 256 GB200: 126 layers, pp 16 x vpp 8); a split that cannot be made is a
    one-line error naming the fields."""
    model = {"num_layers": layers, "hidden_size": 256, "num_attention_heads": 4,
             "vocab_size": 1000}
    par = {"pp": pp, "vpp": vpp, "schedule": "interleaved" if vpp > 1 else "1f1b",
           "account_for_embedding_in_pipeline_split": emb,
           "account_for_loss_in_pipeline_split": loss}
    d = small_scenario(workload={"model": model, "global_batch": 4 * pp, "micro_batch": 1},
                       parallel=par, cluster={"gpus": 8 * pp})
    if not ok:
        err = error_of(d)
        assert "num_layers" in str(err) and "\n" not in str(err)
        return
    lay = resolve(load(d))
    grid = np.array(lay.chunk_layers)
    assert grid.sum() == layers
    per = (layers + emb + loss) // (pp * vpp)
    expect = np.full((pp, vpp), per)
    expect[0, 0] -= emb
    expect[-1, -1] -= loss
    assert (grid == expect).all()


def test_auto_fields_enumerate_valid_choices():
    sc = load(small_scenario(workload={"micro_batch": "auto"}, parallel={"vpp": "auto"}))
    choices = layout_choices(sc)
    assert (1, 1) in choices and (1, 2) in choices and (2, 12) in choices
    for b, v in choices:
        lay = resolve(sc, b, v)
        assert lay.num_micro_batches * b * lay.dp == 64
        if v > 1:
            assert lay.num_micro_batches % lay.pp == 0
    assert all(24 // 2 % v == 0 for _, v in choices)


@pytest.mark.parametrize("bad,field", [
    ({"workload": {"model": "gpt-9000"}}, "workload.model"),
    ({"cluster": {"gpu": "a100-81gb"}}, "cluster.gpu"),
    ({"cluster": {"topology": "nope"}}, "cluster.topology"),
    ({"cluster": {"topology": {"kind": "torus"}}}, "cluster.topology"),
    ({"parallel": {"tpp": 2}}, "parallel.tpp"),
    ({"workload": {"seq_len": -5}}, "workload.seq_len"),
    ({"workload": {"micro_batch": 0}}, "workload.micro_batch"),
    ({"parallel": {"recompute": "some"}}, "parallel.recompute"),
    ({"network": {"ecn": {"kmin_kb": 2000}}}, "network.ecn"),
    ({"network": {"routing": "random"}}, "network.routing"),
    ({"seed": -1}, "seed"),
])
def test_bad_values_name_the_field(bad, field):
    err = error_of(small_scenario(**bad))
    assert str(err).startswith(field), str(err)


def test_bad_overrides_and_files(tmp_path):
    assert error_of(small_scenario(), ["parallel.tp"]).field == "--set"
    assert "workload.seq_len" in str(error_of(small_scenario(), ["workload.seq_len.x=1"]))
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: [1, 2\n")
    with pytest.raises(ScenarioError, match="invalid YAML"):
        Scenario.load(bad)
    with pytest.raises(ScenarioError, match="cannot read"):
        Scenario.load(tmp_path / "missing.yaml")
    lst = tmp_path / "list.yaml"
    lst.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(ScenarioError, match="mapping"):
        Scenario.load(lst)


@pytest.mark.parametrize("group,ok", [(None, False), (6, True), (10, True), (3, False),
                                      (7, False), (11, False)])
def test_microbatch_group_lets_interleaving_run_any_batch_megatron_allows(group, ok):
    """10 micro-batches on pp 4, vpp 2: Megatron's default group (pp) refuses them; a group of
    6 (last group 4 >= pp) or 10 runs; 3 (< pp), 7 (last group 3 < pp) or 11 (> m) do not."""
    par = {"tp": 2, "pp": 4, "vpp": 2, "microbatch_group_size": group}
    sc = small_scenario(workload={"global_batch": 80, "micro_batch": 1}, parallel=par)
    if ok:
        assert resolve(Scenario.from_dict(sc)).num_micro_batches == 10
    else:
        err = error_of(sc)
        assert "parallel" in str(err) and "\n" not in str(err)


def test_llama3_405b_fits_in_80gb_as_the_paper_ran_it():
    """Llama 3 405B on 16,384 H100 as section 3.3.2 describes its FSDP: optimizer states and
    gradients sharded over the data-parallel ranks (gradients reduce-scattered in FP32 every
    micro-batch, ZeRO-2), no activation checkpointing (flash attention stores no scores, so
    selective and none hold the same): every stage fits in 80 GB; keeping whole FP32
    gradients (ZeRO-1) would not."""
    gib = 2 ** 30
    for recompute in ("none", "selective"):
        sc = Scenario.load(REPO / "examples" / "llama3-405b-16384.yaml",
                           ["parallel.zero=2", f"parallel.recompute={recompute}"])
        assert account(sc).memory.total_bytes.max() < 80 * gib
    sc = Scenario.load(REPO / "examples" / "llama3-405b-16384.yaml")
    assert account(sc).memory.total_bytes.max() > 80 * gib
