"""Fabric descriptions, GPU catalogue and (networkx) topology builders.

A library: it never imports the simulator (design.md, "Layout").
"""

from topologies.gpus import GPUSpec, list_gpus, load_gpu
from topologies.spec import TopologySpec, list_topologies, topology_mapping

__all__ = ["GPUSpec", "TopologySpec", "list_gpus", "list_topologies", "load_gpu",
           "topology_mapping"]
