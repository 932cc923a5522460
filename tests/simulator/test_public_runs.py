"""Published runs (public_runs.csv) as scenarios: coverage, FP8 against a published pair,
and the honesty of the leave-one-source-out fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import VALIDATION
from validation.public_runs import (
    GB200_RUNS,
    GB300_RUNS,
    NEWER_RUNS,
    cases,
    evaluate,
    fit,
    fit_rows,
    fit_summary,
    leave_one_source_out,
    scenario_dict,
    surrogate,
    synced_predictions,
)


@pytest.fixture(scope="module")
def table():
    if not VALIDATION.exists():
        pytest.skip(f"{VALIDATION} not present (../shared is beside the repo in CI)")
    return evaluate(VALIDATION)


def test_every_row_simulates_or_says_why_in_one_line(table):
    done = table.predicted_s.notna()
    assert done.sum() >= 52          # 52 of 53: all but OPT's 992 GPUs
    assert (table[~done].reason.str.len() > 0).all()
    assert not table[~done].reason.str.contains("\n").any()
    assert (table[done].predicted_s > 0).all()


def test_every_published_layout_fits_its_gpus_memory(table):
    """These runs ran: every layout the rules build from them fits its GPU's memory (the
    25.11 H100 GPT-OSS row as its table printed it, micro-batch 4, needed 103 GiB)."""
    done = table.predicted_s.notna()
    assert table[done].fits_memory.all(), table[done & ~table.fits_memory].id.tolist()


def test_fp8_moves_the_step_as_the_published_pair(table):
    """Llama 3.1 70B on 256 H100, FSDP 32 x TP 8, the same layout in bf16 (torchtitan async-TP
    benchmark, vanilla TP column) and with Float8 linears: published step ratio 0.72."""
    pub = table.set_index("id").published_s
    pred = table.set_index("id").predicted_s
    published = pub["tt24-70b-256g-2d"] / pub["ttatp-70b-256g-bf16"]
    predicted = pred["tt24-70b-256g-2d"] / pred["ttatp-70b-256g-bf16"]
    assert predicted == pytest.approx(published, rel=0.10)


def test_hopper_rows_within_the_fits_in_sample_error(table):
    """A guard on the Hopper / Blackwell fit (in sample: the constants were fitted on these
    rows, 6.0 % over 39 rows when last checked); the held-out figure is the next test's."""
    assert table[fit_rows(table)].error.abs().mean() < 0.065


def test_hopper_fit_held_out_by_source():
    """Leave-one-source-out: fit the Hopper constants on two publishers and predict the third.
    Issue 19 asks 8 % mean and 15 % for the worst source; today 6.2 % and 10.2 % (12.6 % and
    14.2 % before torchtitan's runs were stated as torchtitan runs them: two pipeline stages
    per rank, DTensor TP's exposed backward collectives, the 500 W part's peak; 5.9 % before
    each row's FP8 recipe was applied). A guard that
    the bar stays met and that the fit stays adopted."""
    if not VALIDATION.exists():
        pytest.skip("no validation data")
    s = fit_summary(surrogate(VALIDATION))
    assert s["loso_mean"] <= 0.08
    assert s["loso_worst_source"] <= 0.15
    assert s["adopted"] and not s["edges"]


def test_row_rules():
    if not VALIDATION.exists():
        pytest.skip("no validation data")
    rows = {r.id: r for r, _, _ in cases(VALIDATION)}
    d = scenario_dict(rows["mb2511-h100-llama31-405b-1024g"])
    assert d["parallel"]["account_for_embedding_in_pipeline_split"]     # 126 on 8 x 8
    assert d["workload"]["precision"] == "fp8" and d["parallel"]["zero"] == 1
    d = scenario_dict(rows["tt24-8b-8g-fsdp"])
    assert d["cluster"]["gpu"] == "h100-96gb" and d["parallel"]["zero"] == 3
    assert d["workload"]["micro_batch"] == 2 and not d["optimizations"]["fused_kernels"]
    assert d["parallel"]["recompute"] == "op"           # torchtitan's per-op SAC
    d = scenario_dict(rows["tt24-405b-512g-3d-interleaved"])   # torchtitan's 2 per rank
    assert d["parallel"]["vpp"] == 2 and d["workload"]["micro_batch"] == 4
    assert d["optimizations"]["tp_bwd_overlap"]                     # async TP
    assert not scenario_dict(rows["ttatp-8b-64g-bf16"])["optimizations"]["tp_bwd_overlap"]
    assert scenario_dict(rows["mb2511-h100-llama3-70b-64g"])["optimizations"]["tp_bwd_overlap"]
    d = scenario_dict(rows["dsv3-h800-2048g"])          # DeepSeek's own run
    assert d["parallel"]["schedule"] == "dualpipe" and d["parallel"]["vpp"] == 1
    # the row's RMSNorm and MLA up-projections, and the paper's SwiGLU (section 3.3.3)
    assert d["parallel"]["recompute_modules"] == ["layernorm", "mla_up_proj", "moe_act"]
    assert d["workload"]["fp8_recipe"] == "blockwise"
    assert d["optimizations"]["comm_sms"] == 20                  # held by its all-to-all
    d = scenario_dict(rows["bloom-176b-a100-384g"])
    assert d["parallel"]["vpp"] == 1 and not d["optimizations"]["dp_overlap"]
    # Megatron-Bridge's recipes reduce gradients in bf16, NeMo 24.07's and torchtitan's in fp32
    assert scenario_dict(rows["mb2511-h100-llama3-70b-64g"])["parallel"][
        "grad_reduce_dtype"] == "bf16"
    assert scenario_dict(rows["nemo2407-llama3-70b-64g"])["parallel"][
        "grad_reduce_dtype"] == "auto"
    assert scenario_dict(rows["tt24-8b-8g-fsdp"])["parallel"]["grad_reduce_dtype"] == "auto"
    # the 25.11 H100 GPT-OSS row prints B200's MBS 4; its recipe runs 1
    assert scenario_dict(rows["mb2511-h100-gptoss-120b-64g"])["workload"]["micro_batch"] == 1


def _synthetic(published_b: float) -> pd.DataFrame:
    """Two sources whose rows are exactly explained by gemm_efficiency 0.6 (group a) and by
    whatever ``published_b`` implies (group b)."""
    rows = []
    for g, n in (("a", 4), ("b", 3)):
        for i in range(n):
            a = 1.0 + i
            rows.append({"id": f"{g}{i}", "group": g, "gpu": "h100-sxm", "moe": False,
                         "predicted_s": 1.0, "c0": 0.1, "a_gemm_efficiency": a,
                         "a_fp8_gemm_efficiency": 0.0, "a_memory_efficiency": 0.0,
                         "a_flash_scale": 0.0,
                         "published_s": 0.1 + a / 0.6 if g == "a" else published_b * a})
    return pd.DataFrame(rows)


def test_leave_one_source_out_never_sees_the_held_out_rows():
    """Changing group b's published times changes nothing about the fit that predicts b."""
    one = leave_one_source_out(_synthetic(2.0)).set_index("group")
    two = leave_one_source_out(_synthetic(5.0)).set_index("group")
    assert one.loc["b", "constants"] == two.loc["b", "constants"]
    assert one.loc["b", "constants"]["gemm_efficiency"] == pytest.approx(0.6, abs=0.011)
    assert one.loc["b", "mean_abs_error"] != two.loc["b", "mean_abs_error"]


def test_fit_recovers_a_known_constant():
    sur = _synthetic(1.0)
    consts, obj = fit(sur, sur.group == "a")
    assert consts["gemm_efficiency"] == pytest.approx(0.6, abs=0.011) and obj < 0.01
    assert np.isfinite(obj)


def test_op_recompute_memory_matches_torchtitans_compiled_run():
    """torchtitan Llama 3.1 8B on 32 H200 (FSDP, local batch 2 x 8192, per-op selective
    checkpointing, torch.compile + Float8) reports 47.96 GiB per GPU; compiled, its allocator
    holds little beyond the tensors the model counts. Without per-op SAC (nothing recomputed)
    the same run would need far more."""
    if not VALIDATION.exists():
        pytest.skip("no validation data")
    from simulator import simulate
    sc = {r.id: s for r, s, _ in cases(VALIDATION)}["tt-h200-8b-32g"]
    sc = sc.model_copy(update={"fidelity": "analytic"})
    assert simulate(sc).memory_gib_per_gpu == pytest.approx(47.96, rel=0.05)
    none = sc.model_copy(update={"parallel": sc.parallel.model_copy(update={"recompute": "none"})})
    assert simulate(none).memory_gib_per_gpu > 1.3 * 47.96


def test_gb200_rows_out_of_sample():
    """Megatron-Bridge's DGX-GB200 rows of NeMo 25.09, 25.11 and 26.02 (validation/gb200_runs,
    the dense ones fitted to nothing), on the gb200 preset with the Blackwell constants and
    NVLink 5's B300 fractions: the dense rows (Llama 3 8B / 70B / 405B on 8-256 GB200) within
    10 % on average and 25 % at worst (FSDP's the farthest, as on Hopper). Every row runs as
    its recipe laid it out: DeepSeek-V3 at pp 4 x vpp 4 on Megatron-Bridge's 16-stage layout,
    Llama 3.1 405B at pp 16 x vpp 8 with the embedding and the loss alone on their virtual
    stages; those three read within 10 %."""
    if not VALIDATION.exists():
        pytest.skip(f"{VALIDATION} not present (../shared is beside the repo in CI)")
    t = evaluate(VALIDATION, csv=GB200_RUNS).set_index("id")
    dense = t[~t.moe & t.error.notna()]
    assert len(dense) >= 8, dense.to_string()
    assert dense.error.abs().mean() < 0.10 and dense.error.abs().max() < 0.25, dense.to_string()
    assert t.error.notna().all(), t[t.error.isna()].reason.to_string()
    laid_out = t.loc[["mb2511-gb200-dsv3-256g-bf16", "mb2602-gb200-dsv3-256g-mxfp8",
                      "mb2602-gb200-llama31-405b-256g-mxfp8"]]
    assert laid_out.error.abs().max() < 0.10, laid_out.to_string()


def test_gb300_rows_blackwell_ultras_speedup_is_fitted_on():
    """Megatron-Bridge's dense DGX-GB300 rows of NeMo 25.11 and 26.02 (validation/gb300_runs)
    on the gb300 preset: every row runs and fits its 288 GB. They are the rows
    BLACKWELL_ULTRA_TENSOR_SPEEDUP is fitted on (1.15: mean |error| 4.8 %, against 11.2 %
    and every row slow at Blackwell's speed), so within 6 % on average, 10 % at worst, and
    no side's bias beyond 3 %. A row where GB300's memory changes the recipe moves the right
    way: Llama 3 70B under FSDP on 64 GPUs offloads 20 layers on GB300 against 40 on GB200
    and runs faster for it, as measured (7.25 against 7.60 s in 25.11)."""
    if not VALIDATION.exists():
        pytest.skip(f"{VALIDATION} not present (../shared is beside the repo in CI)")
    t = evaluate(VALIDATION, csv=GB300_RUNS).set_index("id")
    assert t.error.notna().all(), t[t.error.isna()].reason.to_string()
    assert t.fits_memory.all(), t.to_string()
    assert t.error.abs().mean() < 0.06 and t.error.abs().max() < 0.10, t.to_string()
    assert abs(t.error.mean()) < 0.03, t.to_string()
    from simulator import simulate
    twin, sc, _ = next(c for c in cases(VALIDATION, GB200_RUNS)
                       if c[0].id == "mb2511-gb200-llama3-70b-64g")
    a = t.loc["mb2511-gb300-llama3-70b-64g"]
    assert a.published_s < twin.step_time_s and a.predicted_s < simulate(sc).step_time_s


def test_newer_release_rows_out_of_sample():
    """Megatron-Bridge's rows of NeMo 26.02.01-26.08 (validation/newer_runs, fitted to
    nothing: software newer than every row the constants saw): every row runs, all but the
    one its README names fit their GPU as printed, GB200's within 10 % each (as its older rows
    are), and the rest within 15 % on average and 30 % at worst. The 24 GB300 and B300 rows
    hold out Blackwell Ultra's speed-up (fitted on the older releases' dense GB300 rows): mean
    |error| within 8 % and none beyond 15 % (15.8 % on average, every row slow, at
    Blackwell's speed). The Blackwell MoE rows run
    their recipes' sync-free dispatch; as the releases before dispatched (the counts through
    the host), Qwen3-30B on 8 GB200 would read more than 40 % slow."""
    if not VALIDATION.exists():
        pytest.skip(f"{VALIDATION} not present (../shared is beside the repo in CI)")
    t = evaluate(VALIDATION, csv=NEWER_RUNS).set_index("id")
    assert t.error.notna().all(), t[t.error.isna()].reason.to_string()
    assert list(t.index[~t.fits_memory.astype(bool)]) == ["mb260201-gb300-llama3-70b-64g-mxfp8"]
    ok = t[t.fits_memory.astype(bool)]
    assert ok.gpu.nunique() == 4 and len(ok) >= 40, ok.to_string()
    gb200 = ok[ok.gpu == "gb200"]
    assert len(gb200) >= 10 and gb200.error.abs().max() < 0.10, gb200.to_string()
    assert ok.error.abs().mean() < 0.15 and ok.error.abs().max() < 0.30, ok.to_string()
    ultra = ok[ok.gpu.isin(["gb300", "b300"])]
    assert len(ultra) == 24 and ultra.error.abs().mean() < 0.08, ultra.to_string()
    assert ultra.error.abs().max() < 0.15, ultra.to_string()
    moe = t[t.moe]
    assert len(moe) >= 20
    synced = synced_predictions(VALIDATION, NEWER_RUNS)
    assert set(synced.index) == set(moe.index[moe.gpu.isin(["gb200", "gb300", "b300"])])
    row = "mb2606-gb200-qwen3-30b-8g-mxfp8"
    assert synced[row] / t.loc[row, "published_s"] > 1.4 and abs(t.loc[row, "error"]) < 0.10
