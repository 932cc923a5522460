"""The packet-level reference's ECMP, reproduced: which switch egress links a packet of a given
5-tuple takes in `third` (HPCC ns-3, validation/ns3_suite*/README.md).

`third` routes by shortest paths: a breadth-first search from every host over the cables
(``CalculateRoute``), each switch keeping, per destination, its neighbours one hop closer in
the order the search met them (``SetRoutingEntries``). The search visits a node's neighbours in
the order of a ``map`` keyed by their addresses, which in this build is descending node id (the
order that reproduces every one of the 64,880 paths the stored runs recorded). A switch
picks among them by ``EcmpHash(sip, dip, sport | dport << 16) % n`` (``SwitchNode::GetOutDev``),
the hash being MurmurHash3's x86 32-bit form (Appleby) seeded with the switch's node id. An
acknowledgement hashes its own header: the receiver's address first and the data's ports
swapped (``RdmaHw::ReceiveUdp``), so it need not come back the way its data went.

This module holds no simulator code: it states those rules and checks itself against the paths
the stored runs' data packets took (``flows.csv`` ``path``; tests/validation)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workloads.units import BITS_PER_BYTE, GIGA

REFERENCE_SPORT = 10000
"""`third`'s first source port of a host pair's flows (``portNumder``)."""
DPORT_PER_DRAW = 100
"""The flow files' destination port is this times the draw, so that ECMP hashes other paths
in each draw (the reference's paths are otherwise fixed by its inputs)."""


def export_topology(case, draw: int):
    """The fabric of ``case`` (a :class:`validation.ns3_suite.Case`) as `third` reads it:
    hosts 0..G-1 (GPU g's NIC), then switches; one line per cable. Returns (text,
    {(node, ifindex): clustersim name of the link that device sends on}, {(node, ifindex):
    the link it receives on})."""
    f = case.fabric(draw)
    nic = f.link_src[f.nic_links[:, 0]]
    switches = np.flatnonzero(f.tier >= 0)
    ns3_id = {int(n): g for g, n in enumerate(nic)}
    ns3_id.update({int(s): case.hosts + k for k, s in enumerate(switches)})
    cables, seen = [], set()
    for li, (a, b) in enumerate(zip(f.link_src, f.link_dst)):
        if int(a) not in ns3_id or int(b) not in ns3_id or (int(b), int(a)) in seen:
            continue
        seen.add((int(a), int(b)))
        cables.append((int(a), int(b), f.capacity[li] * BITS_PER_BYTE / GIGA,
                       f.latency[li] * 1e3))                    # Gb/s, ms
    n_if = {}
    port, inport = {}, {}
    link_names = f.link_names()
    by_pair = {(int(a), int(b)): link_names[i] for i, (a, b) in
               enumerate(zip(f.link_src, f.link_dst))}
    lines = []
    for a, b, gbps, ms in cables:
        ia, ib = ns3_id[a], ns3_id[b]
        n_if[ia] = n_if.get(ia, 0) + 1
        n_if[ib] = n_if.get(ib, 0) + 1
        port[(ia, n_if[ia])] = by_pair[(a, b)]          # node ia's device toward b: a -> b
        port[(ib, n_if[ib])] = by_pair[(b, a)]
        inport[(ia, n_if[ia])] = by_pair[(b, a)]
        inport[(ib, n_if[ib])] = by_pair[(a, b)]
        lines.append(f"{ia} {ib} {gbps:g}Gbps {ms:g}ms 0")
    head = [f"{case.hosts + len(switches)} {len(switches)} {len(cables)}",
            " ".join(str(case.hosts + k) for k in range(len(switches)))]
    return "\n".join(head + lines) + "\n", port, inport


def reference_ports(src, dst, start_s, flow, draw, run=0) -> tuple[np.ndarray, np.ndarray]:
    """Each flow's (source, destination) UDP port in its run of ``draw``: `third` numbers a
    host pair's flows REFERENCE_SPORT, REFERENCE_SPORT + 1, ... in the order they start (ties
    by flow id, the flow file's order); the flow file gives every flow DPORT_PER_DRAW x draw.
    ``draw`` and ``run`` (labels of separate runs) may be per flow."""
    f = pd.DataFrame({"src": np.asarray(src), "dst": np.asarray(dst),
                      "start_s": np.asarray(start_s), "flow": np.asarray(flow),
                      "draw": draw, "run": run})
    rank = f.sort_values(["start_s", "flow"], kind="stable").groupby(
        ["draw", "run", "src", "dst"]).cumcount()
    sport = REFERENCE_SPORT + rank.reindex(f.index).to_numpy()
    return sport, DPORT_PER_DRAW * f.draw.to_numpy(np.int64)


_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmur3_32(words: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """MurmurHash3 x86 32-bit of rows of little-endian uint32 words ([n, k]; k * 4 bytes, no
    tail), seeded per row: vectorised over rows."""
    words = np.asarray(words, np.uint32)
    h = np.asarray(seed, np.uint32).copy()
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            k = _rotl(words[:, j] * _C1, 15) * _C2
            h = _rotl(h ^ k, 13)
            h = h * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= np.uint32(4 * words.shape[1])
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h


def node_ip(node) -> np.ndarray:
    """`third`'s address of host ``node`` (``node_id_to_ip``), as the uint32 it hashes."""
    node = np.asarray(node, np.int64)
    return (0x0B000001 + (node // 256) * 0x10000 + (node % 256) * 0x100).astype(np.uint32)


class Routes:
    """`third`'s routing tables for a topology file's text (:func:`ns3_reference.
    export_topology`): per switch and destination host, the egress interfaces in order."""

    def __init__(self, topology: str):
        lines = topology.strip().splitlines()
        n_nodes, _, n_links = (int(x) for x in lines[0].split()[:3])
        self.switches = {int(x) for x in lines[1].split()}
        self.hosts = [n for n in range(n_nodes) if n not in self.switches]
        self.nbr: list[dict[int, int]] = [{} for _ in range(n_nodes)]   # node -> {peer: if}
        for line in lines[2:2 + n_links]:
            a, b = (int(x) for x in line.split()[:2])
            self.nbr[a][b] = len(self.nbr[a]) + 1      # device 0 is the loopback
            self.nbr[b][a] = len(self.nbr[b]) + 1
        self.peer = [{i: p for p, i in nb.items()} for nb in self.nbr]   # node -> {if: peer}
        self.table: dict[tuple[int, int], list[int]] = {}
        for host in self.hosts:
            self._bfs(host)

    def _bfs(self, host: int) -> None:
        dist, queue = {host: 0}, [host]
        for now in queue:
            for nxt in sorted(self.nbr[now], reverse=True):
                if nxt not in dist:
                    dist[nxt] = dist[now] + 1
                    if nxt in self.switches:
                        queue.append(nxt)
                if dist[nxt] == dist[now] + 1 and nxt in self.switches:
                    self.table.setdefault((nxt, host), []).append(self.nbr[nxt][now])

    def paths(self, src, dst, sport, dport) -> list[list[tuple[int, int]]]:
        """Per packet src -> dst with these ports (arrays), the (switch, egress interface)
        it is queued at, in order (first: the source's one switch). Ports are 16 bits on the
        wire (a flow file's larger destination port wraps)."""
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        ports = (np.asarray(sport, np.int64) & 0xFFFF) | ((np.asarray(dport, np.int64)
                                                          & 0xFFFF) << 16)
        words = np.stack([node_ip(src), node_ip(dst), ports.astype(np.uint32)], axis=1)
        sw = np.array(sorted(self.switches))
        col = {int(s): j for j, s in enumerate(sw)}
        h = murmur3_32(np.repeat(words, len(sw), axis=0), np.tile(sw, len(src)))
        h = h.reshape(len(src), len(sw))                 # [packet, switch] its hash there
        out = []
        for f, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
            node, hops = next(iter(self.nbr[s])), []
            while node != d:
                nexts = self.table[(node, d)]
                intf = nexts[int(h[f, col[node]]) % len(nexts)]
                hops.append((node, intf))
                node = self.peer[node][intf]
            out.append(hops)
        return out

    def named(self, port: dict, src, dst, sport, dport) -> list[str]:
        """:meth:`paths` as the switch egress links' names (``port``: :func:`export_topology`'s
        (node, ifindex) -> name), space-separated as flows.csv's ``path``."""
        return [" ".join(port[x] for x in p) for p in self.paths(src, dst, sport, dport)]
