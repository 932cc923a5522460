"""Fabrics to simulate on: a topology spec built (networkx) and compiled (numpy), with a
scenario's faults applied."""

from __future__ import annotations

import numpy as np

from simulator.calibration import nvlink_efficiency
from simulator.config.scenario import Scenario
from simulator.errors import FabricError, ScenarioError
from simulator.network.fabric import Fabric, compile_fabric
from topologies.builders import build_fabric
from topologies.gpus import GPUSpec


def make_fabric(spec, *, gpus: int, gpus_per_node: int, gpu: GPUSpec, seed: int = 0) -> Fabric:
    graph = build_fabric(spec, gpus=gpus, gpus_per_node=gpus_per_node,
                         nvlink_gbyte_per_s=gpu.nvlink_gbyte_per_s)
    graph.graph["nvlink_efficiency"] = nvlink_efficiency(gpu.name)
    return compile_fabric(graph, rng=np.random.default_rng(seed))


def build_fabric_for(scenario: Scenario) -> Fabric:
    """The scenario's fabric with its faults applied (names as ``clustersim topology`` lists)."""
    c = scenario.cluster
    graph = build_fabric(c.topology, gpus=c.gpus, gpus_per_node=c.gpus_per_node,
                         nvlink_gbyte_per_s=c.gpu.nvlink_gbyte_per_s)
    graph.graph["nvlink_efficiency"] = nvlink_efficiency(c.gpu.name)
    fabric = compile_fabric(graph, rng=np.random.default_rng(scenario.seed))
    f = scenario.faults

    def cable(text: str, field: str) -> tuple[str, str]:
        a, sep, b = text.partition("-")
        if not sep or not a or not b:
            raise ScenarioError(f"{field}: {text!r} is not a cable name like leaf3-spine1",
                                field=field)
        return a, b

    try:
        links = [cable(x, "faults.failed_links") for x in f.failed_links]
        fabric = fabric.with_failures(links=links, switches=f.failed_switches)
        factors = {cable(d.link, "faults.degraded_links"): d.capacity_factor
                   for d in f.degraded_links}
        fabric = fabric.with_capacity(factors)
    except FabricError as err:
        raise ScenarioError(f"faults: {err}", field="faults") from None
    cut = fabric.cut_off_gpus()
    if len(cut):
        down = sorted({n for g in cut[:8] for n in fabric.failed_cables(g)})
        raise ScenarioError(
            f"faults: {'GPU' if len(cut) == 1 else 'GPUs'} {_ranges(cut)} "
            f"{'loses its' if len(cut) == 1 else 'lose their'} only path to the other GPUs "
            f"({', '.join(down)} down); the job cannot run there (NCCL does not route a dead "
            f"NIC's or NVLink port's traffic through another GPU): remove the GPUs' node or "
            f"the fault",
            field="faults")
    return fabric


def _ranges(ids) -> str:
    """GPU ids (sorted) as compact ranges: 0-7, 16."""
    ids = np.asarray(ids)
    cut = np.flatnonzero(np.diff(ids) != 1) + 1                  # where a run breaks
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in np.split(ids, cut))
