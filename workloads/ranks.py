"""Megatron's rank map: where each (tp, cp, dp, pp) coordinate sits among the global GPU ids.

Rank order tp-cp-ep-dp-pp (Megatron-Core's default ``order``): tensor-parallel ranks are
consecutive, then context-parallel, then data-parallel, then pipeline stages:

    gpu = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank))

Expert parallelism is carved out of the data x context ranks of a stage in blocks of ``ep``
consecutive ones (Megatron-Core's expert groups); the expert-data-parallel group (``edp``) joins
the ranks that hold the same experts. Every component that needs a group (the step compiler's
communicators, the fabric's replica groups, stragglers, busbw factors) asks this module.

Roles: ``tp``, ``cp``, ``ep``, ``dp`` (data x context: the gradient all-reduce group), ``edp``,
``pp`` (a stage and the next), ``emb`` (first and last stage: the tied embedding); ``zdp`` /
``zedp`` are ZeRO's per-micro-batch traffic over the ``dp`` / ``edp`` groups.
"""

from __future__ import annotations

import numpy as np

from workloads.layout import Layout

ALIASES = {"zdp": "dp", "zedp": "edp"}
"""Roles that run over another role's groups."""


def group_spec(layout: Layout) -> dict[str, tuple[int, int]]:
    """(size, stride between consecutive members in global rank order) of each role's group."""
    tp, cp, ep, dp = layout.tp, layout.cp, layout.ep, layout.dp
    return {"tp": (tp, 1), "cp": (cp, tp), "ep": (ep, tp), "dp": (dp * cp, tp),
            "edp": (max(1, dp * cp // ep), tp * ep), "pp": (2, tp * cp * dp),
            "emb": (2, tp * cp * dp * max(1, layout.pp - 1))}


def group_size(layout: Layout, role: str) -> int:
    """Members of one group of ``role``."""
    return group_spec(layout)[ALIASES.get(role, role)][0]


def stage_ranks(layout: Layout, stage: int) -> np.ndarray:
    """[dp, cp, tp] global GPU ids of the ranks of pipeline ``stage``."""
    tp, cp, dp = layout.tp, layout.cp, layout.dp
    per_stage = tp * cp * dp
    return (stage * per_stage + np.arange(per_stage)).reshape(dp, cp, tp)


def replica_groups(layout: Layout, role: str, stage: int) -> list[np.ndarray]:
    """GPU ids of every group of ``role`` at ``stage`` (all replicas of that communicator)."""
    tp, cp, dp, ep, p = layout.tp, layout.cp, layout.dp, layout.ep, layout.pp
    role = ALIASES.get(role, role)
    R = stage_ranks(layout, stage)
    D = R.transpose(2, 0, 1).reshape(tp, dp * cp)          # data-parallel x context groups
    if role == "tp":
        return list(R.reshape(-1, tp))
    if role == "cp":
        return list(R.transpose(0, 2, 1).reshape(-1, cp))
    if role == "dp":
        return list(D)
    if role == "ep":
        return list(D.reshape(tp, -1, ep).reshape(-1, ep))
    if role == "edp":
        return list(D.reshape(tp, -1, ep).transpose(0, 2, 1).reshape(-1, dp * cp // ep))
    if role == "pp":
        nxt = stage_ranks(layout, min(stage + 1, p - 1))
        return [np.array(pair) for pair in zip(R.ravel(), nxt.ravel())]
    if role == "emb":
        return [np.array(pair) for pair in zip(stage_ranks(layout, 0).ravel(),
                                               stage_ranks(layout, p - 1).ravel())]
    raise ValueError(f"unknown group role {role!r}")


def stage_and_replica(layout: Layout, gpu: int) -> tuple[int, int]:
    """(pipeline stage, data-parallel replica) of global GPU id ``gpu``."""
    stage, local = divmod(gpu, layout.tp * layout.cp * layout.dp)
    return stage, local // (layout.tp * layout.cp)
