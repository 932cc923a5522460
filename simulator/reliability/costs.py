"""Durations of one job's checkpoints and recoveries, from its accounting and its cluster.

Checkpoint state is what Megatron-LM saves: bf16 weights plus the optimizer's fp32 master
weights and moments (workloads.memory's BYTES_WEIGHT + BYTES_OPTIMIZER: 14 B per parameter with
Adam; BLOOM-176B's 2.3 TB is 13 B per parameter). Each GPU snapshots what it holds (weights and
optimizer shard of its stage, from the memory accounting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from simulator.config.failure_catalogue import Component, JobCounts, catalogue
from simulator.config.failures import CheckpointConfig, FailuresConfig, Recovery
from simulator.reliability.closed_form import daly_interval
from topologies.builders import fabric_size
from workloads.memory import BYTES_WEIGHT, optimizer_state_bytes
from workloads.units import GIGA

INIT_REFERENCE_GPUS = 2048
"""MegaScale (arXiv 2402.15627, section 3.5) measured communication-group initialisation on
2,048 GPUs."""
INIT_AT_REFERENCE_S = {"tcpstore": 1047.0, "redis": 361.0, "barrier-free": 5.0}
INIT_EXPONENT = {"tcpstore": 2, "redis": 2, "barrier-free": 1}
"""Global barriers make initialisation O(n^2); removing them O(n) (MegaScale). The barrier-free
line predicts 25 s at 10,240 GPUs, matching the paper's 'under 30 s on more than 10,000'."""
HOST_COPY_EFFICIENCY = 0.8
"""Pinned device-to-host copies reach about 80 % of the PCIe link's rate (*assumption*, typical
of cudaMemcpyAsync into pinned buffers)."""
NIC_EFFICIENCY = 0.9
"""Share of the NIC line rate a bulk broadcast or peer copy sustains (*assumption*)."""


def init_s(mode: str, gpus: int) -> float:
    return INIT_AT_REFERENCE_S[mode] * (gpus / INIT_REFERENCE_GPUS) ** INIT_EXPONENT[mode]


@dataclass(frozen=True)
class Costs:
    """Everything the Monte-Carlo needs, in seconds unless named otherwise."""

    components: tuple[Component, ...]
    rates_per_s: np.ndarray
    """[component] job-level interruption rate (rate x units / 1000 / 86400)."""
    detect_s: np.ndarray
    """[component] time to notice the failure."""
    diagnose_s: np.ndarray
    replace: np.ndarray
    planned: np.ndarray
    swap_s: float
    restart_s: float
    """launch + communication init + checkpoint reload."""
    init_s: float
    reload_s: float
    state_bytes: float
    gpu_state_bytes: float
    blocking_s: float
    """Training stalls this long per checkpoint."""
    persist_s: float
    """After the stall, the checkpoint becomes durable this much later (0 for sync)."""
    planned_save_s: float
    """A planned stop writes a checkpoint first (synchronously) and loses no work."""
    interval_s: float
    """Training time between checkpoints (whole steps)."""
    step_time_s: float
    spares: int | None
    repair_s: float
    counts: JobCounts

    @property
    def unexpected_rate_per_s(self) -> float:
        return float(self.rates_per_s[~self.planned].sum())

    @property
    def mtbf_s(self) -> float:
        r = self.unexpected_rate_per_s
        return math.inf if r == 0 else 1.0 / r

    def with_interval(self, interval_s: float) -> "Costs":
        return replace(self, interval_s=_whole_steps(interval_s, self.step_time_s))

    def with_strategy(self, strategy: str, checkpoint: CheckpointConfig, gpu_pcie: float,
                      nic_bytes_per_s: float) -> "Costs":
        b, p = checkpoint_times(strategy, self.state_bytes, self.gpu_state_bytes, checkpoint,
                                gpu_pcie, nic_bytes_per_s)
        return replace(self, blocking_s=b, persist_s=p)


def _whole_steps(interval_s: float, step_s: float) -> float:
    return max(1, round(interval_s / step_s)) * step_s


def checkpoint_times(strategy: str, state_bytes: float, gpu_state_bytes: float,
                     ck: CheckpointConfig, pcie_gbyte_per_s: float, nic_bytes_per_s: float
                     ) -> tuple[float, float]:
    """(blocking, persist) seconds of one checkpoint."""
    write = state_bytes / (ck.write_gbyte_per_s * GIGA)
    copy = gpu_state_bytes / (pcie_gbyte_per_s * GIGA * HOST_COPY_EFFICIENCY)
    if strategy == "sync":
        return write, 0.0
    if strategy == "two-stage":
        return copy, write
    return copy, gpu_state_bytes / nic_bytes_per_s        # in-memory: replica on a peer


def job_counts(scenario) -> JobCounts:
    cl = scenario.cluster
    size = fabric_size(cl.topology, gpus=cl.gpus, gpus_per_node=cl.gpus_per_node)
    nodes = math.ceil(cl.gpus / cl.gpus_per_node)
    return JobCounts(gpus=cl.gpus, nodes=nodes, nics=nodes * size.nics_per_node,
                     switches=size.switches)


def nic_bytes_per_s(scenario) -> float:
    """Fabric bandwidth per GPU for bulk copies (line rate x NIC_EFFICIENCY)."""
    cl = scenario.cluster
    nics = cl.topology.nics_per_node or cl.gpus_per_node
    return cl.topology.nic_gbps * GIGA / 8 * nics / cl.gpus_per_node * NIC_EFFICIENCY


def job_costs(scenario, accounting, step_time_s: float, failures: FailuresConfig,
              checkpoint: CheckpointConfig) -> Costs:
    comps = catalogue(failures.preset)
    counts = job_counts(scenario)
    rate = np.array([failures.rates.get(c.name, c.rate) * counts.units(c.unit) for c in comps])
    rate = rate * failures.scale / 1000.0 / 86400.0
    rec: Recovery = failures.recovery
    detect = np.array([{"heartbeat": rec.heartbeat_s, "watchdog": rec.watchdog_timeout_s,
                        "planned": 0.0}[c.detection] for c in comps])
    planned = np.array([c.planned for c in comps], dtype=bool)
    diagnose = np.where(planned, 0.0, rec.diagnosis_s)
    replace = np.array([c.replace for c in comps], dtype=bool)

    w = scenario.workload
    params = accounting.params.total
    state = params * (BYTES_WEIGHT + optimizer_state_bytes(w.optimizer, w.moments_dtype))
    mem = accounting.memory
    gpu_state = float((mem.weights_bytes + mem.optimizer_bytes).max())
    weights_unique = params * BYTES_WEIGHT
    dp = accounting.layout.dp
    nic = nic_bytes_per_s(scenario)
    read = checkpoint.read_gbyte_per_s * GIGA
    if checkpoint.strategy == "in-memory":
        reload = gpu_state / nic                              # from a peer's host memory
    elif rec.reload == "peer":
        per_gpu_weights = float(mem.weights_bytes.max())
        reload = state / read + per_gpu_weights / nic         # one reader per DP group + bcast
    else:
        reload = (state + (dp - 1) * weights_unique) / read   # every DP replica reads weights
    init = init_s(rec.init, counts.gpus)
    pcie = scenario.cluster.gpu.pcie_gbyte_per_s
    blocking, persist = checkpoint_times(checkpoint.strategy, state, gpu_state, checkpoint,
                                         pcie, nic)
    unexpected = float(rate[~planned].sum())
    if checkpoint.interval_min == "auto":
        interval = daly_interval(blocking, 1.0 / unexpected) if unexpected > 0 else 86400.0
        interval = max(interval, persist)   # a new save waits for the previous one to persist
    else:
        interval = checkpoint.interval_min * 60.0
    return Costs(components=comps, rates_per_s=rate, detect_s=detect, diagnose_s=diagnose,
                 replace=replace, planned=planned, swap_s=rec.swap_s,
                 restart_s=rec.launch_s + init + reload, init_s=init, reload_s=reload,
                 state_bytes=state, gpu_state_bytes=gpu_state, blocking_s=blocking,
                 persist_s=persist, planned_save_s=state / (checkpoint.write_gbyte_per_s * GIGA),
                 interval_s=_whole_steps(interval, step_time_s), step_time_s=step_time_s,
                 spares=rec.spares, repair_s=rec.repair_hours * 3600.0, counts=counts)
