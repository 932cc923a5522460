"""Collectives lowered to flows on the fabric, plus NCCL's latency terms.

A collective over a batch of communicator groups (e.g. all 64 DP groups of a stage at once) is a
list of sequential phases; each phase is one set of concurrent flows covering every group, so
groups really share (and collide on) links. Pure numpy: no simpy here.

Algorithms (NCCL's, validation/network.md):
- ring: one ring per channel; with k GPUs of the group per node, k NIC rails and
  ``channels_per_nic`` channels on each (NCCL doubles the one per NIC its search finds; the
  default here is one),
  channel c visiting each node's GPUs starting from its (c mod k)-th; each ring edge carries
  factor x S / channels (all-reduce 2(n-1)/n, all-gather / reduce-scatter (n-1)/n of the full
  buffer S); the flows of one ring are rate-coupled: the ring moves at its slowest edge.
- tree: NCCL's double binary tree over nodes (chains inside nodes); each tree carries S/2 up
  (reduce) and down (broadcast), pipelined, so both directions run at once.
- nvls: NCCL's NVLS all-reduce inside one node with NVLink SHARP (H100 and later): the NVSwitch
  reduces and multicasts, not simulated as flows; time = NCCL's NVLS latency + S / the node's
  NVLS rate (:func:`simulator.network.alpha_beta.nvls_node_algbw`).
- nvlstree: NCCL's NVLSTree all-reduce on NVSwitch systems with NVLink SHARP: the reduction
  inside a node runs in the NVSwitch (NVLS, as above: it bounds the pipeline), across nodes the
  trees above without chains, so every inter-node hop stays on its rail; latency = NCCL's
  NVLSTree term plus the pipeline fill of the tree
  (:func:`simulator.network.alpha_beta.nvls_tree_fill_s`).
- nvls / collnet across nodes (``topology.sharp``: IB SHARP through NCCL's CollNet): the
  switches reduce, not simulated as flows; each GPU's NIC carries S / k each way whatever the
  node count, at its link's effective capacity (degraded or failed links count), pipelined
  with the node's NVLS (or NVLink reduce-scatter / all-gather) stage; NCCL's NVLS / CollNet
  Direct latency (:meth:`simulator.network.alpha_beta.AlphaBeta.sharp_algbw`).
- halving_doubling: Rabenseifner all-reduce, log2(n) rounds of pairwise exchanges of S/2, S/4,
  ... (reduce-scatter) then the same reversed (all-gather); n must be a power of two.
- hierarchical: reduce-scatter inside each node over NVLink, all-reduce of each 1/k shard across
  nodes on its own rail (k rings), all-gather inside each node: three sequential phases.
- all_to_all: every rank sends S/n to every other rank (S = what one rank sends in total).
- rail_all_to_all / node_all_to_all: the two legs of a hierarchical all-to-all (DeepEP): each
  rank sends S / (nodes - 1) to the GPU on its own rail in every other node of the group, or
  S / (k - 1) to every other member of the group in its own node (k per node).
- p2p: each rank sends S to the next rank of its group (nccl-tests sendrecv).
p2p and all_to_all sends to another node's GPU on another rail go through PXN
(:func:`pxn_edges`): over NVLink to the local GPU on the destination's rail, then its NIC.
Each flow is split over ``queue_pairs`` queue pairs (distinct source ports, so ECMP spreads them):
all of them, or as many as it has messages (:func:`qps_used`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator import congestion
from simulator.calibration import (
    CHANNELS_PER_NIC_DEFAULT,
    NCCL_BUFFSIZE_BYTES,
    NCCL_STEPS,
    NET_BUSBW_EFFICIENCY,
)
from simulator.errors import FabricError
from simulator.network.alpha_beta import (
    A2A_KINDS,
    A2A_LEGS,
    BUSBW_FACTOR,
    PROTOCOL_KINDS,
    SIMPLE_ONLY,
    all_to_all_plugin_s,
    all_to_all_protocol,
    crosses_net_as_p2p,
    fastest_protocol,
    ll_floor_s,
    nccl_latency_s,
    nvls_node_algbw,
    nvls_tree_fill_s,
    p2p_latency_s,
    p2p_net_derate,
    ring_run_s,
    sharp_node_algbw,
    tree_run_s,
)
from simulator.network.fabric import Fabric, switch_buffers, switch_ids
from simulator.network.flows import FlowResult, simulate_flows
from simulator.step.groups import Group

CONGESTION_KEYS = {"max_queue_bytes": "link_max_queue", "queue_byte_s": "link_queue_byte_s",
                   "pause_s": "link_pause_s", "pauses": "link_pauses",
                   "marked_bytes": "link_marked_bytes", "dropped_bytes": "link_dropped_bytes"}
"""CollectiveResult.congestion arrays and the FluidResult fields they sum (max for queues)."""


def add_congestion(total: dict, part, times: float = 1.0, field=lambda k: k) -> None:
    """Accumulate per-link congestion arrays into ``total``: the deepest queue is a maximum,
    everything else sums (``times`` repetitions of ``part``; ``field`` maps a key to the
    attribute or item of ``part`` that holds it)."""
    for k in CONGESTION_KEYS:
        got = part(field(k))
        if k == "max_queue_bytes":
            np.maximum(total[k], got, out=total[k])
        else:
            total[k] += got * times
MAX_A2A_FLOWS = 4_000_000
"""all-to-all needs n (n - 1) flows per group; beyond this many the request is refused."""
ALGORITHMS = ("ring", "tree", "nvls", "nvlstree", "collnet", "halving_doubling", "hierarchical")


@dataclass
class Phase:
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    group: np.ndarray
    """Rate-coupling id: flows with the same id move at one rate (a ring)."""


def _layout(ranks: np.ndarray, gpn: int) -> list[np.ndarray]:
    """The group's GPUs per node, nodes in order of first appearance."""
    nodes = ranks // gpn
    _, first = np.unique(nodes, return_index=True)
    return [ranks[nodes == nodes[i]] for i in np.sort(first)]


def _ring_edges(ranks: np.ndarray, gpn: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(src, dst) edge arrays of each channel's ring (:func:`rail_ring`)."""
    per_node = _layout(ranks, gpn)
    k = min(len(x) for x in per_node)
    if len(per_node) == 1 or any(len(x) != k for x in per_node):
        chans = k if len(per_node) > 1 else 1
        out = []
        for c in range(chans):
            order = np.concatenate([np.roll(x, -c) for x in per_node])
            out.append((order, np.roll(order, -1)))
        return out
    blocks = np.stack(per_node)[None]                          # [1 group, nodes, k]
    return [rail_ring(blocks, c) for c in range(k)]


def rail_ring(blocks: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of channel ``c``'s ring over groups laid out as ``blocks`` [group, node, k]
    (k GPUs of the group per node, nodes in ring order), rail-aligned as NCCL builds it on
    multi-NIC servers: the ring enters each node at its c-th GPU (over NIC rail c), visits the
    node's other GPUs over NVLink, and the last one hands its data over NVLink back to the
    c-th GPU, whose NIC sends it to the next node's c-th GPU (PXN, NCCL_PXN_DISABLE=0). Every
    inter-node hop stays on rail c, so a rail-optimized fabric carries it inside the rail.
    Per node: k - 1 ring hops and the PXN hop over NVLink, one hop over the network; with one
    GPU per node (k = 1) just the network hop."""
    order = np.roll(blocks, -c, axis=2)                        # [G, m, k], entry GPU first
    src, dst = [], []
    if order.shape[2] > 1:
        src += [order[:, :, :-1], order[:, :, -1:]]            # NVLink ring, then PXN hop
        dst += [order[:, :, 1:], order[:, :, :1]]
    src.append(order[:, :, :1])                                # network: rail c to rail c
    dst.append(np.roll(order[:, :, :1], -1, axis=1))
    return (np.concatenate([s.reshape(len(order), -1) for s in src], axis=1).ravel(),
            np.concatenate([d.reshape(len(order), -1) for d in dst], axis=1).ravel())


def pxn_edges(src: np.ndarray, dst: np.ndarray, gpn: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point-to-point sends as NCCL routes them with PXN (``NCCL_P2P_PXN_LEVEL=2``, its
    default: send / receive and all-to-all always use PXN): a send to another node whose GPU
    sits on another rail first crosses NVLink to the local GPU of the destination's rail, whose
    NIC carries it, so every inter-node hop stays on one rail. Returns (src, dst, pair id): the
    NVLink leg and the network leg of one send share an id (they pipeline: one rate)."""
    cross = (src // gpn != dst // gpn) & (src % gpn != dst % gpn)
    proxy = (src // gpn) * gpn + dst % gpn
    ids = np.arange(len(src))
    return (np.concatenate([src[~cross], src[cross], proxy[cross]]),
            np.concatenate([dst[~cross], proxy[cross], dst[cross]]),
            np.concatenate([ids[~cross], ids[cross], ids[cross]]))


def btree_parent(r: np.ndarray, m: int) -> np.ndarray:
    """NCCL's binary tree over m ranks (src/graph/trees.cc): rank 0 is the root; otherwise with
    b the lowest set bit of r the parent is (r ^ b) | 2b, or r ^ b when that is out of range.
    Odd ranks are the leaves."""
    r = np.asarray(r, np.int64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= m, r ^ bit, up)
    return np.where(r == 0, -1, up)


def _tree_edges(ranks: np.ndarray, gpn: int, chains: bool = True
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Both directions of every edge of NCCL's double binary trees over nodes, one pair per
    channel (one channel per NIC rail, as its rings): channel c's trees join the nodes'
    c-th GPUs (the second tree mirrors the first for an even node count, shifts it by one for
    an odd one, so each node is a leaf in at least one tree), and a chain inside each node
    starts there (``chains``; NVLSTree reduces inside the node through the NVSwitch instead).
    Each of the 2 x channels trees carries S / (2 x channels) up and down."""
    per_node = _layout(ranks, gpn)
    m = len(per_node)
    k = min(len(x) for x in per_node) if m > 1 else 1
    r = np.arange(m)
    parent1 = btree_parent(r, m)
    if m % 2 == 0:
        mirror = m - 1 - r
        parent2 = np.where(parent1[mirror] >= 0, m - 1 - parent1[mirror], -1)
    else:
        shift = (r - 1) % m
        parent2 = np.where(parent1[shift] >= 0, (parent1[shift] + 1) % m, -1)
    out = []
    for c in range(k):
        nodes = [np.roll(x, -c) for x in per_node]
        leaders = np.array([x[0] for x in nodes])
        none = np.zeros(0, np.int64)
        chains_src = np.concatenate([x[1:] if chains else none for x in nodes] or [none])
        chains_dst = np.concatenate([x[:-1] if chains else none for x in nodes] or [none])
        for parent in (parent1, parent2):
            child = np.flatnonzero(parent >= 0)
            up_s, up_d = leaders[child], leaders[parent[child]]
            out.append((np.concatenate([up_s, up_d, chains_src, chains_dst]),
                        np.concatenate([up_d, up_s, chains_dst, chains_src])))
    return out


def _check_a2a_flows(n: int, groups: int) -> None:
    """An all-to-all of ``groups`` groups of n ranks is n (n - 1) flows per group: refuse one
    beyond MAX_A2A_FLOWS in one line that names the way out."""
    if n * (n - 1) * groups > MAX_A2A_FLOWS:
        raise FabricError(f"all_to_all over {n} ranks x {groups} groups needs "
                          f"{n * (n - 1) * groups:,} flows (limit {MAX_A2A_FLOWS:,}); "
                          f"screening fidelity runs NCCL's cost model instead (nccl-tests "
                          f"--fidelity screening)")


def lower(kind: str, groups: list[np.ndarray], nbytes: float, *, gpus_per_node: int,
          algorithm: str = "ring", channels_per_nic: int = CHANNELS_PER_NIC_DEFAULT
          ) -> list[Phase]:
    """Phases of flows for ``kind`` run by every group in ``groups`` at once; rings and trees
    across nodes run ``channels_per_nic`` channels on each rail, each its own ring (or tree
    pair) with 1 / channels of the data."""
    cpn = channels_per_nic
    phases: list[list[tuple]] = []
    gid = 0

    def add(p: int, src, dst, size, coupled=True, pxn=False):
        nonlocal gid
        while len(phases) <= p:
            phases.append([])
        if pxn:
            src, dst, g = pxn_edges(np.asarray(src), np.asarray(dst), gpus_per_node)
            g = gid + g
        else:
            g = np.full(len(src), gid) if coupled else gid + np.arange(len(src))
        gid = int(g.max()) + 1 if len(src) else gid
        phases[p].append((src, dst, np.full(len(src), float(size)), g))

    uniform = len({len(g) for g in groups}) == 1 and len(groups[0]) >= 2
    if uniform and (kind == "p2p" or (kind not in A2A_KINDS and algorithm == "ring")):
        # every group the same size: build all groups' edges at once (no loop over groups)
        M = np.asarray(groups, np.int64)                         # [groups, n]
        n = M.shape[1]
        if kind == "p2p":
            add(0, M.ravel(), np.roll(M, -1, axis=1).ravel(), nbytes, pxn=True)
            return [Phase(*[np.concatenate([p[i] for p in ph]) for i in range(4)])
                    for ph in phases]
        nodes = M // gpus_per_node
        k = int((nodes == nodes[:, :1]).sum(axis=1).min())      # GPUs per node in the group
        same_layout = (nodes.reshape(len(M), -1, k) == nodes.reshape(len(M), -1, k)[:, :, :1]
                       ).all() if n % k == 0 else False
        if same_layout:
            chans = k * cpn if n > k else 1
            per = BUSBW_FACTOR[kind](n) * nbytes / chans
            blocks = M.reshape(len(M), n // k, k)
            for c in range(chans):
                if n > k:                   # across nodes: rail-aligned (rail_ring)
                    src, dst = rail_ring(blocks, c % k)
                else:                       # one node: a plain ring over NVLink
                    order = np.roll(blocks, -c, axis=2).reshape(len(M), n)
                    src, dst = order.ravel(), np.roll(order, -1, axis=1).ravel()
                ids = gid + np.repeat(np.arange(len(M)), len(src) // len(M))
                gid += len(M)
                while len(phases) < 1:
                    phases.append([])
                phases[0].append((src, dst, np.full(len(src), per), ids))
            return [Phase(*[np.concatenate([p[i] for p in ph]) for i in range(4)])
                    for ph in phases]
    for ranks in groups:
        ranks = np.asarray(ranks, np.int64)
        n = len(ranks)
        if n < 2:
            continue
        if kind == "p2p":
            add(0, ranks, np.roll(ranks, -1), nbytes, pxn=True)
        elif kind == "all_to_all":
            _check_a2a_flows(n, len(groups))
            s, d = np.meshgrid(ranks, ranks, indexing="ij")
            off = s != d
            add(0, s[off], d[off], nbytes / n, pxn=True)
        elif kind in A2A_LEGS:
            per_node = _layout(ranks, gpus_per_node)
            if len({len(x) for x in per_node}) > 1:
                raise FabricError(f"{kind} needs the same number of the group's GPUs on every "
                                  f"node, got {[len(x) for x in per_node]}")
            grid = np.stack(per_node)                            # [node, local]
            rail = kind == "rail_all_to_all"
            peers = grid.shape[0 if rail else 1]
            if peers > 1:                    # shift j = 1 .. peers - 1 along nodes or locals
                shift = (np.arange(1, peers)[:, None] + np.arange(peers)) % peers
                dst = (grid[shift] if rail else grid[:, shift].transpose(1, 0, 2)).ravel()
                add(0, np.tile(grid.ravel(), peers - 1), dst, nbytes / (peers - 1),
                    coupled=False)
        elif algorithm == "ring" or kind != "all_reduce":
            edges = _ring_edges(ranks, gpus_per_node)
            if len(_layout(ranks, gpus_per_node)) > 1:
                edges = edges * cpn
            per = BUSBW_FACTOR[kind](n) * nbytes / len(edges)
            for src, dst in edges:
                add(0, src, dst, per)
        elif algorithm in ("tree", "nvlstree"):
            trees = _tree_edges(ranks, gpus_per_node, chains=algorithm == "tree") * cpn
            for src, dst in trees:
                add(0, src, dst, nbytes / len(trees))
        elif algorithm == "hierarchical":
            per_node = _layout(ranks, gpus_per_node)
            k, m = len(per_node[0]), len(per_node)
            for x in per_node:                                   # phases 0 and 2: NVLink rings
                if k > 1:
                    add(0, x, np.roll(x, -1), (k - 1) / k * nbytes)
                    add(2, x, np.roll(x, -1), (k - 1) / k * nbytes)
            if m > 1:                                            # phase 1: one ring per rail
                grid = np.stack(per_node)                        # [node, local]
                for j in range(k):
                    col = grid[:, j]
                    add(1, col, np.roll(col, -1), 2 * (m - 1) / m * nbytes / k)
        elif algorithm == "halving_doubling":
            if n & (n - 1):
                raise FabricError(f"halving_doubling needs a power-of-two group, got {n}")
            rounds = int(math.log2(n))
            idx = np.arange(n)
            for r in range(rounds):
                partner = idx ^ (n >> (r + 1))
                size = nbytes / 2 ** (r + 1)
                add(r, ranks, ranks[partner], size, coupled=False)
                add(2 * rounds - 1 - r, ranks, ranks[partner], size, coupled=False)
        else:
            raise FabricError(f"unknown algorithm {algorithm!r}; expected one of "
                              f"{', '.join(ALGORITHMS)}")
    out = []
    for parts in phases:
        cat = [np.concatenate([p[i] for p in parts]) for i in range(4)]
        out.append(Phase(*cat))
    return out


@dataclass
class CollectiveResult:
    time_s: float
    """Latency term plus the bandwidth time of all phases."""
    bandwidth_s: float
    latency_s: float
    flows: int
    link_bytes: np.ndarray
    link_busy_s: np.ndarray
    link_max_flows: np.ndarray
    protocol: str = "Simple"
    """NCCL protocol the latency term ran with (LL, LL128 or Simple)."""
    congestion: dict | None = None
    """Fluid model only: per-link arrays ``max_queue_bytes``, ``queue_byte_s``, ``pause_s``,
    ``pauses``, ``marked_bytes``, ``dropped_bytes``, and ``queue_trace`` (t_s from the
    collective's start, link, queue_bytes) for its hottest links."""


def effective_capacity(fabric: Fabric) -> np.ndarray:
    """Line rate x achievable bus-bandwidth fraction (NVLink or network), failed links at 0.
    Computed once per fabric object."""
    cached = getattr(fabric, "_effective_capacity", None)
    if cached is not None:
        return cached
    nv = (fabric.kind[fabric.link_src] == "nvswitch") | (fabric.kind[fabric.link_dst] == "nvswitch")
    cap = fabric.capacity * np.where(nv, fabric.nvlink_efficiency,
                                     NET_BUSBW_EFFICIENCY[fabric.transport])
    cap = np.where(fabric.failed, 0.0, cap)
    fabric._effective_capacity = cap
    return cap


@dataclass
class RoutedPhase:
    """One phase of a collective on the fabric: its flows' hops, sizes, line shares and
    groups (after queue-pair spreading and routing)."""

    hops: np.ndarray
    size: np.ndarray
    share: np.ndarray
    group: np.ndarray
    split: object = None
    """Under the fluid model, its flows split into forms ahead of time (plan_forms)."""


NET_MESSAGE_BYTES = NCCL_BUFFSIZE_BYTES // NCCL_STEPS
"""The largest message NCCL's network transport posts for one connection: one step of the
Simple protocol's buffer (512 KiB)."""


def qps_used(nbytes: np.ndarray, queue_pairs: int, split_data_on_qps: bool) -> np.ndarray:
    """Queue pairs each connection's ``nbytes`` travel on, as NCCL's IB / RoCE transport posts
    them (net_ib.cc, 2.28): with NCCL_IB_SPLIT_DATA_ON_QPS=1 every message is cut into one part
    per queue pair; with 0, its default, each message goes whole on the next queue pair in
    turn, so a connection of m = ceil(nbytes / NET_MESSAGE_BYTES) messages uses min(m, queue
    pairs) of them, each carrying an equal share over the run."""
    nbytes = np.asarray(nbytes, float)
    if split_data_on_qps or queue_pairs == 1:
        return np.full(len(nbytes), queue_pairs, np.int64)
    return np.clip(np.ceil(nbytes / NET_MESSAGE_BYTES), 1, queue_pairs).astype(np.int64)


def route_phases(fabric: Fabric, kind: str, groups: list[np.ndarray], nbytes: float, *,
                 routing: str = "ecmp", queue_pairs: int = 1, algorithm: str = "ring",
                 channels_per_nic: int = CHANNELS_PER_NIC_DEFAULT,
                 split_data_on_qps: bool = False) -> list[RoutedPhase]:
    """The phases of one collective of every group, routed on ``fabric``: each connection over
    its queue pairs (:func:`qps_used`), queue pair j of connection group g on source port
    g x queue_pairs + j."""
    if queue_pairs < 1:
        raise FabricError(f"queue_pairs must be >= 1, got {queue_pairs}")
    if algorithm in ("nvls", "collnet"):  # the switches reduce: no flows (run_collective times
        return []                         # them)
    out = []
    for ph in lower(kind, groups, nbytes, gpus_per_node=fabric.gpus_per_node,
                    algorithm=algorithm, channels_per_nic=channels_per_nic):
        if queue_pairs == 1 or split_data_on_qps:      # every connection on all of them
            q = queue_pairs
            qp = np.tile(np.arange(q), len(ph.src))
        else:
            q = qps_used(ph.nbytes, queue_pairs, split_data_on_qps)
            qp = np.arange(int(q.sum())) - np.repeat(np.cumsum(q) - q, q)  # j within its flow
        src, dst = np.repeat(ph.src, q), np.repeat(ph.dst, q)
        sport = qp + np.repeat(ph.group, q) * queue_pairs
        hops, parent, share = fabric.route(src, dst, sport, routing)
        out.append(RoutedPhase(hops=hops, size=np.repeat(ph.nbytes / q, q)[parent] * share,
                               share=share, group=np.repeat(ph.group, q)[parent]))
    return out


def run_collective(fabric: Fabric, kind: str, groups: list[np.ndarray], nbytes: float, *,
                   routing: str = "ecmp", queue_pairs: int = 1, algorithm: str = "ring",
                   net=None, seed: int = 0, fluid_cache: dict | None = None,
                   routed: list[RoutedPhase] | None = None, pool=None,
                   protocol: str = "auto", channels_per_nic: int = CHANNELS_PER_NIC_DEFAULT,
                   gpu_name: str | None = None, split_data_on_qps: bool = False
                   ) -> CollectiveResult:
    """Simulate one collective of every group at once; time = NCCL latency + fluid time.

    ``net`` (a NetworkConfig with DCQCN or PFC on) runs the phases through the congestion
    fluid model (simulator.congestion.fluid) instead of max-min sharing; ring members are then not
    rate-coupled and the collective ends with its slowest flow. Congested components of the
    same shape are simulated once (:mod:`simulator.congestion.shapes`); ``fluid_cache`` keeps
    those shapes across calls, ``pool`` (a FormPool) runs them in worker processes.
    ``routed``: the phases from :func:`route_phases`, if already routed (``queue_pairs`` and
    ``split_data_on_qps`` as there). ``protocol``:
    NCCL_PROTO (auto: the protocol with the least latency + bandwidth time on this fabric, LL
    no faster than NCCL's LL ceiling for ``gpu_name`` on this many nodes)."""
    fluid = net is not None and (net.congestion_control == "dcqcn" or net.pfc)
    if routed is None:
        routed = route_phases(fabric, kind, groups, nbytes, routing=routing,
                              queue_pairs=queue_pairs, algorithm=algorithm,
                              channels_per_nic=channels_per_nic,
                              split_data_on_qps=split_data_on_qps)
    cap = effective_capacity(fabric)
    for ph in routed:
        _check_live(fabric, ph.hops, cap)
    L = fabric.num_links
    total = {"bytes": np.zeros(L), "busy": np.zeros(L), "max": np.zeros(L, np.int64)}
    bw, flows = 0.0, 0
    cong = {k: np.zeros(L) for k in CONGESTION_KEYS} if fluid else None
    traces = []
    for ph in routed:
        hops, size, share = ph.hops, ph.size, ph.share
        if fluid:
            res, fl = _fluid_phase(fabric, hops, size, share, cap, net, seed, fluid_cache, pool,
                                   ph.split)
            add_congestion(cong, lambda name: getattr(fl, name), field=CONGESTION_KEYS.get)
            if len(fl.queue_trace):
                traces.append(fl.queue_trace.assign(t_s=fl.queue_trace.t_s + bw))
        else:
            res = simulate_flows(hops, size, cap, np.zeros(L), group=ph.group, weight=share)
        bw += float(np.nanmax(res.finish_s)) if len(size) else 0.0
        total["bytes"] += res.link_bytes
        total["busy"] += res.link_busy_s
        np.maximum(total["max"], res.link_max_flows, out=total["max"])
        flows += len(size)
    sizes = [len(g) for g in groups if len(g) > 1]
    n = max(sizes) if sizes else 1
    grp = Group(size=n, per_node=len(_layout(np.asarray(groups[0]), fabric.gpus_per_node)[0]))
    nvlink = fabric.capacity[fabric.gpu_links[int(groups[0][0]), 0]]
    if crosses_net_as_p2p(kind, grp):    # sends across nodes, NIC-bound: at their measured rate
        bw /= p2p_net_derate(fabric.transport)
    if algorithm in ("nvls", "collnet") and grp.nodes > 1:       # IB SHARP: the switches reduce
        bw = max(bw, nbytes / _sharp_algbw(fabric, groups, grp, nvlink, algorithm, gpu_name))
    elif algorithm in ("nvls", "nvlstree"):  # the NVSwitch's stage inside each node
        bw = max(bw, nbytes / nvls_node_algbw(nvlink, grp.per_node, gpu_name, grp.size))
    algo = "tree" if algorithm == "tree" else "ring"
    lat_kind = "all_gather" if kind in (*A2A_KINDS, "p2p") else kind
    a2a = kind in A2A_KINDS
    # the net plugin's latency: per network hop, but once (twice under Simple) for an
    # all-to-all's messages, which are in flight together (alpha_beta.all_to_all_plugin_s)
    net_us = 0.0 if a2a else fabric.net_latency_us
    lat, proto = 0.0, "Simple"
    if n > 1:
        # NCCL_PROTO binds the collectives NCCL tunes; an all-to-all's sends run LL or Simple
        # by their size (alpha_beta.all_to_all_protocol); a hierarchical one's legs, Simple
        proto_set = (protocol if kind in PROTOCOL_KINDS else
                     all_to_all_protocol(grp, nbytes) if kind == "all_to_all" else "Simple")
        # an all-to-all's sends borrow the ring's hop latencies, not its tuner's per-step
        # network overhead or LL ceiling by host (alpha_beta.all_to_all_latency_s)
        host = None if a2a or kind == "p2p" else fabric.host_cpu
        floor = ll_floor_s(algo, lat_kind, grp, nbytes, gpu_name, host or "intel")
        lat, proto = fastest_protocol(proto_set,
                                      lambda p: nccl_latency_s(algo, p, lat_kind, grp, net_us,
                                                               host, nbytes),
                                      bw, floor,
                                      nbytes if algo == "tree" and kind == "all_reduce"
                                      else 0.0)
        if algorithm == "ring" and grp.nodes > 1 and kind in PROTOCOL_KINDS:
            # NCCL's estimate chose the protocol; the ring runs pipelined (ring_run_s)
            lat = ring_run_s(proto, kind, grp, bw, net_us=net_us, host_cpu=fabric.host_cpu,
                             transport=fabric.transport, ll_floor=floor)
        elif algorithm == "tree" and grp.nodes > 1 and kind == "all_reduce":
            # and a tree at its transport's measured rate (alpha_beta.tree_run_s)
            lat = tree_run_s(proto, grp, nbytes, bw, net_us=net_us, host_cpu=fabric.host_cpu,
                             transport=fabric.transport, ll_floor=floor)
        lat -= bw
        if a2a:
            lat += all_to_all_plugin_s(kind, grp, fabric.net_latency_us, proto)
    if algorithm in (*SIMPLE_ONLY, "halving_doubling") or kind == "p2p":
        proto = "Simple"
    if algorithm in ("nvls", "collnet"):
        lat = nccl_latency_s(algorithm, "Simple", kind, grp, net_us)
    elif algorithm == "nvlstree":    # Simple only, and its pipeline fill across the nodes
        nic = fabric.capacity[fabric.nic_links[int(groups[0][0]), 0]]
        lat = (nccl_latency_s("nvlstree", "Simple", kind, grp, net_us)
               + nvls_tree_fill_s(nbytes, grp.nodes, grp.per_node, nic, fabric.transport))
    elif algorithm == "halving_doubling":
        lat = len(routed) * nccl_latency_s("ring", "Simple", "p2p", Group(2, 1), net_us)
    elif kind == "p2p":             # one send / receive per rank, whatever the group's size
        lat = p2p_latency_s(grp.nodes == 1, fabric.net_latency_us)
    return CollectiveResult(time_s=bw + lat, bandwidth_s=bw, latency_s=lat, flows=flows,
                            protocol=proto,
                            link_bytes=total["bytes"], link_busy_s=total["busy"],
                            link_max_flows=total["max"],
                            congestion=None if not fluid else {
                                **cong, "queue_trace": pd.concat(traces) if traces else
                                pd.DataFrame(columns=["t_s", "link", "queue_bytes"])})


def _sharp_algbw(fabric: Fabric, groups: list[np.ndarray], grp: Group, nvlink: float,
                 algorithm: str, gpu_name: str | None) -> float:
    """Algorithm bandwidth of an all-reduce the switches reduce (IB SHARP,
    :meth:`AlphaBeta.sharp_algbw`) on this fabric: each GPU's NIC carries S / k each way to
    and from the aggregation tree, so the slowest NIC link of any group (effective capacity:
    degraded or failed ones count) sets the network stage; the trees above the NICs carry S / k
    per link and are not routed here. The stage inside each node as in the alpha-beta model."""
    ranks = np.concatenate([np.asarray(g, np.int64) for g in groups if len(g) > 1])
    links = fabric.nic_links[ranks]                              # [rank, up / down]
    cap = effective_capacity(fabric)[links]
    if not cap.min() > 0:
        raise FabricError(f"{algorithm} all-reduce: a NIC link of GPU "
                          f"{int(ranks[np.argmin(cap.min(axis=1))])} has failed")
    _, inv, count = np.unique(links, return_inverse=True, return_counts=True)
    per_gpu = cap / count[inv.reshape(links.shape)]               # GPUs sharing a NIC split it
    node = sharp_node_algbw(algorithm, nvlink, fabric.nvlink_efficiency, grp.per_node,
                            gpu_name, grp.size)
    return min(grp.per_node * float(per_gpu.min()), node)


def _check_live(fabric: Fabric, hops: np.ndarray, cap: np.ndarray) -> None:
    """A flow whose path crosses a failed or zero-capacity link never finishes: say which."""
    used = hops[hops >= 0]
    dead = used[cap[used] <= 0]
    if len(dead):
        raise FabricError(f"a collective's path crosses {fabric.link_names([dead[0]])[0]}, "
                          f"which is down or has no capacity")


def fluid_inputs(fabric: Fabric, net) -> tuple:
    """The fluid model's per-link and per-switch arguments for ``fabric`` on the calibrated
    capacities: (capacity wire bytes/s, latency, switch_src, switch_dst, buffer_bytes)."""
    payload = net.mtu_bytes / (net.mtu_bytes + net.header_bytes)
    src_sw, dst_sw, _ = switch_ids(fabric)
    return (effective_capacity(fabric) / payload, np.zeros(fabric.num_links) + fabric.latency,
            src_sw, dst_sw, switch_buffers(fabric))


def _fluid_phase(fabric: Fabric, hops, size, share, cap, net, seed: int, cache, pool=None,
                 split=None):
    """One phase through the DCQCN / PFC fluid model, on the same calibrated capacities:
    (FlowResult, FluidResult)."""
    res = congestion.simulate_fluid_components(hops, size, *fluid_inputs(fabric, net), net,
                                               seed=seed, line_share=share, cache=cache,
                                               pool=pool, split=split)
    counts = np.bincount(hops[hops >= 0], minlength=fabric.num_links)
    busy = np.where(res.link_bytes > 0, res.link_bytes / np.maximum(cap, 1e-30), 0.0)
    return FlowResult(finish_s=res.finish_s, link_bytes=res.link_bytes, link_busy_s=busy,
                      link_max_flows=counts, events=res.steps), res
