"""Exact accounting of a scenario before any simulation: parameters, FLOPs per step, memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd

from simulator.config.resolve import layout_choices, resolve
from simulator.config.scenario import Scenario
from workloads.flops import StepFlops, step_flops
from workloads.layout import Layout
from workloads.memory import memory_table, saved_linear_input_bytes
from workloads.params import ParamCount, count_params
from workloads.units import GIB


@dataclass(frozen=True)
class Accounting:
    scenario: Scenario
    layout: Layout
    params: ParamCount
    flops: StepFlops
    memory: pd.DataFrame
    """Per-stage, per-GPU memory in bytes (columns: workloads.memory.COLUMNS)."""
    auto_choices: dict[str, int] = field(default_factory=dict)
    """Values picked for fields given as ``auto`` (empty when none were)."""

    @property
    def worst_stage(self) -> int:
        return int(self.memory["total_bytes"].idxmax())

    @cached_property
    def memory_gib_per_gpu(self) -> float:
        """Peak over pipeline stages of the per-GPU total."""
        return float(self.memory["total_bytes"].max() / GIB)

    @property
    def fits_memory(self) -> bool:
        return self.memory_gib_per_gpu <= self.scenario.cluster.gpu.hbm_gib

    def to_dict(self) -> dict:
        lay, sc = self.layout, self.scenario
        worst = self.memory.iloc[self.worst_stage]
        return {
            "name": sc.name, "model": sc.workload.model.name, "gpu": sc.cluster.gpu.name,
            "gpus": lay.gpus, "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "cp": lay.cp,
            "ep": lay.ep, "vpp": lay.vpp, "micro_batch": lay.micro_batch,
            "num_micro_batches": lay.num_micro_batches, "schedule": lay.schedule,
            "recompute": lay.recompute, "zero": lay.zero,
            "auto_choices": dict(self.auto_choices),
            "params": self.params.total, "active_params": self.params.active,
            "model_flops_per_step": self.flops.model,
            "hardware_flops_per_step": self.flops.hardware,
            "memory_gib_per_gpu": self.memory_gib_per_gpu,
            "hbm_gib": sc.cluster.gpu.hbm_gib, "fits_memory": self.fits_memory,
            "worst_stage": self.worst_stage,
            "breakdown_gib": {c.removesuffix("_bytes"): float(worst[c]) / GIB
                              for c in self.memory.columns if c.endswith("_bytes")
                              and c not in ("total_bytes", "host_offload_bytes")},
            "host_offload_gib": float(worst.host_offload_bytes) / GIB,
            "stages": self.memory.assign(
                **{c: self.memory[c] / GIB for c in self.memory.columns if c.endswith("_bytes")}
            ).rename(columns=lambda c: c.replace("_bytes", "_gib")).to_dict(orient="records"),
        }


def _block_recomputed(model, layout) -> dict[bool, int] | None:
    """{is MoE: layers} block recomputation runs again, over one pipeline (None otherwise)."""
    if layout.recompute != "full" or layout.recompute_method != "block":
        return None
    counts, seen = {False: 0, True: 0}, set()
    for i in range(layout.pp):
        for c in range(layout.vpp):
            piece = layout.piece(i, c)          # DualPipe runs each piece on two ranks
            if piece in seen:
                continue
            seen.add(piece)
            first = layout.first_layer(i, c)
            for j in range(layout.recomputed_layers(i, c)):
                counts[model.is_moe_layer(first + j)] += 1
    return counts


def account(scenario: Scenario, micro_batch: int | None = None, vpp: int | None = None
            ) -> Accounting:
    """Parameters, step FLOPs and per-stage memory of ``scenario``.

    Fields given as ``auto`` take ``micro_batch`` / ``vpp`` when passed, otherwise the smallest
    valid value (the least memory); the step simulator instead picks the fastest.
    """
    auto = {}
    if scenario.workload.micro_batch == "auto" or scenario.parallel.vpp == "auto":
        b0, v0 = layout_choices(scenario)[0]
        if scenario.workload.micro_batch == "auto":
            auto["micro_batch"] = micro_batch or b0
        if scenario.parallel.vpp == "auto":
            auto["vpp"] = vpp or v0
    layout = resolve(scenario, auto.get("micro_batch"), auto.get("vpp"))
    w = scenario.workload
    model = w.model
    return Accounting(
        scenario=scenario, layout=layout,
        params=count_params(model, w.seq_len),
        flops=step_flops(model, seq_len=w.seq_len, global_batch=w.global_batch,
                         recompute=layout.recompute, tp=layout.tp,
                         recompute_modules=layout.recompute_modules,
                         full_recomputed=_block_recomputed(model, layout)),
        memory=memory_table(model, layout, seq_len=w.seq_len, optimizer=w.optimizer,
                            flash_attention=scenario.optimizations.flash_attention,
                            grad_bytes=scenario.parallel.grad_bytes(w.precision),
                            linear_input_bytes=saved_linear_input_bytes(
                                w.precision, w.fp8_recipe, w.fp8_saved_inputs),
                            moments_dtype=w.moments_dtype),
        auto_choices=auto,
    )
