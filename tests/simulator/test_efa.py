"""AWS EFA as a transport: SRD's spraying, the aws-ofi-nccl plugin's latency per network hop,
and the p5 nccl-tests measurements it explains."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.network.nccl_tests import nccl_tests
from tests.simulator.test_fabric import fabric
from tests.simulator.test_validation import VALIDATION
from validation.collectives import aws_p5_table, summary

EFA = "{kind: spine-leaf, nic_gbps: 400, transport: efa%s}"


def test_efa_sprays_where_roce_hashes():
    """SRD spreads each message's packets over the paths: under ``routing: ecmp`` an EFA fabric
    splits every flow over all the leaf's uplinks, so eight flows between two leaves load the
    eight uplinks evenly, where RoCE's 5-tuple hash piles some on one uplink."""
    spec = {"kind": "spine-leaf", "nic_gbps": 100, "hosts_per_leaf": 8, "leaves": 2,
            "spines": 8}
    efa, roce = fabric({**spec, "transport": "efa"}, gpus=16), fabric(spec, gpus=16)
    src, dst, sport = np.arange(8), np.arange(8) + 8, np.zeros(8, np.int64)
    up = (efa.link_src == efa.gpu_leaf[0]) & (efa.tier[efa.link_dst] == 1)   # leaf 0's uplinks
    loads = {}
    for name, f in (("efa", efa), ("roce", roce)):
        hops, parent, share = f.route(src, dst, sport, "ecmp")
        on = hops >= 0
        per_link = np.zeros(f.num_links)               # flows' worth of bytes per link
        np.add.at(per_link, hops[on], np.broadcast_to(share[:, None], hops.shape)[on])
        loads[name] = per_link[up]
    assert np.allclose(loads["efa"], 1.0)                # 8 flows' bytes over 8 uplinks
    assert loads["roce"].max() >= 2                      # hashing collides (seeded, fixed)


@pytest.mark.parametrize("gpus", [32, 128])
def test_the_plugin_latency_is_paid_per_ring_step_and_once_per_send_or_all_to_all(gpus):
    """NCCL adds the net plugin's latency to every network hop, and once more under Simple,
    which also waits for the flush (tuning.cc). A ring's steps run at the mean hop around the
    ring, one network hop per node of 8 (calibration.RING_PIPELINE_P), so a ring all-gather of
    1 KiB pays (n - 1) x nodes / n network hops' worth of it: 75 us each under LL128 and 150
    under Simple more than the same fabric without it (NCCL's own estimate charges nodes - 1,
    which makes p5's all-gather of a given size per rank slower per GPU on more nodes, where
    the measurements hold it flat). A send crosses one network hop, whatever the group's size;
    an all-to-all's messages are in flight together, so it pays the plugin's latency once (its
    1 KiB runs LL; Simple's sends pay it twice, once: test_a_hierarchical_all_to_all...)."""
    nodes = gpus // 8
    with_, without = {}, {}
    for op, proto in (("all_gather", "Simple"), ("all_gather", "LL128"), ("sendrecv", None),
                      ("alltoall", None)):
        kw = {"gpus": gpus, "gpu": "h100-sxm", "min_bytes": 1024, "max_bytes": 1024,
              "protocol": proto}
        with_[op, proto] = nccl_tests(op, topology=EFA % "", **kw).time_s[0]
        without[op, proto] = nccl_tests(op, topology=EFA % ", net_latency_us: 0", **kw).time_s[0]
    extra = {k: with_[k] - without[k] for k in with_}
    hops = (gpus - 1) * nodes / gpus
    assert extra["all_gather", "Simple"] == pytest.approx(hops * 150e-6)
    assert extra["all_gather", "LL128"] == pytest.approx(hops * 75e-6)
    assert extra["sendrecv", None] == pytest.approx(75e-6)
    assert extra["alltoall", None] == pytest.approx(75e-6)


def test_p5_sendrecv_latency_does_not_depend_on_the_group():
    times = [nccl_tests("sendrecv", gpus=g, topology="aws-p5", min_bytes=8,
                        max_bytes=8).time_s[0] for g in (16, 128)]
    assert times[0] == pytest.approx(times[1]) and times[0] > 75e-6


def test_p5_all_gather_is_latency_bound_as_measured():
    """AWS p5's all-gather of 32-64 MiB takes ~85 us per node on 64-256 GPUs (10-25 GB/s busbw
    at 256 GPUs): each ring step across nodes pays aws-ofi-nccl's 75 us. Without the plugin's
    latency the simulation read these points 118-306 % too fast; the 75 us is the plugin's own
    figure, not fitted."""
    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    table = aws_p5_table(VALIDATION, collectives=("all_gather",), gpus=(64, 256),
                         max_bytes=64 * 2**20)
    assert len(table) == 4
    assert summary(table)["worst_abs_error"] < 0.20, table.to_string()


def test_a_hierarchical_all_to_all_pays_the_plugin_on_its_rail_leg_only():
    """DeepEP-style all-to-all: the rail leg crosses the network, its messages in flight
    together (the plugin's latency once, twice under Simple, as its sends of 1 MiB run), the
    node leg stays on NVLink (none of it); the flat all-to-all's 16 KiB a peer run LL (once)."""
    from simulator.network.alpha_beta import AlphaBeta
    from simulator.step.groups import Group

    efa = AlphaBeta(nvlink_bytes_per_s=450e9, nic_bytes_per_s=50e9, transport="efa",
                    net_latency_us=75.0)
    bare = AlphaBeta(nvlink_bytes_per_s=450e9, nic_bytes_per_s=50e9, transport="efa")
    g = Group(size=64, per_node=8)
    for kind, extra in (("rail_all_to_all", 150e-6), ("node_all_to_all", 0.0),
                        ("all_to_all", 75e-6)):
        assert efa.time_s(kind, g, 2**20) - bare.time_s(kind, g, 2**20) == pytest.approx(
            extra, abs=1e-12), kind
