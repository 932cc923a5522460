"""What a new user hit (issue 24): each former crash is a result or one line naming the field,
exit code 2; sweep workers die with their parent; regress compares at full precision."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from simulator import Scenario, ScenarioError, simulate
from simulator.sweep import runner
from simulator.sweep.runner import run_sweep
from tests.conftest import REPO, small_scenario
from tests.simulator.test_bad_input import _cli
from tests.simulator.test_sweep import BASELINE, _sweep_file

SELENE = REPO / "examples" / "gpt3-175b-1024-selene.yaml"
NIC_FAULT = small_scenario(
    workload={"model": "megatron-gpt-1.7b", "seq_len": 2048, "global_batch": 16,
              "micro_batch": 1},
    parallel={"tp": 8, "pp": 1},
    cluster={"gpu": "h100-sxm", "gpus": 16, "topology": {"kind": "spine-leaf"}},
    faults={"failed_links": ["nic0.0-leaf0"]}, fidelity="flow")
TOPO = "{kind: spine-leaf, leaves: 2, spines: 2, hosts_per_leaf: 8}"


@pytest.mark.parametrize("cc", ["none", "dcqcn"])
def test_a_gpu_whose_only_nic_is_down_is_an_error_naming_the_cable(cc):
    data = {**NIC_FAULT, "network": {"congestion_control": cc}}
    with pytest.raises(ScenarioError) as err:
        simulate(Scenario.from_dict(data))
    assert err.value.field == "faults" and "nic0.0-leaf0" in str(err.value)
    assert "GPU 0 loses its only path" in str(err.value)


def test_the_same_job_without_the_fault_runs_on_the_fabric():
    r = simulate(Scenario.from_dict({**NIC_FAULT, "faults": {},
                                     "network": {"congestion_control": "none"}}))
    assert r.fidelity == "flow" and r.step_time_s > 0


def test_small_switch_buffers_under_dcqcn_give_a_step():
    """A jump's length from the drift bound was a float added to the int64 DCQCN timers
    (UFuncOutputCastingError with 1-2 MiB buffers)."""
    r = simulate(Scenario.load(SELENE, ["fidelity=flow", "network.congestion_control=dcqcn",
                                        "cluster.topology.buffer_mib=2"]))
    assert r.fidelity == "fluid" and 0 < r.mfu <= 1


@pytest.mark.parametrize("rows,needle", [
    ("", "no flows"),
    ("0,9,inf,0\n", "finite"),
    ("0,9,1e6,nan\n", "FLOWS.start_s"),
])
def test_bad_flow_files_are_one_line(tmp_path, rows, needle):
    f = tmp_path / "flows.csv"
    f.write_text("src_gpu,dst_gpu,bytes,start_s\n" + rows)
    for topo in (TOPO, "{kind: spine-leaf}"):       # sized fabric, or sized by the flows
        r = _cli("flows", str(f), "--topology", topo, "--out", str(tmp_path / "o.csv"))
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr


def test_files_that_are_not_utf8_are_one_line_naming_them(tmp_path):
    bad = tmp_path / "latin1"
    bad.write_bytes("name: caf\xe9\n".encode("latin-1") + b"\xff\xfe")
    sweep = _sweep_file(tmp_path)
    cases = [(["simulate", str(bad)], "scenario"), (["memory", str(bad)], "scenario"),
             (["sweep", str(bad), "--out", str(tmp_path / "s.csv")], "sweep"),
             (["regress", str(bad)], "baseline"),
             (["flows", str(bad), "--topology", TOPO, "--out", str(tmp_path / "o.csv")],
              "FLOWS")]
    data = yaml.safe_load(sweep.read_text())
    data["base"] = str(bad)
    sweep.write_text(yaml.safe_dump(data))
    cases.append((["sweep", str(sweep), "--out", str(tmp_path / "s.csv")], "sweep.base"))
    for args, field in cases:
        r = _cli(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (args, r.stderr)
        assert f"{field}:" in r.stderr and "not UTF-8" in r.stderr, r.stderr


def test_sweep_to_a_missing_folder_fails_before_computing(tmp_path, monkeypatch):
    r = _cli("sweep", str(_sweep_file(tmp_path)), "--out", "/nonexistent/x.csv")
    assert r.returncode == 2 and "--out" in r.stderr and "does not exist" in r.stderr

    def computed(*_, **__):
        raise AssertionError("a point was computed before --out was checked")

    monkeypatch.setattr(runner, "evaluate_work", computed)
    with pytest.raises(ScenarioError, match="does not exist"):
        run_sweep(_sweep_file(tmp_path), tmp_path / "missing" / "x.csv", jobs=1,
                  progress=False)


def test_resume_drops_a_cut_last_line_and_says_so(tmp_path):
    sweep = _sweep_file(tmp_path, grid={"parallel.tp": [1, 2, 4], "parallel.pp": [1, 2]})
    out = tmp_path / "s.csv"
    full = run_sweep(sweep, out, jobs=1, progress=False)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])   # cut mid-line
    r = _cli("sweep", str(sweep), "--out", str(out), "--resume", "--jobs", "1")
    assert r.returncode == 0, r.stderr
    assert "dropped the cut last line" in r.stderr
    again = pd.read_csv(out)
    pd.testing.assert_frame_equal(again.drop(columns="sim_wall_s"),
                                  full.drop(columns="sim_wall_s"), check_dtype=False)


def test_sweep_workers_die_with_their_killed_parent(tmp_path):
    sweep = _sweep_file(tmp_path)
    exe = Path(sys.executable).with_name("clustersim")
    proc = subprocess.Popen([str(exe), "sweep", str(sweep), "--out", str(tmp_path / "s.csv"),
                             "--jobs", "2", "--quiet", "--fidelity", "screening"])
    parent = psutil.Process(proc.pid)
    deadline = time.time() + 60
    workers = []
    while time.time() < deadline and len(workers) < 2:
        workers = parent.children(recursive=True)
        time.sleep(0.05)
    assert len(workers) >= 2, "the pool never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"{len(alive)} workers outlived their parent"


def test_regress_fails_a_drift_just_past_the_tolerance(tmp_path):
    """A full-precision baseline: a drift of tolerance + 1e-7 fails, tolerance - 1e-7 passes
    (a 6-decimal baseline read +0.005 as 0.0049997)."""
    df = pd.read_csv(BASELINE).iloc[[1]]                         # the analytic row: fast
    df["scenario"] = [str((BASELINE.parent / s).resolve()) for s in df.scenario]
    planted = tmp_path / "b.csv"
    df.to_csv(planted, index=False)
    assert _cli("regress", str(planted), "--update").returncode == 0
    exact = pd.read_csv(planted)
    assert exact.mfu.iloc[0] != round(exact.mfu.iloc[0], 6)      # stored at full precision
    for delta, code in ((0.005 + 1e-7, 1), (0.005 - 1e-7, 0)):
        moved = exact.copy()
        moved.loc[0, "mfu"] = exact.mfu.iloc[0] + delta
        moved.to_csv(planted, index=False)
        assert _cli("regress", str(planted)).returncode == code, delta


@pytest.mark.parametrize("row,needle", [
    ("0,0,1e6,0", "to itself"),
    ("0,1.5,1e6,0", "whole numbers"),
    ("-1,3,1e6,0", "whole numbers"),
    ("0,999999999,1e6,0", "--gpus"),
])
def test_flows_ids_are_whole_distinct_and_bounded(tmp_path, row, needle):
    f = tmp_path / "flows.csv"
    f.write_text("src_gpu,dst_gpu,bytes,start_s\n" + row + "\n")
    r = _cli("flows", str(f), "--topology", "{kind: spine-leaf}", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr


def test_flows_say_how_the_fabric_was_sized(tmp_path):
    f = tmp_path / "flows.csv"
    f.write_text("src_gpu,dst_gpu,bytes,start_s\n0,9,1e6,0\n")
    r = _cli("flows", str(f), "--topology", "{kind: spine-leaf}", "--out",
             str(tmp_path / "o.csv"))
    assert r.returncode == 0 and "fabric sized to 10 GPUs" in r.stdout


def test_a_sweep_grid_key_that_is_no_field_is_refused_up_front(tmp_path):
    sweep = _sweep_file(tmp_path, grid={"parallel.tpp": [1, 2], "parallel.pp": [1, 2]})
    r = _cli("sweep", str(sweep), "--out", str(tmp_path / "s.csv"))
    assert r.returncode == 2 and "sweep.grid.parallel.tpp" in r.stderr
    assert not (tmp_path / "s.csv").exists()


def test_messages_name_the_field_once_and_cut_long_values():
    with pytest.raises(ScenarioError) as err:
        Scenario.load(SELENE, ["cluster.gpus=1028"])
    assert str(err.value).startswith("cluster.gpus (1028)") and err.value.field == "cluster.gpus"
    with pytest.raises(ScenarioError) as err:
        Scenario.load(SELENE, ["workload.seq_len=" + "x" * 5000])
    assert "workload.seq_len" in str(err.value) and len(str(err.value)) < 200


def test_gpu_presets_expand_under_set_like_models_and_topologies():
    sc = Scenario.load(SELENE, ["cluster.gpu.hbm_gib=40"])
    assert sc.cluster.gpu.hbm_gib == 40 and sc.cluster.gpu.bf16_tflops == 312


def test_nccl_tests_take_the_gpu_of_the_preset_fabric():
    r = _cli("nccl-tests", "all_reduce", "--gpus", "16", "--topology", "selene-a100",
             "-b", "1M", "-e", "1M")
    assert r.returncode == 0 and "a100-80gb" in r.stdout, r.stdout


def test_topology_lists_a_summary_unless_all():
    short = _cli("topology", str(REPO / "examples" / "megascale-175b-12288.yaml"))
    assert short.returncode == 0 and short.stdout.count("\n") < 80
    assert "12,288" in short.stdout and "--all" in short.stdout


def test_the_best_table_merges_recompute_ties(tmp_path):
    """With flash attention, selective recomputation recomputes nothing: the same layout with
    none and selective is one row of the table, not two."""
    sweep = _sweep_file(tmp_path, grid={"parallel.recompute": ["none", "selective"],
                                        "parallel.tp": [2, 4], "parallel.pp": [1, 2]})
    r = _cli("sweep", str(sweep), "--out", str(tmp_path / "s.csv"), "--jobs", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("│")]
    assert rows and all("none = selective" in line for line in rows)
    assert len(rows) == len(set(rows)) == len(pd.read_csv(tmp_path / "s.csv")) // 2


def test_the_first_fluid_run_says_numba_compiles_and_later_ones_do_not(tmp_path, monkeypatch):
    """A fresh checkout's first run through the congestion model waits ~40 s on numba: the
    CLI says so on stderr before it starts, and stays quiet once the kernel's cache exists."""
    from simulator.cli import first_run
    folder = tmp_path / "__pycache__"
    folder.mkdir()
    monkeypatch.setattr(first_run, "KERNEL_CACHE", (folder, "kernel.run_steps-"))
    said = io.StringIO()
    first_run.say_if_first_fluid_run(said)
    assert said.getvalue().startswith("first run in this checkout: numba compiles the congestion")
    (folder / "kernel.run_steps-355.py311.nbi").write_bytes(b"")
    said = io.StringIO()
    first_run.say_if_first_fluid_run(said)
    assert said.getvalue() == ""
