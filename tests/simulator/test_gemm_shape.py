"""The GEMM tile model (compute.gemm_time_s) against measured cuBLAS throughput by shape on H100
(validation/kernels, OpenXLA's sm_90 matmul table), and its invariants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.calibration import GEMM_FIXED_S, compute_calibration
from simulator.step.compute import Device, gemm_time_s
from topologies.gpus import load_gpu
from validation.gemm_kernels import load_table, summary


@pytest.fixture(scope="module")
def kernels() -> dict:
    return summary()


def test_fitted_on_unbatched_shapes_it_predicts_the_batched_ones(kernels):
    """Out of sample: the tile model fitted on the 125 single GEMMs predicts the 249 batched
    ones (waves filled by several GEMMs at once) within 8 % on average, 9 in 10 within 20 %."""
    held = np.abs(kernels["held_out_errors"])
    assert held.mean() < 0.08 and np.percentile(held, 90) < 0.2


def test_todays_tile_constants_match_the_measured_table(kernels):
    """GEMM_TILE_FILL_K and GEMM_FIXED_S as committed, with the table's own mainloop and memory
    fractions, reproduce the 374 measured shapes within 5 % on average; one 256 x 128 tile per
    SM without fill (the model before it) was 30 % off."""
    err = np.abs(kernels["today_errors"])
    assert err.mean() < 0.05 and err.mean() < kernels["best"] + 0.005


def test_small_k_and_few_tiles_run_below_the_large_gemm_rate_as_measured(kernels):
    """Measured (table): 4096^3 runs at 783 TFLOP/s, 4096 x 4096 x 256 at 392 (the tile's
    fill against a short mainloop), 256 x 2048 x 4096 at 286 (16 tiles for 132 SMs). The model
    orders them the same way and puts each within 25 %."""
    table = load_table()
    idx = table.set_index(["batch", "m", "n", "k"]).index
    rates = []
    for shape in [(1, 4096, 4096, 4096), (1, 4096, 4096, 256), (1, 256, 2048, 4096)]:
        i = idx.get_loc(shape)
        err = kernels["today_errors"][i]
        assert abs(err) < 0.25
        rates.append(table.bf16_tflops.iloc[i] * np.exp(-err))
    assert rates[0] > rates[1] > rates[2]


_H100 = load_gpu("h100-sxm")
_DEV = Device.of(_H100, compute_calibration(_H100.name))
_dims = st.integers(min_value=1, max_value=16384)


@settings(max_examples=200, deadline=None)
@given(_dims, _dims, _dims, st.integers(min_value=1, max_value=64), st.booleans())
def test_a_bigger_gemm_never_runs_faster_nor_beats_the_roofline(m, n, k, batch, fp8):
    t = gemm_time_s(_DEV, m, n, k, batch=batch, fp8=fp8)
    cal = _DEV.cal
    rate = _DEV.fp8_peak_flops * cal.fp8_gemm_efficiency if fp8 else \
        _DEV.peak_flops * cal.gemm_efficiency
    assert t >= 2.0 * m * n * k * batch / rate + GEMM_FIXED_S - 1e-15
    for bigger in [(2 * m, n, k, batch), (m, 2 * n, k, batch), (m, n, 2 * k, batch),
                   (m, n, k, 2 * batch)]:
        assert gemm_time_s(_DEV, *bigger[:3], batch=bigger[3], fp8=fp8) >= t - 1e-15
