"""Max-min fair rates, with rate-coupled groups (rings) and weighted subflows.

Properties (tested): no link carries more than its capacity; every flow crosses a saturated link
on which no other flow has a higher rate (the max-min certificate), unless its coupled group holds
it back; flows of one group all get the group's slowest rate, and what the group cannot use stays
available to others.

Notes
-----
Progressive filling (Bertsekas & Gallager, Data Networks, section 6.5.2), link by link: a link's
fair share is residual capacity / weight of its unfixed flows. The link with the smallest share
is a bottleneck of every unfixed flow on it, so those flows (and every member of their coupled
groups) are fixed there, at that share times their weight; fixing a flow at a level no larger
than any share never lowers another link's share, so the next smallest share is the next
bottleneck. Shares live in an indexed binary heap over links, updated as flows are fixed:
O(flows x hops x log links) for the whole solve, compiled (numba, :mod:`.waterfill`, loaded
on the first solve so that ``import simulator`` stays free of it), where a round-based
vectorised solve re-scans every unfixed flow once per distinct bottleneck level (an ECMP-hashed
all-to-all has hundreds).
"""

from __future__ import annotations

import numpy as np


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
    hops = np.ascontiguousarray(hops, dtype=np.int64)
    F = hops.shape[0]
    if F == 0:
        return np.full(0, np.inf)
    unit = np.arange(F) if group is None else np.unique(group, return_inverse=True)[1]
    members = np.argsort(unit, kind="stable")
    starts = np.searchsorted(unit[members], np.arange(int(unit.max()) + 2))
    w = np.ones(F) if weight is None else np.asarray(weight, float)
    from simulator.network.waterfill import fill   # numba: loaded on the first solve
    return fill(hops, np.asarray(capacity, float), unit.astype(np.int64), w,
                 starts.astype(np.int64), members.astype(np.int64))


def link_loads(hops: np.ndarray, rate: np.ndarray, L: int) -> np.ndarray:
    """Bytes/s carried by each link."""
    v = hops >= 0
    return np.bincount(hops[v], weights=np.broadcast_to(rate[:, None], hops.shape)[v],
                       minlength=L)
