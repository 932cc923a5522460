"""The communicators a rank of one pipeline stage talks over, as the step compiler sees them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from workloads.layout import Layout
from workloads.ranks import group_spec


@dataclass(frozen=True)
class Group:
    """A communicator: ``size`` ranks, ``per_node`` of them in each node they occupy."""

    size: int
    per_node: int
    role: str = ""
    """tp, cp, ep, dp, edp, pp or emb (:mod:`workloads.ranks`): which Megatron group this is
    (the fabric uses it to lay out every replica's group; alpha-beta ignores it)."""
    stage: int = 0
    """Pipeline stage the group belongs to (pp: the sending stage)."""

    @property
    def nodes(self) -> int:
        return math.ceil(self.size / self.per_node)


def _group(size: int, stride: int, gpus_per_node: int, role: str = "", stage: int = 0) -> Group:
    """A group of ``size`` ranks ``stride`` apart in global rank order."""
    per_node = max(1, min(size, gpus_per_node // stride)) if stride < gpus_per_node else 1
    return Group(size=size, per_node=per_node, role=role, stage=stage)


def stage_groups(layout: Layout, gpus_per_node: int, stage: int) -> dict[str, Group]:
    """Every communicator of a rank of ``stage`` (sizes and strides from
    :func:`workloads.ranks.group_spec`)."""
    return {r: _group(n, st, gpus_per_node, r, stage)
            for r, (n, st) in group_spec(layout).items()}
