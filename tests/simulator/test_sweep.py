"""Sweeps (local pool, Dask, resume), the analytic fidelity, and MFU regression in CI."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from simulator.config.scenario import Scenario
from simulator.sweep.grid import auto_points, evaluate
from simulator.sweep.runner import run_sweep
from tests.conftest import REPO, small_scenario
from tests.simulator.test_bad_input import _cli

GRID = {"parallel.tp": [1, 2, 4, 8], "parallel.pp": [1, 2, 4], "workload.micro_batch": [1, 2, 3],
        "parallel.recompute": ["none", "full"], "parallel.zero": [0, 1, 3]}


def _sweep_file(tmp_path: Path, grid=GRID, **extra) -> Path:
    base = small_scenario(cluster={"gpu": "a100-40gb", "gpus": 64, "gpus_per_node": 8},
                          workload={"model": "megatron-gpt-7.5b", "seq_len": 2048,
                                    "global_batch": 96, "micro_batch": 1})
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": base, "grid": grid, **extra}))
    return path


def test_sweep_rows_cover_every_point_with_status_and_reason(tmp_path):
    table = run_sweep(_sweep_file(tmp_path), tmp_path / "out.csv", jobs=1, progress=False)
    assert len(table) == int(np.prod([len(v) for v in GRID.values()]))
    assert set(table.status) == {"ok", "oom", "invalid"}
    bad = table[table.status == "invalid"]
    assert bad.reason.str.contains("parallel|workload").all()       # names the field
    assert table[table.status == "oom"].reason.str.contains("GiB").all()
    ok = table[table.status == "ok"]
    assert (ok.fidelity == "analytic").all() and ok.calibration.notna().all()
    assert {"tp", "pp", "dp", "micro_batch", "zero", "recompute", "mfu", "step_time_s",
            "breakdown_bubble"} <= set(table.columns)
    assert pd.read_csv(tmp_path / "out.csv").point.tolist() == table.point.tolist()


def test_auto_enumerates_only_valid_layouts():
    sc = Scenario.from_dict(small_scenario())
    pts = auto_points(sc)
    assert len(pts) > 100
    for p in random.Random(0).sample(pts, 60):
        row = evaluate(small_scenario(), [], p, "analytic")
        assert row["status"] in ("ok", "oom"), row["reason"]


def test_killed_sweep_resumes_to_exactly_the_uninterrupted_rows(tmp_path):
    sweep = _sweep_file(tmp_path, grid={**GRID, "parallel.zero": [0, 1, 2, 3],
                                        "optimizations.dp_overlap": [True, False]})
    full = run_sweep(sweep, tmp_path / "full.csv", jobs=1, progress=False)
    out = tmp_path / "part.csv"
    exe = Path(sys.executable).with_name("clustersim")
    proc = subprocess.Popen([str(exe), "sweep", str(sweep), "--out", str(out), "--jobs", "1",
                             "--quiet", "--fidelity", "screening"])
    deadline = time.time() + 60
    while time.time() < deadline:
        if out.exists() and out.read_text().count("\n") > 40:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = pd.read_csv(out)
    assert 0 < len(partial) < len(full)                   # really interrupted mid-way
    resumed = run_sweep(sweep, out, jobs=2, resume=True, fidelity="screening", progress=False)
    again = run_sweep(sweep, tmp_path / "again.csv", jobs=1, fidelity="screening",
                      progress=False)
    pd.testing.assert_frame_equal(resumed.drop(columns="sim_wall_s"),
                                  again.drop(columns="sim_wall_s"))
    pd.testing.assert_frame_equal(pd.read_csv(out).drop(columns="sim_wall_s"),
                                  pd.read_csv(tmp_path / "again.csv").drop(columns="sim_wall_s"))


def test_dask_cluster_returns_the_rows_of_the_local_pool(tmp_path):
    from distributed import Client, LocalCluster
    sweep = _sweep_file(tmp_path, grid={"parallel.tp": [2, 4], "parallel.pp": [1, 2, 4],
                                        "workload.micro_batch": [1, 2]})
    local = run_sweep(sweep, tmp_path / "local.parquet", jobs=2, progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        dist = run_sweep(sweep, tmp_path / "dask.csv", scheduler=client, progress=False)
    cols = [c for c in local.columns if c != "sim_wall_s"]

    def norm(df):                   # parquet keeps None, CSV reads NaN: compare the values
        df = df[cols].reset_index(drop=True).astype(object)
        return df.where(df.notna(), None)

    pd.testing.assert_frame_equal(norm(pd.read_parquet(tmp_path / "local.parquet")),
                                  norm(pd.read_csv(tmp_path / "dask.csv")), check_dtype=False)
    assert len(dist) == 12


def test_analytic_fidelity_agrees_with_the_executor():
    """Closed-form pipeline vs the simpy executor over sampled valid layouts."""
    base = small_scenario(workload={"model": "megatron-gpt-7.5b", "global_batch": 128})
    pts = random.Random(3).sample(auto_points(Scenario.from_dict(base)), 80)
    errs = []
    for p in pts:
        a = evaluate(base, [], p, "analytic")
        if a["status"] != "ok":
            continue
        s = evaluate(base, [], p, "screening")
        errs.append(a["step_time_s"] / s["step_time_s"] - 1)
    errs = np.abs(errs)
    assert len(errs) > 20
    assert errs.max() < 0.025 and np.median(errs) < 0.005


# ---------------- regress ----------------
BASELINE = REPO / "tests" / "regression" / "mfu_baseline.csv"


def test_repository_baseline_passes_and_covers_the_examples(tmp_path):
    r = _cli("regress", str(BASELINE), "--jobs", "2", "--junit", str(tmp_path / "r.xml"))
    assert r.returncode == 0, r.stdout + r.stderr
    covered = {Path(s).name for s in pd.read_csv(BASELINE).scenario}
    assert covered == {p.name for p in (REPO / "examples").glob("*.yaml")}
    assert 'failures="0"' in (tmp_path / "r.xml").read_text()


def test_regress_catches_planted_drift_and_broken_scenarios_and_updates(tmp_path):
    df = pd.read_csv(BASELINE)
    df["scenario"] = [str((BASELINE.parent / s).resolve()) for s in df.scenario]
    df.loc[1, "mfu"] += 0.02                                  # planted drift
    planted = tmp_path / "b.csv"
    df.to_csv(planted, index=False)
    r = _cli("regress", str(planted), "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 1 and "1 of" in r.stderr
    assert 'failures="1"' in (tmp_path / "j.xml").read_text()
    ok = _cli("regress", str(planted), "--tolerance", "0.03")
    assert ok.returncode == 0
    broken = df.copy()
    broken.loc[0, "overrides"] = "parallel.tp=3"
    broken.to_csv(planted, index=False)
    r = _cli("regress", str(planted), "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 1 and 'errors="1"' in (tmp_path / "j.xml").read_text()
    df.loc[0, "overrides"] = ""
    df.to_csv(planted, index=False)
    assert _cli("regress", str(planted), "--update").returncode == 0
    assert _cli("regress", str(planted)).returncode == 0


@pytest.mark.parametrize("args,needle", [
    (["sweep", "missing.yaml", "--out", "x.csv"], "sweep"),
    (["sweep", "SWEEP", "--out", "x.txt"], "--out"),
    (["regress", "missing.csv"], "baseline"),
    (["regress", "BASELINE", "--tolerance", "-1"], "--tolerance"),
])
def test_bad_sweep_and_regress_input_is_one_line(tmp_path, args, needle):
    sweep = _sweep_file(tmp_path)
    args = [str(sweep) if a == "SWEEP" else str(BASELINE) if a == "BASELINE" else a
            for a in args]
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and needle in r.stderr


# ---------------- sweeps on the fabric ----------------
def _flow_sweep(tmp_path: Path) -> Path:
    """64 GPUs on a 2-spine ECMP fabric (collisions make the fabric matter), 48 layouts; the
    rank orders place groups of the same sizes and bytes on different GPUs (a cache keyed
    without the placement would mix them up)."""
    base = small_scenario(cluster={"gpus": 64, "gpus_per_node": 8, "topology": {
        "kind": "spine-leaf", "nic_gbps": 100, "hosts_per_leaf": 2, "spines": 2}},
        network={"routing": "ecmp", "congestion_control": "none"})
    path = tmp_path / "flow.yaml"
    path.write_text(yaml.safe_dump({
        "base": base, "fidelity": "flow",
        "grid": {"parallel.tp": [2, 4, 8], "parallel.pp": [1, 2],
                 "workload.micro_batch": [1, 2], "parallel.zero": [1, 2],
                 "parallel.order": ["tp-cp-ep-dp-pp", "tp-pp-cp-ep-dp"]}}))
    return path


def _numbers(t: pd.DataFrame) -> pd.DataFrame:
    return t.drop(columns="sim_wall_s").reset_index(drop=True)


def test_cached_flow_sweep_equals_solving_every_collective_and_resumes_from_disk(tmp_path):
    sweep = _flow_sweep(tmp_path)
    cached = run_sweep(sweep, tmp_path / "c.csv", jobs=2, progress=False)
    plain = run_sweep(sweep, tmp_path / "p.csv", jobs=1, progress=False, cache=False)
    assert (cached.status == "ok").all() and (cached.fidelity == "flow").all()
    pd.testing.assert_frame_equal(_numbers(cached), _numbers(plain))
    n = cached.attrs["collectives"]
    assert plain.attrs["collectives"] == {"solved": 0, "reused": 0}      # no cache at all
    # layouts share DP groups and pipeline sends: most batches are reused, not re-solved
    assert n["reused"] > n["solved"] > 0
    # a resumed sweep computes its missing points from the disk cache alone, to the same rows
    out = tmp_path / "c.csv"
    pd.read_csv(out).iloc[:5].to_csv(out, index=False)
    resumed = run_sweep(sweep, out, jobs=1, progress=False, resume=True)
    pd.testing.assert_frame_equal(_numbers(resumed), _numbers(cached))
    assert resumed.attrs["collectives"]["solved"] == 0
    assert resumed.attrs["collectives"]["reused"] > 0


def test_screen_top_sends_the_analytic_best_and_their_near_ties_to_the_fabric(tmp_path):
    sweep = _flow_sweep(tmp_path)
    table = run_sweep(sweep, tmp_path / "f.csv", jobs=1, progress=False, screen_top=3,
                      screen_margin=0.05)
    screen = table.attrs["screen"]
    ok = screen[screen.status == "ok"]
    assert len(screen) == 48 and (screen.fidelity == "analytic").all()
    bar = ok.mfu.sort_values(ascending=False).iloc[2] * 0.95
    assert set(table.point) == set(ok.point[ok.mfu >= bar]) and len(table) >= 3
    assert (table.fidelity == "flow").all()
    full = run_sweep(sweep, tmp_path / "all.csv", jobs=1, progress=False)
    same = full.set_index("point").loc[table.point]
    np.testing.assert_allclose(same.mfu.to_numpy(), table.mfu.to_numpy(), rtol=1e-12)
    assert (tmp_path / "f.screen.csv").exists()


def test_best_table_keeps_points_apart_and_names_their_schedule(tmp_path):
    """The summary table merges only layouts that differ in recomputation alone; points the
    grid sets apart otherwise (here the dispatcher, which the node limit does not change for
    NCCL's flat all-to-all, so their steps tie) keep a row each, and a schedule column appears
    when the points' schedules differ (DualPipe's two chunks a rank read as vpp 2)."""
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({
        "base": str(REPO / "examples" / "deepseek-v3-2048-h800.yaml"), "fidelity": "screening",
        "grid": {"parallel.schedule": ["dualpipe", "1f1b"],
                 "workload.moe.max_nodes_per_token": [2, 4],
                 "workload.moe.dispatcher": ["alltoall"]}}))
    r = _cli("sweep", str(sweep), "--out", str(tmp_path / "s.csv"), "--jobs", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "alltoall" in ln]
    assert len(rows) == 4 and not any("=" in ln for ln in rows), r.stdout
    assert "schedule" in r.stdout and sum("dualpipe" in ln for ln in rows) == 2
