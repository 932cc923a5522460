"""NCCL's protocols (LL, LL128, Simple): the cost model runs the fastest, NCCL_PROTO
(network.nccl.protocol, nccl-tests --proto) forces one, at screening and on the fabric alike."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from simulator import Scenario, simulate
from simulator.config.topology import topology_spec
from simulator.errors import ScenarioError
from simulator.network.alpha_beta import AlphaBeta
from simulator.network.nccl_tests import nccl_tests
from simulator.step.groups import Group
from topologies.gpus import load_gpu

SIZES = [8 * 32**k for k in range(7)]          # 8 B ... 8 GiB, as -b 8 -e 8G -f 32
TOPOLOGY = "{kind: spine-leaf, nic_gbps: 400}"


def _scan(protocol=None, op="all_reduce", gpus=32):
    return nccl_tests(op, gpus=gpus, topology=TOPOLOGY, routing="spray", min_bytes=SIZES[0],
                      max_bytes=SIZES[-1], factor=32, protocol=protocol).set_index("bytes")


@pytest.mark.parametrize("op", ["all_reduce", "all_gather"])
def test_the_cost_model_runs_the_protocol_nccl_rates_fastest(op):
    """Auto runs the protocol NCCL's own estimate rates fastest (the tuner's choice), and runs
    it as a forced run of that protocol does. A ring across nodes runs faster than NCCL
    estimates (calibration.RING_PIPELINE_P), Simple's latency hiding most, so forcing Simple
    may beat NCCL's choice of LL128 on mid-size all-gathers, as NCCL_PROTO=Simple does on
    real clusters; by estimate it never helps."""
    auto = _scan(op=op)
    forced = {p: _scan(p, op) for p in ("LL", "LL128", "Simple")}
    tuner = AlphaBeta.for_cluster(load_gpu("h100-sxm"), topology_spec(TOPOLOGY), 8)
    for size in SIZES:
        proto = tuner.choice(op, Group(size=32, per_node=8), size)[1]
        assert auto.protocol[size] == proto
        assert auto.time_s[size] == pytest.approx(forced[proto].time_s[size], rel=1e-12)
    for p, f in forced.items():
        assert (f.protocol == p).all()
    assert auto.protocol.iloc[0] == "LL"           # 8 B: the lowest latency
    assert auto.protocol.iloc[-1] == "Simple"      # 8 GiB: every byte on the wire is payload
    # LL sends a 4 B flag with every 4 B of data (at most half the bus bandwidth), and NCCL
    # caps it across 3+ nodes of Intel hosts at 20.4 GB/s (tuning.cc llMaxBws): at 8 GiB the
    # cap is what binds
    ll = forced["LL"].busbw_gbyte_per_s.iloc[-1]
    simple = forced["Simple"].busbw_gbyte_per_s.iloc[-1]
    assert ll == pytest.approx(20.4, rel=0.01) and ll < 0.5 * simple


def test_screening_and_the_fabric_pick_the_same_protocol():
    """On a non-blocking (sprayed) fabric the fabric's bandwidth time is the alpha-beta one, so
    the fabric must land on the screening fidelity's choice at every size."""
    spec = topology_spec(TOPOLOGY)
    tuner = AlphaBeta.for_cluster(load_gpu("h100-sxm"), spec, 8)
    for op, kind in (("all_reduce", "all_reduce"), ("all_gather", "all_gather")):
        fabric = _scan(op=op)
        for size in SIZES:
            algo, proto = tuner.choice(kind, Group(size=32, per_node=8), size)
            assert (fabric.algorithm[size], fabric.protocol[size]) == (algo, proto), (op, size)


def test_forcing_ll_slows_a_step_whose_gradients_are_bandwidth_bound():
    base = ["fidelity=screening", "optimizations.dp_overlap=false"]
    sc = Scenario.load("examples/gpt3-175b-1024-selene.yaml", base)
    ll = Scenario.load("examples/gpt3-175b-1024-selene.yaml",
                       base + ["network.nccl.protocol=LL"])
    simple = Scenario.load("examples/gpt3-175b-1024-selene.yaml",
                           base + ["network.nccl.protocol=Simple"])
    t = {k: simulate(s, frames=False).step_time_s for k, s in
         (("auto", sc), ("LL", ll), ("Simple", simple))}
    assert t["LL"] > t["auto"] * 1.01
    assert t["Simple"] >= t["auto"]


def test_nvlstree_with_a_protocol_other_than_simple_is_refused():
    with pytest.raises(ScenarioError, match="network.nccl.protocol LL cannot run algorithm "
                                            "nvlstree"):
        Scenario.load("examples/megascale-175b-12288.yaml",
                      ["cluster.gpu=h100-sxm", "network.nccl.algorithm=nvlstree",
                       "network.nccl.protocol=LL"])
    with pytest.raises(ScenarioError, match="network.nccl.protocol"):
        Scenario.load("examples/megascale-175b-12288.yaml", ["network.nccl.protocol=LL64"])


@pytest.mark.parametrize("argv, field", [
    (["all_reduce", "--proto", "LL", "--algo", "nvlstree", "--gpus", "16",
      "--topology", "dgx-h100-rail"], "--proto"),
    (["alltoall", "--proto", "LL", "--gpus", "16"], "--proto"),
])
def test_cli_refuses_a_protocol_nccl_cannot_run_in_one_line(argv, field):
    out = subprocess.run([sys.executable, "-m", "simulator.cli", "nccl-tests", *argv],
                         capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in out.stderr


def test_latency_constants_are_nccls_own():
    """Every (base, NVLink hop, network hop) of NCCL_LATENCY_US (ring, tree, NVLS, NVLSTree,
    CollNet Direct) is the value NCCL 2.30.7's tuning.cc ships (../shared/validation/
    network_scale/nccl_tuning_model_defaults.csv); tree / Simple was once NCCL 2.4's 28 us per
    hop."""
    import pandas as pd

    from simulator.calibration import NCCL_LATENCY_US
    from tests.simulator.test_validation import VALIDATION

    path = VALIDATION / "network_scale" / "nccl_tuning_model_defaults.csv"
    if not path.exists():
        pytest.skip("../shared/validation is not beside the repository")
    d = pd.read_csv(path)
    for (algo, proto), (base, intra, inter) in NCCL_LATENCY_US.items():
        name = {"collnet": "collnetdirect"}.get(algo, algo)
        row = d[(d.algorithm.str.lower() == name) & (d.protocol == proto)]

        def value(param, hw):
            v = row[(row.parameter == param) & (row.hw_or_scope == hw)].value
            # the CSV lists no base latency for NVLS / NVLSTree / CollNet: tuning.cc's is 0
            zero_base = algo.startswith("nvls") or algo == "collnet"
            return float(v.iloc[0]) if len(v) or not zero_base else 0.0
        got = {p: value(*p) for p in (("baseLatency", "-"), ("hwLatency", "NVLINK"),
                                      ("hwLatency", "NET"))}
        assert (base, intra, inter) == tuple(got.values()), (algo, proto, got)


def test_simple_waits_for_the_flush_on_every_network_step():
    """NCCL's tuning.cc adds the net plugin's latency (graph latencyInter) to every network
    step once, and once more for Simple ("the flush extra latency"). On EFA that is 75 us per
    step on p5, and it is what holds NVLSTree's mid-size all-reduces on 256 GPUs down: 512 MiB
    and 1 GiB measure 157 and 220 GB/s busbw (aws_p5_efa_nccl_tests.csv); counted once they read
    52 % and 29 % fast, counted as NCCL does 30 % and 18 %."""
    from tests.simulator.test_validation import VALIDATION
    from validation.collectives import aws_p5_table

    if not VALIDATION.exists():
        pytest.skip("../shared/validation is not beside the repository")
    t = aws_p5_table(VALIDATION, collectives=("all_reduce",), gpus=(256,)).set_index("bytes")
    assert t.algorithm[2**29] == t.algorithm[2**30] == "nvlstree"
    assert t.error[2**29] < 0.35 and t.error[2**30] < 0.25


def _tuning_csv():
    import pandas as pd

    from tests.simulator.test_validation import VALIDATION

    path = VALIDATION / "network_scale" / "nccl_tuning_model_defaults.csv"
    if not path.exists():
        pytest.skip("../shared/validation is not beside the repository")
    return pd.read_csv(path)


def _net_overhead_us() -> dict:
    """The CSV's "net overhead per step" row, "1.0 / 2.0 us (x3 for Simple)": Intel / AMD."""
    import re

    d = _tuning_csv()
    text = d[d.parameter == "net overhead per step"].value.iloc[0]
    intel, amd, simple = (float(x) for x in re.findall(r"[0-9.]+", text))
    return {"intel": intel, "amd": amd, "simple": simple}


@pytest.mark.parametrize("nodes", [2, 4, 32])
@pytest.mark.parametrize("cpu", ["intel", "amd"])
def test_a_ring_all_reduce_crosses_the_network_twice_per_node_boundary_walked(nodes, cpu):
    """NCCL >= 2.23 (tuning.cc, nInterSteps = 2 (nNodes - 1)): of a ring all-reduce's 2 (n - 1)
    steps, 2 (nodes - 1) cross the network (a chunk walks n - 1 hops of the ring, past
    nodes - 1 node boundaries, once reducing and once gathering); it charged 2 nodes, two
    network hops too many (on EFA, 2 x 79 us per LL128 all-reduce). Each of the other steps
    costs at least the host's network post overhead ("inter-node rings still have to launch
    nsteps * net overhead"), three times it under Simple: on AMD hosts 6 us, not the NVLink
    hop's 3.4. Hop latencies and overheads as NCCL ships them (the tuning CSV)."""
    from simulator.network.alpha_beta import Group, nccl_latency_s

    d = _tuning_csv()
    over = _net_overhead_us()
    n = 8 * nodes
    for proto in ("LL", "LL128", "Simple"):
        ring = d[(d.algorithm == "Ring") & (d.protocol == proto)]
        base = float(ring[ring.parameter == "baseLatency"].value.iloc[0])
        hop = ring[ring.parameter == "hwLatency"].set_index("hw_or_scope").value.astype(float)
        intra = max(hop["NVLINK"], over[cpu] * (over["simple"] if proto == "Simple" else 1))
        got = nccl_latency_s("ring", proto, "all_reduce", Group(size=n, per_node=8),
                             host_cpu=cpu)
        want = (base + (2 * (n - 1) - 2 * (nodes - 1)) * intra
                + 2 * (nodes - 1) * hop["NET"])
        assert got == pytest.approx(want * 1e-6), proto


def test_a_ring_simple_all_reduce_across_nodes_pays_nccls_plateau_factor():
    """tuning.cc ncclTopoGetAlgoTime: a ring / Simple all-reduce across nodes whose channels
    each move >= 64 B per rank has its latency multiplied (the CSV's "ring plateau latency
    multiplier", 1.4 on sm_80 and newer); a 1 KiB one does not, and neither does LL128 or an
    all-gather, nor a ring inside one node."""
    import re

    from simulator.network.alpha_beta import Group, nccl_latency_s

    d = _tuning_csv()
    text = d[d.parameter == "ring plateau latency multiplier"].value.iloc[0]
    factor = float(re.findall(r"[0-9.]+", text)[0])
    g = Group(size=32, per_node=8)
    small = nccl_latency_s("ring", "Simple", "all_reduce", g, nbytes=1024)
    big = nccl_latency_s("ring", "Simple", "all_reduce", g, nbytes=2**30)
    assert big == pytest.approx(factor * small)
    for proto, kind, grp in (("LL128", "all_reduce", g), ("Simple", "all_gather", g),
                             ("Simple", "all_reduce", Group(size=8, per_node=8))):
        assert (nccl_latency_s("ring", proto, kind, grp, nbytes=2**30)
                == nccl_latency_s("ring", proto, kind, grp, nbytes=1024))


def test_the_trees_network_depth_is_nccls_integer_log():
    """tuning.cc charges a tree all-reduce 2 log2i(nNodes) network hops, log2i the floor of the
    base-2 log: 248 nodes (the 1,984-GPU H200 run of nccl-tests#283) pay 7 levels, as 128 do,
    not log2(248) = 7.95."""
    from simulator.calibration import NCCL_LATENCY_US
    from simulator.network.alpha_beta import Group, nccl_latency_s

    base, intra, inter = NCCL_LATENCY_US[("tree", "Simple")]
    for nodes, levels in ((3, 1), (128, 7), (248, 7), (256, 8)):
        got = nccl_latency_s("tree", "Simple", "all_reduce", Group(size=8 * nodes, per_node=8))
        assert got == pytest.approx((base + 2 * (7 * intra + levels * inter)) * 1e-6), nodes


@pytest.mark.parametrize("gpus, ll_up_to", [(8, 2 * 2**20), (128, 2 * 2**20), (32, 2**20)])
def test_all_to_all_runs_ll_or_simple_by_its_per_peer_message(gpus, ll_up_to):
    """NCCL posts an all-to-all as sends and receives, which run LL when a peer's message is at
    most 16 KiB x its channels per peer and Simple above, never LL128 (enqueue.cc): 16 channels
    per peer inside one 8-GPU node (2 MiB total = 256 KiB a peer), across nodes 2 up to 32
    ranks (1 MiB over 32 = 32 KiB a peer) and 1 beyond (2 MiB over 128 = 16 KiB). The fabric
    and the screening model charge the same protocol's latency."""
    df = nccl_tests("alltoall", gpus=gpus, gpu="h100-sxm", topology="dgx-h100-rail",
                    min_bytes=ll_up_to // 4, max_bytes=ll_up_to * 4, factor=2)
    assert list(df.protocol) == ["LL", "LL", "LL", "Simple", "Simple"]
    tuner = AlphaBeta.for_cluster(load_gpu("h100-sxm"), topology_spec("dgx-h100-rail"), 8)
    group = Group(size=gpus, per_node=min(gpus, 8))
    screening = np.array([tuner.time_s("all_to_all", group, float(b)) for b in df.bytes])
    # LL's latency and half-rate payload, Simple's higher latency: both fidelities agree
    assert screening == pytest.approx(df.time_s.to_numpy(), rel=0.05)
