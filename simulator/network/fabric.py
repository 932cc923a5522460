"""The fabric compiled to numpy: links, routing tables, and vectorised path selection.

A Clos fabric is routed valley-free: up from the source leaf until a switch that can reach the
destination leaf below it, then down. At every upward hop a switch picks one of its equal-cost
next hops, i.e. the live uplinks whose far end still reaches the destination (so a failed link or
switch removes next hops and flows re-hash):

- ``ecmp``: a hash of the flow's 5-tuple (source, destination, source port = queue pair) with a
  per-switch seed (vectorised splitmix64; the seeds come from the scenario's one generator) on
  a RoCE fabric; on InfiniBand (``transport: ib``) the subnet manager's fat-tree routing, one
  port per destination (d-mod-k over destinations numbered by their port below the leaf, as
  OpenSM's ftree numbers them: the leaf takes destination mod its fan-out, the spine the next
  digit), so flows to different destinations spread and the queue pairs do not; on EFA
  (``transport: efa``) SRD's spraying, as ``spray`` below;
- ``spray``: the flow is split into equal sub-flows, sub-flow k taking the k-th equal-cost uplink
  (and rotating at the next tier): an even spread over the equal-cost paths;
- ``adaptive``: at flow start, the least-loaded equal-cost next hop; flows of one batch are placed
  in turn at every switch (round robin by their position among the flows at that switch), so
  equal flows spread as evenly as the next hops allow, at the leaf and again at the spine.

Complexity: compiling is O(links + tier-1 switches x leaves); routing F flows is
O(F x hops x fan-out) in numpy, with no Python loop over flows or links.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import networkx as nx
import numpy as np

from simulator.arrays import content_digest, splitmix64
from simulator.calibration import net_plugin_latency_us, nvlink_efficiency
from simulator.errors import FabricError
from workloads.units import MIB

MAX_HOPS = 8
"""gpu-nic, nic-leaf, leaf-agg, agg-core, core-agg, agg-leaf, leaf-nic, nic-gpu."""
ROUTING = ("ecmp", "spray", "adaptive")
MAX_SPRAYED_FLOWS = 1_000_000
"""Sub-flows one routing call makes at most under ``spray``: beyond it each flow takes k
sub-flows on k consecutive paths of the leaf's order, the flows of a leaf dealt in turn
(flow i from path i k), so the leaf's paths carry equal shares as full spraying leaves them
(a 512-GPU all-to-all on 32-uplink leaves was 8.4 M sub-flows and 11.5 GB; at 1,024 GPUs it
ran out of memory). On aws-p5 the 115 measured points come out the same to 3e-14 (the 256-GPU
all-to-all at 15 sub-flows per flow, four times faster, and at one); on a 2:1 oversubscribed
spine-leaf a 64-GPU all-to-all takes the same time at 1-8 sub-flows per flow (tested), where
hashing each flow's first path read up to 25 % slower."""
SPRAY_MAX_SUBFLOWS = 64
"""Sub-flows per sprayed flow: the product of the leaf and tier-1 fan-outs (sub-flow j takes
leaf uplink j mod c1 and tier-1 uplink j div c1: every path once), capped here to bound the
flow count; above the cap the tier-1 choice adds a per-flow hash, a near-even spread."""


@dataclass
class Fabric:
    """Arrays of one fabric. Link ids index ``capacity`` etc.; node ids index ``names``."""

    names: list[str]
    kind: np.ndarray
    tier: np.ndarray
    pod: np.ndarray
    link_src: np.ndarray
    link_dst: np.ndarray
    capacity: np.ndarray
    """Bytes per second of each directed link."""
    latency: np.ndarray
    """Seconds of each directed link."""
    gpus: int
    gpus_per_node: int
    gpu_node: np.ndarray
    gpu_links: np.ndarray
    """[gpu, 4]: gpu->nvswitch, nvswitch->gpu, gpu->nic, nic->gpu."""
    gpu_leaf: np.ndarray
    """[gpu] node id of the leaf of the GPU's NIC (-1 on a single-server fabric)."""
    nic_links: np.ndarray
    """[gpu, 2]: nic->leaf, leaf->nic."""
    gpu_port: np.ndarray
    """[gpu] the index fat-tree routing gives the GPU's NIC as a destination: leaf by leaf, the
    leaf's NIC ports in order (leaf column x widest leaf + port), so a leaf's d-mod-k spreads
    the NICs below any other leaf over all its uplinks (OpenSM ftree; -1 without a leaf)."""
    up_links: np.ndarray
    """[node, U]: upward links of each switch, -1 padded."""
    leaf_col: np.ndarray
    """[node] column of a leaf in the tables below, -1 for other nodes."""
    t1_col: np.ndarray
    """[node] row of a tier-1 (spine / aggregation) switch in ``down1``."""
    core_col: np.ndarray
    down1: np.ndarray
    """[tier-1 switch, leaf] link down to the leaf, -1 if none."""
    down2: np.ndarray
    """[core, pod] link down to that pod's aggregation switch, -1 if none."""
    seeds: np.ndarray
    """[node] per-switch ECMP hash seed."""
    buffer: np.ndarray | None = None
    """[node] shared packet buffer of each switch, bytes (0 for GPUs, NICs, NVSwitches)."""
    failed: np.ndarray = field(default=None)
    """[link] True where the link is down."""
    transport: str = "roce"
    """``roce`` (5-tuple ECMP), ``ib`` (per-destination routing) or ``efa`` (SRD sprays);
    topologies.spec."""
    net_latency_us: float = 0.0
    """The NCCL net plugin's reported latency, added to every network hop of NCCL's latency
    terms (calibration.NET_PLUGIN_LATENCY_US)."""
    host_cpu: str = "intel"
    """The hosts' CPU (topologies.spec): NCCL's per-step network overhead and LL ceiling."""
    nvlink_efficiency: float = nvlink_efficiency(None)
    """Achievable fraction of NVLink's rate for the fabric's GPU (calibration.nvlink_efficiency;
    set from the GPU by simulator.network.build, Hopper's for a bare graph)."""

    def __post_init__(self):
        if self.failed is None:
            self.failed = np.zeros(len(self.capacity), dtype=bool)
        self._reach()

    def digest(self) -> str:
        """A content hash of everything routing and flow rates depend on (every field: links,
        capacities, latencies, buffers, failures, ECMP seeds, transport): equal fabrics, equal
        digests. Computed once per object (what-if copies are new objects)."""
        cached = self.__dict__.get("_digest")
        if cached is None:
            cached = self.__dict__["_digest"] = content_digest(self)
        return cached

    # ---- names ----
    @property
    def num_links(self) -> int:
        return len(self.capacity)

    def link_names(self, links=None) -> list[str]:
        """Names ``src->dst`` of every link, or of the link ids ``links``."""
        src, dst = (self.link_src, self.link_dst) if links is None else \
            (self.link_src[links], self.link_dst[links])
        return [f"{self.names[a]}->{self.names[b]}" for a, b in zip(src, dst)]

    def reverse_links(self) -> np.ndarray:
        """[link] a link the other way between the same two nodes (of parallel cables, the
        lowest id), -1 where there is none: the path an acknowledgement takes back."""
        n = len(self.names)
        key = self.link_src.astype(np.int64) * n + self.link_dst
        order = np.argsort(key, kind="stable")
        want = self.link_dst.astype(np.int64) * n + self.link_src
        at = np.minimum(np.searchsorted(key[order], want), len(key) - 1)
        return np.where(key[order][at] == want, order[at], -1)

    def link_tiers(self) -> np.ndarray:
        """[link] tier name: nvlink, gpu-nic, nic-leaf, leaf-spine (leaf-agg) or spine-core."""
        src_t, dst_t = self.tier[self.link_src], self.tier[self.link_dst]
        return LINK_TIERS[np.clip(np.maximum(src_t, dst_t) + 2, 0, 4)]

    def node_id(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise FabricError(f"no switch or node named {name!r}") from None

    def cable(self, a: str, b: str) -> np.ndarray:
        """Both directed link ids of the cable between nodes ``a`` and ``b``."""
        ia, ib = self.node_id(a), self.node_id(b)
        hit = np.flatnonzero(((self.link_src == ia) & (self.link_dst == ib)) |
                             ((self.link_src == ib) & (self.link_dst == ia)))
        if not len(hit):
            raise FabricError(f"no link between {a} and {b}")
        return hit

    # ---- what-ifs ----
    def with_failures(self, links=(), switches=()) -> "Fabric":
        """A copy with cables (pairs of node names) and switches (names) removed."""
        failed = self.failed.copy()
        for a, b in links:
            failed[self.cable(a, b)] = True
        for s in switches:
            i = self.node_id(s)
            failed[(self.link_src == i) | (self.link_dst == i)] = True
        return replace(self, failed=failed)

    def _attachments(self) -> np.ndarray:
        """[gpu, k] the links that attach each GPU: its NVLink ports and, on a fabric of
        several servers, its NIC path (GPU -> NIC -> leaf and back); -1 where absent."""
        if not (self.gpu_leaf >= 0).any():          # a single server: no NIC path
            return self.gpu_links[:, 0:2]
        return np.concatenate([self.gpu_links, self.nic_links], axis=1)

    def cut_off_gpus(self) -> np.ndarray:
        """GPU ids one of whose NVLink ports or NIC path links has failed."""
        links = self._attachments()
        return np.flatnonzero((self.failed[np.maximum(links, 0)] & (links >= 0)).any(axis=1))

    def failed_cables(self, gpu: int) -> list[str]:
        """Names ``a-b`` of the failed cables attaching GPU ``gpu``."""
        links = self._attachments()[gpu]
        links = links[(links >= 0) & self.failed[np.maximum(links, 0)]]
        ends = [sorted((self.link_src[x], self.link_dst[x]), key=lambda n: (self.tier[n], n))
                for x in links]                    # lower tier first, as `clustersim topology`
        return sorted({f"{self.names[a]}-{self.names[b]}" for a, b in ends})

    def with_capacity(self, factors: dict[tuple[str, str], float]) -> "Fabric":
        """A copy with cables' capacity scaled (degraded links)."""
        cap = self.capacity.copy()
        for (a, b), f in factors.items():
            cap[self.cable(a, b)] *= f
        return replace(self, capacity=cap)

    def _reach(self) -> None:
        """Which tier-1 switches and cores can still reach each leaf downward or via the core."""
        alive = ~self.failed
        ok1 = (self.down1 >= 0) & alive[np.maximum(self.down1, 0)]
        if self.down2.size:
            ok2 = (self.down2 >= 0) & alive[np.maximum(self.down2, 0)]
            agg = self.link_dst[np.maximum(self.down2, 0)]            # [core, pod]
            leaf_pod = self.pod[self.leaf_nodes]
            rows = self.t1_col[agg[:, leaf_pod]]                      # [core, leaf]
            core_reach = ok2[:, leaf_pod] & ok1[np.maximum(rows, 0), np.arange(len(leaf_pod))]
            core_reach &= rows >= 0
        else:
            core_reach = np.zeros((0, len(self.leaf_nodes)), dtype=bool)
        t1_nodes = np.flatnonzero(self.t1_col >= 0)
        via_core = np.zeros_like(ok1)
        if core_reach.size:
            ups = self.up_links[t1_nodes]                            # [t1, U]
            live = (ups >= 0) & alive[np.maximum(ups, 0)]
            cores = self.core_col[self.link_dst[np.maximum(ups, 0)]]
            for u in range(ups.shape[1]):                             # fan-out, not flows
                m = live[:, u] & (cores[:, u] >= 0)
                via_core[self.t1_col[t1_nodes[m]]] |= core_reach[cores[m, u]]
        self.ok_down1 = ok1
        self.core_reach = core_reach
        self.t1_reach = ok1 | via_core

    @property
    def leaf_nodes(self) -> np.ndarray:
        return np.flatnonzero(self.leaf_col >= 0)

    # ---- routing ----
    def _choose(self, node: np.ndarray, ok_next, h: np.ndarray, mode: str,
                rank: np.ndarray, load: np.ndarray) -> np.ndarray:
        """One upward ECMP decision per flow at switch ``node``: a live uplink whose far end
        satisfies ``ok_next(far_end_nodes) -> bool [F, U]``."""
        cand = self.up_links[node]                                    # [F, U]
        far = self.link_dst[np.maximum(cand, 0)]
        valid = (cand >= 0) & ~self.failed[np.maximum(cand, 0)] & ok_next(far)
        count = valid.sum(axis=1)
        if (count == 0).any():
            bad = int(np.flatnonzero(count == 0)[0])
            raise FabricError(f"no live path upward from {self.names[int(node[bad])]}")
        if mode == "adaptive":
            score = np.where(valid, load[np.maximum(cand, 0)], np.inf)
            order = np.argsort(score, axis=1, kind="stable")          # least loaded first
            k = rank % count
            return cand[np.arange(len(node)), order[np.arange(len(node)), k]], count
        k = (h % count.astype(np.uint64)).astype(np.int64) if mode == "ecmp" else rank % count
        pos = np.argmax(np.cumsum(valid, axis=1) > k[:, None], axis=1)
        return cand[np.arange(len(node)), pos], count

    def route(self, src: np.ndarray, dst: np.ndarray, sport: np.ndarray, mode: str = "ecmp",
              load: np.ndarray | None = None):
        """Paths of flows src GPU -> dst GPU. Returns (hops [F', MAX_HOPS] link ids -1 padded,
        parent [F'] index of the original flow, share [F'] fraction of its bytes); F' > F only
        under ``spray``, which splits each flow over the source leaf's equal-cost uplinks."""
        if mode not in ROUTING:
            raise FabricError(f"unknown routing {mode!r}; expected one of {', '.join(ROUTING)}")
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        sport = np.asarray(sport, np.int64)
        n = len(src)
        if mode == "ecmp" and self.transport == "ib":
            mode = "dmodk"         # the subnet manager's one port per destination
        elif mode == "ecmp" and self.transport == "efa":
            mode = "spray"         # SRD spreads each message's packets over the paths
        parent, share = np.arange(n), np.ones(n)
        if mode == "spray":
            width = self._spray_width()
            k = min(width, max(1, MAX_SPRAYED_FLOWS // max(n, 1)))
            parent = np.repeat(np.arange(n), k)
            sub = np.tile(np.arange(k), n)            # sub-flow j of its flow
            rank = sub
            if k < width:      # thinned: k of the paths, from a per-flow place in their order
                first = _positions(self.gpu_leaf[src]) * k % width
                rank = sub + first[parent]
            src, dst, sport = src[parent], dst[parent], sport[parent]
            usable = np.ones(n * k, dtype=bool)
        load = np.zeros(self.num_links) if load is None else load
        F = len(src)
        hops = np.full((F, MAX_HOPS), -1, dtype=np.int64)
        same = self.gpu_node[src] == self.gpu_node[dst]
        i = np.flatnonzero(same)
        hops[i, 0] = self.gpu_links[src[i], 0]
        hops[i, 1] = self.gpu_links[dst[i], 1]
        x = np.flatnonzero(~same)
        if len(x):
            s, d = src[x], dst[x]
            lf_s, lf_d = self.gpu_leaf[s], self.gpu_leaf[d]
            lc_d = self.leaf_col[lf_d]
            key = s * np.int64(1_000_003) + d * np.int64(7919) + sport[x] * np.int64(104729)
            if mode == "spray":
                rk = rank[x]
            elif mode == "dmodk":      # InfiniBand fat-tree routing: digits of the destination
                rk = self.gpu_port[d]
            elif mode == "adaptive":   # position of the flow among those at the same leaf
                rk = _positions(lf_s)
            else:
                rk = np.zeros(len(x), np.int64)
            hops[x, 0] = self.gpu_links[s, 2]
            hops[x, 1] = self.nic_links[s, 0]
            col = 2
            path = np.full((len(x), MAX_HOPS - 4), -1, dtype=np.int64)
            cross = lf_s != lf_d
            c = np.flatnonzero(cross)
            if len(c):
                path[c], count1 = self._climb(lf_s[c], lf_d[c], lc_d[c], key[c], mode, rk[c],
                                              load)
                if mode == "spray":     # whole rounds of the live uplinks only: an even split
                    js = sub[x[c]]
                    usable[x[c]] = np.where(k >= count1, js < count1 * (k // count1), True)
            if mode == "spray":
                usable[x[~cross]] = sub[x[~cross]] == 0
            hops[x, col:col + path.shape[1]] = path
            last = np.where(hops[x] >= 0, np.arange(MAX_HOPS), -1).max(axis=1) + 1
            hops[x, last] = self.nic_links[d, 1]
            hops[x, last + 1] = self.gpu_links[d, 3]
        if mode == "spray":
            usable[i] = sub[i] == 0
            hops, parent = hops[usable], parent[usable]
            share = 1.0 / np.bincount(parent, minlength=n)[parent]
        return hops, parent, share

    def _spray_width(self) -> int:
        c1, c2 = (max(1, int((self.up_links[self.tier == t] >= 0).sum(axis=1).max(initial=1)))
                  for t in (0, 1))
        if c1 * c2 <= SPRAY_MAX_SUBFLOWS:
            return c1 * c2
        return max(c1, min(SPRAY_MAX_SUBFLOWS, c1 * (SPRAY_MAX_SUBFLOWS // c1)))

    def _climb(self, leaf_s, leaf_d, lc_d, key, mode, rank, load) -> np.ndarray:
        """leaf_s -> ... -> leaf_d for flows between different leaves: up to 4 switch hops."""
        m = len(leaf_s)
        out = np.full((m, MAX_HOPS - 4), -1, dtype=np.int64)
        h1 = splitmix64(key.astype(np.uint64) ^ self.seeds[leaf_s])
        up1, count1 = self._choose(leaf_s, lambda far: self.t1_reach[
            np.maximum(self.t1_col[far], 0), lc_d[:, None]] & (self.t1_col[far] >= 0),
            h1, mode, rank, load)
        out[:, 0] = up1
        t1 = self.link_dst[up1]
        direct = self.ok_down1[self.t1_col[t1], lc_d]
        out[direct, 1] = self.down1[self.t1_col[t1[direct]], lc_d[direct]]
        v = np.flatnonzero(~direct)
        if len(v):
            h2 = splitmix64(key[v].astype(np.uint64) ^ self.seeds[t1[v]])
            if mode == "spray":     # tier-1 choice: j div c1 (+ a hash once capped)
                c1 = max(1, int((self.up_links[self.tier == 0] >= 0).sum(axis=1).max()))
                c2 = max(1, int((self.up_links[self.tier == 1] >= 0).sum(axis=1).max()))
                r2 = rank[v] // c1
                if c1 * c2 > SPRAY_MAX_SUBFLOWS:
                    r2 = r2 + (h2 % np.uint64(c2)).astype(np.int64)
            elif mode == "dmodk":      # the next digit of the destination
                c1 = max(1, int((self.up_links[self.tier == 0] >= 0).sum(axis=1).max()))
                r2 = rank[v] // c1
            elif mode == "adaptive":
                # the flow's position among those at this tier-1 switch, not at its leaf: the
                # leaf's position picked the leaf uplink, so reusing it sent every flow through
                # a spine out of one core uplink when the fan-outs share a factor (herding)
                r2 = _positions(t1[v])
            else:
                r2 = rank[v]
            up2, _ = self._choose(t1[v], lambda far: self.core_reach[
                np.maximum(self.core_col[far], 0), lc_d[v][:, None]] & (self.core_col[far] >= 0),
                h2, mode, r2, load)
            core = self.link_dst[up2]
            pod_d = self.pod[leaf_d[v]]
            down_agg = self.down2[self.core_col[core], pod_d]
            agg = self.link_dst[down_agg]
            out[v, 1] = up2
            out[v, 2] = down_agg
            out[v, 3] = self.down1[self.t1_col[agg], lc_d[v]]
        return out, count1


def _positions(keys: np.ndarray) -> np.ndarray:
    """Each item's position among the items with the same key (in input order): the
    round-robin slot ``adaptive`` routing gives a flow at its switch."""
    n = len(keys)
    order = np.lexsort((np.arange(n), keys))
    first = np.r_[0, np.flatnonzero(np.diff(keys[order])) + 1]
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    return pos


LINK_TIERS = np.array(["nvlink", "gpu-nic", "nic-leaf", "leaf-spine", "spine-core"])


def _leaf_ports(nic: np.ndarray, leaf: np.ndarray, leaf_col: np.ndarray) -> np.ndarray:
    """[gpu] destination index of each GPU's NIC for fat-tree routing: the NICs below each
    leaf numbered 0.. in NIC order, then leaf column x widest leaf + that position. Numbering
    by GPU id instead would put, on a rail-optimized fabric, every rail's destinations on a
    few of a leaf's uplinks (GPU ids of one rail step by 8)."""
    out = np.full(len(nic), -1, dtype=np.int64)
    has = leaf >= 0
    if not has.any():
        return out
    nics, first = np.unique(nic[has], return_index=True)
    nic_leaf = leaf[has][first]
    order = np.lexsort((nics, nic_leaf))              # by leaf, then NIC
    pos = _positions(nic_leaf[order])
    width = int(pos.max()) + 1
    port = np.empty(len(nics), dtype=np.int64)
    port[order] = leaf_col[nic_leaf[order]] * width + pos
    out[has] = port[np.searchsorted(nics, nic[has])]
    return out


def compile_fabric(g: nx.DiGraph, *, rng: np.random.Generator) -> Fabric:
    """Lower a builder graph (topologies.builders) to arrays and routing tables."""
    names = list(g.nodes)
    nid = {n: i for i, n in enumerate(names)}
    attrs = [g.nodes[n] for n in names]
    kind = np.array([a["kind"] for a in attrs])
    tier = np.array([a["tier"] for a in attrs], dtype=np.int64)
    pod = np.array([a.get("pod", -1) if a["tier"] >= 0 else -1 for a in attrs], dtype=np.int64)
    rows = [(iu, nid[v], d["capacity_bps"], d["latency_s"])
            for iu, (_, nbrs) in enumerate(g.adjacency()) for v, d in nbrs.items()]
    E = len(rows)
    arr = np.array(rows, dtype=float).reshape(E, 4)
    src, dst = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
    cap, lat = arr[:, 2] / 8, arr[:, 3]
    N = len(names)

    # GPU attachments, vectorised through a (src, dst) -> link lookup on sorted keys
    key = src * N + dst
    order = np.argsort(key)

    def link(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        k = a * N + b
        pos = np.searchsorted(key[order], k)
        pos = np.minimum(pos, E - 1)
        found = key[order][pos] == k
        return np.where(found, order[pos], -1)

    gpus = g.graph["gpus"]
    # GPU, NVSwitch and NIC node ids by their builder indices (no per-GPU name lookups)
    index = np.array([a["index"] for a in attrs], dtype=np.int64)
    server = np.array([a.get("node", -1) for a in attrs], dtype=np.int64)

    def by_index(k: str, key: np.ndarray) -> np.ndarray:
        ids = np.flatnonzero(kind == k)
        table = np.full(int(key[ids].max()) + 1, -1, dtype=np.int64)
        table[key[ids]] = ids
        return table

    gpu_id = by_index("gpu", index)[:gpus]
    gpu_node = server[gpu_id]
    nvs = by_index("nvswitch", server)[gpu_node]
    nics_per_node = g.graph["nics_per_node"]
    gpn = g.graph["gpus_per_node"]
    local = np.arange(gpus) % gpn
    nic = by_index("nic", index)[gpu_node * nics_per_node + local * nics_per_node // gpn]
    gpu_links = np.stack([link(gpu_id, nvs), link(nvs, gpu_id), link(gpu_id, nic),
                          link(nic, gpu_id)], axis=1)
    nic_leaf = np.full(N, -1)
    nl = (tier[src] == -1) & (tier[dst] == 0)
    nic_leaf[src[nl]] = dst[nl]
    gpu_leaf = nic_leaf[nic]
    nic_links = np.stack([link(nic, gpu_leaf), link(gpu_leaf, nic)], axis=1)

    up = (tier[src] >= 0) & (tier[dst] > tier[src])
    counts = np.bincount(src[up], minlength=N)
    width = max(1, int(counts.max()) if up.any() else 1)
    up_links = np.full((N, width), -1, dtype=np.int64)
    ups = np.flatnonzero(up)
    ups = ups[np.argsort(src[ups], kind="stable")]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    up_links[src[ups], np.arange(len(ups)) - starts[src[ups]]] = ups

    def cols(mask):
        c = np.full(N, -1)
        c[mask] = np.arange(int(mask.sum()))
        return c

    leaf_col, t1_col, core_col = cols(tier == 0), cols(tier == 1), cols(tier == 2)
    gpu_port = _leaf_ports(nic, gpu_leaf, leaf_col)
    down1 = np.full((int((tier == 1).sum()), int((tier == 0).sum())), -1, dtype=np.int64)
    d1 = (tier[src] == 1) & (tier[dst] == 0)
    down1[t1_col[src[d1]], leaf_col[dst[d1]]] = np.flatnonzero(d1)
    pods = int(pod.max()) + 1 if (pod >= 0).any() else 1
    down2 = np.full((int((tier == 2).sum()), pods), -1, dtype=np.int64)
    d2 = (tier[src] == 2) & (tier[dst] == 1)
    down2[core_col[src[d2]], pod[dst[d2]]] = np.flatnonzero(d2)
    seeds = rng.integers(0, 2**63 - 1, size=N, dtype=np.int64).astype(np.uint64)
    transport = g.graph.get("transport", "roce")
    buffer = np.array([float(a.get("buffer_bytes", 0.0)) for a in attrs])
    return Fabric(names=names, kind=kind, tier=tier, pod=pod, link_src=src, link_dst=dst,
                  capacity=cap, latency=lat, gpus=gpus, gpus_per_node=gpn, gpu_node=gpu_node,
                  gpu_links=gpu_links, gpu_leaf=gpu_leaf, nic_links=nic_links,
                  gpu_port=gpu_port, up_links=up_links,
                  leaf_col=leaf_col, t1_col=t1_col, core_col=core_col, down1=down1, down2=down2,
                  seeds=seeds, buffer=buffer, transport=transport,
                  net_latency_us=net_plugin_latency_us(transport,
                                                       g.graph.get("net_latency_us")),
                  host_cpu=g.graph.get("host_cpu", "intel"),
                  nvlink_efficiency=g.graph.get("nvlink_efficiency", nvlink_efficiency(None)))


def switch_ids(fabric: Fabric) -> tuple[np.ndarray, np.ndarray, int]:
    """Per link: the switch it leaves and the switch it enters (-1 for GPUs / NICs), and the
    number of switches."""
    is_sw = fabric.tier >= 0
    sw_of = np.full(len(fabric.tier), -1)
    sw_of[is_sw] = np.arange(int(is_sw.sum()))
    return sw_of[fabric.link_src], sw_of[fabric.link_dst], int(is_sw.sum())


def switch_buffers(fabric: Fabric, default_mib: float = 32.0) -> np.ndarray:
    """[switch] shared buffer bytes, in :func:`switch_ids` order."""
    buf = fabric.buffer[fabric.tier >= 0] if fabric.buffer is not None else None
    if buf is None or not (buf > 0).all():
        return np.full(int((fabric.tier >= 0).sum()), default_mib * MIB)
    return buf
