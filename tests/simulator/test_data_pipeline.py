"""The data loaders (simulator/step/data_pipeline.py): what a node reads and assembles per step
against closed forms, and a loader that cannot keep up pacing the step."""

from __future__ import annotations

import pytest

from simulator import Scenario, simulate
from simulator.config.data import DataPipeline
from simulator.step.data_pipeline import loader_time
from tests.conftest import small_scenario

SHAPE = dict(tp=2, cp=1, dp=32, gpus_per_node=8, global_batch=256, seq_len=4096,
             vocab_size=128_256)
"""8 GPUs per node in 4 TP groups of 2; each replica takes 256 / 32 = 8 samples per step."""


def _load(**data) -> object:
    return loader_time(DataPipeline(**data), **SHAPE)


def test_who_loads_sets_the_reads_and_the_cpu_work_of_a_node():
    """A node of 4 TP groups (4 replicas' first stages): per_gpu reads every sample once per
    GPU (8 x 8 samples), per_tp_group once per TP group (4 x 8), per_node once (32 samples, one
    loader); samples of 4,096 int32 tokens (vocabulary above 65,500)."""
    sample = 4096 * 4
    rate = 2e9
    gpu = _load(loader="per_gpu", storage_gbyte_per_s=2.0, cpu_ms_per_sample=1.0, workers=2)
    tp = _load(loader="per_tp_group", storage_gbyte_per_s=2.0, cpu_ms_per_sample=1.0, workers=2)
    node = _load(loader="per_node", storage_gbyte_per_s=2.0, cpu_ms_per_sample=1.0, workers=2)
    assert gpu.storage_s == pytest.approx(8 * 8 * sample / rate)
    assert tp.storage_s == pytest.approx(4 * 8 * sample / rate)
    assert node.storage_s == pytest.approx(32 * sample / rate)
    # CPU: each loader's samples over its workers; the one per-node loader assembles all 32
    assert gpu.cpu_s == tp.cpu_s == pytest.approx(8 * 1e-3 / 2)
    assert node.cpu_s == pytest.approx(32 * 1e-3 / 2)
    # a vocabulary under 65,500 is stored as uint16: half the bytes
    small = loader_time(DataPipeline(loader="per_node", storage_gbyte_per_s=2.0),
                        **{**SHAPE, "vocab_size": 51_200})
    assert small.storage_s == pytest.approx(node.storage_s / 2)


def test_workers_share_the_cores_of_a_node():
    """8 per-GPU loaders with 4 workers each want 32 cores; with 8 cores each gets one."""
    free = _load(loader="per_gpu", workers=4)
    tight = _load(loader="per_gpu", workers=4, cpu_cores_per_node=8)
    assert tight.cpu_s == pytest.approx(4 * free.cpu_s)
    assert not _load(workers=0).overlapped and not _load(prefetch=0).overlapped
    assert _load().overlapped


def _scenario(**data) -> Scenario:
    return Scenario.from_dict(small_scenario(fidelity="screening", data=data))


def test_a_loader_slower_than_the_step_paces_it():
    """Prefetching hides a loader up to the step time; past it the step lasts as long as the
    node's loaders take (they are a producer the step waits on), and the breakdown says so.
    MegaScale's per-node loader reads each sample once instead of once per TP rank."""
    base = simulate(_scenario(), frames=False)
    assert base.breakdown_s["data_load"] == 0
    # tp 2: 4 TP groups per node, per_gpu reads each sample twice
    slow = dict(loader="per_gpu", bytes_per_sample=50_000_000, storage_gbyte_per_s=1.0)
    lay = simulate(_scenario(**slow), frames=False)
    load = loader_time(DataPipeline(**slow), tp=2, cp=1, dp=16, gpus_per_node=8,
                       global_batch=64, seq_len=2048, vocab_size=51_200).load_s
    assert load > 2 * base.step_time_s
    assert lay.step_time_s == pytest.approx(load, rel=1e-9)
    assert lay.breakdown_s["data_load"] == pytest.approx(load - base.step_time_s, rel=1e-9)
    node = simulate(_scenario(**{**slow, "loader": "per_node"}), frames=False)
    assert node.step_time_s == pytest.approx(load / 2, rel=1e-9)
    timeline = simulate(_scenario(**slow)).timeline
    wait = timeline.query("stream == 'data'")
    assert wait.end_s.max() == pytest.approx(load - base.step_time_s)
    assert timeline.end_s.max() == pytest.approx(load)


def test_a_synchronous_loader_adds_its_whole_time():
    """workers: 0 loads in the training process before each micro-batch: the step grows by
    the loader's time per step even when it is far shorter than the step (one pipeline stage,
    so the loads are all in series); behind the step, workers hide it."""
    def run(**data):
        sc = small_scenario(fidelity="screening", data=data)
        sc["parallel"] = {**sc["parallel"], "pp": 1}
        return simulate(Scenario.from_dict(sc), frames=False)

    base = run()
    cpu = dict(workers=0, cpu_ms_per_sample=20.0)
    sync = run(**cpu)
    load = 64 / 32 * 20e-3                         # 2 samples per replica, on one core
    assert sync.step_time_s - base.step_time_s == pytest.approx(load, rel=1e-6)
    assert sync.breakdown_s["data_load"] == pytest.approx(load, rel=1e-6)
    assert run(**{**cpu, "workers": 2}).step_time_s == base.step_time_s
