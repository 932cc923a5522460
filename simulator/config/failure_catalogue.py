"""Failure catalogue: what interrupts a training job, how often, and how it is noticed.

Rates are interruptions per 1,000 unit-days, where the unit is what the failure scales with
(a GPU, a node, a NIC port, a switch, or the job itself), so a preset measured on one cluster
predicts another by its counts. Presets (../shared/validation/reliability.md):

* ``llama3-405b``: Llama 3 Table 5 (arXiv 2407.21783, section 3.3.4): 419 unexpected
  interruptions by root cause plus 47 planned ones in a 54-day snapshot on 16,384 H100 GPUs
  (2,048 nodes, one 400 Gb/s NIC per GPU, the llama3-24k fabric). Each cause's rate is its count
  / (54 days x the snapshot's units of that cause's kind); planned interruptions are per job.
* ``meta-rsc1`` / ``meta-rsc2``: Kokolis et al. (HPCA 2025) node failure rates r_f = 6.50 and
  2.34 per 1,000 node-days, one component covering all causes (the paper's job MTTF projection
  1 / (nodes x r_f) is exactly this model).
* ``none``: no failures (checkpoint overhead only).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import TypeAdapter

from topologies.builders import fabric_size
from topologies.spec import TopologySpec, topology_mapping


@dataclass(frozen=True)
class Component:
    name: str
    """Identifier users override rates by (``failures.rates: {faulty_gpu: 0.5}``)."""
    label: str
    category: str
    """Llama 3 Table 5's category (GPU, host, network, dependency, maintenance, unknown) or
    ``planned``."""
    unit: str
    rate: float
    """Interruptions per 1,000 unit-days."""
    detection: str
    """``heartbeat``: the process dies or the agent reports it (crash, Xid, link down);
    ``watchdog``: the job hangs until the NCCL watchdog times out; ``planned``: announced."""
    replace: bool
    """The job restarts on a spare node (hardware) rather than on the same nodes (software)."""

    @property
    def planned(self) -> bool:
        return self.detection == "planned"


@dataclass(frozen=True)
class JobCounts:
    """What a job's failure rates scale with."""

    gpus: int
    nodes: int
    nics: int
    switches: int

    def units(self, unit: str) -> int:
        return {"gpu": self.gpus, "node": self.nodes, "nic": self.nics,
                "switch": self.switches, "job": 1}[unit]


LLAMA3_DAYS = 54
LLAMA3_COUNTS = JobCounts(gpus=16_384, nodes=2_048, nics=16_384, switches=0)
"""The Llama 3 snapshot: 16,384 H100 in 2,048 Grand Teton nodes, one 400 Gb/s RoCE NIC per GPU.
``switches`` is filled from the llama3-24k fabric preset at 16,384 GPUs (see :func:`presets`)."""

# (name, label, category, unit, count in 54 days, detection, replace) -- Llama 3 Table 5
LLAMA3_TABLE5 = (
    ("faulty_gpu", "Faulty GPU", "GPU", "gpu", 148, "heartbeat", True),
    ("gpu_hbm", "GPU HBM3 memory", "GPU", "gpu", 72, "heartbeat", True),
    ("software_bug", "Software bug", "dependency", "node", 54, "heartbeat", False),
    ("network", "Network switch / cable", "network", "switch", 35, "watchdog", True),
    ("host_maintenance", "Host maintenance (unplanned)", "maintenance", "node", 32,
     "heartbeat", True),
    ("gpu_sram", "GPU SRAM memory", "GPU", "gpu", 19, "heartbeat", True),
    ("gpu_system_processor", "GPU system processor", "GPU", "gpu", 17, "heartbeat", True),
    ("nic", "NIC", "host", "nic", 7, "heartbeat", True),
    ("nccl_watchdog", "NCCL watchdog timeout", "unknown", "node", 7, "watchdog", False),
    ("silent_data_corruption", "Silent data corruption", "GPU", "gpu", 6, "watchdog", True),
    ("gpu_thermal", "GPU thermal interface / sensor", "GPU", "gpu", 6, "heartbeat", True),
    ("ssd", "SSD", "host", "node", 3, "heartbeat", True),
    ("power_supply", "Power supply", "host", "node", 3, "heartbeat", True),
    ("server_chassis", "Server chassis", "host", "node", 2, "heartbeat", True),
    ("io_expansion", "IO expansion board", "host", "node", 2, "heartbeat", True),
    ("dependency", "Dependency", "dependency", "node", 2, "heartbeat", False),
    ("cpu", "CPU", "host", "node", 2, "heartbeat", True),
    ("system_memory", "System memory", "host", "node", 2, "heartbeat", True),
)
LLAMA3_PLANNED = 47
"""Planned interruptions in the same 54 days (firmware upgrades, configuration or dataset
changes), a property of the job's operation, not of its size."""

META_RSC1_PER_1K_NODE_DAYS = 6.50
META_RSC2_PER_1K_NODE_DAYS = 2.34


def _llama3(switches: int) -> tuple[Component, ...]:
    counts = replace(LLAMA3_COUNTS, switches=switches)
    out = [Component(n, label, cat, unit, 1000 * c / (LLAMA3_DAYS * counts.units(unit)), det, rep)
           for n, label, cat, unit, c, det, rep in LLAMA3_TABLE5]
    out.append(Component("planned", "Planned maintenance", "planned", "job",
                         1000 * LLAMA3_PLANNED / LLAMA3_DAYS, "planned", False))
    return tuple(out)


def _node(rate: float) -> tuple[Component, ...]:
    return (Component("node", "Node failure (all causes)", "node", "node", rate, "heartbeat",
                      True),)


PRESETS = ("llama3-405b", "meta-rsc1", "meta-rsc2", "none")


def llama3_switches() -> int:
    """Switches of the llama3-24k fabric preset at the snapshot's 16,384 GPUs."""
    spec = TypeAdapter(TopologySpec).validate_python(topology_mapping("llama3-24k"))
    return fabric_size(spec, gpus=LLAMA3_COUNTS.gpus, gpus_per_node=8).switches


def catalogue(preset: str) -> tuple[Component, ...]:
    if preset == "llama3-405b":
        return _llama3(llama3_switches())
    if preset == "meta-rsc1":
        return _node(META_RSC1_PER_1K_NODE_DAYS)
    if preset == "meta-rsc2":
        return _node(META_RSC2_PER_1K_NODE_DAYS)
    if preset == "none":
        return ()
    raise ValueError(f"unknown failure preset {preset!r}; expected one of {PRESETS}")
