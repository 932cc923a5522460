"""Max-min fair rates, vectorised over flows and links, with rate-coupled groups (rings).

Properties (tested): no link carries more than its capacity; every flow crosses a saturated link
on which no other flow has a higher rate (the max-min certificate), unless its coupled group holds
it back; flows of one group all get the group's slowest rate, and what the group cannot use stays
available to others.

Notes
-----
Bottleneck form of water-filling (Bertsekas & Gallager, Data Networks, section 6.5.2). A link's
fair share is residual / unfixed flows on it. Fixing a flow at a rate no larger than the share of
any link it crosses never lowers another link's share, so shares only grow. Hence a link whose
share is no larger than what each of its flows sees everywhere else is a bottleneck of all of
them: every such link is fixed in the same round, at its share. A round is a few ``bincount`` /
``minimum.at`` passes over the flows x hops matrix; rounds are few (the depth of the bottleneck
order, not the number of distinct rates). Padding (-1) is mapped to a sentinel link of infinite
capacity so the inner loop needs no masks.
"""

from __future__ import annotations

import numpy as np

REL_EPS = 1e-9
"""Shares within this relative distance count as equal."""


def max_min_rates(hops: np.ndarray, capacity: np.ndarray, group: np.ndarray | None = None,
                  weight: np.ndarray | None = None) -> np.ndarray:
    """Rates (bytes/s) of flows whose links are the rows of ``hops`` (-1 padded).

    ``weight`` makes it weighted max-min: a flow's rate is weight x its level, and links share
    their capacity in proportion to weight (a flow sprayed over k paths is k subflows of weight
    1/k: together they get one flow's fair share, as a sprayed queue pair does). ``group``
    couples flows: a group moves at one level, its slowest member's, so every member finishes
    the same fraction of its bytes at the same time (a ring). A flow with no link (same GPU)
    gets ``inf``.
    """
    F = hops.shape[0]
    rate = np.full(F, np.inf)
    if F == 0:
        return rate
    L = len(capacity)
    resid = np.append(capacity.astype(float), np.inf)            # link L: the sentinel
    unit = np.arange(F) if group is None else np.unique(group, return_inverse=True)[1]
    n_units = int(unit.max()) + 1
    w = np.ones(F) if weight is None else np.asarray(weight, float)
    idx = np.flatnonzero((hops >= 0).any(axis=1))
    h = np.where(hops[idx] >= 0, hops[idx], L)
    while len(idx):
        counts = np.bincount(h.ravel(), weights=np.repeat(w[idx], h.shape[1]), minlength=L + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.maximum(resid, 0.0) / counts                # level; inf where unused
        share[L] = np.inf
        sh = share[h]
        flow_min = sh.min(axis=1)
        u = unit[idx]
        unit_min = np.full(n_units, np.inf)
        np.minimum.at(unit_min, u, flow_min)
        need = unit_min[u]                                         # what each flow's unit gets
        seen = np.full(L + 1, np.inf)
        np.minimum.at(seen, h.ravel(), np.repeat(need, h.shape[1]))
        bottleneck = share <= seen * (1 + REL_EPS)
        bottleneck[L] = False
        tight = (sh <= need[:, None] * (1 + REL_EPS)) & bottleneck[h]
        on_bn = tight.any(axis=1)
        fix_unit = np.zeros(n_units, dtype=bool)
        fix_unit[u[on_bn]] = True
        fix = fix_unit[u]
        if not fix.any():                                          # numerical guard
            fix = need <= need.min() * (1 + REL_EPS)
        r = need[fix] * w[idx[fix]]
        rate[idx[fix]] = r
        hf = h[fix]
        resid -= np.bincount(hf.ravel(), weights=np.repeat(r, hf.shape[1]), minlength=L + 1)
        resid[L] = np.inf
        idx, h = idx[~fix], h[~fix]
    return rate


def link_loads(hops: np.ndarray, rate: np.ndarray, L: int) -> np.ndarray:
    """Bytes/s carried by each link."""
    v = hops >= 0
    return np.bincount(hops[v], weights=np.broadcast_to(rate[:, None], hops.shape)[v],
                       minlength=L)
