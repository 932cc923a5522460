"""Fidelity against the published measurements of ../shared/validation (asserted, not printed).

One calibration for all rows (simulator/calibration.py, fitted by scripts/calibrate.py); the
unknowns of each row follow the rules in validation/published.py, never per row.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import VALIDATION
from validation.collectives import (aws_p5_table, effect_table, gtc24_table, reported_table,
                                    summary)
from validation.published import layer_table, step_table

STEP_TOLERANCE = 0.10
LAYER_TOLERANCE = 0.15


@pytest.fixture(scope="module")
def steps():
    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    return step_table(VALIDATION)


def test_every_published_step_time_within_10_percent(steps):
    assert len(steps) == 10 + 6 + 9          # Table 1, Table 2 PTD-P, Table 5 (both modes + dp8)
    bad = steps[steps.error.abs() > STEP_TOLERANCE]
    assert bad.empty, bad.to_string()


def test_no_systematic_bias(steps):
    """A calibration tuned row by row would hide a bias; one fitted jointly has none to speak
    of, per table as well as overall."""
    assert abs(steps.error.mean()) < 0.03
    for _, g in steps.groupby("table"):
        assert abs(g.error.mean()) < 0.06


def test_selective_recompute_mfu_close_to_published(steps):
    """Korthikanti Table 5's MFU column (sequence parallel + selective recompute)."""
    t5 = steps[steps.row.str.endswith("selective")]
    published = {"22B": 0.415, "175B": 0.514, "530B": 0.560, "1T": 0.563, "530B-dp8": 0.542}
    for row in t5.itertuples():
        assert row.mfu == pytest.approx(published[row.row.split()[0]], rel=STEP_TOLERANCE)


def test_one_layer_of_22b_within_15_percent():
    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    t = layer_table(VALIDATION)
    assert (t.fwd_error.abs() <= LAYER_TOLERANCE).all(), t.to_string()
    assert (t.bwd_error.abs() <= LAYER_TOLERANCE).all(), t.to_string()
    # sequence parallelism makes the forward faster; recomputation makes the backward slower
    by = t.set_index("experiment")
    assert by.predicted_fwd_ms["sequence_parallel"] < by.predicted_fwd_ms["no_recompute"]
    assert by.predicted_bwd_ms["full_recompute"] > by.predicted_bwd_ms["selective_recompute"] > \
        by.predicted_bwd_ms["no_recompute"]


@pytest.fixture(scope="module")
def gtc24():
    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    return gtc24_table(VALIDATION)


@pytest.fixture(scope="module")
def aws_p5():
    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    return aws_p5_table(VALIDATION)


def test_nvlstree_follows_nvidias_scan_where_nothing_was_fitted(gtc24):
    """NCCL_ALGO=NVLSTree on DGX H100 (GTC24 S62129), every size at 1,024-8,192 GPUs: the points
    held out of the one fitted constant (NVLSTREE_HOP_OVERHEAD_US, fitted at 32-512 GPUs; the
    IB NIC efficiency is the maintainers' per-NIC figure). The rest is NCCL's: its NVLSTree
    latency, chunking, channels and double binary tree. Before the fill was modelled, 16 MiB on
    8,192 GPUs read +246 %; with a fill of all 16 channels per hop and A100's NIC efficiency,
    64 MiB read -27 %. The 16 MiB row is read off the slide at +-8 GB/s on 33-60 GB/s."""
    table = gtc24[gtc24.gpus >= 1024]
    assert len(table) == 24 and (table.algorithm == "nvlstree").all()
    got = summary(table)
    assert got["median_abs_error"] < 0.05, table.to_string()
    assert got["worst_abs_error"] < 0.20, table.to_string()
    assert table[table.bytes >= 2**26].error.abs().max() < 0.10, table.to_string()


def test_every_gtc24_point_within_15_percent_of_its_reading_band(gtc24):
    """The scan's busbw values are read off a slide, each with the uncertainty the CSV states
    (+-8 GB/s): every one of the 54 points, 32-8,192 GPUs and 16 MiB-16 GiB, lies within 15 %
    of the band published +- uncertainty (the issue's worst-point bar)."""
    table = gtc24
    assert len(table) == 54
    assert table.band_error.abs().max() <= 0.15, table.to_string()


def test_the_aws_p5_table_runs_every_collective():
    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    table = aws_p5_table(VALIDATION, max_gpus=16)
    assert set(table.collective) == {"all_reduce", "all_gather", "alltoall"}
    assert table.simulated.gt(0).all() and table.error.notna().all()


def test_reported_points_where_the_fabric_is_known():
    """NCCL's maintainers' per-NIC figures and the vendors' DGX bars (nothing fitted to them
    but the InfiniBand NIC efficiency, which the per-NIC figures are), and the A100 RoCE
    cluster whose busbw falls from 100 to 40 GB/s between 2 and 6 nodes as ECMP collisions
    take hold (nccl-tests#169)."""
    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    t = reported_table(VALIDATION).set_index("case")
    for case in ("DGX A100, 8 x 200G IB", "one 400G NDR NIC per node, 2 nodes",
                 "one 200G HDR NIC per node, 2 nodes",
                 "DGX H100, 8 x 400G IB + SHARP (GTC24 bar)"):
        assert abs(t.error[case]) < 0.05, t.to_string()
    for case in ("DGX H100, 8 x 400G (GTC24 bar)", "DGX H100, 8 x 400G (GTC25 bar)"):
        assert abs(t.error[case]) < 0.10, t.to_string()
    roce = t.simulated
    assert roce["A100, 8 x 100G RoCE, 6 nodes"] < 0.6 * roce["A100, 8 x 100G RoCE, 2 nodes"]


def test_aws_p5_within_the_issues_median_bar(aws_p5):
    """AWS p5's 115 points (all-reduce, all-gather, alltoall on 16-256 GPUs, 32 MiB-8 GiB):
    median |error| within 5 %, and so are the all-gathers and all-reduces on their own. With
    NCCL's estimate as the time (latency and transfer added, nodes - 1 network hops) the table
    read 10.7 % (all-gather 11.6 %: busbw falling with GPU count at a given size per rank,
    where the measurements hold it flat); the rings run pipelined
    (calibration.RING_PIPELINE_P)."""
    assert len(aws_p5) == 115
    assert aws_p5.error.abs().median() <= 0.05, aws_p5.to_string()
    for op in ("all_gather", "all_reduce"):
        part = aws_p5[aws_p5.collective == op]
        assert part.error.abs().median() <= 0.05, part.to_string()


def test_p5_all_gather_busbw_is_set_by_the_size_per_rank(aws_p5):
    """A ring's steps run at its mean hop (one network hop per 8-GPU node), so at a given size
    per rank p5's all-gather busbw stays flat from 32 to 256 GPUs, as measured (2 MiB a rank:
    139-146 GB/s published, 148-152 simulated); NCCL's count of nodes - 1 network hops on
    n - 1 steps made it fall (131 to 118 GB/s from 32 to 256 GPUs)."""
    ag = aws_p5[(aws_p5.collective == "all_gather") & (aws_p5.gpus >= 32)]
    per_rank = ag.assign(per_rank=ag.bytes // ag.gpus)
    for size in (2**20, 2 * 2**20, 4 * 2**20):
        pts = per_rank[per_rank.per_rank == size]
        assert len(pts) >= 3
        sim = pts.simulated.to_numpy()
        assert sim.max() / sim.min() < 1.10, pts.to_string()
        assert (pts.error.abs() < 0.10).all(), pts.to_string()


def test_the_busbw_points_meet_the_issues_median_bar(gtc24, aws_p5):
    """The issue's bar over the busbw points: NVIDIA's GTC24 scan, AWS p5's table and the
    reported points together, median |error| within 5 % (each table's own median is in
    docs/validation.md: 1.6 %, 3.1 % and 6.3 %; pooled 2.3 %, 3.2 % before EFA's sends ran at
    their measured rate, 3.8 % before its trees did, 6.1 % before rings across nodes ran
    pipelined)."""
    reported = reported_table(VALIDATION)
    pooled = pd.concat([gtc24.error.abs(), aws_p5.error.abs(), reported.error.abs()])
    assert len(pooled) == 54 + 115 + 18
    assert pooled.median() <= 0.05


def test_published_effect_sizes():
    """The effect sizes of sharp_nvls.csv and ecmp_lb_adaptive_routing.csv that clustersim can
    express (validation.collectives.EFFECTS): NVLS inside one node within 3 points of the scan
    over 5-8 GPUs and of GB200 NVL72's gain on 32 GPUs, none on four RoCE nodes; IB SHARP's
    +26-30 %, ECMP leaving 0.5-0.7 of spraying, more queue pairs gaining +10-70 %, spraying up
    to 2.5x (read to a hundredth). NVLSTree on two RoCE nodes overshoots (+36 % against +30 %:
    the NVSwitch stage at one node's 480 GB/s where the report measured 430), as
    docs/validation.md states: above the published gain, by less than 10 points."""
    t = effect_table().set_index("effect")
    nvls = t[t.index.str.startswith("NVLS vs ring inside one")]
    assert len(nvls) == 5 and (nvls.outside <= 0.03).all(), nvls.to_string()
    assert t.loc["NVLS on, 4 nodes of 8 H100, 8 x 400G RoCE"].outside == 0.0
    ranged = t[t.index.str.contains("SHARP|ECMP|Queue-pair|Spraying")]
    assert len(ranged) == 4 and (ranged.outside <= 0.01).all(), ranged.to_string()
    over = t.loc["NVLS on, 2 nodes of 8 H100, 8 x 400G RoCE"]
    assert over.simulated > over.high and over.outside < 0.10, over.to_string()
