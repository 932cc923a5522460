"""Fabric work reused across the points of a sweep: the compiled fabric, and every collective's
time, content-addressed.

A sweep's layouts share most of their fabric collectives: every layout with the same (tp, cp,
pp) lays out the same DP groups, every micro-batch size the same pipeline sends. A collective's
time on the fabric depends only on the fabric (:meth:`simulator.network.fabric.Fabric.digest`),
the routing, queue pairs, congestion-control settings and seed, NCCL's algorithm, the kind, the
GPUs of every group and the bytes; :func:`collective_key` hashes exactly those (with the
calibration id and :data:`CACHE_VERSION`), so a hit is the same number the fabric would give
again, in any process, in any order: a resumed sweep, a Dask worker and a fresh run agree
(tested). Kept in memory per worker and, with a directory, on disk per sweep (one small file a
collective, written atomically, so workers share it and a killed sweep leaves no torn entry).

Only the time is kept: a sweep asks for numbers, not link frames (``simulate(frames=False)``).
The worker also remembers executed steps by the content of their compiled programs
(:func:`simulator.arrays.content_digest`), in memory only, at screening and flow fidelity: the
analytic engine costs less than the digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

from simulator.calibration import CALIBRATION_ID, CHANNELS_PER_NIC_DEFAULT
from simulator.config.scenario import Scenario
from simulator.network.build import build_fabric_for
from simulator.network.fabric import Fabric

CACHE_VERSION = 1
"""Bumped whenever a change in the fabric code moves any collective's time: old entries on disk
then no longer match."""

FABRICS_KEPT = 2
"""Compiled fabrics a worker keeps (a 131,072-GPU fabric is a few hundred MB)."""

STEPS_KEPT = 4096
"""Executed steps a worker remembers (without timelines, a few KB each)."""


def collective_key(fabric: Fabric, kind: str, groups: list[np.ndarray], nbytes: float, *,
                   routing: str, queue_pairs: int, algorithm: str, net, seed: int,
                   protocol: str = "auto",
                   channels_per_nic: int = CHANNELS_PER_NIC_DEFAULT,
                   split_data_on_qps: bool = False) -> str:
    """The content address of one fabric collective (every group of it at once)."""
    h = hashlib.sha256(f"{CACHE_VERSION} {CALIBRATION_ID} {fabric.digest()} {kind} "
                       f"{float(nbytes)!r} {routing} {queue_pairs} {split_data_on_qps} "
                       f"{algorithm} {protocol} {channels_per_nic}".encode())
    # the congestion model's settings and its seeded draws; max-min has neither
    h.update(b"maxmin" if net is None else f"{net.model_dump_json()} {seed}".encode())
    h.update(np.fromiter((len(g) for g in groups), np.int64, len(groups)).tobytes())
    h.update(np.concatenate(groups).astype(np.int64, copy=False).tobytes() if groups else b"")
    return h.hexdigest()


class StepCache:
    """What a sweep worker keeps between points: compiled fabrics (by the scenario fields they
    are built from) and collective times (memory, and ``directory`` if given)."""

    def __init__(self, directory: str | Path | None = None):
        self.directory = Path(directory) if directory is not None else None
        self.times: dict[str, float] = {}
        self.fabrics: OrderedDict[str, Fabric] = OrderedDict()
        self.solved = 0
        """Collectives this worker ran on the fabric (misses)."""
        self.reused = 0
        """Collectives answered from memory or disk (hits)."""
        self.steps: OrderedDict[str, object] = OrderedDict()
        """Executed steps by the content of what ran (the compiled programs and the fidelity):
        layouts that compile to the same programs (e.g. selective recomputation that
        recomputes nothing under flash attention) run the executor once."""

    def step(self, key: str):
        """The memo of the executed step ``key``, or None."""
        return _recall(self.steps, key)

    def keep_step(self, key: str, trace) -> None:
        _remember(self.steps, key, trace, STEPS_KEPT)

    # ---- fabrics ----
    def fabric_for(self, scenario: Scenario) -> Fabric:
        """The scenario's fabric, compiled once per worker for every point that shares its
        cluster, faults and seed."""
        key = json.dumps([scenario.cluster.model_dump(mode="json"),
                          scenario.faults.model_dump(mode="json"), scenario.seed],
                         sort_keys=True)
        fabric = _recall(self.fabrics, key)
        if fabric is None:
            fabric = build_fabric_for(scenario)
            _remember(self.fabrics, key, fabric, FABRICS_KEPT)
        return fabric

    # ---- collective times ----
    def get(self, key: str) -> float | None:
        t = self.times.get(key)
        if t is None and self.directory is not None:
            try:
                t = float((self.directory / key[:2] / key).read_text())
            except (OSError, ValueError):
                t = None
            if t is not None:
                self.times[key] = t
        if t is not None:
            self.reused += 1
        return t

    def put(self, key: str, time_s: float) -> None:
        self.solved += 1
        self.times[key] = time_s
        if self.directory is None:
            return
        folder = self.directory / key[:2]
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(repr(float(time_s)))
        os.replace(tmp, folder / key)


def _recall(kept: OrderedDict, key: str):
    """``kept[key]`` (now the most recently used), or None."""
    hit = kept.get(key)
    if hit is not None:
        kept.move_to_end(key)
    return hit


def _remember(kept: OrderedDict, key: str, value, limit: int) -> None:
    """Keep ``value``, forgetting the least recently used beyond ``limit`` entries."""
    kept[key] = value
    while len(kept) > limit:
        kept.popitem(last=False)
