"""The whole cluster on the fabric: consistency with alpha-beta, what-ifs with the right sign
and size, link and collective frames."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from simulator import Scenario, ScenarioError, simulate
from tests.conftest import REPO, small_scenario


def scenario(**over) -> Scenario:
    """64 GPUs, GPT 18.4B, tp 8 x pp 2 x dp 4 on a small spine-leaf fabric."""
    data = {
        "name": "cluster-test",
        "workload": {"model": "megatron-gpt-18.4b", "seq_len": 2048, "global_batch": 64,
                     "micro_batch": 1},
        "parallel": {"tp": 8, "pp": 2, "sequence_parallel": True, "recompute": "selective",
                     "zero": 1},
        "cluster": {"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8,
                    "topology": {"kind": "spine-leaf", "nic_gbps": 200, "hosts_per_leaf": 8,
                                 "spines": 4}},
        "network": {"congestion_control": "none", "routing": "spray"},
        "fidelity": "flow",
    }
    return Scenario.from_dict(data, [f"{k}={v}" for k, v in over.items()])


def dp_time(r) -> float:
    c = r.collectives
    return float(c[(c.group == "dp") & (c.kind == "reduce_scatter")].time_s.max())


@pytest.mark.parametrize("gpus", [64, 1024])
def test_non_blocking_fabric_agrees_with_alpha_beta(gpus):
    over = {"cluster.gpus": gpus, "workload.global_batch": gpus}
    flow = simulate(scenario(**over))
    screen = simulate(scenario(**over, fidelity="screening"))
    assert flow.fidelity == "flow" and screen.fidelity == "screening"
    assert flow.step_time_s == pytest.approx(screen.step_time_s, rel=0.02)
    assert len(flow.links) > 0 and len(screen.links) == 0


def test_ecmp_collisions_slow_the_dp_all_reduce_versus_spray():
    over = {"cluster.gpus": 256, "workload.global_batch": 256, "parallel.pp": 1,
            "cluster.topology.hosts_per_leaf": 16, "cluster.topology.spines": 16}
    spray = simulate(scenario(**over))
    ecmp = [simulate(scenario(**over, **{"network.routing": "ecmp", "seed": s}))
            for s in range(3)]
    assert all(dp_time(e) > dp_time(spray) * 1.2 for e in ecmp)
    assert np.mean([e.step_time_s for e in ecmp]) > spray.step_time_s
    # the collectives frame names what the collisions cost against NCCL's non-blocking time
    # (the screening fidelity's, computed by the other model) and where the flows met
    c = ecmp[0].collectives
    dp = c[(c.group == "dp") & (c.kind == "reduce_scatter")].iloc[0]
    assert dp.slowdown > 1.2 and "spine" in dp.hottest_link
    s = spray.collectives
    assert s[s.group == "dp"].slowdown.between(0.97, 1.05).all()


def test_failed_spine_slows_cross_leaf_collectives_by_the_lost_capacity():
    base = simulate(scenario())
    broken = simulate(scenario(**{"faults.failed_switches": "[spine1]"}))
    # each leaf has 8 x 200G uplinks, two to each of 4 spines: losing one leaves 3/4
    assert dp_time(broken) / dp_time(base) == pytest.approx(4 / 3, rel=0.03)
    c = broken.collectives
    rs = c[(c.group == "dp") & (c.kind == "reduce_scatter")]
    assert rs.slowdown.max() == pytest.approx(4 / 3, rel=0.05)
    assert rs.hottest_link.str.contains("spine").all()
    up = broken.links[broken.links.tier == "leaf-spine"]
    assert len(up) and up.collective.str.contains(" dp stage ").all()
    assert broken.step_time_s > base.step_time_s
    assert not broken.links.link.str.contains("spine1").any()
    degraded = simulate(scenario(**{"faults.degraded_links":
                                    "[{link: leaf0-spine0, capacity_factor: 0.5}]"}))
    assert degraded.step_time_s >= base.step_time_s


@pytest.mark.parametrize("pp", [1, 2])
def test_straggler_lengthens_the_step_by_its_share_of_critical_path_compute(pp):
    """The straggler sits on the last stage, the critical one (it also runs the logits).
    Variability off: every other GPU at its nominal speed, so the straggler alone slows."""
    off = {"parallel.pp": pp, "cluster.variability.gpu_speed_cv": 0}
    base = simulate(scenario(**off))
    gpu = 64 - 5
    slow = simulate(scenario(**off, **{"faults.stragglers": f"[{{gpu: {gpu}, slowdown: 1.1}}]"}))
    b = base.breakdown_s
    compute = b["forward_compute"] + b["backward_compute"] + b["recompute"]
    delta = slow.step_time_s - base.step_time_s
    # "about": the slower last backward also hides ~10 % more of the gradient reduction, and
    # with pp > 1 the straggling stage is only part of the critical path
    assert delta == pytest.approx(0.10 * compute, rel=0.25 if pp > 1 else 0.15)
    assert delta > 0


def test_core_oversubscription_only_hurts_traffic_that_crosses_it():
    """Two pods of 64 GPUs; pp 2 puts stage 0 in pod 0 and stage 1 in pod 1. DP groups stay in
    their pod; the pipeline sends all cross the core. 8 leaves per pod: a 1:7 core keeps
    ceil(8/7) = 2 of 8 uplinks per aggregation switch."""
    def run(ratio: int):
        return simulate(scenario(**{
            "cluster.gpus": 128, "workload.global_batch": 128,
            "cluster.topology": f"{{kind: clos3, nic_gbps: 200, hosts_per_leaf: 8, "
                                f"pod_gpus: 64, core_oversubscription: {ratio}}}"}))

    full, over = run(1), run(7)
    assert dp_time(over) == pytest.approx(dp_time(full), rel=1e-9)
    c_full, c_over = full.collectives, over.collectives
    pp_full = float(c_full[c_full.group == "pp"].time_s.max())
    pp_over = float(c_over[c_over.group == "pp"].time_s.max())
    # bandwidth term 4x (2 of 8 core uplinks), diluted by the same fixed latency term
    assert 3.2 < pp_over / pp_full <= 4.0 + 1e-9
    assert over.step_time_s > full.step_time_s


def test_flow_results_are_deterministic_and_framed():
    a, b = simulate(scenario(**{"network.routing": "ecmp"})), \
        simulate(scenario(**{"network.routing": "ecmp"}))
    da, db = a.to_dict(), b.to_dict()
    da.pop("sim_wall_s"), db.pop("sim_wall_s")
    assert da == db
    assert list(a.links.columns) == ["link", "tier", "bytes", "busy_s", "utilisation",
                                     "max_flows", "collective", "max_queue_bytes",
                                     "mean_queue_bytes", "pause_s", "ecn_mark_rate",
                                     "dropped_bytes"]
    assert (a.links.utilisation <= 1 + 1e-9).all() and a.links.utilisation.is_monotonic_decreasing
    assert {"kind", "group", "bytes", "start_s", "end_s", "busbw_gbyte_per_s"} <= set(
        a.collectives.columns)


def test_bad_faults_are_one_line_errors():
    for over, field in (({"faults.failed_switches": "[spine9]"}, "faults"),
                        ({"faults.failed_links": "[leaf0spine0]"}, "faults.failed_links"),
                        ({"faults.stragglers": "[{gpu: 999, slowdown: 1.1}]"},
                         "faults.stragglers"),
                        ({"faults.failed_switches": "[spine0]", "fidelity": "screening"},
                         "fidelity")):
        with pytest.raises(ScenarioError) as err:
            simulate(scenario(**over))
        assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["megascale-175b-12288", "gpt3-175b-1024-selene"])
def test_examples_run_at_flow_fidelity(name):
    sc = Scenario.load(REPO / "examples" / f"{name}.yaml",
                       ["fidelity=flow", "network.congestion_control=none"])
    r = simulate(sc)
    screen = simulate(Scenario.load(REPO / "examples" / f"{name}.yaml", ["fidelity=screening"]))
    assert r.fidelity == "flow" and len(r.links) and len(r.collectives)
    assert r.step_time_s >= screen.step_time_s * 0.98      # a real fabric only adds contention


@pytest.mark.parametrize("fidelity,cc", [("analytic", "none"), ("screening", "none"),
                                         ("flow", "none"), ("flow", "dcqcn")])
def test_same_scenario_and_seed_give_byte_identical_json_in_separate_processes(
        tmp_path, fidelity, cc):
    """design.md: same scenario + same seed = identical numbers. Two separate processes print
    the same JSON, byte for byte, except the wall time of the simulation."""
    from tests.simulator.test_bad_input import _cli
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(small_scenario(
        cluster={"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8,
                 "topology": {"kind": "spine-leaf", "hosts_per_leaf": 4, "spines": 2,
                              "nic_gbps": 200}},
        fidelity=fidelity, network={"congestion_control": cc, "routing": "ecmp"}, seed=7)))
    outs = []
    for _ in range(2):
        r = _cli("simulate", str(path), "--json")
        assert r.returncode == 0, r.stderr
        text = re.sub(r'"sim_wall_s": [0-9.e+-]+', '"sim_wall_s": 0', r.stdout)
        outs.append(text)
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["fidelity"] == ("fluid" if cc == "dcqcn" else fidelity)


def test_simulate_runs_on_the_fabric_by_default_and_says_what_it_did(tmp_path):
    """No fidelity in the file: the CLI runs the step on the fabric under the scenario's DCQCN
    and shows the hottest links, the congestion totals and the collectives ECMP slowed (the
    DP reduce-scatter, whose rings collide on the leaf uplinks: test above)."""
    data = scenario().model_dump(mode="json", exclude={"fidelity"})
    data = {k: data[k] for k in ("name", "workload", "parallel", "cluster", "seed")}
    data["cluster"]["gpus"], data["workload"]["global_batch"] = 256, 256
    data["parallel"]["pp"] = 1
    data["cluster"]["topology"].update(hosts_per_leaf=16, spines=16)
    data["network"] = {"routing": "ecmp", "congestion_control": "dcqcn", "pfc": True}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    cli = Path(sys.executable).with_name("clustersim")
    out = subprocess.run([str(cli), "simulate", str(path)], capture_output=True, text=True,
                         env={"COLUMNS": "250", "PATH": ""})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "fidelity fluid" in text and "Hottest links (deepest queue first)" in text
    assert "congestion per step: deepest queue" in text
    slowed = text.split("Collectives the fabric slowed")[1]
    first = next(ln for ln in slowed.splitlines() if "stage" in ln)
    assert " dp stage 0" in first and "spine" in first
    assert float(re.search(r"(\d+\.\d+)x", first).group(1)) > 1.2


@pytest.mark.parametrize("gpu,gpus,per", [("gb200", 1024, 64), ("gb200", 144, 72),
                                          ("gb200", 32, 72), ("gb200", 136, 68),
                                          ("gb300", 144, 72), ("gb300", 1024, 64),
                                          ("h100-sxm", 1024, 8), ("a100-80gb", 64, 8)])
def test_an_unset_node_is_the_gpus_nvlink_domain_or_whole_trays_of_it(gpu, gpus, per):
    """gpus_per_node unset: one NVLink domain (8 on HGX, 72 per GB200 NVL72 rack), or where
    the job is not whole racks, whole 4-GPU compute trays of one (NVIDIA runs 1,024 GB200 as
    racks of 64). nccl-tests takes the same default; a stated value is kept."""
    cluster = {"gpu": gpu, "gpus": gpus}
    data = small_scenario(cluster=cluster, parallel={"tp": 2, "pp": 1, "zero": 1},
                          workload={"global_batch": gpus // 2})
    data["cluster"].pop("gpus_per_node")
    assert Scenario.from_dict(data).cluster.gpus_per_node == per
    data["cluster"]["gpus_per_node"] = 8
    assert Scenario.from_dict(data).cluster.gpus_per_node == 8


def test_hgx_jobs_that_are_not_whole_boards_are_still_refused():
    data = small_scenario(cluster={"gpus": 12}, parallel={"tp": 2, "pp": 1, "zero": 1},
                          workload={"global_batch": 12})
    data["cluster"].pop("gpus_per_node")
    with pytest.raises(ScenarioError, match="whole number of nodes of cluster.gpus_per_node"):
        Scenario.from_dict(data)
