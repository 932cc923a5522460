"""Which scenario fields act at which fidelity (the sensitivity contract).

A field set in a scenario that cannot change the step at the chosen fidelity is named in a
warning, so a scenario is never silently half-used. The table is checked by
tests/simulator/test_sensitivity.py: changing a field changes the result at every fidelity
listed for it (on a scenario where it matters) and nothing at the others.

Fidelities: ``analytic`` and ``screening`` (alpha-beta collectives), ``flow`` (the fabric with
max-min sharing, ``congestion_control: none``) and ``fluid`` (the fabric through the DCQCN /
PFC fluid model, ``congestion_control: dcqcn``).
"""

from __future__ import annotations

FIDELITIES = ("analytic", "screening", "flow", "fluid")
ALL = frozenset(FIDELITIES)
FABRIC = frozenset({"flow", "fluid"})
FLUID = frozenset({"fluid"})

ACTS: dict[str, frozenset] = {
    "workload": ALL, "parallel": ALL, "optimizations": ALL, "fidelity": ALL,
    "cluster.gpu": ALL, "cluster.gpus": ALL, "cluster.gpus_per_node": ALL,
    "cluster.variability": ALL,
    # the alpha-beta model reads the NIC rate of a GPU: line rate x NICs per node / GPUs
    "cluster.topology": ALL, "cluster.topology.nic_gbps": ALL,
    "cluster.topology.nics_per_node": ALL,
    # the shape of the fabric acts only where there is a fabric
    "cluster.topology.kind": FABRIC, "cluster.topology.leaves": FABRIC,
    "cluster.topology.spines": FABRIC, "cluster.topology.hosts_per_leaf": FABRIC,
    "cluster.topology.pod_gpus": FABRIC, "cluster.topology.oversubscription": FABRIC,
    "cluster.topology.core_oversubscription": FABRIC, "cluster.topology.uplink_gbps": FABRIC,
    "cluster.topology.rail_optimized": FABRIC, "cluster.topology.transport": ALL,
    # the net plugin's latency is in NCCL's latency terms, which every fidelity charges
    "cluster.topology.net_latency_us": ALL,
    # so is the host's per-step network overhead of an inter-node ring (tuning.cc)
    "cluster.topology.host_cpu": ALL,
    # max-min sharing has no propagation delay (NCCL's latency terms stand for it) and no
    # buffers: only the fluid model's round trips, pauses and queues use them
    "cluster.topology.link_latency_us": FLUID, "cluster.topology.buffer_mib": FLUID,
    "network.routing": FABRIC, "network.queue_pairs": FABRIC,
    "network.congestion_control": FABRIC,
    "network.pfc": FLUID, "network.ecn": FLUID, "network.dcqcn": FLUID,
    "network.pfc_threshold": FLUID, "network.mtu_bytes": FLUID, "network.header_bytes": FLUID,
    # acknowledgements load the reverse paths in `clustersim flows` only, never in the step
    "network.ack_bytes": frozenset(),
    # NCCL_ALGO: the alpha-beta model and the fabric run the same forced algorithm
    "network.nccl": ALL,
    # queue pairs are flows on the fabric; the alpha-beta model has none
    "network.nccl.qps_per_connection": FABRIC, "network.nccl.split_data_on_qps": FABRIC,
    "faults.stragglers": ALL, "faults.failed_links": FABRIC, "faults.failed_switches": FABRIC,
    "faults.degraded_links": FABRIC,
    # the loaders pace the first and last stages at every fidelity
    "data": ALL,
    # ECMP hash seeds and the fluid model's CNP draws
    "seed": FABRIC,
}
"""Dotted field (or section) -> the fidelities at which it can change the step. A field not
listed takes its nearest listed parent's entry."""


NOT_THE_STEP = ("name", "cluster.topology.name", "cluster.topology.source",
                "cluster.topology.gpu", "failures", "checkpoint")
"""Labels, and the sections of a run under failures (``clustersim failures``): never warned
about (the step does not read them, and no one expects it to)."""


def acts_at(path: str) -> frozenset:
    """The fidelities at which the field ``path`` (dotted) can change the step."""
    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        entry = ACTS.get(".".join(parts[:k]))
        if entry is not None:
            return entry
    return ALL


def set_paths(data, prefix: str = "") -> list[str]:
    """The dotted paths a scenario mapping sets: every leaf value (a mapping is walked, a
    preset name or list is one value)."""
    if not isinstance(data, dict):
        return [prefix] if prefix else []
    out = []
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        out += set_paths(value, path) if isinstance(value, dict) else [path]
    return out


def inert(paths, fidelity: str) -> list[str]:
    """The paths among ``paths`` that cannot change the step at ``fidelity``."""
    return [p for p in paths if fidelity not in acts_at(p)
            and not any(p == q or p.startswith(q + ".") for q in NOT_THE_STEP)]
