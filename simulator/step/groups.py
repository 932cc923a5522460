"""The communicators a rank of one pipeline stage talks over, as the step compiler sees them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from workloads.layout import Layout
from workloads.ranks import ROLES, group_sizes, per_node, strides


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


STAGE_ROLES = ("pp", "emb")
"""Roles whose groups join two stages (the next one, or the first and the last)."""


def _group(layout: Layout, gpus_per_node: int, role: str, stage: int, size: int) -> Group:
    return Group(size=size, per_node=max(1, min(size, per_node(layout, role, stage,
                                                               gpus_per_node))),
                 role=role, stage=stage)


def stage_groups(layout: Layout, gpus_per_node: int, stage: int) -> dict[str, Group]:
    """Every communicator of a rank of ``stage``, sized and placed by the rank map
    (:mod:`workloads.ranks`)."""
    sizes = group_sizes(layout)
    return {r: _group(layout, gpus_per_node, r, stage, sizes[r]) for r in ROLES}


def pipeline_groups(layout: Layout, gpus_per_node: int) -> list[dict[str, Group]]:
    """:func:`stage_groups` of every stage. A stage's groups are stage 0's moved by whole
    stages of ranks; where a stage spans whole nodes they sit in the nodes alike, so only the
    groups that join stages are placed again."""
    if strides(layout)["pp"] % gpus_per_node:
        return [stage_groups(layout, gpus_per_node, i) for i in range(layout.pp)]
    first = stage_groups(layout, gpus_per_node, 0)
    sizes = group_sizes(layout)
    return [first] + [{**{r: replace(g, stage=i) for r, g in first.items()},
                       **{r: _group(layout, gpus_per_node, r, i, sizes[r])
                          for r in STAGE_ROLES}}
                      for i in range(1, layout.pp)]
