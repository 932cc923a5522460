"""Validated fabric specifications: the `cluster.topology` section of a scenario.

A spec only describes the fabric; the builders (networkx graphs) turn it into switches and
links. Sizes left out default from the cluster's GPU count when the fabric is built.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workloads.presets import preset_mapping, yaml_presets

_BIG = 10**7


class _FabricBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str | None = None
    source: str | None = None
    gpu: str | None = None
    """The GPU of the published cluster a preset describes (metadata: ``nccl-tests`` and
    ``flows`` use it when ``--gpu`` is not given; a scenario's GPU is ``cluster.gpu``)."""
    transport: Literal["roce", "ib", "efa"] = "roce"
    """``roce``: switches hash each packet's 5-tuple (ECMP over the queue pairs' source ports);
    ``ib``: InfiniBand, whose subnet manager gives every switch one output port per
    destination (fat-tree routing, d-mod-k), so ``routing: ecmp`` follows the destination;
    ``efa``: AWS Elastic Fabric Adapter, whose SRD transport sprays every message's packets
    over many paths (Shalev et al., IEEE Micro 2020), so ``routing: ecmp`` sprays; NCCL runs
    over it through the aws-ofi-nccl plugin, whose reported latency NCCL adds per network
    hop (``net_latency_us``)."""
    sharp: bool = False
    """In-network reduction (InfiniBand SHARP in Quantum switches, with NCCL's CollNet plugin
    enabled, NCCL_COLLNET_ENABLE=1): all-reduces across nodes may run with the switches
    reducing, each GPU's NIC carrying 1 / (its node's GPUs) of the data each way however many
    nodes take part (simulator.network.alpha_beta.AlphaBeta.sharp_algbw). Needs
    ``transport: ib``."""
    host_cpu: Literal["intel", "amd", "arm"] = "intel"
    """The hosts' CPU, which NCCL's tuner reads (tuning.cc): an inter-node ring pays a network
    post overhead per step (getNetOverhead: 1 us on Intel and non-x86 hosts, 2 us on AMD,
    three times under Simple), and LL's ceiling across nodes is the CPU's (llMaxBws: Intel
    39 / 20.4 GB/s on 2 / 3+ nodes, AMD 22.5 / 19.0). Default: NCCL's non-AMD value."""
    net_latency_us: float | None = Field(default=None, ge=0, le=1e5)
    """Latency the NCCL network plugin reports (ncclNetProperties_t.latency), added by NCCL to
    every network hop of its cost model; default by transport (ib / roce 0, efa 75 us:
    aws-ofi-nccl's p5 value; 35 on p5en / P6)."""
    nic_gbps: float = Field(default=400, gt=0, le=1e5)
    """Line rate of one NIC port, Gb/s (bits)."""
    nics_per_node: int | None = Field(default=None, gt=0, le=1024)
    """Scale-out NICs per node; default one per GPU (cluster.gpus_per_node)."""
    uplink_gbps: float | None = Field(default=None, gt=0, le=1e5)
    """Line rate of switch-to-switch links; default nic_gbps."""
    link_latency_us: float = Field(default=1.0, ge=0, le=1e4)
    """One-way latency of one hop (propagation plus switch cut-through)."""
    buffer_mib: float = Field(default=32, gt=0, le=1e5)
    """Shared packet buffer per switch (Tomahawk-3-class: 32 MiB)."""

    @model_validator(mode="after")
    def _sharp_is_infiniband(self):
        if self.sharp and self.transport != "ib":
            raise ValueError(f"sharp needs transport ib (SHARP reduces in InfiniBand switches; "
                             f"transport is {self.transport})")
        return self


class SpineLeaf(_FabricBase):
    """Two-tier leaf-spine Clos."""

    kind: Literal["spine-leaf"]
    leaves: int | None = Field(default=None, gt=0, le=_BIG)
    spines: int | None = Field(default=None, ge=0, le=_BIG)
    """Spine switches; 0 = a single leaf (incast tests)."""
    hosts_per_leaf: int | None = Field(default=None, gt=0, le=_BIG)
    """NIC ports attached to one leaf."""
    oversubscription: float = Field(default=1.0, ge=1.0, le=1024)
    """Leaf downlink : uplink capacity."""


class Clos3(_FabricBase):
    """Three-tier Clos: leaves and aggregation switches form pods, a core joins the pods."""

    kind: Literal["clos3"]
    pod_gpus: int | None = Field(default=None, gt=0, le=_BIG)
    """GPUs per pod (Llama 3: 3,072)."""
    hosts_per_leaf: int | None = Field(default=None, gt=0, le=_BIG)
    oversubscription: float = Field(default=1.0, ge=1.0, le=1024)
    """Leaf downlink : uplink capacity."""
    core_oversubscription: float = Field(default=1.0, ge=1.0, le=1024)
    """Aggregation downlink : core uplink capacity (Llama 3: 7)."""
    rail_optimized: bool = False
    """NIC i of every node goes to rail i's leaf (MegaScale's multi-rail ToRs)."""


class RailOptimized(_FabricBase):
    """Rail-optimized two-tier fabric: NIC i of every node attaches to the leaves of rail i."""

    kind: Literal["rail-optimized"]
    hosts_per_leaf: int | None = Field(default=None, gt=0, le=_BIG)
    spines: int | None = Field(default=None, ge=0, le=_BIG)
    oversubscription: float = Field(default=1.0, ge=1.0, le=1024)


TopologySpec = Annotated[Union[SpineLeaf, Clos3, RailOptimized], Field(discriminator="kind")]


def _presets() -> dict[str, dict]:
    return {k: v for k, v in yaml_presets("topologies", "presets").items() if k != "gpus"}


def list_topologies() -> list[str]:
    return sorted(_presets())


def topology_mapping(name: str) -> dict:
    """Raw mapping of topology preset ``name`` (a fresh dict)."""
    return preset_mapping(_presets(), name, "topology preset")
