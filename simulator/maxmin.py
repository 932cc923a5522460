"""Max-min fair rates by progressive filling, vectorised over flows and links.

Properties (tested): no link carries more than its capacity; every flow crosses a saturated link
on which no other flow has a higher rate (the max-min certificate), unless it is held back by its
coupled group; flows of one group (a ring) all get the group's slowest rate, and what the group
cannot use stays available to others.

Notes
-----
Water-filling (Bertsekas & Gallager, Data Networks, section 6.5.2): all unfrozen flows grow at the
same pace; the step is the smallest residual / unfrozen-flow-count over links; links that fill
freeze every flow crossing them (and, for coupled groups, the whole group). Each round is one
``bincount`` over the flows x hops matrix; rounds <= number of distinct bottleneck levels.
"""

from __future__ import annotations

import numpy as np

REL_EPS = 1e-9
"""A link counts as saturated when its residual is below this fraction of its capacity."""


def max_min_rates(hops: np.ndarray, capacity: np.ndarray, group: np.ndarray | None = None,
                  weight: np.ndarray | None = None) -> np.ndarray:
    """Rates (bytes/s) of flows whose links are the rows of ``hops`` (-1 padded).

    ``group`` couples flows (same id = one rate, the slowest member's); ``weight`` counts a flow
    that many times on each of its links (a sub-flow carrying part of a coupled transfer).
    """
    F = hops.shape[0]
    rate = np.zeros(F)
    if F == 0:
        return rate
    weight = np.ones(F) if weight is None else weight
    valid = hops >= 0
    resid = capacity.astype(float).copy()
    L = len(capacity)
    active = np.ones(F, dtype=bool)
    has_group = group is not None
    if has_group:
        _, group = np.unique(group, return_inverse=True)
    # flows with no link at all (same GPU) are unconstrained: they finish at once
    empty = ~valid.any(axis=1)
    rate[empty] = np.inf
    active &= ~empty
    idx = np.flatnonzero(active)
    h = hops[idx]
    w = weight[idx]
    while len(idx):
        v = h >= 0
        counts = np.bincount(h[v], weights=np.broadcast_to(w[:, None], h.shape)[v], minlength=L)
        used = counts > 0
        share = np.full(L, np.inf)
        share[used] = resid[used] / counts[used]
        step = share.min()
        rate[idx] += step
        resid -= step * counts
        full = used & (resid <= REL_EPS * capacity)
        hit = (full[np.maximum(h, 0)] & v).any(axis=1)
        if has_group:
            g_hit = np.zeros(group.max() + 1, dtype=bool)
            g_hit[group[idx[hit]]] = True
            hit = g_hit[group[idx]]
        keep = ~hit
        idx, h, w = idx[keep], h[keep], w[keep]
    return rate


def link_loads(hops: np.ndarray, rate: np.ndarray, L: int, weight: np.ndarray | None = None
               ) -> np.ndarray:
    """Bytes/s carried by each link."""
    v = hops >= 0
    r = rate if weight is None else rate * weight
    return np.bincount(hops[v], weights=np.broadcast_to(r[:, None], hops.shape)[v],
                       minlength=L)
