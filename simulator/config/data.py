"""The training-data pipeline: who loads the batches, with how many workers, from what storage."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from simulator.calibration import DATA_CPU_MS_PER_SAMPLE, DATA_STORAGE_GBYTE_PER_S


class DataPipeline(BaseModel):
    """Data loaders (:mod:`simulator.step.data_pipeline`): a loader that cannot keep up with the
    step stalls the first and last pipeline stages, which consume its batches."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    loader: Literal["per_gpu", "per_tp_group", "per_node"] = "per_tp_group"
    """Where loaders run. per_tp_group: tensor-parallel rank 0 loads each micro-batch and
    broadcasts it to its TP group (Megatron-LM); per_gpu: every rank loads its own copy
    (plain DDP / FSDP loops, MegaScale's baseline), so a node reads each sample once per TP
    rank; per_node: one loader per machine into shared memory, each GPU copies its part
    (MegaScale section 3.5, redundant data-loader elimination)."""
    workers: int = Field(default=2, ge=0, le=1024)
    """Worker processes per loader (Megatron-LM --num-workers, default 2). 0 loads in the
    training process itself, on the critical path (PyTorch num_workers=0)."""
    prefetch: int = Field(default=2, ge=0, le=1024)
    """Batches each worker prepares ahead (PyTorch DataLoader prefetch_factor, default 2).
    0 waits for every batch: loading is on the critical path. Any depth >= 1 overlaps loading
    with the step; in a steady state without loader jitter a deeper queue hides no more."""
    cpu_ms_per_sample: float = Field(default=DATA_CPU_MS_PER_SAMPLE, gt=0, le=1e6)
    """CPU time for one worker to read and assemble one sample (calibration.DATA_CPU_MS_PER_SAMPLE
    for pre-tokenized text)."""
    storage_gbyte_per_s: float = Field(default=DATA_STORAGE_GBYTE_PER_S, gt=0, le=1e5)
    """Storage read rate per node, GB/s (calibration.DATA_STORAGE_GBYTE_PER_S)."""
    bytes_per_sample: int | None = Field(default=None, gt=0, le=10**12)
    """Bytes read from storage per sample; None: seq_len tokens of Megatron's indexed dataset
    (2 B per token for vocabularies under 65,500, 4 B above)."""
    cpu_cores_per_node: int | None = Field(default=None, gt=0, le=100_000)
    """Host cores the loaders' workers share; None: every worker has a core of its own."""
