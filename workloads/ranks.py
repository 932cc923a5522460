"""Megatron's rank map: where each (tp, cp, dp, pp) coordinate sits among the global GPU ids.

The rank order (``parallel.order``, Megatron-Core's ``order``) lists the dimensions
fastest-varying first; the default tp-cp-ep-dp-pp gives

    gpu = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank))

Expert parallelism takes no place in this map: expert groups are carved out of the data x
context ranks of a stage, taken in global rank order, in blocks of ``ep`` consecutive ones
(``ep-dp`` in the order) or of ranks an expert-data-parallel group apart (``dp-ep``), as
Megatron-Core's expert RankGenerator lays them out, and the expert-data-parallel group
(``edp``) joins the ranks that hold the same experts. With MoE parallel folding
(``parallel.etp`` < tp) the stage's tp x cp x dp ranks regroup as etp x ep x edp instead, so
an expert group may span tensor-parallel ranks.
Every component that needs a group (the step compiler's communicators, the fabric's replica
groups, stragglers, busbw factors) asks this module.

Roles: ``tp``, ``cp``, ``ep``, ``dp`` (data x context: the gradient all-reduce group), ``edp``,
``pp`` (a stage and the next), ``emb`` (first and last stage: the tied embedding); ``zdp`` /
``zedp`` are ZeRO's per-micro-batch traffic over the ``dp`` / ``edp`` groups. With a ZeRO shard
group smaller than dp x cp (HSDP / MiCS, ``Layout.zero_shard``), ``dps`` are the shard groups
(consecutive ranks of a ``dp`` group), ``dpr`` the replica groups (the ranks at the same place
of every shard group), ``edps`` / ``edpr`` the same within the ``edp`` groups, and ``zdps`` /
``zedps`` ZeRO's per-micro-batch traffic over the shard groups.
"""

from __future__ import annotations

import numpy as np

from workloads.layout import Layout

ALIASES = {"zdp": "dp", "zedp": "edp", "zdps": "dps", "zedps": "edps"}
"""Roles that run over another role's groups."""
ROLES = ("tp", "cp", "ep", "dp", "edp", "pp", "emb", "dps", "dpr", "edps", "edpr")
"""The communicators a stage's rank belongs to (see the module docstring)."""
FOLDED_ROLES = ("ep", "edp", "edps", "edpr")
"""Roles regrouped by MoE parallel folding (``parallel.etp`` < tp; no HSDP with it: the
expert shard group is the edp group, the replica group one rank)."""


def strides(layout: Layout) -> dict[str, int]:
    """Distance between consecutive ranks of each dimension in global rank order."""
    sizes = {"tp": layout.tp, "cp": layout.cp, "ep": 1, "dp": layout.dp, "pp": layout.pp}
    out, step = {}, 1
    for dim in layout.order.split("-"):
        out[dim] = step
        step *= sizes[dim]
    return out


def group_sizes(layout: Layout) -> dict[str, int]:
    """Members of one group of each role."""
    tp, cp, ep, dp = layout.tp, layout.cp, layout.ep, layout.dp
    z, ez = layout.shard, layout.expert_shard
    edp = max(1, tp // layout.expert_tp * dp * cp // ep)
    return {"tp": tp, "cp": cp, "ep": ep, "dp": dp * cp, "edp": edp,
            "pp": 2, "emb": 2, "dps": z, "dpr": dp * cp // z, "edps": ez,
            "edpr": max(1, edp // ez)}


def group_size(layout: Layout, role: str) -> int:
    """Members of one group of ``role``."""
    return group_sizes(layout)[ALIASES.get(role, role)]


def stage_ranks(layout: Layout, stage: int) -> np.ndarray:
    """[dp, cp, tp] global GPU ids of the ranks of pipeline ``stage``."""
    s = strides(layout)
    return (stage * s["pp"] + np.arange(layout.dp)[:, None, None] * s["dp"] +
            np.arange(layout.cp)[None, :, None] * s["cp"] +
            np.arange(layout.tp)[None, None, :] * s["tp"])


def _experts_apart(layout: Layout) -> bool:
    """Whether the order puts ep after dp (``dp-ep``): an expert group's ranks are an
    expert-data-parallel group apart, not consecutive."""
    return "dp-ep" in layout.order


def _expert_groups(layout: Layout, D: np.ndarray) -> np.ndarray:
    """[..., expert-data-parallel rank, ep rank] of data x context ranks ``D`` [..., dp x cp]
    in global rank order."""
    ep = layout.ep
    if _experts_apart(layout):
        return np.swapaxes(D.reshape(*D.shape[:-1], ep, -1), -1, -2)
    return D.reshape(*D.shape[:-1], -1, ep)


def replica_groups(layout: Layout, role: str, stage: int) -> list[np.ndarray]:
    """GPU ids of every group of ``role`` at ``stage`` (all replicas of that communicator)."""
    tp, cp, dp, ep, p = layout.tp, layout.cp, layout.dp, layout.ep, layout.pp
    role = ALIASES.get(role, role)
    R = stage_ranks(layout, stage)
    # data-parallel x context groups, each in global rank order
    D = np.sort(R.transpose(2, 0, 1).reshape(tp, dp * cp), axis=1)
    if role == "tp":
        return list(R.reshape(-1, tp))
    if role == "cp":
        return list(R.transpose(0, 2, 1).reshape(-1, cp))
    if role == "dp":
        return list(D)
    if role in FOLDED_ROLES and layout.folded:
        F = _folded(layout, R)
        if role == "ep":
            return list(F.transpose(0, 2, 1).reshape(-1, ep))
        edp = F.transpose(1, 2, 0).reshape(-1, F.shape[0])
        return list(edp.reshape(-1, 1) if role == "edpr" else edp)
    if role == "ep":
        return list(_expert_groups(layout, D).reshape(-1, ep))
    if role == "edp":
        return list(_expert_groups(layout, D).transpose(0, 2, 1).reshape(-1, dp * cp // ep))
    if role in ("dps", "dpr", "edps", "edpr"):
        return list(_sharded(layout, D, role).reshape(-1, group_size(layout, role)))
    if role == "pp":
        nxt = stage_ranks(layout, min(stage + 1, p - 1))
        return list(np.stack([R.ravel(), nxt.ravel()], axis=1))
    if role == "emb":
        return list(np.stack([stage_ranks(layout, 0).ravel(),
                              stage_ranks(layout, p - 1).ravel()], axis=1))
    raise ValueError(f"unknown group role {role!r}")


def _folded(layout: Layout, R: np.ndarray) -> np.ndarray:
    """[edp, ep, etp] GPU ids of a stage's ranks ``R`` regrouped for folded MoE layers: the
    ranks in global order, etp consecutive ones an expert-TP group, ep of those an expert
    group (Megatron-Core's expert rank order tp-ep-dp with tp := etp; ep consecutive expert-TP
    groups, or under ``dp-ep`` ones an expert-data-parallel group apart)."""
    ranks = np.sort(R.ravel()).reshape(-1, layout.expert_tp)
    return _expert_groups(layout, ranks.T).transpose(1, 2, 0)


def _sharded(layout: Layout, D: np.ndarray, role: str) -> np.ndarray:
    """[..., group members] of the shard / replica roles over the data x context ranks
    ``D`` [tp, dp x cp]: a shard group is ``shard`` consecutive ranks of a dp group (whole
    expert groups), its expert shard the ranks holding the same experts inside it."""
    tp, z, ep = D.shape[0], layout.shard, layout.ep
    if layout.folded:       # no HSDP with folding (make_layout): a shard group is the whole
        return D if role == "dps" else D[..., None]     # dp group, a replica group one rank
    X = D.reshape(tp, -1, z // ep, ep)            # [tp, shard group, expert group, ep rank]
    if role == "dps":
        return X.reshape(tp, -1, z)
    if role == "dpr":
        return X.reshape(tp, -1, z).transpose(0, 2, 1)
    if role == "edps":
        return X.transpose(0, 1, 3, 2)
    return X.transpose(0, 2, 3, 1)                # edpr: across shard groups


def first_group(layout: Layout, role: str, stage: int) -> np.ndarray:
    """GPU ids of the first group of ``role`` at ``stage`` (the first of
    :func:`replica_groups`, without building the others)."""
    role = ALIASES.get(role, role)
    s = strides(layout)
    origin = stage * s["pp"]                  # stage_ranks' [0, 0, 0], without the others
    if role == "tp":
        return origin + np.arange(layout.tp) * s["tp"]
    if role == "cp":
        return origin + np.arange(layout.cp) * s["cp"]
    # the first data x context group, in global rank order
    dp_cp = np.sort(origin + (np.arange(layout.dp)[:, None] * s["dp"]
                              + np.arange(layout.cp)[None, :] * s["cp"]).ravel())
    if role == "dp":
        return dp_cp
    if role in FOLDED_ROLES and layout.folded:
        F = _folded(layout, stage_ranks(layout, stage))
        return {"ep": F[0, :, 0], "edp": F[:, 0, 0], "edps": F[:, 0, 0],
                "edpr": F[:1, 0, 0]}[role]
    if role in ("ep", "edp"):
        E = _expert_groups(layout, dp_cp)              # [edp, ep]
        return E[0] if role == "ep" else E[:, 0]
    if role in ("dps", "dpr", "edps", "edpr"):
        return _sharded(layout, dp_cp[None, :], role).reshape(-1, group_size(layout, role))[0]
    last = layout.pp - 1
    other = min(stage + 1, last) if role == "pp" else last
    first = stage if role == "pp" else 0
    return np.array([first * s["pp"], other * s["pp"]])


def per_node(layout: Layout, role: str, stage: int, gpus_per_node: int) -> int:
    """How many members of one ``role`` group of ``stage`` share a node (its first group's
    count in the node of its first member; the groups of a role are laid out alike)."""
    nodes = first_group(layout, role, stage) // gpus_per_node
    return int((nodes == nodes[0]).sum())


def stage_and_replica(layout: Layout, gpu: int) -> tuple[int, int]:
    """(pipeline stage, data-parallel replica) of global GPU id ``gpu``."""
    s = strides(layout)
    return (gpu // s["pp"]) % layout.pp, (gpu // s["dp"]) % layout.dp
