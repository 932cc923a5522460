"""One simulated step: the JSON contract, determinism, the timeline, and the levers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import Scenario, simulate
from simulator.config.resolve import layout_choices
from simulator.result import BREAKDOWN_KEYS, TIMELINE_COLUMNS
from tests.conftest import REPO

CONTRACT = ["step_time_s", "mfu", "hfu", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
            "tokens_per_s", "bubble_fraction", "breakdown_s", "memory_gib_per_gpu",
            "fits_memory", "gpus", "tp", "pp", "dp", "cp", "ep", "vpp", "sim_wall_s",
            "fidelity", "calibration"]


def gpt_scenario(**over) -> Scenario:
    """A 64-GPU GPT 18.4B job: small enough for tests, large enough for every stream."""
    data = {
        "name": "lever-test",
        "workload": {"model": "megatron-gpt-18.4b", "seq_len": 2048, "global_batch": 128,
                     "micro_batch": 1},
        "parallel": {"tp": 8, "pp": 4, "sequence_parallel": True, "recompute": "selective"},
        "optimizations": {"dp_overlap": True, "pp_overlap": True, "tp_overlap": False},
        "cluster": {"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8,
                    "topology": "selene-a100"},
        "network": {"congestion_control": "none"},
    }
    return Scenario.from_dict(data, [f"{k}={v}" for k, v in over.items()])


def test_json_contract_and_breakdown_adds_up():
    r = simulate(Scenario.load(REPO / "examples" / "megascale-175b-12288.yaml"))
    d = json.loads(r.to_json())
    for key in CONTRACT:
        assert key in d, key
    assert set(d["breakdown_s"]) == set(BREAKDOWN_KEYS)
    assert sum(d["breakdown_s"].values()) == pytest.approx(d["step_time_s"], rel=1e-9)
    # the step ends when the timeline's last action does (the executor's rows, not the sum)
    assert r.timeline.end_s.max() == pytest.approx(d["step_time_s"], rel=1e-12)
    assert 0 < d["mfu"] <= d["hfu"] <= 1
    # MFU from the closed form, computed here: model FLOPs of GPT-3 175B without
    # recomputation, 72 B s l h^2 (1 + s / 6h + V / 12 l h) (Narayanan et al. 2021, eq. 3 with
    # three passes instead of four), over 12,288 A100s at 312 TFLOP/s
    B, s, l, h, V = 6144, 2048, 96, 12288, 51200
    flops = 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
    assert d["mfu"] == pytest.approx(flops / (d["step_time_s"] * 12288 * 312e12), rel=1e-9)
    assert (d["gpus"], d["tp"], d["pp"], d["dp"]) == (12288, 8, 8, 192)


def test_same_scenario_same_numbers():
    a = simulate(gpt_scenario()).to_dict()
    b = simulate(gpt_scenario()).to_dict()
    a.pop("sim_wall_s"), b.pop("sim_wall_s")
    assert a == b


def test_timeline_and_chrome_trace(tmp_path):
    r = simulate(gpt_scenario())
    tl = r.timeline
    assert list(tl.columns) == TIMELINE_COLUMNS
    comp = tl[(tl.stream == "compute") & tl.kind.isin(["forward", "backward"])]
    assert len(comp) == 4 * r.num_micro_batches * 2          # p x m x (F, B)
    assert (tl.end_s >= tl.start_s).all() and tl.end_s.max() == pytest.approx(r.step_time_s)
    for _, g in comp.groupby("stage"):                        # one compute stream per stage
        g = g.sort_values("start_s")
        assert (g.start_s.to_numpy()[1:] >= g.end_s.to_numpy()[:-1] - 1e-12).all()
    tp_rows = tl[(tl.stream == "tp") & (tl.stage == 0)]
    assert (tp_rows.end_s - tp_rows.start_s).sum() == pytest.approx(r.breakdown_s["tp_comm"])
    path = tmp_path / "trace.json"
    r.to_chrome_trace(path)
    trace = json.loads(path.read_text())
    names = {(e["pid"], e["args"]["name"]) for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {(0, "stage 0"), (3, "stage 3")} <= names
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == len(tl)


def _bd(r):
    return r.breakdown_s


def test_dp_overlap_hides_gradient_reduction_up_to_the_last_bucket():
    """Gradients accumulate over micro-batches, so buckets go out during the last micro-batch's
    backward; what that backward cannot hide, and the final bucket, stay exposed."""
    over = {"parallel.pp": 1, "workload.global_batch": 16}
    on = simulate(gpt_scenario(**over))
    off = simulate(gpt_scenario(**over, **{"optimizations.dp_overlap": False}))
    assert _bd(off)["dp_comm"] > 0
    assert _bd(on)["dp_comm"] < _bd(off)["dp_comm"]
    tl = on.timeline
    buckets = tl.query("stream == 'dp' and kind == 'grad_reduce'")
    total = float((buckets.end_s - buckets.start_s).sum())
    last_bwd = tl.query("stream == 'compute' and kind == 'backward'").iloc[-1]
    window = last_bwd.end_s - last_bwd.start_s
    final = buckets.end_s.max() - buckets.start_s.max()
    assert _bd(on)["dp_comm"] <= max(0.0, total - window) + final + 1e-9
    assert _bd(off)["dp_comm"] == pytest.approx(total, rel=1e-9)
    assert on.step_time_s < off.step_time_s


def test_pp_overlap_removes_blocking_sends():
    on, off = simulate(gpt_scenario()), simulate(gpt_scenario(**{"optimizations.pp_overlap":
                                                                  False}))
    assert _bd(on)["pp_comm"] == 0 < _bd(off)["pp_comm"]
    assert on.step_time_s < off.step_time_s


def test_tp_overlap_hides_tensor_parallel_collectives():
    off = simulate(gpt_scenario())
    on = simulate(gpt_scenario(**{"optimizations.tp_overlap": True}))
    assert _bd(on)["tp_comm"] < _bd(off)["tp_comm"]
    assert on.step_time_s < off.step_time_s


def _tp_exposed(r, kind: str) -> float:
    tl = r.timeline
    t = tl[(tl.stream == "tp") & (tl.stage == 0) & (tl.kind == kind)]
    return float((t.end_s - t.start_s).sum())


def test_backward_tp_collectives_exposed_without_megatrons_async_overlap():
    """Without recomputation the backward runs the forward's TP collectives on the gradients
    (all-gather <-> reduce-scatter, same bytes): PyTorch DTensor TP exposes exactly as much in
    the backward as in the forward; Megatron's async gradient collective hides it behind the
    weight-gradient GEMMs."""
    base = {"parallel.recompute": "none"}
    megatron = simulate(gpt_scenario(**base))
    dtensor = simulate(gpt_scenario(**base, **{"optimizations.tp_bwd_overlap": False}))
    fwd = _tp_exposed(dtensor, "forward")
    assert fwd > 0 and _tp_exposed(dtensor, "backward") == pytest.approx(fwd, rel=1e-9)
    assert _tp_exposed(megatron, "forward") == pytest.approx(fwd, rel=1e-9)
    assert _tp_exposed(megatron, "backward") < 0.5 * fwd
    assert dtensor.step_time_s > megatron.step_time_s


def test_parallel_block_halves_tp_collectives():
    off = simulate(gpt_scenario())
    on = simulate(gpt_scenario(**{"optimizations.parallel_block": True}))
    assert _bd(on)["tp_comm"] == pytest.approx(_bd(off)["tp_comm"] / 2, rel=0.02)
    assert on.step_time_s < off.step_time_s


def test_fused_kernels_and_flash_attention_are_faster():
    base = simulate(gpt_scenario())
    assert simulate(gpt_scenario(**{"optimizations.fused_kernels": False})).step_time_s > \
        base.step_time_s
    assert simulate(gpt_scenario(**{"optimizations.flash_attention": False})).step_time_s > \
        base.step_time_s


def test_sliding_window_only_cuts_attention_work():
    long = {"workload.seq_len": 16384, "workload.global_batch": 16}
    dense = simulate(gpt_scenario(**long))
    swa = simulate(gpt_scenario(**long, **{"workload.model.sliding_window": 2048}))
    assert swa.step_time_s < dense.step_time_s


def test_recompute_trades_time_for_memory():
    res = {m: simulate(gpt_scenario(**{"parallel.recompute": m,
                                      "optimizations.flash_attention": False}))
           for m in ("none", "selective", "full")}
    assert res["none"].step_time_s < res["selective"].step_time_s < res["full"].step_time_s
    assert res["none"].memory_gib_per_gpu > res["selective"].memory_gib_per_gpu > \
        res["full"].memory_gib_per_gpu
    assert res["none"].mfu > res["full"].mfu
    assert res["full"].hfu > res["full"].mfu


def test_more_micro_batches_shrink_the_bubble():
    few = simulate(gpt_scenario(**{"workload.global_batch": 32}))
    many = simulate(gpt_scenario(**{"workload.global_batch": 256}))
    assert many.bubble_fraction < few.bubble_fraction


def test_auto_picks_the_fastest_that_fits():
    sc = gpt_scenario(**{"workload.micro_batch": "auto", "parallel.vpp": "auto"})
    best = simulate(sc)
    assert set(best.auto_choices) == {"micro_batch", "vpp"}
    for b, v in layout_choices(sc)[:6]:
        fixed = simulate(gpt_scenario(**{"workload.micro_batch": b, "parallel.vpp": v}))
        if fixed.fits_memory:
            assert best.step_time_s <= fixed.step_time_s + 1e-12


def test_auto_that_cannot_fit_takes_the_fastest_of_the_least_memory():
    """Llama 3 405B's per-pipeline shape (tp 8, pp 16, 16 micro-batches, interleaved): every
    vpp holds all 16 micro-batches in flight on the first stage, so vpp 2, 4 and 8 (the
    embedding and the loss alone on their virtual stages) need the same memory and none fits
    80 GiB under ZeRO-1. The choice is then the fastest (vpp 4: a smaller bubble than 2, less
    per-chunk traffic than 8), neither the first nor the last."""
    from tests.conftest import small_scenario
    sc = Scenario.from_dict(small_scenario(
        workload={"model": "llama3-405b", "seq_len": 8192, "global_batch": 128,
                  "micro_batch": 1},
        parallel={"tp": 8, "pp": 16, "vpp": "auto", "schedule": "interleaved",
                  "sequence_parallel": True, "zero": 1, "recompute": "selective",
                  "account_for_embedding_in_pipeline_split": True,
                  "account_for_loss_in_pipeline_split": True},
        cluster={"gpu": "h100-sxm", "gpus": 1024, "gpus_per_node": 8}))
    assert [v for _, v in layout_choices(sc)] == [2, 4, 8]
    best = simulate(sc, frames=False)
    fixed = {v: simulate(sc.model_copy(update={"parallel": sc.parallel.model_copy(
        update={"vpp": v})}), frames=False) for v in (2, 4, 8)}
    assert not best.fits_memory
    assert fixed[2].memory_gib_per_gpu == fixed[4].memory_gib_per_gpu == \
        fixed[8].memory_gib_per_gpu
    assert fixed[4].step_time_s < min(fixed[2].step_time_s, fixed[8].step_time_s)
    assert best.vpp == 4 and best.step_time_s == fixed[4].step_time_s


def test_faster_gpu_is_faster():
    a100 = simulate(gpt_scenario())
    h100 = simulate(gpt_scenario(**{"cluster.gpu": "h100-sxm"}))
    assert h100.step_time_s < a100.step_time_s


@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]),
       schedule=st.sampled_from(["1f1b", "gpipe", "zb-h1"]),
       recompute=st.sampled_from(["none", "selective", "full"]))
@settings(max_examples=25, deadline=None)
def test_invariants_over_layouts(tp, pp, schedule, recompute):
    sc = gpt_scenario(**{"parallel.tp": tp, "parallel.pp": pp, "parallel.schedule": schedule,
                         "parallel.recompute": recompute,
                         "parallel.sequence_parallel": tp > 1})
    r = simulate(sc)
    assert 0 < r.mfu <= r.hfu <= 1
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert all(v >= 0 for v in r.breakdown_s.values())
    assert r.bubble_fraction >= 0


def test_zero_stages_trade_memory_for_communication():
    over = {"parallel.pp": 1, "parallel.tp": 8, "workload.global_batch": 64}
    res = {z: simulate(gpt_scenario(**over, **{"parallel.zero": z})) for z in (0, 1, 2, 3)}
    mem = [res[z].memory_gib_per_gpu for z in (0, 1, 2, 3)]
    assert mem == sorted(mem, reverse=True) and mem[0] > mem[3]
    assert res[0].breakdown_s["zero_comm"] == res[1].breakdown_s["zero_comm"] == 0
    no_overlap = {"optimizations.dp_overlap": False}
    z3 = simulate(gpt_scenario(**over, **no_overlap, **{"parallel.zero": 3}))
    z2 = simulate(gpt_scenario(**over, **no_overlap, **{"parallel.zero": 2}))
    # ZeRO-3 gathers weights twice per micro-batch on top of ZeRO-2's reduce-scatter
    assert z3.breakdown_s["zero_comm"] > z2.breakdown_s["zero_comm"] > 0
    assert z3.step_time_s > z2.step_time_s


def test_context_parallel_traffic_ring_and_all_gather():
    """Ring attention hides its K/V hand-offs behind attention at long sequence; the all-gather
    variant exposes its collective. Either way cp divides the activations per GPU. tp 2 x cp 4
    keeps the cp group inside one NVLink domain, as deployments do."""
    long = {"workload.seq_len": 32768, "workload.global_batch": 8, "parallel.pp": 1,
            "parallel.tp": 2, "parallel.cp": 4}
    ring = simulate(gpt_scenario(**long))
    ag = simulate(gpt_scenario(**long, **{"parallel.cp_comm_type": "all_gather"}))
    assert ag.breakdown_s["cp_comm"] > 0
    assert ring.breakdown_s["cp_comm"] < ag.breakdown_s["cp_comm"]
    no_cp = simulate(gpt_scenario(**{**long, "parallel.cp": 1, "workload.global_batch": 32}))
    assert ring.memory_gib_per_gpu < no_cp.memory_gib_per_gpu
    assert no_cp.breakdown_s["cp_comm"] == 0


def test_expert_parallel_all_to_all_is_exposed():
    moe = {"workload.model": "mixtral-8x7b", "workload.seq_len": 4096,
           "workload.global_batch": 64, "parallel.tp": 2, "parallel.pp": 1}
    one = simulate(gpt_scenario(**moe, **{"parallel.ep": 1}))
    eight = simulate(gpt_scenario(**moe, **{"parallel.ep": 8}))
    assert one.breakdown_s["ep_comm"] == 0 < eight.breakdown_s["ep_comm"]
    assert eight.memory_gib_per_gpu < one.memory_gib_per_gpu


def test_synchronous_data_loading_waits_on_the_first_and_last_stage():
    sync = simulate(gpt_scenario(**{"optimizations.async_data_loading": False}))
    asyn = simulate(gpt_scenario())
    assert asyn.breakdown_s["data_load"] == 0
    loads = sync.timeline.query("stream == 'data'")
    assert set(loads.stage) == {0, 3}
    assert len(loads) == 2 * sync.num_micro_batches
    assert sync.step_time_s > asyn.step_time_s


def test_each_optimizer_pays_its_own_step_and_keeps_its_own_state():
    """SGD reads and writes less than Adam (no second moment); LAMB and LARS add passes for
    their per-tensor norms (You et al. 2017, 2020): sgd < lars <= adam < lamb in step time.
    State: LAMB keeps Adam's two moments, LARS SGD's momentum (ZeRO's K)."""
    selene = REPO / "examples" / "gpt3-175b-1024-selene.yaml"
    runs = {o: simulate(Scenario.load(selene, [f"workload.optimizer={o}"]), frames=False)
            for o in ("adam", "sgd", "lamb", "lars")}
    opt = {o: r.breakdown_s["optimizer"] for o, r in runs.items()}
    assert opt["sgd"] < opt["lars"] <= opt["adam"] < opt["lamb"]
    mem = {o: r.memory_gib_per_gpu for o, r in runs.items()}
    assert mem["lamb"] == mem["adam"] and mem["lars"] == mem["sgd"] < mem["adam"]
