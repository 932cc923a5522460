"""Sends across nodes at their transport's measured rate (calibration.P2P_NET_FRACTION): the fit
on AWS p5's all-to-all points, held out by GPU count, and what it leaves alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.calibration import P2P_NET_FRACTION
from simulator.network.alpha_beta import AlphaBeta
from simulator.network.nccl_tests import nccl_tests
from simulator.step.groups import Group
from tests.conftest import VALIDATION

EFA = "{kind: spine-leaf, nic_gbps: 400, transport: %s}"


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["all_to_all", "node_all_to_all", "p2p"]),
       per_node=st.sampled_from([2, 4, 8]), nbytes=st.floats(1e3, 1e10))
def test_traffic_inside_a_node_runs_as_fast_over_any_transport(kind, per_node, nbytes):
    """Only bytes that cross the network slow down: inside one node, and on a hierarchical
    all-to-all's NVLink leg, EFA, InfiniBand and RoCE nodes with the same NVLink take the same
    time."""
    nodes = 1 if kind != "node_all_to_all" else 4
    g = Group(size=per_node * nodes, per_node=per_node)
    times = {t: AlphaBeta(nvlink_bytes_per_s=450e9, nic_bytes_per_s=50e9,
                          transport=t).time_s(kind, g, nbytes) for t in ("efa", "ib", "roce")}
    assert times["efa"] == pytest.approx(times["ib"], rel=1e-12)
    assert times["efa"] == pytest.approx(times["roce"], rel=1e-12)


@pytest.mark.parametrize("op", ["alltoall", "sendrecv"])
def test_sends_across_efa_nodes_move_their_bytes_at_the_measured_rate(op):
    """Between 1 and 2 GiB the latency cancels: a 16-GPU all-to-all's network bytes (8 of 16
    peers across the network) and a send between two nodes move at P2P_NET_FRACTION of the
    400 Gb/s a p5 GPU has, on the fabric as at screening; on InfiniBand, at a ring's 0.96."""
    for transport, frac in (("efa", P2P_NET_FRACTION["efa"]), ("ib", 0.96)):
        kw = {"gpus": 16, "gpu": "h100-sxm", "topology": EFA % transport,
              "min_bytes": 2**30, "max_bytes": 2**31}
        for fidelity in ("flow", "screening"):
            t = nccl_tests(op, fidelity=fidelity, **kw).time_s.to_numpy()
            net = 2**30 * (0.5 if op == "alltoall" else 1.0)      # added network bytes a GPU
            assert net / (t[1] - t[0]) / 50e9 == pytest.approx(frac, rel=1e-6), (
                transport, fidelity)


@pytest.fixture(scope="module")
def fit():
    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    from validation.a2a_fit import summary

    return summary(VALIDATION)


def test_the_rate_is_the_fit_and_holds_out_by_gpu_count(fit):
    """P2P_NET_FRACTION is what scripts/calibrate_a2a.py fits on p5's 35 all-to-all points (one
    grid step apart at most), near the 0.84 the 1-2 GiB points move their bytes at: median
    |error| 3.0 % in sample, where a ring's rate reads 5.9 % (and 9.2 %, up to 35 % fast,
    when the Simple sends paid the plugin's latency once); fitted on the other GPU counts,
    each count's points come out within 12 % median and 21 % worst."""
    assert fit["points"] == 35
    assert fit["fraction"] == pytest.approx(P2P_NET_FRACTION["efa"], abs=0.005)
    assert 0.82 < fit["fraction"] < 0.85
    assert fit["median"] < 0.035 < 0.055 < fit["ring_median"]
    assert fit["worst"] < 0.21 < 0.23 < fit["ring_worst"]
    for gpus, h in fit["held_out"].items():
        assert h["median"] < 0.12 and h["worst"] < 0.21, (gpus, h)


def test_what_the_rate_leaves(fit):
    """Bytes-bound all-to-alls (1-2 GiB) within 7 % on every GPU count; the points of 128-512
    MiB on 16-32 nodes, which carry a size-dependent overhead the model lacks, read up to 17 %
    fast (at a ring's rate with the plugin's latency paid once, 11-25 %); 32 MiB on 32 nodes
    is the worst, 20 % slow (its modelled latency, 1.35 ms, above the measured ~0.9 ms), and
    on 2 nodes 13 % fast (26 % with the plugin's latency paid once)."""
    t = fit["table"].set_index(["gpus", "bytes"])
    big = t[t.index.get_level_values("bytes") >= 2**30]
    assert len(big) == 10 and (big.error.abs() < 0.07).all(), big.to_string()
    mid = t.loc[[(g, b) for g in (128, 256) for b in (2**27, 2**28, 2**29)]]
    assert np.all((mid.error > 0.0) & (mid.error < 0.18)), mid.to_string()
    assert t.error.abs().idxmax() == (256, 2**25) and -0.25 < t.error[256, 2**25] < -0.15
    assert 0.08 < t.error[16, 2**25] < 0.18
