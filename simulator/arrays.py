"""Array kernels shared by the network and congestion layers: hashing and flow components.

A leaf module (numpy only): the fabric's ECMP hashing and the fluid model's seeded draws use the
same hash, and both the max-min flow simulation and the fluid model's shapes split flows into
independent components the same way; :func:`content_digest` addresses the memos of a sweep.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """Vectorised splitmix64 finaliser (Steele, Lea, Flood 2014): a well-mixed 64-bit hash."""
    x = np.asarray(x).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return (x ^ (x >> np.uint64(31))) & _M64


def components(hops: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
    """[flow] label of its connected component (flows linked by a shared link or group), by
    label propagation over the flows x hops matrix: O(diameter) vectorised passes."""
    F = hops.shape[0]
    label = np.arange(F)
    if F == 0:
        return label
    valid = hops >= 0
    rows = np.nonzero(valid)[0]
    links = hops[valid]
    L = int(links.max()) + 1 if len(links) else 0
    g = None if group is None else np.unique(group, return_inverse=True)[1]
    while True:
        link_min = np.full(L + 1, F)
        np.minimum.at(link_min, links, label[rows])
        cand = np.where(valid, link_min[np.where(valid, hops, L)], F).min(axis=1)
        new = np.minimum(label, cand)
        if g is not None:
            gmin = np.full(int(g.max()) + 1, F)
            np.minimum.at(gmin, g, new)
            new = gmin[g]
        new = new[new]                                 # pointer jumping: follow to the root
        if np.array_equal(new, label):
            return label
        label = new


def content_digest(*objs) -> str:
    """SHA-256 of nested dataclasses, dicts, lists / tuples, arrays and scalars, by content
    (array dtype, shape and bytes; dict items in key order; floats by repr, so exact)."""
    h = hashlib.sha256()

    def walk(x) -> None:
        if isinstance(x, np.ndarray):
            h.update(f"a{x.dtype}{x.shape}".encode())
            h.update(np.ascontiguousarray(x).tobytes())
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            h.update(f"d{type(x).__name__}".encode())
            for f in dataclasses.fields(x):
                h.update(f.name.encode())
                walk(getattr(x, f.name))
        elif isinstance(x, dict):
            h.update(f"m{len(x)}".encode())
            for k in sorted(x, key=repr):
                walk(k)
                walk(x[k])
        elif isinstance(x, (list, tuple)):
            h.update(f"l{len(x)}".encode())
            for v in x:
                walk(v)
        elif isinstance(x, (str, bool, int, float, np.generic)) or x is None:
            h.update(f"s{type(x).__name__}:{x!r};".encode())
        else:
            raise TypeError(f"content_digest: cannot hash {type(x).__name__}")

    for o in objs:
        walk(o)
    return h.hexdigest()
