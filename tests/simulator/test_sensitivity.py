"""The sensitivity contract (simulator/config/sensitivity.py): changing a field changes the step
at every fidelity the table lists for it, and nothing at the others; the warning names what a
scenario sets in vain."""

from __future__ import annotations

import copy

import pytest

from simulator import Scenario, simulate
from simulator.config.sensitivity import ACTS, FIDELITIES, acts_at
from tests.conftest import small_scenario

TOPOLOGY = {"kind": "spine-leaf", "leaves": 4, "spines": 2, "hosts_per_leaf": 16,
            "nic_gbps": 200, "oversubscription": 2, "buffer_mib": 4, "link_latency_us": 1}
BASE = small_scenario(
    workload={"model": "megatron-gpt-1.7b", "seq_len": 2048, "global_batch": 64,
              "micro_batch": 1},
    parallel={"tp": 2, "pp": 2, "sequence_parallel": True, "zero": 1},
    cluster={"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8, "topology": TOPOLOGY},
    optimizations={"dp_overlap": False, "pp_overlap": False},
    network={"routing": "ecmp", "ecn": {"kmin_kb": 5, "kmax_kb": 50, "pmax": 0.5}}, seed=3)
"""64 GPUs on an oversubscribed spine-leaf: data-parallel rings of 4 GPUs per node across
nodes and pipeline sends, exposed (no overlap), so that what the fabric does shows in the
step; ECN marks early, so DCQCN is at work at fluid fidelity."""

CHANGES = {
    "workload": ("workload.global_batch", 128),
    "parallel": ("parallel.tp", 4),
    "optimizations": ("optimizations.fused_kernels", False),
    "cluster.gpu": ("cluster.gpu", "h100-sxm"),
    "cluster.gpus": ("cluster.gpus", 32),
    "cluster.gpus_per_node": ("cluster.gpus_per_node", 4),
    "cluster.variability": ("cluster.variability.gpu_speed_cv", 0.05),
    "cluster.topology": ("cluster.topology", {**TOPOLOGY, "nic_gbps": 100}),
    "cluster.topology.nic_gbps": ("cluster.topology.nic_gbps", 400),
    "cluster.topology.nics_per_node": ("cluster.topology.nics_per_node", 4),
    "cluster.topology.kind": ("cluster.topology", {"kind": "rail-optimized",
                                                   "nic_gbps": 200, "spines": 2,
                                                   "hosts_per_leaf": 8}),
    "cluster.topology.leaves": ("cluster.topology", {**TOPOLOGY, "leaves": 8,
                                                     "hosts_per_leaf": 8}),
    "cluster.topology.spines": ("cluster.topology.spines", 1),
    "cluster.topology.hosts_per_leaf": ("cluster.topology.hosts_per_leaf", 32),
    "cluster.topology.pod_gpus": ("cluster.topology", {"kind": "clos3", "nic_gbps": 200,
                                                       "hosts_per_leaf": 8, "pod_gpus": 32}),
    "cluster.topology.oversubscription": ("cluster.topology.oversubscription", 4),
    "cluster.topology.core_oversubscription": (
        "cluster.topology", {"kind": "clos3", "nic_gbps": 200, "hosts_per_leaf": 8,
                             "pod_gpus": 32, "core_oversubscription": 4}),
    "cluster.topology.uplink_gbps": ("cluster.topology", {**TOPOLOGY, "uplink_gbps": 50,
                                                          "spines": None}),
    "cluster.topology.rail_optimized": ("cluster.topology",
                                        {"kind": "clos3", "nic_gbps": 200, "hosts_per_leaf": 8,
                                         "pod_gpus": 32, "rail_optimized": True}),
    "cluster.topology.transport": ("cluster.topology.transport", "ib"),
    "cluster.topology.net_latency_us": ("cluster.topology.net_latency_us", 200),
    "cluster.topology.host_cpu": ("cluster.topology.host_cpu", "amd"),
    "cluster.topology.link_latency_us": ("cluster.topology.link_latency_us", 50),
    "cluster.topology.buffer_mib": ("cluster.topology.buffer_mib", 0.25),
    "network.routing": ("network.routing", "spray"),
    "network.queue_pairs": ("network.queue_pairs", 8),
    "network.congestion_control": None,          # it is what tells flow from fluid
    "network.pfc": ("network.pfc", False),
    "network.ecn": ("network.ecn", {"kmin_kb": 400, "kmax_kb": 1600, "pmax": 0.2}),
    "network.dcqcn": ("network.dcqcn", {"ai_mbps": 2000, "hai_mbps": 20000,
                                        "rate_increase_timer_us": 20}),
    "network.pfc_threshold": ("network.pfc_threshold", {"alpha": 0.01}),
    "network.mtu_bytes": ("network.mtu_bytes", 1024),
    "network.header_bytes": ("network.header_bytes", 600),
    "network.ack_bytes": ("network.ack_bytes", 600),
    "network.nccl": ("network.nccl.algorithm", "tree"),
    "network.nccl.qps_per_connection": ("network.nccl.qps_per_connection", 8),
    # it acts only with several queue pairs and a connection of fewer messages than them
    "network.nccl.split_data_on_qps": ("network.nccl", {"qps_per_connection": 64,
                                                        "split_data_on_qps": True}),
    "faults.stragglers": ("faults.stragglers", [{"gpu": 3, "slowdown": 1.5}]),
    "faults.failed_links": ("faults.failed_links", ["leaf0-spine0"]),
    "faults.failed_switches": ("faults.failed_switches", ["spine1"]),
    "faults.degraded_links": ("faults.degraded_links", [{"link": "leaf1-spine0",
                                                         "capacity_factor": 0.1}]),
    "data": ("data.workers", 0),
    "seed": ("seed", 11),
    "fidelity": None,                            # the axis of the table itself
}
"""A change of each field of the table (a field given by its section where a single value
cannot change alone, e.g. a fabric kind)."""


def _with(data: dict, path: str, value) -> dict:
    data = copy.deepcopy(data)
    parts = path.split(".")
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return data


def _at(data: dict, fidelity: str) -> dict:
    if fidelity in ("flow", "fluid"):
        net = {**data.get("network", {}),
               "congestion_control": "dcqcn" if fidelity == "fluid" else "none"}
        return {**data, "fidelity": "flow", "network": net}
    return {**data, "fidelity": fidelity}


def _numbers(data: dict) -> dict:
    d = simulate(Scenario.from_dict(data), frames=False).to_dict()
    for k in ("sim_wall_s", "warnings", "name", "seed"):          # echoes, not results
        d.pop(k)
    return d


def test_every_field_of_the_table_has_a_change():
    assert set(CHANGES) == set(ACTS)


@pytest.fixture(scope="module")
def base_numbers():
    return {f: _numbers(_at(BASE, f)) for f in FIDELITIES}


@pytest.mark.parametrize("field", [f for f, c in CHANGES.items() if c is not None])
def test_a_field_changes_the_step_where_it_acts_and_nowhere_else(field, base_numbers):
    path, value = CHANGES[field]
    acts = acts_at(field)
    for fidelity in FIDELITIES:
        if field.startswith("faults.") and field != "faults.stragglers" \
                and fidelity not in ("flow", "fluid"):
            continue                # refused off the fabric (a validation rule, tested apart)
        got = _numbers(_at(_with(BASE, path, value), fidelity))
        if fidelity in acts:
            assert got != base_numbers[fidelity], f"{field} changed nothing at {fidelity}"
        else:
            assert got == base_numbers[fidelity], f"{field} changed the step at {fidelity}"


def test_the_warning_names_the_fields_set_in_vain():
    sc = Scenario.from_dict(_at(BASE, "screening"), ["network.pfc=false",
                                                       "cluster.topology.buffer_mib=8"])
    assert set(sc.inert("screening")) == {
        "cluster.topology.kind", "cluster.topology.leaves", "cluster.topology.spines",
        "cluster.topology.hosts_per_leaf", "cluster.topology.oversubscription",
        "cluster.topology.buffer_mib", "cluster.topology.link_latency_us", "network.routing",
        "seed", "network.pfc", "network.ecn.kmin_kb", "network.ecn.kmax_kb",
        "network.ecn.pmax"}
    r = simulate(Scenario.from_dict(_at(BASE, "fluid")), frames=False)
    assert r.warnings == []                   # at fluid fidelity every field acts


def test_the_readme_shows_the_same_table():
    from tests.conftest import REPO
    text = (REPO / "README.md").read_text()
    block = text.split("<!-- sensitivity table: generated from simulator/config/sensitivity.py"
                       " -->\n")[1].split("\n<!-- end of sensitivity table -->")[0]
    rows = {}
    for line in block.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = {f for f, c in zip(FIDELITIES, cells[1:]) if c == "x"}
    assert rows == {f: set(a) for f, a in ACTS.items()}
