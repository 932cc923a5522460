"""How long the data loaders of one node take to produce one training step's batches.

A loader is a producer pipelined with the step: its workers read samples from storage and
assemble them on the CPU while the GPUs train on earlier batches (PyTorch DataLoader with
``num_workers`` processes and ``prefetch_factor``). In a steady state it delivers a step's
batches in ``max(CPU time, storage time)``; with prefetching the step waits only for what the
loader cannot hide, ``max(0, load - step)``, and without it for all of it. Only the first and
last pipeline stages consume batches (tokens; labels and loss mask), so they are where a slow
loader stalls the pipeline.

Who loads (``data.loader``) sets how many loaders share a node's cores and storage link and how
often a sample is read: every GPU (plain DDP / FSDP loops, MegaScale's baseline), tensor-
parallel rank 0 with a broadcast (Megatron-LM ``get_batch``), or one loader per machine into
shared memory (MegaScale, Jiang et al. 2024, arXiv 2402.15627, section 3.5).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.config.data import DataPipeline
from workloads.units import GIGA

INDEXED_DATASET_UINT16_VOCAB = 65_500
"""Megatron's indexed dataset stores token ids as uint16 below this vocabulary size and int32
above (megatron/core/datasets/indexed_dataset.py, DType.optimal_dtype)."""


@dataclass(frozen=True)
class LoaderTime:
    """One node's loaders over one step (seconds); ``load_s`` = max(cpu_s, storage_s)."""

    loaders_per_node: int
    samples_per_loader: int
    cpu_s: float
    storage_s: float
    overlapped: bool
    """Loading runs behind the step (workers >= 1 and prefetch >= 1)."""

    @property
    def load_s(self) -> float:
        return max(self.cpu_s, self.storage_s)


def token_bytes(vocab_size: int) -> int:
    """Bytes per token id in Megatron's indexed dataset (:data:`INDEXED_DATASET_UINT16_VOCAB`)."""
    return 2 if vocab_size < INDEXED_DATASET_UINT16_VOCAB else 4


def loader_time(data: DataPipeline, *, tp: int, cp: int, dp: int, gpus_per_node: int,
                global_batch: int, seq_len: int, vocab_size: int) -> LoaderTime:
    """The loaders of one node that holds first-stage GPUs, over one step.

    Each data-parallel replica consumes ``global_batch / dp`` samples per step; a node holds
    ``gpus_per_node / (tp x cp)`` replicas' first stages (at least a part of one). per_gpu runs
    a loader on every GPU, per_tp_group one per TP group (each CP rank loads the whole sample
    and keeps its slice, as Megatron does), per_node one for all of them.
    """
    per_replica = global_batch // dp
    replicas = max(1, gpus_per_node // (tp * cp))
    loaders, samples = {
        "per_gpu": (gpus_per_node, per_replica),
        "per_tp_group": (max(1, gpus_per_node // tp), per_replica),
        "per_node": (1, per_replica * replicas),
    }[data.loader]
    sample_bytes = data.bytes_per_sample or seq_len * token_bytes(vocab_size)
    storage_s = loaders * samples * sample_bytes / (data.storage_gbyte_per_s * GIGA)
    workers = max(data.workers, 1)          # 0: the training process loads, on one core
    if data.cpu_cores_per_node is not None:
        workers = min(workers, data.cpu_cores_per_node / loaders)
    cpu_s = samples * data.cpu_ms_per_sample * 1e-3 / workers
    return LoaderTime(loaders_per_node=loaders, samples_per_loader=samples, cpu_s=cpu_s,
                      storage_s=storage_s, overlapped=data.workers >= 1 and data.prefetch >= 1)
