"""In-network reduction (cluster.topology.sharp: IB SHARP through NCCL's CollNet): NVLS across
nodes on NVLS GPUs, CollNet Direct otherwise; against NVIDIA's published SHARP bar and closed
forms, the same at screening and on the fabric."""

from __future__ import annotations

import subprocess
import sys

import pytest

from simulator import Scenario, ScenarioError, simulate
from simulator.config.topology import topology_spec
from simulator.network.alpha_beta import AlphaBeta
from simulator.network.build import build_fabric_for
from simulator.network.nccl_tests import nccl_tests
from simulator.step.groups import Group
from tests.conftest import small_scenario
from topologies.gpus import load_gpu

IB = "{kind: rail-optimized, nic_gbps: 400, transport: ib}"
SHARP = "{kind: rail-optimized, nic_gbps: 400, transport: ib, sharp: true}"
GIB16 = 16 * 2**30


def _busbw(topology: str, gpus: int, gpu: str = "h100-sxm", size: int = GIB16, **kw):
    row = nccl_tests("all_reduce", gpus=gpus, gpu=gpu, topology=topology, min_bytes=size,
                     max_bytes=size, **kw).iloc[0]
    return row.busbw_gbyte_per_s, row.algorithm


def test_sharp_on_dgx_h100_against_nvidias_bar():
    """4 DGX H100 (8 x 400G IB): 370-380 GB/s busbw without SHARP, 480 with it (GTC24 S62129 /
    GTC25 S72583 slide 12; sharp_nvls.csv). With SHARP NCCL runs NVLS across nodes, bound by
    the NVSwitch stage at one node's NVLS busbw (480, nccl#2140): within 3 %, a gain of
    26-30 %; without it NVLSTree at 370."""
    plain, algo0 = _busbw(IB, 32)
    sharp, algo1 = _busbw(SHARP, 32)
    assert algo0 == "nvlstree" and algo1 == "nvls"
    assert plain == pytest.approx(375, rel=0.05)
    assert sharp == pytest.approx(480, rel=0.03)
    assert 0.26 - 0.01 < sharp / plain - 1 < 0.30 + 0.01


def test_sharp_busbw_does_not_grow_with_the_node_count():
    """NVLS with SHARP is NVSwitch-bound on DGX H100: its bus bandwidth stays at the one-node
    NVLS figure from 4 nodes to 64, as NCCL's cost model holds it (busBw per channel whatever
    the rank count, tuning.cc) and as NVIDIA's bar reads (480 at 32 GPUs). An algorithm
    bandwidth held at the node's instead would carry busbw from 480 x 62 / 32 / 1.75 = 531
    at 32 GPUs to 546 at 512."""
    for gpus in (32, 128, 512):
        busbw, algo = _busbw(SHARP, gpus)
        assert algo == "nvls"
        assert 0.97 * 480 < busbw <= 480


def _tuner(topology: str, gpu: str) -> AlphaBeta:
    return AlphaBeta.for_cluster(load_gpu(gpu), topology_spec(topology), 8)


def test_the_switches_reduce_so_node_count_does_not_matter():
    """CollNet Direct on A100 with 100 Gb/s NICs is NIC-bound: each NIC carries S / 8 each way
    whatever the node count, so algbw = 8 x the NIC's achievable rate on 2 nodes and on 64,
    at screening and on the fabric alike (where a ring's busbw would not exceed 1 NIC x 8)."""
    topo = "{kind: rail-optimized, nic_gbps: 100, transport: ib, sharp: true}"
    ab = _tuner(topo, "a100-80gb")
    nic = ab.net_bytes_per_s                      # 100 Gb/s x IB's achievable fraction
    for gpus in (16, 512):
        group = Group(size=gpus, per_node=8)
        assert ab.algorithm("all_reduce", group, GIB16) == "collnet"
        assert ab.sharp_algbw(group, "collnet") == pytest.approx(8 * nic)
        busbw, algo = _busbw(topo, gpus, gpu="a100-80gb")
        assert algo == "collnet"
        algbw = busbw / (2 * (gpus - 1) / gpus) * 1e9
        assert algbw == pytest.approx(8 * nic, rel=0.01)
        t_screen = ab.time_s("all_reduce", group, GIB16)
        assert GIB16 / t_screen == pytest.approx(algbw, rel=0.01)


def test_a_degraded_nic_link_slows_its_trees():
    """On the fabric the slowest NIC link of the group sets SHARP's network stage: one NIC
    link at half capacity halves a NIC-bound CollNet all-reduce."""
    topo = {"kind": "rail-optimized", "nic_gbps": 100, "transport": "ib", "sharp": True}
    sc = lambda faults: Scenario.from_dict(small_scenario(    # noqa: E731
        parallel={"tp": 1, "pp": 1, "zero": 0, "sequence_parallel": False}, fidelity="flow",
        cluster={"gpu": "a100-80gb", "gpus": 32, "gpus_per_node": 8, "topology": topo},
        network={"congestion_control": "none"}, faults=faults))
    ok = simulate(sc({}))
    fabric = build_fabric_for(sc({}))
    nic = fabric.link_names([fabric.nic_links[3, 0]])[0].replace("->", "-")   # GPU 3's cable
    slow = simulate(sc({"degraded_links": [{"link": nic, "capacity_factor": 0.5}]}))
    assert slow.breakdown_s["dp_comm"] > 1.5 * ok.breakdown_s["dp_comm"]


@pytest.mark.parametrize("topology, field", [
    ({"kind": "spine-leaf", "transport": "roce", "sharp": True}, "cluster.topology"),
])
def test_sharp_needs_infiniband(topology, field):
    with pytest.raises(ScenarioError, match="sharp needs transport ib") as err:
        Scenario.from_dict(small_scenario(cluster={"gpu": "h100-sxm", "gpus": 64,
                                                   "topology": topology}))
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("gpu, algo, why", [
    ("a100-80gb", "nvls", "NVLink SHARP"),
])
def test_forcing_an_in_network_algorithm_is_checked(gpu, algo, why):
    with pytest.raises(ScenarioError, match=why):
        Scenario.from_dict(small_scenario(
            cluster={"gpu": gpu, "gpus": 64, "topology": {"kind": "rail-optimized",
                                                          "transport": "ib", "sharp": True}},
            network={"nccl": {"algorithm": algo}}))
    with pytest.raises(ScenarioError, match="sharp is false"):
        Scenario.from_dict(small_scenario(cluster={"gpu": "a100-80gb", "gpus": 64},
                                          network={"nccl": {"algorithm": "collnet"}}))


def test_nccl_tests_refuses_collnet_without_sharp_in_one_line():
    out = subprocess.run([sys.executable, "-m", "simulator.cli", "nccl-tests", "all_reduce",
                          "--gpus", "16", "--gpu", "a100-80gb", "--topology", IB,
                          "--algo", "collnet"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "--algo" in out.stderr
