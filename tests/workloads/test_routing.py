"""The router's skew, capacity and node-limit models (workloads/routing.py) against closed forms,
conservation of routed tokens and an independent Monte Carlo of node-limited routing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.routing import (
    MoERouting,
    dirichlet_alpha,
    rank_over_budget,
    remote_nodes_per_token,
    routing_load,
)


def test_a_balanced_router_loads_every_rank_with_exactly_its_share():
    load = routing_load(MoERouting(), 256, 64)
    assert (load.busiest, load.busiest_expert, load.dropped) == (1.0, 1.0, 0.0)


@pytest.mark.parametrize("cv", [0.1, 0.5, 2.0])
def test_the_dirichlet_shares_have_the_asked_coefficient_of_variation(cv):
    """Var(p_e) = (1/E)(1 - 1/E) / (E alpha + 1) for a symmetric Dirichlet, so the loads
    E p_e of many draws scatter around 1 with standard deviation cv."""
    E = 128
    rng = np.random.default_rng(1)
    loads = rng.dirichlet(np.full(E, dirichlet_alpha(E, cv)), size=4000) * E
    assert loads.std() == pytest.approx(cv, rel=0.02)


def test_one_rank_holding_every_expert_carries_all_the_tokens_whatever_the_skew():
    """Conservation: the shares sum to the tokens routed."""
    assert routing_load(MoERouting(imbalance=0.8), 64, 1).busiest == pytest.approx(1.0, abs=1e-12)


def test_one_expert_per_rank_makes_the_busiest_rank_the_busiest_expert():
    load = routing_load(MoERouting(imbalance=0.4), 32, 32)
    assert load.busiest == pytest.approx(load.busiest_expert, rel=1e-12)


def test_more_ranks_meet_a_busier_one():
    r = MoERouting(imbalance=0.3)
    got = [routing_load(r, 256, ep).busiest for ep in (1, 8, 64, 256)]
    assert got == sorted(got) and got[0] < got[-1]


def test_capacity_without_skew_drops_exactly_what_exceeds_it():
    load = routing_load(MoERouting(capacity_factor=0.8), 64, 8)
    assert load.dropped == pytest.approx(0.2) and load.busiest == pytest.approx(0.8)


def test_padding_to_capacity_makes_every_rank_compute_its_capacity():
    load = routing_load(MoERouting(imbalance=0.5, capacity_factor=1.25, pad_to_capacity=True),
                        64, 8)
    assert load.busiest == pytest.approx(1.25) and load.dropped > 0


def test_a_capacity_above_every_load_drops_nothing():
    free = routing_load(MoERouting(imbalance=0.2), 64, 8)
    capped = routing_load(MoERouting(imbalance=0.2, capacity_factor=50.0), 64, 8)
    assert capped == free


@settings(max_examples=40, deadline=None)
@given(E_log=st.integers(3, 9), ep_log=st.integers(0, 9), cv=st.floats(0.0, 1.5),
       cap=st.one_of(st.none(), st.floats(0.5, 3.0)))
def test_the_busiest_rank_carries_at_least_the_mean_of_what_is_kept(E_log, ep_log, cv, cap):
    E, ep = 2 ** E_log, 2 ** min(ep_log, E_log)
    load = routing_load(MoERouting(imbalance=cv, capacity_factor=cap), E, ep, draws=64)
    assert 0.0 <= load.dropped < 1.0
    assert load.busiest >= 1.0 - load.dropped - 1e-9
    assert load.busiest <= load.busiest_expert + 1e-9


def test_a_skew_no_split_can_have_is_refused():
    with pytest.raises(ValueError, match="imbalance"):
        dirichlet_alpha(8, math.sqrt(7))


def _sampled_remote_nodes(E, k, nodes, M, draws=40_000, seed=5):
    """Route tokens one by one: pick M of the nodes, then k distinct experts among theirs;
    count the other nodes (than the sender's, node 0) that received one."""
    rng = np.random.default_rng(seed)
    per = E // nodes
    picked_nodes = np.argsort(rng.random((draws, nodes)), axis=1)[:, :M]
    experts = np.argsort(rng.random((draws, M * per)), axis=1)[:, :k]
    node_of = picked_nodes[np.arange(draws)[:, None], experts // per]
    used = np.zeros((draws, nodes), bool)
    used[np.arange(draws)[:, None], node_of] = True
    return used[:, 1:].sum(axis=1).mean()


@pytest.mark.parametrize("E,k,nodes,M", [(256, 8, 8, None), (256, 8, 8, 4), (128, 8, 2, None),
                                         (64, 6, 16, 3), (32, 1, 4, None)])
def test_remote_nodes_per_token_matches_routing_tokens_one_by_one(E, k, nodes, M):
    sampled = _sampled_remote_nodes(E, k, nodes, M or nodes)
    assert remote_nodes_per_token(E, k, nodes, M) == pytest.approx(sampled, rel=0.01)


def test_one_expert_per_token_lands_off_node_with_the_share_of_other_nodes():
    assert remote_nodes_per_token(64, 1, 8) == pytest.approx(7 / 8)
    assert remote_nodes_per_token(64, 8, 1) == 0.0


@settings(max_examples=40, deadline=None)
@given(E_log=st.integers(3, 8), ep_log=st.integers(0, 3), cv=st.floats(0.05, 1.5),
       budget=st.floats(1.0, 4.0))
def test_a_rank_budget_is_exceeded_exactly_where_some_drawn_rank_carries_more(E_log, ep_log, cv,
                                                                            budget):
    """rank_over_budget reports the largest rank load of the draws routing_load averages
    (never below their mean busiest rank) where it passes the budget, and 0.0 otherwise; a
    budget at that load or above it is never exceeded."""
    E, ep = 2 ** E_log, 2 ** min(ep_log, E_log)
    routing = MoERouting(imbalance=min(cv, 0.9 * math.sqrt(E - 1)), dispatcher="flex",
                         rank_capacity_factor=budget)
    worst = rank_over_budget(routing, E, ep)
    load = routing_load(routing, E, ep)
    assert load.worst_rank >= load.busiest - 1e-12
    assert worst == (load.worst_rank if load.worst_rank > budget else 0.0)
    if worst:
        roomy = routing.model_copy(update={"rank_capacity_factor": worst})
        assert rank_over_budget(roomy, E, ep) == 0.0
    balanced = routing.model_copy(update={"imbalance": 0.0})
    assert rank_over_budget(balanced, E, ep) == 0.0
