"""`clustersim nccl-tests` and `clustersim flows`: output contracts, measured figures, bad input."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from simulator.network.nccl_tests import nccl_tests
from tests.simulator.test_bad_input import _cli


def test_nccl_tests_match_measurements_the_efficiencies_were_not_fitted_to():
    """The NVLink and network efficiencies were set from A100 measurements (232.5 GB/s on one
    DGX A100; 86 and 84.8 GB/s over 100 GB/s of NICs; validation/network.md). Out of sample,
    on H100: one DGX H100's NVLink4 gives about 370 GB/s busbw after ~20 % protocol overhead
    (NCCL maintainers, nccl-tests#212), and 4 DGX H100 on 8 x 400G reach 375 GB/s at 16 GiB
    (NVIDIA GTC24 S62129; network_scale/nccl_allreduce_scaling_gtc24.csv)."""
    one = nccl_tests("all_reduce", gpus=8, gpu="h100-sxm", min_bytes=2**30, max_bytes=2**30,
                     algorithm="ring")            # the ring's figure (NVLS gives 480)
    assert one.busbw_gbyte_per_s.iloc[-1] == pytest.approx(370, rel=0.08)
    four = nccl_tests("all_reduce", gpus=32, topology="dgx-h100-rail", min_bytes=2**34,
                      max_bytes=2**34)
    assert four.busbw_gbyte_per_s.iloc[-1] == pytest.approx(375, rel=0.10)


def test_nccl_tests_sizes_and_definitions():
    done = []                 # the CLI's progress bar advances on each size as it is done
    df = nccl_tests("all_gather", gpus=16, gpu="h100-sxm", min_bytes=1024, max_bytes=2**20,
                    factor=4, on_size=done.append)
    assert list(df.bytes) == [1024, 4096, 16384, 65536, 262144, 1048576] == done
    done.clear()
    nccl_tests("all_gather", gpus=16, min_bytes=1024, max_bytes=5000, factor=4,
               fidelity="screening", on_size=done.append)
    assert done == [1024, 4096]
    assert (df.algbw_gbyte_per_s == df.bytes / df.time_s / 1e9).all()
    assert df.busbw_gbyte_per_s.to_numpy() == pytest.approx(
        df.algbw_gbyte_per_s.to_numpy() * 15 / 16)
    assert df.time_s.is_monotonic_increasing
    assert df.busbw_gbyte_per_s.is_monotonic_increasing     # latency-bound at small sizes


def test_cli_nccl_tests_json_and_errors():
    res = _cli("nccl-tests", "all_reduce", "--gpus", "16", "-b", "1M", "-e", "4M", "--json",
               "--routing", "spray")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [set(r) for r in rows] == [{"bytes", "time_s", "algbw_gbyte_per_s",
                                       "busbw_gbyte_per_s", "algorithm", "protocol"}] * 3
    assert {r["algorithm"] for r in rows} <= {"ring", "tree"}
    assert {r["protocol"] for r in rows} <= {"LL", "LL128", "Simple"}
    forced = json.loads(_cli("nccl-tests", "all_reduce", "--gpus", "16", "-b", "8", "-e", "8",
                             "--json", "--algo", "ring").stdout)
    assert forced[0]["algorithm"] == "ring"
    for args, field in ((["frobnicate", "--gpus", "8"], "OP"),
                        (["all_reduce", "--gpus", "1"], "--gpus"),
                        (["all_reduce", "--gpus", "8", "-b", "lots"], "-b"),
                        (["all_reduce", "--gpus", "8", "--topology", "{kind: torus}"],
                         "--topology"),
                        (["all_reduce", "--gpus", "8", "--gpu", "v100"], "--gpu"),
                        (["all_gather", "--gpus", "16", "--algo", "tree"], "--algo"),
                        (["all_reduce", "--gpus", "16", "--gpu", "a100-80gb", "--algo",
                          "nvlstree"], "--algo"),
                        (["all_reduce", "--gpus", "8", "--algo", "nvlstree"], "--algo"),
                        (["all_gather", "--gpus", "16", "--algo", "nvlstree"], "--algo")):
        bad = _cli("nccl-tests", *args)
        assert bad.returncode == 2 and field in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_cli_flows_incast_is_fair_and_writes_link_statistics(tmp_path):
    n, size = 8, 10_000_000
    flows = pd.DataFrame({"src_gpu": range(n), "dst_gpu": [n] * n, "bytes": [size] * n,
                          "start_s": [0.0] * n})
    path, out = tmp_path / "flows.csv", tmp_path / "fct.csv"
    flows.to_csv(path, index=False)
    topo = f"{{kind: spine-leaf, leaves: 1, spines: 0, hosts_per_leaf: {n + 1}, nic_gbps: 100}}"
    res = _cli("flows", str(path), "--topology", topo, "--out", str(out))
    assert res.returncode == 0, res.stderr
    fct = pd.read_csv(out)
    # max-min: the 100G downlink is shared 8 ways, all finish together at 8 x size / 12.5 GB/s
    expect = n * size / 12.5e9
    assert fct.finish_s.to_numpy() == pytest.approx([expect + 2e-6] * n, rel=1e-6)
    links = pd.read_csv(tmp_path / "fct_links.csv")
    down = links[links.link == f"leaf0->nic{n}.0"].iloc[0]
    assert down.bytes == pytest.approx(n * size) and down.max_flows == n
    trace = tmp_path / "flows.json"
    fluid = _cli("flows", str(path), "--topology", topo, "--out", str(out), "--cc", "dcqcn",
                 "--pfc", "on", "--trace", str(trace))
    assert fluid.returncode == 0, fluid.stderr
    import json
    ev = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in ev) == n
    assert any(e["ph"] == "C" and e["name"].startswith("queue leaf0->") for e in ev)
    links = pd.read_csv(tmp_path / "fct_links.csv")
    assert {"max_queue_bytes", "pause_s", "ecn_mark_rate", "dropped_bytes"} <= set(links.columns)
    bad = _cli("flows", str(path), "--topology", topo, "--out", str(out), "--network",
               "{ecn: {kmin_kb: 9, kmax_kb: 1}}")
    assert bad.returncode == 2 and "--network" in bad.stderr
    flows.assign(src_gpu=99).to_csv(path, index=False)
    bad = _cli("flows", str(path), "--topology", topo, "--out", str(out))
    assert bad.returncode == 2 and "src_gpu" in bad.stderr


@pytest.mark.parametrize("args,needle", [
    (["nccl-tests", "all_reduce", "--gpus", "16", "--queue-pairs", "0"], "--queue-pairs"),
    (["nccl-tests", "all_reduce", "--gpus", "16", "--qps-per-connection", "0"],
     "--queue-pairs/--qps-per-connection"),
    (["nccl-tests", "all_reduce", "--gpus", "16", "--split-data-on-qps", "2"],
     "--split-data-on-qps"),
    (["nccl-tests", "all_reduce", "--gpus", "16", "--network",
      "{queue_pairs: 8, nccl: {qps_per_connection: 4}}"], "network.nccl.qps_per_connection"),
    (["nccl-tests", "all_reduce", "--gpus", "16", "--channels", "12"], "--channels"),
    (["nccl-tests", "all_reduce", "--gpus", "16", "--gpus-per-node", "0"], "--gpus-per-node"),
    (["nccl-tests", "all_reduce", "--gpus", "16", "--seed", "-1"], "--seed"),
    (["nccl-tests", "all_reduce", "--gpus", "1024", "--topology", "gb200-nvl72",
      "--gpus-per-node", "72"], "not whole nodes of 72; --gpus-per-node 64 fills 64 of each"),
    (["flows", "FLOWS", "--topology", "{kind: spine-leaf}", "--out", "o.csv", "--gpus", "-3"],
     "--gpus"),
    (["flows", "FLOWS", "--topology", "{kind: spine-leaf}", "--out", "o.csv",
      "--network", "{queue_pairs: 0}"], "--network.queue_pairs"),
    (["flows", "FLOWS", "--topology", "{kind: spine-leaf}", "--out", "o.csv",
      "--network", "{ecn: {pmax: 3}}"], "--network.ecn.pmax"),
    (["flows", "FLOWS", "--topology", "{kind: spine-leaf}", "--out", "o.csv",
      "--network", "{ack_bytes: -60}"], "--network.ack_bytes"),
])
def test_cli_bad_numbers_are_one_line_errors(tmp_path, args, needle):
    flows = tmp_path / "flows.csv"
    flows.write_text("src_gpu,dst_gpu,bytes,start_s\n0,1,1000,0\n")
    args = [str(flows) if a == "FLOWS" else a for a in args]
    res = _cli(*args, cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.stderr


def test_sendrecv_latency_does_not_grow_with_the_ranks():
    """One send / receive per rank: 8 B cost one network hop at 16 or 128 ranks (it cost a
    ring all-gather's latency over all of them, 47 and 350 us)."""
    times = [nccl_tests("sendrecv", gpus=n, min_bytes=8, max_bytes=8).time_s[0]
             for n in (16, 128)]
    assert times[0] == pytest.approx(times[1], rel=1e-6) and times[0] < 20e-6


def test_a_latency_bound_all_reduce_costs_the_same_on_the_fabric_as_in_the_cost_model():
    """At 8 B NCCL's cost model picks its tree; the fabric runs the same tree, so flow and
    screening fidelity agree (the fabric was ring-only: 115.8 us against 45.2)."""
    from simulator.network.alpha_beta import AlphaBeta
    from simulator.step.groups import Group
    from topologies.gpus import load_gpu
    from topologies.spec import SpineLeaf
    flow = nccl_tests("all_reduce", gpus=64, min_bytes=8, max_bytes=8)
    ab = AlphaBeta.for_cluster(load_gpu("h100-sxm"), SpineLeaf(kind="spine-leaf"), 8)
    assert flow.algorithm[0] == "tree"
    assert flow.time_s[0] == pytest.approx(ab.time_s("all_reduce", Group(64, 8), 8.0),
                                           rel=0.02)


def test_nccl_channels_in_all_are_channels_per_nic_times_the_nics():
    """NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = 16 on nodes of 8 NICs is NCCL's own 2 per NIC
    (its graph search's one per NIC, doubled): `--channels 16` runs what `--channels-per-nic 2`
    runs, and under ECMP that differs from one channel a NIC (other flows, other paths)."""
    def busbw(*flags):
        res = _cli("nccl-tests", "all_reduce", "--gpus", "256", "--topology",
                   "{kind: spine-leaf, nic_gbps: 400}", "--algo", "ring", "-b", "1G", "-e", "1G",
                   "--json", *flags)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)[0]["busbw_gbyte_per_s"]
    assert busbw("--channels", "16") == busbw("--channels-per-nic", "2") != busbw()


def test_nccl_tests_at_screening_runs_what_the_fabric_cannot_hold():
    """An all-to-all of 4,096 ranks needs 16.8 million flows, beyond the fabric's cap: the
    flow fidelity refuses it in one line naming the way out, and `--fidelity screening` (NCCL's
    cost model, no fabric) runs it, no faster than the NICs allow: each GPU sends (n - 8) / n
    of its bytes through its 400 Gb/s NIC (48 GB/s achievable on InfiniBand), so busbw =
    algbw (n - 1) / n <= 48 (n - 1) / (n - 8)."""
    args = ("nccl-tests", "alltoall", "--gpus", "4096", "--topology", "dgx-h100-rail",
            "-b", "16G", "-e", "16G")
    bad = _cli(*args)
    assert bad.returncode == 2 and "--fidelity screening" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    res = _cli(*args, "--fidelity", "screening", "--json")
    assert res.returncode == 0, res.stderr
    busbw = json.loads(res.stdout)[0]["busbw_gbyte_per_s"]
    assert 0.5 * 48 < busbw <= 48 * 4095 / 4088
    flags = _cli("nccl-tests", "all_reduce", "--gpus", "16", "--fidelity", "screening",
                 "--routing", "spray")
    assert flags.returncode == 2 and "--fidelity" in flags.stderr


@pytest.mark.parametrize("topology,gpu,nic_gbps", [("gb200-nvl72", "gb200", 400),
                                                    ("gb300-nvl72", "gb300", 800),
                                                    ("dgx-h100-rail", "h100-sxm", 400),
                                                    ("dgx-b300-rail", "b300", 800)])
def test_one_gpu_per_node_sends_at_its_nic_rate(topology, gpu, nic_gbps):
    """Between two nodes (NVL72 racks, DGX boxes) one GPU's send leaves on its own NIC: 400 Gb/s
    ConnectX-7 on GB200 and DGX H100, 800 Gb/s ConnectX-8 on GB300 and DGX B300, at
    InfiniBand's achievable 0.96 of line rate (NCCL's maintainers: 48 of 50 GB/s per NDR
    NIC)."""
    df = nccl_tests("sendrecv", gpus=2, gpus_per_node=1, gpu=gpu, topology=topology,
                    min_bytes=2**33, max_bytes=2**33)
    assert df.busbw_gbyte_per_s[0] == pytest.approx(0.96 * nic_gbps / 8, rel=0.01)


LEAVES = "{kind: spine-leaf, nic_gbps: 400, hosts_per_leaf: 2, spines: 4}"
"""Eight nodes of 8 GPUs over four leaves: ECMP picks among four spines."""


@pytest.mark.parametrize("op, kw", [
    ("alltoall", {"gpus": 32, "topology": "aws-p5", "gpu": "h100-sxm"}),
    ("all_reduce", {"gpus": 64, "topology": LEAVES,
                    "routing": "adaptive"}),
    ("all_reduce", {"gpus": 64, "topology": LEAVES,
                    "queue_pairs": 4}),
    ("all_gather", {"gpus": 64, "topology": LEAVES,
                    "queue_pairs": 4, "split_data_on_qps": True}),
])
def test_a_scan_reads_each_size_as_it_reads_alone(op, kw):
    """A scan routes its collective once and scales the flows' bytes for the other sizes
    (paths do not depend on the size unless queue pairs fill message by message): every
    size of a 1 KiB - 1 GiB scan (factor 8, so 256 KiB and 64 MiB straddle NCCL's 512 KiB
    message) reads exactly as that size run alone."""
    scan = nccl_tests(op, min_bytes=2**10, max_bytes=2**30, factor=8, **kw)
    alone = pd.concat([nccl_tests(op, min_bytes=s, max_bytes=s, **kw) for s in scan.bytes],
                      ignore_index=True)
    pd.testing.assert_frame_equal(scan, alone, check_exact=True)
