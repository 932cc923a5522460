"""Sweeps: a base scenario x a grid of dotted keys (and/or every valid parallel layout),
evaluated on a local process pool or a Dask cluster, appended to a file as points finish.

A sweep file::

    base: ../examples/gpt3-175b-1024-selene.yaml   # path (relative to this file) or a mapping
    set: [workload.global_batch=1536]               # optional overrides of the base
    grid: {parallel.recompute: [selective, full]}   # dotted key -> list of values
    auto: true                                      # every valid tp/pp/vpp/cp/ep/mb/zero/recompute
    fidelity: analytic                              # analytic | screening | flow

One row per point (``ROW_COLUMNS`` + ``breakdown_*``): the point's overrides as canonical JSON
(``point``, the resume key), ``status`` (ok / oom / invalid / error) with ``reason``, every
layout column and every result field, and the fidelity and calibration it was computed with.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simulator.config.resolve import layout_choices
from simulator.config.scenario import Scenario
from simulator.errors import ScenarioError, from_validation_error, read_input
from simulator.network.cache import StepCache
from simulator.result import BREAKDOWN_KEYS
from simulator.simulate import simulate
from simulator.step.accounting import account
from workloads.layout import divisors, make_layout
from workloads.parallel import ParallelConfig

AUTO_MAX_MICRO_BATCH = 16
"""``auto`` tries micro-batches up to this size (larger ones never win on activation memory)."""
AUTO_CP = (1, 2, 4, 8)
AUTO_ZERO = (0, 1, 2, 3)
AUTO_RECOMPUTE = ("none", "selective", "full")

ROW_COLUMNS = ["point", "status", "reason", "name", "gpus", "tp", "pp", "dp", "cp", "ep", "vpp",
               "micro_batch", "num_micro_batches", "schedule", "zero", "recompute",
               "sequence_parallel", "step_time_s", "mfu", "hfu", "tokens_per_s",
               "model_tflops_per_gpu", "bubble_fraction", "memory_gib_per_gpu", "fits_memory",
               "fidelity", "calibration", "sim_wall_s"]
"""Columns of every sweep row (then ``breakdown_<part>`` seconds, one per breakdown part)."""


def all_columns() -> list[str]:
    return ROW_COLUMNS + [f"breakdown_{k}" for k in BREAKDOWN_KEYS]


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    base: str | dict[str, Any]
    set: list[str] = Field(default_factory=list)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    auto: bool = False
    fidelity: Literal["analytic", "screening", "flow"] = "analytic"


def load_sweep(path: str | Path) -> tuple[SweepSpec, dict]:
    """The sweep spec and its base scenario mapping (validated once, here)."""
    path = Path(path)
    text = read_input(path, "sweep")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ScenarioError(f"sweep: invalid YAML in {path}", field="sweep") from None
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as err:
        e = from_validation_error(err)
        raise ScenarioError(f"sweep.{e}", field=f"sweep.{e.field}") from None
    for key, values in spec.grid.items():
        if not values:
            raise ScenarioError(f"sweep.grid.{key}: needs at least one value",
                                field=f"sweep.grid.{key}")
    if isinstance(spec.base, str):
        base_path = (path.parent / spec.base)
        text = read_input(base_path, "sweep.base")
        try:
            base = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ScenarioError(f"sweep.base: invalid YAML in {base_path}",
                                field="sweep.base") from None
    else:
        base = dict(spec.base)
    Scenario.from_dict(base, spec.set)           # the base itself must load
    for key, values in spec.grid.items():        # ... and every grid key must name a field
        _check_grid_key(base, spec.set, key, values)
    return spec, base


def _check_grid_key(base: dict, sets: list[str], key: str, values: list) -> None:
    """A grid key that names no scenario field is refused up front (else every point would be
    "invalid"): some value of it loads, or its error is about that value, not the key."""
    for value in values:
        try:
            Scenario.from_dict(base, list(sets) + [(key, value)])
            return
        except ScenarioError as err:
            if "unknown key" not in str(err) and "cannot be set" not in str(err):
                return                          # the key exists; this value breaks a rule
            last = err
    raise ScenarioError(f"sweep.grid.{key}: not a scenario field ({last})",
                        field=f"sweep.grid.{key}")


def _canon(point: dict) -> str:
    return json.dumps(point, sort_keys=True, separators=(",", ":"))


def auto_points(sc: Scenario) -> list[dict]:
    """Every layout Megatron-LM's rules allow for the scenario's GPU count (tp within a node)."""
    gpus, gpn = sc.cluster.gpus, sc.cluster.gpus_per_node
    model = sc.workload.model
    base = sc.parallel.model_dump()
    experts = getattr(model, "num_experts", None) or 1
    out = []
    for tp in divisors(math.gcd(gpn, gpus)):
        for pp in divisors(gpus // tp):
            for cp in [c for c in AUTO_CP if (gpus // (tp * pp)) % c == 0]:
                dp = gpus // (tp * pp * cp)
                for ep in [e for e in divisors(experts) if (dp * cp) % e == 0]:
                    for zero, rc in itertools.product(AUTO_ZERO, AUTO_RECOMPUTE):
                        par = {**base, "tp": tp, "pp": pp, "cp": cp, "ep": ep, "dp": "auto",
                               "zero": zero, "recompute": rc,
                               "sequence_parallel": tp > 1, "vpp": "auto",
                               "schedule": base["schedule"] if base["schedule"] in
                               ("gpipe", "zb-h1", "dualpipe") else "1f1b",
                               "first_stage_layers": None, "last_stage_layers": None}
                        try:
                            pc = ParallelConfig.model_validate(par)
                            pc_w = sc.workload.model_copy(update={"micro_batch": "auto"})
                            trial = sc.model_copy(update={"parallel": pc, "workload": pc_w})
                            pairs = layout_choices(trial)
                        except (ValueError, ValidationError):
                            continue
                        for b, v in pairs:
                            if b > AUTO_MAX_MICRO_BATCH:
                                continue
                            sched = "interleaved" if v > 1 else par["schedule"]
                            if v > 1 and par["schedule"] != "1f1b":
                                continue
                            try:
                                make_layout(pc_w, pc.model_copy(update={"vpp": v,
                                                                        "schedule": sched}),
                                            gpus=gpus, micro_batch=b, vpp=v)
                            except ValueError:
                                continue
                            out.append({"parallel.tp": tp, "parallel.pp": pp, "parallel.cp": cp,
                                        "parallel.ep": ep, "parallel.vpp": v,
                                        "parallel.schedule": sched, "parallel.zero": zero,
                                        "parallel.recompute": rc,
                                        "parallel.sequence_parallel": tp > 1,
                                        "workload.micro_batch": b})
    return out


def expand(spec: SweepSpec, base: dict) -> list[dict]:
    """Every point of the sweep: the grid's product, crossed with the auto layouts if asked."""
    keys = list(spec.grid)
    grid = [dict(zip(keys, vals)) for vals in itertools.product(*spec.grid.values())] or [{}]
    if not spec.auto:
        return grid
    out, seen = [], set()
    for g in grid:
        try:
            sc = Scenario.from_dict(base, list(spec.set) + list(g.items()))
        except ScenarioError:
            out.append(g)                       # reported as invalid when evaluated
            continue
        for a in auto_points(sc):
            point = {**g, **a}
            key = _canon(point)
            if key not in seen:
                seen.add(key)
                out.append(point)
    return out


def evaluate(base: dict, sets: list[str], point: dict, fidelity: str,
             cache: StepCache | None = None) -> dict:
    """One row: the point simulated, or why it cannot run. Never raises for a bad point.
    ``cache``: the worker's :class:`StepCache` (flow fidelity: fabrics and collective times
    shared with the sweep's other points); the row then says how many fabric collectives it
    solved and reused (``collectives_solved`` / ``collectives_reused``, not written out)."""
    row: dict[str, Any] = {c: None for c in ROW_COLUMNS}
    row["point"] = _canon(point)
    try:
        sc = Scenario.from_dict(base, list(sets) + list(point.items()) +
                                [("fidelity", fidelity)])
    except ScenarioError as err:
        row.update(status="invalid", reason=str(err), fidelity=fidelity)
        return row
    try:
        acc = account(sc)
        lay = acc.layout
        row.update(name=sc.name, gpus=lay.gpus, tp=lay.tp, pp=lay.pp, dp=lay.dp, cp=lay.cp,
                   ep=lay.ep, vpp=lay.vpp, micro_batch=lay.micro_batch,
                   num_micro_batches=lay.num_micro_batches, schedule=lay.schedule,
                   zero=lay.zero, recompute=lay.recompute,
                   sequence_parallel=lay.sequence_parallel,
                   memory_gib_per_gpu=acc.memory_gib_per_gpu, fits_memory=acc.fits_memory,
                   fidelity=fidelity)
        if not acc.fits_memory and sc.workload.micro_batch != "auto" \
                and sc.parallel.vpp != "auto":
            row.update(status="oom", reason=f"needs {acc.memory_gib_per_gpu:.1f} GiB per GPU, "
                       f"{sc.cluster.gpu.name} has {sc.cluster.gpu.hbm_gib:g}")
            return row
        before = (cache.solved, cache.reused) if cache is not None else (0, 0)
        res = simulate(sc, frames=False, accounting=acc, cache=cache)
        if cache is not None:
            row["collectives_solved"] = cache.solved - before[0]
            row["collectives_reused"] = cache.reused - before[1]
    except ScenarioError as err:
        row.update(status="invalid", reason=str(err))
        return row
    except Exception as err:                     # noqa: BLE001 -- recorded, never a crash
        row.update(status="error", reason=f"{type(err).__name__}: {err}")
        return row
    d = res.to_dict()
    for k in ROW_COLUMNS:
        if k in d and k not in ("point",):
            row[k] = d[k]
    row["zero"], row["sequence_parallel"] = lay.zero, lay.sequence_parallel
    for k, v in d["breakdown_s"].items():
        row[f"breakdown_{k}"] = v
    row["status"] = "ok" if res.fits_memory else "oom"
    row["reason"] = "" if res.fits_memory else \
        f"needs {res.memory_gib_per_gpu:.1f} GiB per GPU, {sc.cluster.gpu.name} has " \
        f"{sc.cluster.gpu.hbm_gib:g}"
    return row


_WORKER_CACHES: dict[str | None, StepCache] = {}
"""This process's StepCache per sweep cache directory (a pool or Dask worker keeps it from one
batch to the next)."""


def evaluate_batch(base: dict, sets: list[str], points: list[dict], fidelity: str,
                   cache_dir: str | None = None, cache: bool = True) -> list[dict]:
    """Rows of ``points`` through this worker's :class:`StepCache` (unless ``cache`` is False;
    fabric collectives on disk in ``cache_dir`` if given)."""
    sc = None
    if cache:
        sc = _WORKER_CACHES.get(cache_dir)
        if sc is None:
            sc = _WORKER_CACHES[cache_dir] = StepCache(cache_dir)
    return [evaluate(base, sets, pt, fidelity, cache=sc) for pt in points]


def evaluate_work(work: tuple, points: list[dict]) -> list[dict]:
    """:func:`evaluate_batch` of a sweep's ``work`` = (base, sets, fidelity, cache_dir, cache),
    as the local pool and Dask workers receive it."""
    base, sets, fidelity, cache_dir, cache = work
    return evaluate_batch(base, sets, points, fidelity, cache_dir=cache_dir, cache=cache)


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=all_columns())
