"""Fabric builders: plain functions returning networkx graphs (networkx's own style).

Nodes carry ``kind`` (gpu, nvswitch, nic, leaf, spine, agg, core), ``tier`` (-2 GPU / NVSwitch,
-1 NIC, 0 leaf, 1 spine or aggregation, 2 core), ``index`` and, where it applies, ``node``
(server), ``rail`` and ``pod``. Every cable is two directed edges with ``capacity_bps`` (bits per
second), ``latency_s`` and ``tier`` of the upper end. Switches carry ``buffer_bytes``.

Notes
-----
Sizes left as None default from the GPU count (one NIC per GPU unless ``nics_per_node`` says
otherwise): leaves hold ``hosts_per_leaf`` NIC ports (default 32, half of a 64-port switch); a
leaf has as many uplinks as needed for ``oversubscription`` (down : up capacity), one to each
spine / aggregation switch; a clos3 pod holds ``pod_gpus``; aggregation switches reach the core
through ``leaves_per_pod / core_oversubscription`` uplinks, one to each core of their plane
(plane j = the j-th aggregation switch of every pod). Building is O(links).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx

from topologies.spec import Clos3, RailOptimized, SpineLeaf
from workloads.units import GIGA, MIB, US

DEFAULT_HOSTS_PER_LEAF = 32
"""NIC ports per leaf when not given: half the ports of a 64-port (Tomahawk 4 / Spectrum-4)
switch face hosts, half face spines."""


class _Draft:
    """Nodes and directed links collected in dicts, then handed to networkx in one bulk call
    each (per-edge ``add_edge`` dominated building a 32,768-GPU fabric)."""

    def __init__(self, **graph_attrs):
        self.attrs = graph_attrs
        self.nodes: dict[str, dict] = {}
        self.edges: dict[tuple[str, str], dict] = {}

    def node(self, name: str, **attrs) -> None:
        self.nodes[name] = attrs

    def link(self, a: str, b: str, gbps: float, latency_s: float) -> None:
        """A cable: both directions; a second cable between the same pair adds capacity."""
        tier = max(self.nodes[a]["tier"], self.nodes[b]["tier"])
        for key in ((a, b), (b, a)):
            e = self.edges.get(key)
            if e is not None:
                e["capacity_bps"] += gbps * GIGA
                e["cables"] += 1
            else:
                self.edges[key] = {"capacity_bps": gbps * GIGA, "latency_s": latency_s,
                                   "tier": tier, "cables": 1}

    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph(**self.attrs)
        g.add_nodes_from(self.nodes.items())
        g.add_edges_from((u, v, d) for (u, v), d in self.edges.items())
        return g


def _servers(g: _Draft, gpus: int, gpus_per_node: int, nics_per_node: int,
             nvlink_gbps: float, nic_gbps: float) -> list[str]:
    """GPUs, one NVSwitch domain per server, NICs; returns the NIC names in global order."""
    nodes = max(1, math.ceil(gpus / gpus_per_node))
    nics = []
    for n in range(nodes):
        nvs = f"nvs{n}"
        g.node(nvs, kind="nvswitch", tier=-2, index=n, node=n)
        for k in range(nics_per_node):
            nic = f"nic{n}.{k}"
            g.node(nic, kind="nic", tier=-1, index=n * nics_per_node + k, node=n, rail=k)
            nics.append(nic)
        for local in range(gpus_per_node):
            gid = n * gpus_per_node + local
            if gid >= gpus:
                break
            gpu = f"gpu{gid}"
            g.node(gpu, kind="gpu", tier=-2, index=gid, node=n)
            g.link(gpu, nvs, nvlink_gbps, 0.0)
            nic = f"nic{n}.{local * nics_per_node // gpus_per_node}"
            g.link(gpu, nic, nic_gbps, 0.0)     # GPUDirect RDMA through the PCIe switch
    return nics


def _leaves_for(nics: list[str], hosts_per_leaf: int, rail_optimized: bool, nics_per_node: int
                ) -> list[list[str]]:
    """Group NIC ports into leaves: consecutive, or (rail-optimized) NIC i of each block of
    ``hosts_per_leaf`` servers on rail i's leaf."""
    if not rail_optimized:
        return [nics[i:i + hosts_per_leaf] for i in range(0, len(nics), hosts_per_leaf)]
    servers = len(nics) // nics_per_node
    out = []
    for block in range(0, servers, hosts_per_leaf):
        for rail in range(nics_per_node):
            out.append([nics[s * nics_per_node + rail]
                        for s in range(block, min(block + hosts_per_leaf, servers))])
    return out


@dataclass(frozen=True)
class FabricSize:
    """Switch counts and port arithmetic of a spec at a GPU count (shared by the builder and by
    anything that needs counts without building the graph, e.g. failure rates per switch)."""

    nics_per_node: int
    nics: int
    hosts_per_leaf: int
    leaves: int
    uplinks: int
    """Uplinks per leaf (the number of tier-1 switches a leaf connects to in a 3-tier Clos)."""
    pods: int = 1
    leaves_per_pod: int = 0
    core_up: int = 0
    """Core switches per aggregation plane (3-tier Clos with more than one pod)."""
    spines: int = 0

    @property
    def switches(self) -> int:
        if self.leaves_per_pod:
            return self.leaves + self.pods * self.uplinks + \
                (self.uplinks * self.core_up if self.pods > 1 else 0)
        return self.leaves + self.spines


def fabric_size(spec, *, gpus: int, gpus_per_node: int) -> FabricSize:
    nics_per_node = spec.nics_per_node or gpus_per_node
    up_gbps = spec.uplink_gbps or spec.nic_gbps
    nodes = max(1, math.ceil(gpus / gpus_per_node))
    nics = nodes * nics_per_node
    hpl = spec.hosts_per_leaf or DEFAULT_HOSTS_PER_LEAF
    rail = isinstance(spec, RailOptimized) or getattr(spec, "rail_optimized", False)
    if isinstance(spec, SpineLeaf) and spec.leaves:
        hpl = max(hpl, math.ceil(nics / spec.leaves))
    leaves = math.ceil(nodes / hpl) * nics_per_node if rail else math.ceil(nics / hpl)
    uplinks = max(1, math.ceil(hpl * spec.nic_gbps / (up_gbps * spec.oversubscription)))
    if isinstance(spec, Clos3):
        pod_nics = (spec.pod_gpus or gpus) * nics_per_node // gpus_per_node
        leaves_per_pod = max(1, math.ceil(pod_nics / hpl))
        return FabricSize(nics_per_node, nics, hpl, leaves, uplinks,
                          pods=math.ceil(leaves / leaves_per_pod), leaves_per_pod=leaves_per_pod,
                          core_up=max(1, math.ceil(leaves_per_pod / spec.core_oversubscription)))
    n_spines = spec.spines if getattr(spec, "spines", None) is not None else uplinks
    if leaves == 1 and not getattr(spec, "spines", None):
        n_spines = 0
    return FabricSize(nics_per_node, nics, hpl, leaves, uplinks, spines=n_spines)


def build_fabric(spec, *, gpus: int, gpus_per_node: int, nvlink_gbyte_per_s: float) -> nx.DiGraph:
    """The directed fabric graph of ``spec`` (a validated topology spec) for ``gpus`` GPUs."""
    size = fabric_size(spec, gpus=gpus, gpus_per_node=gpus_per_node)
    nics_per_node = size.nics_per_node
    up_gbps = spec.uplink_gbps or spec.nic_gbps
    lat = spec.link_latency_us * US
    g = _Draft(kind=spec.kind, gpus=gpus, gpus_per_node=gpus_per_node,
               nics_per_node=nics_per_node, transport=spec.transport,
               net_latency_us=spec.net_latency_us, host_cpu=spec.host_cpu)
    nics = _servers(g, gpus, gpus_per_node, nics_per_node, nvlink_gbyte_per_s * 8,
                    spec.nic_gbps)
    hpl = size.hosts_per_leaf
    rail = isinstance(spec, RailOptimized) or getattr(spec, "rail_optimized", False)
    buffer = spec.buffer_mib * MIB
    groups = _leaves_for(nics, hpl, rail, nics_per_node)
    assert len(groups) == size.leaves
    uplinks = size.uplinks

    def leaf(i: int, pod: int = 0) -> str:
        name = f"leaf{i}"
        g.node(name, kind="leaf", tier=0, index=i, pod=pod, buffer_bytes=buffer)
        for nic in groups[i]:
            g.link(nic, name, spec.nic_gbps, lat)
        return name

    if isinstance(spec, Clos3):
        leaves_per_pod, pods, aggs, core_up = size.leaves_per_pod, size.pods, uplinks, size.core_up
        for p in range(pods):
            for a in range(aggs):
                g.node(f"agg{p}.{a}", kind="agg", tier=1, index=p * aggs + a, pod=p,
                           buffer_bytes=buffer)
        for i in range(len(groups)):
            p = i // leaves_per_pod
            name = leaf(i, p)
            for a in range(aggs):
                g.link(name, f"agg{p}.{a}", up_gbps, lat)
        if pods > 1:
            for a in range(aggs):
                for c in range(core_up):
                    core = f"core{a}.{c}"
                    g.node(core, kind="core", tier=2, index=a * core_up + c, pod=-1,
                               buffer_bytes=buffer)
                    for p in range(pods):
                        g.link(f"agg{p}.{a}", core, up_gbps, lat)
        return g.graph()

    n_spines = size.spines
    for s in range(n_spines):
        g.node(f"spine{s}", kind="spine", tier=1, index=s, pod=0, buffer_bytes=buffer)
    per_spine = max(1, math.ceil(uplinks / max(n_spines, 1)))   # parallel cables if few spines
    # an oversubscribed leaf with more spines than its uplink budget: every leaf still reaches
    # every spine, the budget spread over the cables, so the ratio asked for holds
    cable_gbps = up_gbps
    if spec.oversubscription > 1 and n_spines > uplinks:
        cable_gbps = hpl * spec.nic_gbps / spec.oversubscription / n_spines
    for i in range(len(groups)):
        name = leaf(i)
        for s in range(n_spines):
            for _ in range(per_spine):
                g.link(name, f"spine{s}", cable_gbps, lat)
    return g.graph()
