"""A training run under failures: the step simulation's numbers through the Monte-Carlo."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from simulator.config.scenario import Scenario
from simulator.reliability.costs import Costs, checkpoint_times, job_costs, nic_bytes_per_s
from simulator.reliability.montecarlo import Trials, simulate_run
from simulator.result import Result
from simulator.simulate import simulate
from simulator.step.accounting import account

DEFAULT_DAYS = 30.0
DEFAULT_TRIALS = 1000
STRATEGIES = ("sync", "two-stage", "in-memory")
INTERVALS_MIN = (2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 360, 480)
"""Checkpoint intervals of the ETTR table (minutes)."""

BY_CAUSE_COLUMNS = ["cause", "label", "category", "unit", "rate_per_1k_unit_days",
                    "interruptions_per_day", "share", "recovery_gpu_h", "lost_work_gpu_h",
                    "total_gpu_h"]
"""``Failurereport.by_cause``: one row per component plus ``checkpoint`` (stalls); GPU-hours are
means over trials for the whole run."""
TRIAL_COLUMNS = ["trial", "wall_days", "ettr", "effective_mfu", "interruptions", "unexpected",
                 "planned", "productive_h", "lost_work_h", "checkpoint_stall_h", "recovery_h",
                 "spare_wait_h"]


@dataclass
class FailureReport:
    summary: dict
    by_cause: pd.DataFrame = field(repr=False)
    trials: pd.DataFrame = field(repr=False)
    costs: Costs = field(repr=False)

    def to_dict(self) -> dict:
        return {**self.summary, "by_cause": self.by_cause.to_dict(orient="records")}


def _step(scenario: Scenario, step: Result | None) -> Result:
    if step is None:
        step = simulate(scenario)
    return step


def _costs(scenario: Scenario, step: Result) -> Costs:
    acc = account(scenario, micro_batch=step.micro_batch, vpp=step.vpp) \
        if (scenario.workload.micro_batch == "auto" or scenario.parallel.vpp == "auto") \
        else account(scenario)
    return job_costs(scenario, acc, step.step_time_s, scenario.failures, scenario.checkpoint)


def _run(scenario: Scenario, costs: Costs, step: Result, *, days, tokens, trials) -> Trials:
    f = scenario.failures
    w = scenario.workload
    kw = dict(trials=trials, seed=scenario.seed, distribution=f.distribution,
              weibull_shape=f.weibull_shape)
    if tokens is not None:
        return simulate_run(costs, work_s=tokens / (w.global_batch * w.seq_len) *
                            step.step_time_s, **kw)
    return simulate_run(costs, horizon_s=(DEFAULT_DAYS if days is None else days) * 86400.0,
                        **kw)


def failure_run(scenario: Scenario, *, days: float | None = None, tokens: float | None = None,
                trials: int = DEFAULT_TRIALS, step: Result | None = None) -> FailureReport:
    """Monte-Carlo of ``days`` of training (default 30) or of training ``tokens``."""
    if days is not None and tokens is not None:
        raise ValueError("give days or tokens, not both")
    step = _step(scenario, step)
    costs = _costs(scenario, step)
    tr = _run(scenario, costs, step, days=days, tokens=tokens, trials=trials)
    gpus = costs.counts.gpus
    ettr = tr.ettr
    wall_days = tr.wall_s / 86400.0
    n = tr.interruptions.sum(axis=1)
    planned = tr.interruptions[:, costs.planned].sum(axis=1)
    unexpected = n - planned
    trials_df = pd.DataFrame({
        "trial": np.arange(trials), "wall_days": wall_days, "ettr": ettr,
        "effective_mfu": ettr * step.mfu, "interruptions": n.astype(int),
        "unexpected": unexpected.astype(int), "planned": planned.astype(int),
        "productive_h": tr.productive_s / 3600, "lost_work_h": tr.lost_s / 3600,
        "checkpoint_stall_h": tr.stall_s / 3600, "recovery_h": tr.down_s / 3600,
        "spare_wait_h": tr.spare_wait_s / 3600})[TRIAL_COLUMNS]
    rows = []
    mean_days = float(wall_days.mean())
    for i, comp in enumerate(costs.components):
        rec = float(tr.cause_down_s[:, i].mean()) * gpus / 3600
        lost = float(tr.cause_lost_s[:, i].mean()) * gpus / 3600
        rows.append({"cause": comp.name, "label": comp.label, "category": comp.category,
                     "unit": comp.unit, "rate_per_1k_unit_days":
                     scenario.failures.rates.get(comp.name, comp.rate) * scenario.failures.scale,
                     "interruptions_per_day": float(tr.interruptions[:, i].sum() /
                                                    tr.wall_s.sum() * 86400),
                     "recovery_gpu_h": rec, "lost_work_gpu_h": lost, "total_gpu_h": rec + lost})
    stall = float(tr.stall_s.mean()) * gpus / 3600
    rows.append({"cause": "checkpoint", "label": "Checkpoint stalls", "category": "checkpoint",
                 "unit": "job", "rate_per_1k_unit_days": 0.0, "interruptions_per_day": 0.0,
                 "recovery_gpu_h": 0.0, "lost_work_gpu_h": stall, "total_gpu_h": stall})
    by_cause = pd.DataFrame(rows)
    total = by_cause.total_gpu_h.sum()
    by_cause["share"] = by_cause.total_gpu_h / total if total > 0 else 0.0
    by_cause = by_cause[BY_CAUSE_COLUMNS].sort_values("total_gpu_h", ascending=False,
                                                      kind="stable").reset_index(drop=True)
    q = np.quantile(ettr, [0.05, 0.5, 0.95])
    summary = {
        "name": scenario.name, "gpus": gpus, "nodes": costs.counts.nodes,
        "nics": costs.counts.nics, "switches": costs.counts.switches,
        "failure_preset": scenario.failures.preset, "trials": trials,
        "mode": "tokens" if tokens is not None else "days",
        "days": mean_days, "tokens": tokens,
        "time_to_train_days": mean_days if tokens is not None else None,
        "time_to_train_days_p95": float(np.quantile(wall_days, 0.95)) if tokens is not None
        else None,
        "step_time_s": step.step_time_s, "mfu": step.mfu,
        "ettr": float(ettr.mean()), "ettr_p5": float(q[0]), "ettr_p50": float(q[1]),
        "ettr_p95": float(q[2]), "effective_mfu": float(ettr.mean() * step.mfu),
        "interruptions_per_day": float(n.sum() / tr.wall_s.sum() * 86400),
        "unexpected_per_day": float(unexpected.sum() / tr.wall_s.sum() * 86400),
        "planned_per_day": float(planned.sum() / tr.wall_s.sum() * 86400),
        "job_mttf_h": float(tr.wall_s.sum() / unexpected.sum() / 3600) if unexpected.sum()
        else float("inf"),
        "expected_job_mttf_h": costs.mtbf_s / 3600,
        "checkpoint_strategy": scenario.checkpoint.strategy,
        "checkpoint_interval_min": costs.interval_s / 60,
        "checkpoint_state_tb": costs.state_bytes / 1e12,
        "checkpoint_blocking_s": costs.blocking_s, "checkpoint_persist_s": costs.persist_s,
        "restart_s": costs.restart_s, "init_s": costs.init_s, "reload_s": costs.reload_s,
        "gpu_hours_lost": float(total), "gpu_hours": float(tr.wall_s.mean() * gpus / 3600),
        "fidelity": step.fidelity, "calibration": step.calibration,
    }
    return FailureReport(summary=summary, by_cause=by_cause, trials=trials_df, costs=costs)


ETTR_COLUMNS = ["strategy", "interval_min", "ettr", "ettr_p5", "ettr_p95", "blocking_s",
                "persist_s", "optimal"]


def ettr_vs_interval(scenario: Scenario, *, intervals_min=INTERVALS_MIN,
                     strategies=STRATEGIES, days: float | None = None, trials: int = 200,
                     step: Result | None = None) -> pd.DataFrame:
    """ETTR per checkpoint strategy and interval (common random numbers across points, so
    the curves are smooth and comparable); ``optimal`` marks each strategy's best interval."""
    step = _step(scenario, step)
    base = _costs(scenario, step)
    pcie = scenario.cluster.gpu.pcie_gbyte_per_s
    nic = nic_bytes_per_s(scenario)
    rows = []
    for strategy in strategies:
        c0 = base.with_strategy(strategy, scenario.checkpoint, pcie, nic)
        if strategy == "in-memory" and scenario.checkpoint.strategy != "in-memory":
            c0 = _reload_from_peer_memory(c0, nic)
        for iv in intervals_min:
            c = c0.with_interval(iv * 60.0)
            tr = _run(scenario, c, step, days=days, tokens=None, trials=trials)
            e = tr.ettr
            rows.append({"strategy": strategy, "interval_min": c.interval_s / 60,
                         "ettr": float(e.mean()), "ettr_p5": float(np.quantile(e, 0.05)),
                         "ettr_p95": float(np.quantile(e, 0.95)), "blocking_s": c.blocking_s,
                         "persist_s": c.persist_s})
    df = pd.DataFrame(rows)
    df["optimal"] = df.ettr == df.groupby("strategy").ettr.transform("max")
    return df[ETTR_COLUMNS]


def _reload_from_peer_memory(c: Costs, nic: float) -> Costs:
    reload = c.gpu_state_bytes / nic
    return replace(c, reload_s=reload, restart_s=c.restart_s - c.reload_s + reload)


__all__ = ["FailureReport", "failure_run", "ettr_vs_interval", "checkpoint_times"]
