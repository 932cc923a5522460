"""Bad input never escapes as a traceback: a ScenarioError naming a field, or exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import Scenario, ScenarioError, account
from simulator.config.resolve import layout_choices, resolve
from simulator.errors import SECTIONS
from tests.conftest import REPO, small_scenario

PATHS = [
    "name", "seed",
    "workload.model", "workload.seq_len", "workload.global_batch", "workload.micro_batch",
    "workload.precision", "workload.optimizer", "workload.moments_dtype",
    "workload.model.num_layers", "workload.model.hidden_size", "workload.model.vocab_size",
    "workload.model.num_attention_heads", "workload.model.num_query_groups",
    "workload.model.ffn_hidden_size", "workload.model.activation",
    "workload.model.num_experts", "workload.model.moe_top_k", "workload.model.sliding_window",
    "workload.model.window_attn_skip_freq",
    "parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "parallel.ep", "parallel.vpp",
    "parallel.schedule", "parallel.zero", "parallel.recompute", "parallel.sequence_parallel",
    "parallel.first_stage_layers", "parallel.last_stage_layers", "parallel.pipeline_layout",
    "parallel.etp", "parallel.recompute_modules", "parallel.microbatch_group_size",
    "parallel.recompute_method", "parallel.recompute_num_layers",
    "parallel.cpu_offloading_num_layers", "parallel.offload_modules",
    "workload.model.mtp_num_layers", "workload.fp8_recipe", "workload.fp8_saved_inputs",
    "optimizations.dp_overlap", "optimizations.flash_attention", "optimizations.ep_overlap",
    "optimizations.delay_wgrad",
    "optimizations.tp_bwd_overlap", "optimizations.comm_sms", "optimizations.ep_comm_sms",
    "optimizations.grouped_gemm", "optimizations.cuda_graph_scope",
    "cluster.gpu", "cluster.gpus", "cluster.gpus_per_node", "cluster.topology",
    "cluster.topology.kind", "cluster.topology.leaves", "cluster.topology.hosts_per_leaf",
    "cluster.topology.nic_gbps", "cluster.topology.spines", "cluster.topology.net_latency_us",
    "cluster.topology.transport", "cluster.topology.sharp", "cluster.variability.host_noise",
    "network.routing", "network.queue_pairs", "network.congestion_control", "network.pfc",
    "network.ecn.kmin_kb", "network.ecn.kmax_kb", "network.ecn.pmax", "network.dcqcn.g",
    "network.pfc_threshold.mode", "network.dcqcn.reaction_point",
    "network.nccl.qps_per_connection", "network.nccl.split_data_on_qps",
    "network.nccl.channels", "network.nccl.channels_per_nic",
    "data.loader", "data.workers", "data.prefetch", "data.cpu_ms_per_sample",
    "data.storage_gbyte_per_s", "data.bytes_per_sample", "data.cpu_cores_per_node",
]
SECTION_KEYS = ["workload", "parallel", "cluster", "network", "optimizations", "data"]

values = st.one_of(
    st.integers(-3, 3), st.sampled_from([5, 6, 7, 12, 24, 48, 96, 1000, 4096, 10**6, 10**12,
                                         2**63, 10**40]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.text(max_size=8), st.sampled_from(["auto", "gpt3-175b", "llama3-8b", "h100-sxm",
                                          "spine-leaf", "clos3", "interleaved", "zb-h1",
                                          "dualpipe", "mxfp8",
                                          "full", "dcqcn", "swiglu"]),
    st.lists(st.integers(0, 4), max_size=3), st.dictionaries(st.text(max_size=4),
                                                             st.integers(), max_size=2),
)


def _set(data: dict, path: str, value) -> dict:
    node = data
    parts = path.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {} if child is None else child
            if not isinstance(child, dict):
                return data
        node = child
    node[parts[-1]] = value
    return data


mutation = st.one_of(
    st.tuples(st.sampled_from(PATHS), values),
    st.tuples(st.sampled_from(SECTION_KEYS).map(lambda s: s + ".bogus_key"), values),
    st.tuples(st.sampled_from(SECTION_KEYS), values),
)


@given(mutations=st.lists(mutation, min_size=1, max_size=3))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_scenarios_load_or_name_a_field(mutations):
    data = small_scenario()
    for path, value in mutations:
        data = _set(data, path, value)
    try:
        sc = Scenario.from_dict(data)
    except ScenarioError as err:
        text = str(err)
        assert "\n" not in text and text
        assert err.field is not None and err.field.split(".")[0] in SECTIONS, text
        return
    # whatever loads is consistent and can be accounted without surprises
    lay = resolve(sc, *layout_choices(sc)[0])
    assert lay.tp * lay.pp * lay.dp * lay.cp == sc.cluster.gpus
    assert sum(lay.stage_layers) == sc.workload.model.num_layers
    acc = account(sc)
    assert acc.memory_gib_per_gpu > 0 and acc.flops.model > 0


def _cli(*args, cwd=None):
    exe = Path(sys.executable).with_name("clustersim")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "simulator.cli"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("content,args,needle", [
    ({"workload": {"global_batch": 7}}, [], "workload.global_batch"),
    ({"parallel": {"tp": "eight"}}, [], "parallel.tp"),
    ({}, ["--set", "parallel.pp=3"], "cluster.gpus"),
    ({}, ["--set", "nonsense"], "--set"),
    ({"cluster": {"gpu": "tpu-v5"}}, [], "cluster.gpu"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, content, args, needle):
    path = tmp_path / "s.yaml"
    data = small_scenario(**content)
    path.write_text(yaml.safe_dump(data))
    res = _cli("memory", str(path), *args)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.stderr


def test_cli_missing_file_and_bad_usage(tmp_path):
    for args in (["memory", str(tmp_path / "none.yaml")], ["frobnicate"], ["memory"],
                 ["memory", "x.yaml", "--bogus"]):
        res = _cli(*args)
        assert res.returncode == 2 and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_cli_memory_json_and_presets():
    res = _cli("memory", str(REPO / "examples" / "megascale-175b-12288.yaml"), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for key in ("gpus", "tp", "pp", "dp", "cp", "ep", "vpp", "memory_gib_per_gpu",
                "fits_memory", "model_flops_per_step", "hardware_flops_per_step", "stages"):
        assert key in out
    assert (out["gpus"], out["dp"]) == (12288, 192) and out["fits_memory"] is True
    res = _cli("presets", "--json")
    names = {m["name"] for m in json.loads(res.stdout)["models"]}
    assert {"gpt3-175b", "llama3-405b", "deepseek-v3", "mixtral-8x7b", "nemotron4-340b",
            "mt-nlg-530b", "megatron-gpt-1t"} <= names
    res = _cli("presets")
    assert res.returncode == 0 and "a100-80gb" in res.stdout and "megascale-12288" in res.stdout


def test_cli_simulate_json_and_trace(tmp_path):
    trace = tmp_path / "step.json"
    res = _cli("simulate", str(REPO / "examples" / "gpt3-175b-1024-selene.yaml"), "--json",
               "--trace", str(trace), "--set", "workload.global_batch=512")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["gpus"] == 1024 and 0 < out["mfu"] < 1
    assert sum(out["breakdown_s"].values()) == pytest.approx(out["step_time_s"], rel=1e-9)
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e["ph"] == "X" and e["cat"] == "compute" for e in events)
    human = _cli("simulate", str(REPO / "examples" / "gpt3-175b-1024-selene.yaml"))
    assert human.returncode == 0 and "MFU" in human.stdout and "bubble" in human.stdout
    bad = _cli("simulate", str(REPO / "examples" / "gpt3-175b-1024-selene.yaml"),
               "--set", "parallel.vpp=5")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    unwritable = _cli("simulate", str(REPO / "examples" / "gpt3-175b-1024-selene.yaml"),
                      "--trace", str(tmp_path / "no" / "such" / "dir" / "t.json"))
    assert unwritable.returncode == 2 and "--trace" in unwritable.stderr
