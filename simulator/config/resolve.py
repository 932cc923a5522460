"""A scenario's ``auto`` fields resolved: every (micro_batch, vpp) the layout rules allow, and
the concrete layout of one choice. Functions, not methods: the Scenario stays pure data."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from workloads.layout import Layout, make_layout, micro_batch_candidates, vpp_candidates

if TYPE_CHECKING:                      # the scenario imports this module for its validator
    from simulator.config.scenario import Scenario


def resolve(scenario: Scenario, micro_batch: int | None = None, vpp: int | None = None
            ) -> Layout:
    """The concrete :class:`~workloads.layout.Layout` of ``scenario`` (``auto`` fields take the
    given values); raises ValueError naming the rule a layout breaks. Under EP all-to-all
    overlap the interleaved schedule warms up with one more forward (Megatron-LM's
    get_pp_rank_microbatches)."""
    layout = make_layout(scenario.workload, scenario.parallel, gpus=scenario.cluster.gpus,
                         micro_batch=micro_batch, vpp=vpp)
    if scenario.optimizations.ep_overlap and layout.schedule == "interleaved":
        layout = replace(layout, overlap_warmup=1)
    return layout


def layout_choices(scenario: Scenario, first_only: bool = False) -> list[tuple[int, int]]:
    """Every (micro_batch, vpp) pair that makes a valid layout, in increasing order.

    Fixed fields contribute their one value; ``auto`` fields every value the rules allow
    (micro_batch: divisors of the per-replica batch; vpp: divisors of the stage sizes).
    ``first_only`` stops at the first valid pair (enough to know the scenario is runnable).
    """
    w, par = scenario.workload, scenario.parallel
    b_fixed = w.micro_batch if w.micro_batch != "auto" else None
    if par.vpp != "auto":
        vpps = [par.vpp]
    else:
        vpps = vpp_candidates(w.model, par)
        if scenario.optimizations.ep_overlap and par.pp > 1:   # Megatron's rule: interleaved
            vpps = [v for v in vpps if v > 1]
    out = []
    for v in vpps:
        bs = [b_fixed] if b_fixed else micro_batch_candidates(w, par, scenario.dp, v)
        for b in bs:
            try:
                resolve(scenario, b, v)
            except ValueError:
                continue
            out.append((b, v))
            if first_only:
                return out
    return sorted(out)


def first_failure(scenario: Scenario) -> str:
    """Why the first candidate layout (``auto`` fields at 1) fails, or that the schedule allows
    none."""
    b = scenario.workload.micro_batch if scenario.workload.micro_batch != "auto" else 1
    v = scenario.parallel.vpp if scenario.parallel.vpp != "auto" else 1
    try:
        resolve(scenario, b, v)
    except ValueError as err:
        return str(err)
    return "no candidate value is allowed by the schedule"
