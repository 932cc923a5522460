"""The compiled progressive filling behind :func:`simulator.network.maxmin.max_min_rates`:
an indexed binary heap of the links' fair shares (residual / weight of their unfixed flows);
the smallest is the next bottleneck (Bertsekas & Gallager, Data Networks, section 6.5.2)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _sift_up(heap, pos, key, i):
    """Move the link at slot ``i`` toward the root while its share is below its parent's."""
    x = heap[i]
    while i > 0:
        p = (i - 1) >> 1
        if key[heap[p]] <= key[x]:
            break
        heap[i] = heap[p]
        pos[heap[i]] = i
        i = p
    heap[i] = x
    pos[x] = i


@njit(cache=True, nogil=True)
def _sift_down(heap, pos, key, i, n):
    """Move the link at slot ``i`` toward the leaves while a child's share is below its own."""
    x = heap[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and key[heap[c + 1]] < key[heap[c]]:
            c += 1
        if key[heap[c]] >= key[x]:
            break
        heap[i] = heap[c]
        pos[heap[i]] = i
        i = c
    heap[i] = x
    pos[x] = i


@njit(cache=True, nogil=True)
def fill(hops, capacity, unit, w, starts, members):
    """Rates of the flows (rows of ``hops``, -1 padded) by progressive filling: ``unit`` [flow]
    numbers the coupled groups, ``starts`` / ``members`` list each group's flows (CSR), ``w``
    [flow] the weights (:func:`simulator.network.maxmin.max_min_rates`)."""
    F, H = hops.shape
    L = capacity.shape[0]
    rate = np.full(F, np.inf)
    resid = capacity.copy()
    wsum = np.zeros(L)
    left = np.zeros(L, np.int64)                   # unfixed flows on the link
    ptr = np.zeros(L + 1, np.int64)                # link -> its flows (CSR)
    for f in range(F):
        for j in range(H):
            ln = hops[f, j]
            if ln >= 0:
                ptr[ln + 1] += 1
                wsum[ln] += w[f]
                left[ln] += 1
    for ln in range(L):
        ptr[ln + 1] += ptr[ln]
    cursor = ptr[:L].copy()
    on = np.empty(ptr[L], np.int64)
    for f in range(F):
        for j in range(H):
            ln = hops[f, j]
            if ln >= 0:
                on[cursor[ln]] = f
                cursor[ln] += 1
    key = np.full(L, np.inf)
    heap = np.empty(L, np.int64)
    pos = np.full(L, -1, np.int64)
    n = 0
    for ln in range(L):
        if left[ln] > 0:
            key[ln] = max(resid[ln], 0.0) / wsum[ln]
            heap[n] = ln
            pos[ln] = n
            n += 1
    for i in range(n // 2 - 1, -1, -1):
        _sift_down(heap, pos, key, i, n)
    fixed = np.zeros(F, np.bool_)
    for f in range(F):                             # no link: same GPU, rate stays inf
        fixed[f] = True
        for j in range(H):
            if hops[f, j] >= 0:
                fixed[f] = False
                break
    touched = np.zeros(L, np.bool_)
    moved = np.empty(L, np.int64)
    while n > 0 and key[heap[0]] < np.inf:
        ln = heap[0]
        level = key[ln]
        n_moved = 0
        for k in range(ptr[ln], ptr[ln + 1]):
            f = on[k]
            if fixed[f]:
                continue
            u = unit[f]
            for q in range(starts[u], starts[u + 1]):
                m = members[q]
                if fixed[m]:
                    continue
                fixed[m] = True
                r = w[m] * level
                rate[m] = r
                for j in range(H):
                    x = hops[m, j]
                    if x < 0:
                        continue
                    resid[x] -= r
                    wsum[x] -= w[m]
                    left[x] -= 1
                    if not touched[x]:
                        touched[x] = True
                        moved[n_moved] = x
                        n_moved += 1
        for i in range(n_moved):       # each link's share once per bottleneck
            x = moved[i]
            touched[x] = False
            old = key[x]
            key[x] = max(resid[x], 0.0) / wsum[x] if left[x] > 0 else np.inf
            if key[x] < old:           # (rounding: a share only grows)
                _sift_up(heap, pos, key, pos[x])
            else:
                _sift_down(heap, pos, key, pos[x], n)
    return rate
