"""The communicators a rank of one pipeline stage talks over, as the step compiler sees them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from workloads.layout import Layout
from workloads.ranks import ROLES, group_sizes, per_node


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


def stage_groups(layout: Layout, gpus_per_node: int, stage: int) -> dict[str, Group]:
    """Every communicator of a rank of ``stage``, sized and placed by the rank map
    (:mod:`workloads.ranks`)."""
    sizes = group_sizes(layout)
    return {r: Group(size=sizes[r], per_node=max(1, min(sizes[r], per_node(
        layout, r, stage, gpus_per_node))), role=r, stage=stage) for r in ROLES}
