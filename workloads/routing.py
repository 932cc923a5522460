"""How an MoE router spreads tokens over experts, and what that costs the busiest rank.

Three models, each in closed form or vectorised sampling (never a loop over tokens or GPUs):

- Skew: in one micro-batch of one MoE layer, expert e receives a share p_e of the routed
  (token, expert) pairs. The shares are drawn from a symmetric Dirichlet whose coefficient of
  variation over experts is ``imbalance`` (CV^2 = (E - 1) / (E alpha + 1) for E experts), so
  they always sum to the pairs routed (conservation) and 0 gives the balanced split exactly.
  The rank whose experts receive the most pairs sets the pace of the layer: its grouped GEMM
  runs longest and it receives the most all-to-all bytes. The expected busiest rank is
  averaged over :data:`ROUTING_DRAWS` seeded draws (the layers and micro-batches of a step are
  that many independent routings).
- Capacity (GShard, Lepikhin et al. 2020; Switch Transformer, Fedus et al. 2021; Megatron-Core
  ``moe_expert_capacity_factor``): each expert takes at most C x its balanced share, the rest is
  dropped before dispatch; with ``pad_to_capacity`` every expert computes exactly C x its share.
- Node-limited routing (DeepSeek-V3, arXiv 2412.19437, section 2.1.2: each token goes to at
  most M = 4 nodes): with a dispatcher that sends a token once per destination node and
  forwards it over NVLink there (DeepEP, Megatron-Core's ``flex`` dispatcher), the inter-node
  volume is the number of other nodes a token's experts occupy, a hypergeometric expectation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

ROUTING_DRAWS = 512
"""Routings drawn to estimate the expected busiest rank: a step of a 60-layer model with 8
micro-batches already routes 480 times; the estimate's sampling error at CV 0.3 over 8 ranks is
about 0.2 % of the load."""
ROUTING_SEED = 20241227
"""Seed of those draws. The busiest rank is an expectation over routings, not one step's
draw, so it does not follow the scenario's seed (which draws the fabric's hashes): the same
layout gives the same number under any seed."""


class MoERouting(BaseModel):
    """How the router spreads tokens (``workload.moe``); only for models with experts."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    imbalance: float = Field(default=0.0, ge=0.0, le=100.0)
    """Coefficient of variation of the tokens per expert in one routing (std / mean over the
    experts). 0 = perfectly balanced: Megatron-Core's ``moe_router_force_load_balancing``, as
    NVIDIA's published MoE benchmarks run. Trained routers with an auxiliary loss or
    DeepSeek's bias balancing sit near but not at 0; measure it from the tokens-per-expert
    counts Megatron logs."""
    capacity_factor: float | None = Field(default=None, gt=0.0, le=1000.0)
    """Expert capacity as a multiple of the balanced share; tokens beyond it are dropped
    (Megatron-Core ``moe_expert_capacity_factor``). None = dropless."""
    pad_to_capacity: bool = False
    """Every expert computes and receives exactly its capacity (Megatron-Core
    ``moe_pad_expert_input_to_capacity``): fixed shapes, padding paid as work."""
    rank_capacity_factor: float | None = Field(default=None, ge=1.0, le=1000.0)
    """Sync-free dropless dispatch: each expert-parallel rank receives into a buffer of this
    multiple of its balanced share (Megatron-Core ``moe_expert_rank_capacity_factor`` with
    ``moe_paged_stash``, the HybridEP path of the ``flex`` dispatcher). Shapes are static and
    the token counts stay on the GPU: the dispatcher never waits on the host, so CUDA graphs
    may capture whole MoE layers or iterations. The experts compute the tokens they receive
    (no padding paid, nothing dropped); their saved activations are counted for the tokens
    held (paged), not for the stash pool the recipes size at 1.2x the balanced share
    (``moe_paged_stash_buffer_size_factor_cuda``), which is not modelled.
    A routing that sends a rank more than its budget stops the run in Megatron-Core; the
    scenario is refused where the routings drawn for it would (:func:`rank_over_budget`).
    None: the counts go to the host once per layer (see ``simulator/step/host.py``)."""
    max_nodes_per_token: int | None = Field(default=None, gt=0, le=1_000_000)
    """Node-limited routing: a token's experts lie on at most this many nodes (DeepSeek-V3: 4;
    Megatron-Core ``moe_router_group_topk`` with one group per node). Only the ``flex``
    dispatcher sends fewer bytes for it."""
    dispatcher: Literal["alltoall", "flex"] = "alltoall"
    """alltoall: NCCL all-to-all of every (token, expert) pair (Megatron-Core ``alltoall``).
    flex: each token crosses the network once per destination node, to the GPU on its own
    rail, and is forwarded over NVLink to its experts there, both at once (DeepEP's normal
    kernels; Megatron-Core ``flex``)."""

    @model_validator(mode="after")
    def _rules(self) -> "MoERouting":
        if self.pad_to_capacity and self.capacity_factor is None:
            raise ValueError("pad_to_capacity needs capacity_factor (dropless experts have no "
                             "capacity to pad to)")
        if self.rank_capacity_factor is not None:
            if self.dispatcher != "flex":
                raise ValueError("rank_capacity_factor needs dispatcher flex (Megatron-Core's "
                                 "sync-free dispatch is HybridEP's)")
            if self.capacity_factor is not None:
                raise ValueError("rank_capacity_factor is dropless dispatch; capacity_factor "
                                 "drops tokens per expert: set one of them")
        return self

    @property
    def is_default(self) -> bool:
        return self == MoERouting()


@dataclass(frozen=True)
class RoutingLoad:
    """What one routing costs, relative to the balanced split."""

    busiest: float
    """Pairs the busiest expert-parallel rank computes and receives / its balanced share."""
    dropped: float
    """Fraction of routed (token, expert) pairs dropped by the capacity limit."""
    busiest_expert: float
    """Pairs the busiest expert receives / its balanced share (before the capacity limit):
    DeepSeek's MaxVio + 1."""
    worst_rank: float
    """The largest load any rank receives in any of the routings drawn / its balanced share:
    what a sync-free dispatch's per-rank budget (``rank_capacity_factor``) must hold."""


BALANCED = RoutingLoad(busiest=1.0, dropped=0.0, busiest_expert=1.0, worst_rank=1.0)
"""The load of a balanced, dropless router (and of a dense model)."""


def dirichlet_alpha(num_experts: int, cv: float) -> float:
    """Concentration of the symmetric Dirichlet whose shares have coefficient of variation
    ``cv`` over ``num_experts`` experts (CV^2 = (E - 1) / (E alpha + 1))."""
    E = num_experts
    if cv * cv == 0.0:                  # no spread (or too little to represent): balanced
        return math.inf
    if cv * cv >= E - 1:
        raise ValueError(f"imbalance ({cv}) must be below sqrt(num_experts - 1) = "
                         f"{math.sqrt(E - 1):.3g}: no split of tokens over {E} experts varies "
                         "more")
    return ((E - 1) / (cv * cv) - 1) / E


@lru_cache(maxsize=256)
def routing_load(routing: MoERouting, num_experts: int, ep: int, seed: int = ROUTING_SEED,
                 draws: int = ROUTING_DRAWS) -> RoutingLoad:
    """Expected busiest rank of ``ep`` ranks holding ``num_experts / ep`` experts each
    (memoised: a sweep or a micro-batch search asks the same few questions again)."""
    E = num_experts
    alpha = dirichlet_alpha(E, routing.imbalance)
    if math.isinf(alpha):
        loads = np.ones((1, E))                      # the balanced split, exactly
    else:
        rng = np.random.default_rng([seed, E, ep])
        g = rng.gamma(alpha, size=(draws, E))
        total = g.sum(axis=1, keepdims=True)
        loads = np.where(total > 0, g / np.where(total > 0, total, 1.0) * E, 1.0)
    C = routing.capacity_factor
    kept = loads if C is None else np.minimum(loads, C)
    computed = np.full_like(loads, C) if routing.pad_to_capacity else kept
    per_rank = computed.reshape(len(loads), ep, E // ep).mean(axis=2)
    return RoutingLoad(busiest=float(per_rank.max(axis=1).mean()),
                       dropped=float((loads - kept).sum() / loads.sum()),
                       busiest_expert=float(loads.max(axis=1).mean()),
                       worst_rank=float(per_rank.max()))


def rank_over_budget(routing: MoERouting, num_experts: int, ep: int,
                     seed: int = ROUTING_SEED, draws: int = ROUTING_DRAWS) -> float:
    """Largest load of an expert-parallel rank over ``draws`` seeded routings, as a multiple of
    its balanced share, where it exceeds ``routing.rank_capacity_factor`` (0.0 where every
    routing fits the budget, or there is none). The same draws as :func:`routing_load`."""
    budget = routing.rank_capacity_factor
    if budget is None:
        return 0.0
    worst = routing_load(routing, num_experts, ep, seed, draws).worst_rank
    return worst if worst > budget else 0.0


def remote_nodes_per_token(num_experts: int, top_k: int, nodes: int,
                           max_nodes: int | None = None) -> float:
    """Expected number of other nodes a token's ``top_k`` experts occupy.

    Experts spread evenly over the expert-parallel group's ``nodes``; the router picks the
    token's nodes (at most ``max_nodes`` of them) and its experts among theirs uniformly. A
    picked node holds none of the token's experts with the hypergeometric probability
    C(e (M - 1), k) / C(e M, k), e experts per node; by symmetry a used node is the sender's
    own with probability 1 / nodes.
    """
    if nodes <= 1:
        return 0.0
    per_node = num_experts // nodes
    M = min(max_nodes or nodes, nodes)
    k = min(top_k, per_node * M)
    p_unused = math.comb(per_node * (M - 1), k) / math.comb(per_node * M, k)
    return M * (1.0 - p_unused) * (nodes - 1) / nodes
