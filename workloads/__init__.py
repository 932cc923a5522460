"""Model architectures, parallel configuration and exact per-layer accounting.

A library: it knows nothing about the simulator (design.md, "Layout"). Everything here is
deterministic arithmetic on validated configuration objects.
"""

from workloads.model import ModelConfig
from workloads.parallel import ParallelConfig, WorkloadConfig
from workloads.presets import list_models, load_model

__all__ = ["ModelConfig", "ParallelConfig", "WorkloadConfig", "list_models", "load_model"]
