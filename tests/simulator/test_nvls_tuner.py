"""NVLSTree in NCCL's choice on NVLink SHARP GPUs, bound by the NVSwitch inside the node, and
aws-ofi-nccl's region tuner choosing the all-reduce's algorithm on p5 (EFA)."""

from __future__ import annotations

import pytest

from simulator.config.topology import topology_spec
from simulator.network.alpha_beta import AlphaBeta
from simulator.network.nccl_tests import nccl_tests
from simulator.network.ofi_tuner import p5_all_reduce_choice, region_side
from simulator.step.groups import Group
from tests.simulator.test_validation import VALIDATION
from topologies.gpus import load_gpu
from validation.collectives import H100_ROCE, aws_p5_table

GIB = 2**30


def _busbw(gpus, size, algorithm=None, **kw):
    kw = {**H100_ROCE, **kw}
    row = nccl_tests("all_reduce", gpus=gpus, min_bytes=size, max_bytes=size,
                     algorithm=algorithm, **kw).iloc[0]
    return float(row.busbw_gbyte_per_s), row.algorithm


def test_nvls_pays_on_two_nodes_and_not_on_four():
    """8 x H100 nodes on 8 x 400G RoCE (NVIDIA/nccl#1221, sharp_nvls.csv): NVLS on, two nodes
    go from 330 to 430 GB/s busbw (+30 %); four nodes get nothing (320 both). On two nodes
    NVLSTree's single tree edge carries S / 8 per NIC where a ring carries 2 S (n-1) / n / 8;
    on four, the double binary tree carries as much as the ring. The model's gain on two
    nodes is +45 %: the NVSwitch bound (480 GB/s on one node) is above the measured 430."""
    ring2, _ = _busbw(16, 4 * GIB, "ring")
    auto2, algo2 = _busbw(16, 4 * GIB)
    ring4, _ = _busbw(32, 4 * GIB, "ring")
    auto4, algo4 = _busbw(32, 4 * GIB)
    assert algo2 == "nvlstree"
    assert 1.25 < auto2 / ring2 < 1.6
    assert auto4 / ring4 < 1.05
    assert ring2 == pytest.approx(330, rel=0.08) and ring4 == pytest.approx(320, rel=0.10)


def test_nvlstree_on_two_nodes_is_bound_by_the_nvswitch():
    """On two nodes the network would carry NVLSTree at 8 NICs x 48 GB/s of algorithm
    bandwidth (IB, 400G), a busbw of 720 GB/s on 16 ranks; the NVLS stage inside each node
    holds it to one node's NVLS busbw, 480 GB/s (nccl#2140; NCCL's cost model keeps NVLSTree's
    busBw whatever the rank count), less the latency and the fill, at screening and on the
    fabric alike."""
    bound = 480
    fabric, _ = _busbw(16, 8 * GIB, "nvlstree", topology="dgx-h100-rail",
                       channels_per_nic=1)
    tuner = AlphaBeta.for_cluster(load_gpu("h100-sxm"), topology_spec("dgx-h100-rail"), 8)
    t = tuner.time_s("all_reduce", Group(size=16, per_node=8), 8 * GIB)
    screening = 8 * GIB / t * 30 / 16 / 1e9
    assert 0.97 * bound < fabric <= bound and 0.97 * bound < screening <= bound
    assert screening == pytest.approx(fabric, rel=0.01)


@pytest.mark.parametrize("point, choice", [
    ((32 * 2**20, 32), ("tree", "LL128")),
    ((GIB, 32), ("ring", "LL128")),
    ((2 * GIB, 32), ("ring", "Simple")),
    ((256 * 2**20, 128), ("tree", "LL128")),
    ((2 * GIB, 128), ("ring", "LL128")),        # a vertex of the ring / LL128 region
    ((4 * GIB, 128), ("nvlstree", "Simple")),
    ((8 * GIB, 128), ("ring", "Simple")),
    ((GIB, 256), ("nvlstree", "Simple")),
])
def test_p5_region_tuner_choices(point, choice):
    """aws-ofi-nccl v1.16.3's p5 regions at points the p5 scan measures: the stair steps of
    the measured busbw (ring / LL128 plateaus near 275 GB/s, ring / Simple near 355) fall where
    the regions change."""
    assert p5_all_reduce_choice(*point, nodes=point[1] // 8, nvls=True) == choice


def test_p5_region_tuner_falls_back_to_nccl():
    assert p5_all_reduce_choice(GIB, 16, nodes=2, nvls=True) is None     # <= 2 nodes
    assert p5_all_reduce_choice(GIB, 64, nodes=16, nvls=True) is None    # 4 ranks per node
    assert p5_all_reduce_choice(4 * GIB, 128, nodes=16, nvls=False) != ("nvlstree", "Simple")


def test_region_side_counts_edges():
    square = ((0, 0), (2, 0), (2, 2), (0, 2))
    assert region_side((1, 1), square) == 1
    assert region_side((2, 1), square) == 0 and region_side((0, 0), square) == 0
    assert region_side((3, 1), square) == -1 and region_side((1, 2.0001), square) == -1


def test_p5_all_reduce_follows_the_plugins_stair_steps():
    """The p5 all-reduce at 32-128 GPUs from 1 GiB, where the measured busbw steps between
    the plugin's ring / LL128 and ring / Simple or NVLSTree regions: NCCL's own cost model
    (tree throughout) read 12-22 % high on half of those points."""
    if not (VALIDATION / "network_scale").exists():
        pytest.skip("../shared/validation is not beside the repository")
    t = aws_p5_table(VALIDATION, collectives=("all_reduce",), gpus=(32, 64, 128))
    t = t[t.bytes >= GIB]
    assert t.error.abs().median() < 0.07
    assert t.error.abs().max() < 0.16
    assert set(t.algorithm) == {"ring", "nvlstree"}


def test_p5_two_nodes_run_nvlstree():
    """On 2 nodes the plugin leaves the choice to NCCL, whose model doubles NVLSTree's
    inter-node bandwidth there: the p5 16-GPU all-reduce from 1 GiB reads 435-478 GB/s, which
    a ring (at most 8 NICs x 44.5 GB/s busbw) cannot reach; it read 23-26 % low before."""
    if not (VALIDATION / "network_scale").exists():
        pytest.skip("../shared/validation is not beside the repository")
    t = aws_p5_table(VALIDATION, collectives=("all_reduce",), gpus=(16,))
    t = t[t.bytes >= GIB]
    assert (t.algorithm == "nvlstree").all()
    assert t.error.abs().max() < 0.12


@pytest.mark.parametrize("gpus, measured", [(5, 420), (6, 440), (7, 460)])
def test_nvls_inside_one_node_against_the_gpu_count_scan(gpus, measured):
    """NVLS's NVLink fraction is fitted on 8 x H100 (480 GB/s busbw) alone; its per-GPU
    traffic S (k + 1) / k gives busbw proportional to 2 (k - 1) / (k + 1), held out against
    the scan over GPU counts (NVIDIA/nccl#1455, sharp_nvls.csv: 420 / 440 / 460 on 5 / 6 / 7
    H100)."""
    row = nccl_tests("all_reduce", gpus=gpus, gpu="h100-sxm", min_bytes=4 * GIB,
                     max_bytes=4 * GIB).iloc[0]
    assert row.algorithm == "nvls"
    assert row.busbw_gbyte_per_s == pytest.approx(measured, rel=0.03)


@pytest.mark.parametrize("gpus", [2, 3])
def test_few_gpus_keep_the_ring(gpus):
    """On 2-4 H100 the scan measures the ring's 370 with NVLS on or off: NVLS's 2 (k-1)/(k+1)
    of 309 GB/s is below the ring there (206 and 309 GB/s on 2 and 3 GPUs)."""
    row = nccl_tests("all_reduce", gpus=gpus, gpu="h100-sxm", min_bytes=4 * GIB,
                     max_bytes=4 * GIB).iloc[0]
    assert row.algorithm == "ring"
    assert row.busbw_gbyte_per_s == pytest.approx(370, rel=0.03)


def test_nvls_is_hopper_and_later():
    """A100's NVSwitch has no NVLink SHARP: its one-node all-reduce stays a ring or tree."""
    row = nccl_tests("all_reduce", gpus=8, gpu="a100-80gb", min_bytes=4 * GIB,
                     max_bytes=4 * GIB).iloc[0]
    assert row.algorithm != "nvls"


def test_gb200_nvl72_against_nvidias_bars():
    """32 GB200 in one NVL72 NVLink domain (GTC25 S72583 slide 12, sharp_nvls.csv): 680 GB/s
    all-reduce busbw over NVLink (ring), 850 with NVLink SHARP. NVLink 5's ring and NVLS
    fractions come from 8 x B300 (695 and 845, nccl#2140), a GB200 runs as a Blackwell (its
    superchip name read as its GPU's); the NVLS bus bandwidth of a 32-GPU domain stays at the
    8-GPU figure (calibration.NVLS_BUSBW_SATURATION_GPUS), where NVLink bytes alone give
    1,020. Both within 3 %."""
    ring, algo0 = _busbw(32, 8 * GIB, "ring", topology="gb200-nvl72", gpu="gb200")
    nvls, algo1 = _busbw(32, 8 * GIB, topology="gb200-nvl72", gpu="gb200")
    assert (algo0, algo1) == ("ring", "nvls")
    assert ring == pytest.approx(680, rel=0.03) and nvls == pytest.approx(850, rel=0.03)


def test_p5_mid_size_trees_run_at_nccls_corrected_bandwidth():
    """NCCL derates a tree's bandwidth at mid sizes by its own measured correction (tuning.cc
    treeCorrectionFactor: 0.9 at 32-64 MiB under LL128). On 2 p5 nodes, where NCCL's model
    chooses, the derated tree loses to the ring at 32-64 MiB (the tree read +16 % / +13 %),
    as measured (the ring within 5 %). At 32 MiB on 32-256 GPUs the plugin's tree / LL128 runs
    derated and at EFA's measured tree rate (calibration.TREE_LL128_NET_FRACTION, fitted on the
    11 tree points with these four among them): -8 % on 32 GPUs to -19 % on 256, slow, where
    the 64-256 MiB points sit within 8 % (tests/simulator/test_tree_fit.py); at NCCL's own rate
    these four read +16 % to -8 % and the larger tree points up to +57 %."""
    if not (VALIDATION / "network_scale").exists():
        pytest.skip("../shared/validation is not beside the repository")
    t = aws_p5_table(VALIDATION, collectives=("all_reduce",), max_bytes=64 * 2**20)
    two = t[t.gpus == 16]
    assert len(two) == 2 and (two.algorithm == "ring").all(), two.to_string()
    assert two.error.abs().max() < 0.05, two.to_string()
    tree = t[(t.gpus > 16) & (t.bytes == 32 * 2**20)]
    assert (tree.algorithm == "tree").all() and len(tree) == 4, tree.to_string()
    assert (tree.error < 0).all() and tree.error.abs().max() < 0.20, tree.to_string()
