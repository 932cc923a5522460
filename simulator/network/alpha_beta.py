"""The alpha-beta implementation of the step's communication interface (screening fidelity, and
NVLink inside a node at every fidelity; the interface: :mod:`simulator.step.requests`).

Notes
-----
Alpha-beta with NCCL's own cost structure (src/graph/tuning.cc): time = latency + S / algbw, for
ring and tree and the LL / LL128 / Simple protocols, taking the fastest as NCCL's tuner does.
Bus bandwidth: NVLink inside a node; across nodes, the NICs of the group's GPUs in each node
run in parallel (one ring per NIC), so busbw = min(NVLink, per_node x NIC per GPU).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from simulator.calibration import (
    COLLNET_ARITY_US,
    LL128_NET_FRACTION,
    NCCL_BUFFSIZE_BYTES,
    NCCL_CHANNELS_PER_NIC,
    NCCL_LATENCY_US,
    NCCL_STEPS,
    NET_BUSBW_EFFICIENCY,
    NET_OVERHEAD_US,
    NVLS_BUSBW_SATURATION_GPUS,
    NVLS_CHANNELS,
    NVLSTREE_HOP_OVERHEAD_US,
    NVLSTREE_TREES,
    P2P_CHANNELS,
    P2P_LATENCY_US,
    P2P_LL_THRESHOLD_BYTES,
    P2P_NET_CHANNELS_PER_PEER,
    P2P_NET_FRACTION,
    PROTOCOL_BW_FRACTION,
    RING_PIPELINE_P,
    RING_PLATEAU_LATENCY_FACTOR,
    SIMPLE_NET_OVERHEAD_FACTOR,
    TREE_BUSBW_RATIO,
    TREE_CORRECTION_FACTOR,
    TREE_LL128_NET_FRACTION,
    ll_max_busbw,
    net_plugin_latency_us,
    nvlink_efficiency,
    nvls_efficiency,
)
from simulator.network.ofi_tuner import p5_all_reduce_choice, region_tuner_applies
from simulator.step.groups import Group
from workloads.units import BITS_PER_BYTE, GIGA, US

BUSBW_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
                "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
                "p2p": lambda n: 1.0, "rail_all_to_all": lambda n: 1.0,
                "node_all_to_all": lambda n: 1.0}
"""nccl-tests: busbw = algbw x factor (doc/PERFORMANCE.md). The two legs of a hierarchical
all-to-all send everything they are given off the GPU (factor 1)."""


A2A_LEGS = ("rail_all_to_all", "node_all_to_all")
"""The two legs of a hierarchical all-to-all (DeepEP): across nodes on each rail, and inside
each node over NVLink."""
A2A_KINDS = ("all_to_all", *A2A_LEGS)
"""Kinds where every rank sends to several others at once, each flow on its own."""


def _hop_latencies_us(algo: str, proto: str, group: Group, net_us: float
                      ) -> tuple[float, float, float]:
    """(base, NVLink hop, network hop) of ``algo`` / ``proto`` in us (NCCL_LATENCY_US): the
    network hop plus the net plugin's ``net_us``, twice under Simple (the flush), and the
    tree's network hop wherever one rank per node spans nodes (tuning.cc)."""
    base, intra, inter = NCCL_LATENCY_US[(algo, proto)]
    if group.per_node == 1 and group.nodes > 1:     # one rank per node: NCCL takes the tree's
        inter = NCCL_LATENCY_US[("tree", proto)][2]     # network latency, fully exposed
    return base, intra, inter + net_us * (2 if proto == "Simple" else 1)


def _ring_nvlink_step_us(intra: float, proto: str, host_cpu: str | None) -> float:
    """An inter-node ring's NVLink step: at least the host's network post overhead
    (NET_OVERHEAD_US, three times under Simple); ``host_cpu`` None: the hop alone."""
    if host_cpu is None:
        return intra
    factor = SIMPLE_NET_OVERHEAD_FACTOR if proto == "Simple" else 1
    return max(intra, NET_OVERHEAD_US[host_cpu] * factor)


def nccl_latency_s(algo: str, proto: str, kind: str, group: Group, net_us: float = 0.0,
                   host_cpu: str | None = "intel", nbytes: float = 0.0) -> float:
    """NCCL's latency term (tuning.cc): ring = base + intra-node steps x NVLink hop + inter-node
    steps x network hop; tree = base + 2 ((ranks per node - 1) intra + log2i(nodes) inter);
    NVLSTree = base + NVLS hop + 2 log2i(nodes) inter; NVLS = its NVLS hop, plus one network
    hop across nodes (IB SHARP); CollNet Direct = base + 2 (min(1, local - 1) intra + (local -
    1) x 0.4 us) + inter. A network hop is NCCL's hwLat[NET] plus ``net_us``, the latency the
    net plugin reports (NET_PLUGIN_LATENCY_US), twice under Simple, which also waits for the
    flush (tuning.cc: ``if (p == NCCL_PROTO_SIMPLE) interLat += graphs[a]->latencyInter``);
    with one rank per node NCCL charges every algorithm the tree's network latency. A ring
    across nodes pays at least the host's network post overhead per NVLink step
    (NET_OVERHEAD_US by ``host_cpu``, three times under Simple; None: none, for the
    all-to-all's sends, which borrow the ring's hop latencies), and a ring / Simple
    all-reduce across nodes of ``nbytes`` of at least 64 B per channel and rank NCCL's
    plateau factor (RING_PLATEAU_LATENCY_FACTOR; channels: NCCL_CHANNELS_PER_NIC per GPU)."""
    base, intra, inter = _hop_latencies_us(algo, proto, group, net_us)
    n, nodes = group.size, group.nodes
    if algo == "nvls":                    # one NVLS hop, and the switches' reduction across nodes
        return (base + intra + (inter if nodes > 1 else 0.0)) * US
    if algo == "collnet":
        local = max(group.size // nodes, 1)
        return (base + 2 * (min(1, local - 1) * intra + (local - 1) * COLLNET_ARITY_US)
                + inter) * US
    log2i = nodes.bit_length() - 1        # NCCL's integer log2 (floor)
    if algo == "nvlstree":                # one NVLS hop, then up and down the tree
        return (base + intra + 2 * log2i * inter) * US
    if algo == "tree":
        local = max(group.size // nodes, 1)
        return (base + 2 * ((local - 1) * intra + log2i * inter)) * US
    # (NCCL >= 2.23: a ring all-reduce crosses the network 2 (nodes - 1) times, not 2 nodes)
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    if nodes == 1:
        return (base + steps * intra) * US
    intra = _ring_nvlink_step_us(intra, proto, host_cpu)
    inter_steps = 2 * (nodes - 1) if kind == "all_reduce" else nodes - 1
    lat = base + (steps - inter_steps) * intra + inter_steps * inter
    if (proto == "Simple" and kind == "all_reduce"
            and nbytes >= 64 * NCCL_CHANNELS_PER_NIC * group.per_node * n):
        lat *= RING_PLATEAU_LATENCY_FACTOR
    return lat * US


def tree_correction(proto: str, nbytes: float) -> float:
    """NCCL's derating of a tree all-reduce's bandwidth at ``nbytes`` under ``proto``
    (TREE_CORRECTION_FACTOR, entry log2i(nbytes / 64); 1 outside its 64 B - 256 MiB)."""
    k = (int(nbytes) >> 6).bit_length() - 1
    table = TREE_CORRECTION_FACTOR[proto]
    return table[k] if 0 <= k < len(table) else 1.0


def p2p_latency_s(local: bool, net_us: float = 0.0) -> float:
    """One send / receive: NCCL's Simple hop over NVLink, or over the network plus the net
    plugin's latency ``net_us``; independent of the group's size."""
    return (P2P_LATENCY_US["nvlink"] if local else P2P_LATENCY_US["network"] + net_us) * US


def all_to_all_plugin_s(kind: str, group: Group, net_us: float, proto: str = "Simple"
                        ) -> float:
    """The net plugin's latency ``net_us`` as an all-to-all pays it: once, its messages being in
    flight together, and under Simple once more, as every Simple network hop here pays it
    twice (the flush NCCL's tuner charges: :func:`_hop_latencies_us`); none inside one node or
    on a hierarchical all-to-all's NVLink leg."""
    crosses = group.nodes > 1 and kind != "node_all_to_all"
    return net_us * (2 if proto == "Simple" else 1) * US if crosses else 0.0


def p2p_net_derate(transport: str, fraction: float | None = None) -> float:
    """The rate NCCL's sends and receives reach across nodes relative to a ring's:
    P2P_NET_FRACTION (or ``fraction``, a fit's candidate) over NET_BUSBW_EFFICIENCY, by
    transport; 1 where not measured."""
    frac = P2P_NET_FRACTION.get(transport) if fraction is None else fraction
    return frac / NET_BUSBW_EFFICIENCY[transport] if frac else 1.0


def crosses_net_as_p2p(kind: str, group: Group) -> bool:
    """Whether ``kind`` over ``group`` moves its bytes across nodes as NCCL's sends and
    receives (an all-to-all or p2p across nodes, a hierarchical all-to-all's rail leg)."""
    return (kind == "rail_all_to_all"
            or (kind in ("all_to_all", "p2p") and group.nodes > 1))


def p2p_channels_per_peer(group: Group) -> int:
    """NCCL's p2pnChannelsPerPeer (graph/paths.cc): P2P_CHANNELS between NVLink peers of one
    node; across nodes P2P_NET_CHANNELS_PER_PEER, halved while 2 x ranks > 4 x P2P_CHANNELS
    (one above 32 ranks)."""
    if group.nodes <= 1:
        return P2P_CHANNELS
    c = P2P_NET_CHANNELS_PER_PEER
    while c * group.size > 4 * P2P_CHANNELS and c > 1:
        c //= 2
    return c


def all_to_all_protocol(group: Group, nbytes: float) -> str:
    """The protocol NCCL runs an all-to-all's sends and receives with: LL when each peer's
    message (nbytes / ranks) is at most P2P_LL_THRESHOLD_BYTES x the channels per peer, else
    Simple; p2p never runs LL128 (enqueue.cc)."""
    per_peer = nbytes / max(group.size, 1)
    return "LL" if per_peer <= P2P_LL_THRESHOLD_BYTES * p2p_channels_per_peer(group) \
        else "Simple"


def all_to_all_latency_s(kind: str, group: Group, net_us: float = 0.0,
                         proto: str = "Simple") -> float:
    """Latency of an all-to-all (or one leg of a hierarchical one) under ``proto``
    (:func:`all_to_all_protocol`): NCCL posts one send and one receive per peer, issued in turn
    like a ring all-gather's n - 1 steps (NCCL's hop latencies per peer), but the messages are
    in flight together, not forwarded hop after hop, so the net plugin's latency is paid once
    (twice under Simple) rather than per network step (:func:`all_to_all_plugin_s`)."""
    return (nccl_latency_s("ring", proto, "all_gather", group, host_cpu=None)
            + all_to_all_plugin_s(kind, group, net_us, proto))


def all_to_all_s(group: Group, nbytes: float, nvlink_rate: float, net_rate: float,
                 gpu_name: str | None = None, net_us: float = 0.0,
                 transport: str = "ib", p2p_fraction: float | None = None) -> float:
    """An all-to-all of ``nbytes`` a rank over ``group``: its latency
    (:func:`all_to_all_latency_s`) plus the slower of its NVLink bytes at ``nvlink_rate`` and
    its network bytes at ``net_rate`` (a ring's) times :func:`p2p_net_derate`, at its
    protocol's payload fraction (LL no faster than NCCL's LL ceiling)."""
    n = group.size
    local = min(group.per_node, n)
    net = net_rate * (p2p_net_derate(transport, p2p_fraction)
                      if crosses_net_as_p2p("all_to_all", group) else 1.0)
    t = max(nbytes * (local - 1) / n / nvlink_rate, nbytes * (n - local) / n / net)
    proto = all_to_all_protocol(group, nbytes)
    t /= PROTOCOL_BW_FRACTION[proto]
    if proto == "LL":      # at most NCCL's LL ceiling, as on the fabric
        t = max(t, ll_floor_s("ring", "all_gather", group, nbytes, gpu_name))
    return all_to_all_latency_s("all_to_all", group, net_us, proto) + t


SIMPLE_ONLY = ("nvls", "nvlstree", "collnet")
"""Algorithms NCCL runs with the Simple protocol only (tuning.cc)."""

PROTOCOL_KINDS = ("all_reduce", "all_gather", "reduce_scatter")
"""The collectives NCCL_PROTO (network.nccl.protocol) binds here."""


def protocols(protocol: str) -> dict[str, float]:
    """The protocols NCCL may run (``auto``: all) and their payload fractions."""
    if protocol == "auto":
        return PROTOCOL_BW_FRACTION
    return {protocol: PROTOCOL_BW_FRACTION[protocol]}


def fastest_protocol(protocol: str, latency_s, bandwidth_s: float,
                     ll_floor_s: float = 0.0, tree_bytes: float = 0.0) -> tuple[float, str]:
    """(latency + bandwidth time, protocol) of the protocol NCCL's tuner runs: the minimum of
    latency_s(p) + bandwidth_s / payload fraction(p) over :func:`protocols` (tuning.cc), LL's
    bandwidth time at least ``ll_floor_s`` (the bytes at NCCL's LL ceiling, ll_max_busbw).
    ``tree_bytes``: a tree all-reduce of that many bytes, its bandwidth derated by
    :func:`tree_correction` (0: not one)."""
    return min((latency_s(p) + max(bandwidth_s / frac
                                   / (tree_correction(p, tree_bytes) if tree_bytes else 1.0),
                                   ll_floor_s if p == "LL" else 0.0), p)
               for p, frac in protocols(protocol).items())


LL128_NET_FRACTIONS = {"ring": LL128_NET_FRACTION, "tree": TREE_LL128_NET_FRACTION}
"""LL128's measured rate across nodes by algorithm, each a table by transport."""


def transfer_s(algo: str, proto: str, nodes: int, transport: str, bandwidth_s: float,
               ll_floor: float = 0.0, ll128_fraction: float | None = None,
               derate: float = 1.0) -> float:
    """The bytes of a ring or tree (``bandwidth_s`` at the link's full rate) at ``proto``'s
    rate: the wire format's (PROTOCOL_BW_FRACTION), LL128 across nodes the transport's where
    measured (LL128_NET_FRACTIONS) or ``ll128_fraction`` (a fit's candidate), times
    ``derate`` (a tree's size correction), LL no faster than ``ll_floor``."""
    measured = LL128_NET_FRACTIONS[algo]
    if proto == "LL128" and ll128_fraction is not None:
        frac = ll128_fraction
    elif proto == "LL128" and nodes > 1 and transport in measured:
        frac = measured[transport]
    else:
        frac = PROTOCOL_BW_FRACTION[proto]
    w = bandwidth_s / frac / derate
    return max(w, ll_floor) if proto == "LL" else w


def tree_run_s(proto: str, group: Group, nbytes: float, bandwidth_s: float, *,
               net_us: float = 0.0, host_cpu: str = "intel", transport: str = "ib",
               ll_floor: float = 0.0, ll128_fraction: float | None = None) -> float:
    """The time a tree all-reduce of ``nbytes`` across nodes runs (not NCCL's estimate, by
    which its tuner chose it): NCCL's tree latency, the pipeline's fill up and down the tree,
    plus ``bandwidth_s`` (the bytes at the link's full rate) at ``proto``'s rate
    (:func:`transfer_s`) derated as NCCL derates it (:func:`tree_correction`). Without a
    measured rate for the transport this is NCCL's estimate itself. ``ll128_fraction``: the
    calibrated rate's candidate (validation/tree_fit.py fits it)."""
    w = transfer_s("tree", proto, group.nodes, transport, bandwidth_s, ll_floor,
                   ll128_fraction, derate=tree_correction(proto, nbytes))
    return nccl_latency_s("tree", proto, "all_reduce", group, net_us, host_cpu, nbytes) + w


def ring_run_s(proto: str, kind: str, group: Group, bandwidth_s: float, *,
               net_us: float = 0.0, host_cpu: str = "intel", transport: str = "ib",
               ll_floor: float = 0.0, p: float = RING_PIPELINE_P,
               ll128_fraction: float | None = None) -> float:
    """The time a ring across nodes runs (not NCCL's estimate, by which its tuner chose it):
    base + (L^p + W^p)^(1/p) (RING_PIPELINE_P), where W is ``bandwidth_s`` (the bytes at the
    link's full rate) at ``proto``'s rate (:func:`transfer_s`; LL no faster than
    ``ll_floor``) and L the ring's steps times its mean hop latency around the ring: a network
    hop per node of per_node GPUs, NCCL's hop latencies (the net plugin's latency on each
    network hop, twice under Simple; each NVLink step at least the host's network post
    overhead), as in :func:`nccl_latency_s`. ``p`` and ``ll128_fraction`` (LL128's rate across
    nodes) are the calibrated constants' candidates (validation/ring_fit.py fits them)."""
    base, intra, inter = _hop_latencies_us("ring", proto, group, net_us)
    n, nodes = group.size, group.nodes
    intra = _ring_nvlink_step_us(intra, proto, host_cpu)
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    lat = steps * ((n - nodes) * intra + nodes * inter) / n * US
    w = transfer_s("ring", proto, nodes, transport, bandwidth_s, ll_floor, ll128_fraction)
    return base * US + (lat ** p + w ** p) ** (1.0 / p)


def ll_floor_s(algo: str, kind: str, group: Group, nbytes: float, gpu_name: str | None,
               host_cpu: str = "intel") -> float:
    """LL's bandwidth time at NCCL's LL ceiling (ll_max_busbw): a ring moves its bus factor x
    S per rank, a tree S at half its bus bandwidth."""
    ll_max = ll_max_busbw(gpu_name, group.nodes, host_cpu)
    if algo == "tree":
        return nbytes / (ll_max * TREE_BUSBW_RATIO)
    return nbytes * BUSBW_FACTOR[kind](group.size) / ll_max


NVLS_TREE_CHUNK_STEPS = ((32, 256 * 1024), (16, 128 * 1024), (4, 64 * 1024), (1, 32 * 1024))
"""NCCL's NVLSTree chunking (enqueue.cc, calcCollChunking): while the message is shorter than
``times`` x (operations in flight x chunk), the chunk drops to ``cap``, in this order."""


def nvls_tree_chunk_bytes(nbytes: float, concurrent_ops: int) -> int:
    """The chunk NCCL's NVLSTree all-reduce pipelines a message of ``nbytes`` in:
    NCCL_BUFFSIZE / NCCL_STEPS (512 KiB), cut for messages short against the
    ``concurrent_ops`` = channels x NVLS heads (one per NIC) in flight."""
    chunk = NCCL_BUFFSIZE_BYTES // NCCL_STEPS
    for times, cap in NVLS_TREE_CHUNK_STEPS:
        if nbytes < times * concurrent_ops * chunk and chunk > cap:
            chunk = cap
    return chunk


def nvls_tree_fill_s(nbytes: float, nodes: int, heads: int, nic_bytes_per_s: float,
                     transport: str = "ib") -> float:
    """Pipeline fill of NVLSTree's tree across nodes (the standard pipelined-tree cost,
    T = (chunks + depth - 1) x chunk step): before the steady state the first chunks cross the
    2 ceil(log2(nodes)) network hops up and down one after another. A chunk step moves one
    chunk of each channel of one of the double binary trees (NVLS_CHANNELS / NVLSTREE_TREES)
    through a NIC at the achievable NIC rate, plus NVLSTREE_HOP_OVERHEAD_US; NCCL's latency
    term counts each hop's fixed cost, not this."""
    if nodes < 2:
        return 0.0
    depth = 2 * math.ceil(math.log2(nodes))
    chunk = nvls_tree_chunk_bytes(nbytes, NVLS_CHANNELS * heads)
    step = (NVLS_CHANNELS // NVLSTREE_TREES * chunk
            / (nic_bytes_per_s * NET_BUSBW_EFFICIENCY[transport]))
    return (depth - 1) * (step + NVLSTREE_HOP_OVERHEAD_US * US)


def nvls_node_algbw(nvlink_bytes_per_s: float, per_node: int, gpu_name: str | None,
                    ranks: int | None = None) -> float:
    """Algorithm bandwidth of NCCL's NVLS all-reduce inside one node of ``per_node`` = k GPUs:
    each GPU moves S (k + 1) / k each way over NVLink at NVLS_NVLINK_EFFICIENCY of its rate.
    NVLSTree's stage inside each node, and NVLS's with the switches reducing across nodes,
    bound an all-reduce over ``ranks`` = n > k GPUs at the node's NVLS bus bandwidth, not its
    algorithm bandwidth: NCCL's cost model sets NVLS / NVLSTree busBw per channel whatever
    the rank count and turns it into algbw by nRanks / nsteps (tuning.cc, 2.28), and the
    measurements agree (IB SHARP on 32 H100: 480 GB/s busbw, one node's 480, GTC24 S62129 /
    GTC25 S72583; NVLSTree on 2 RoCE nodes: 430, nccl#1221). So algbw(n) = algbw(k)
    (k - 1) / k x n / (n - 1). A domain of more than NVLS_BUSBW_SATURATION_GPUS GPUs runs at
    the busbw of that many."""
    if per_node < 2:
        return math.inf
    k = min(per_node, NVLS_BUSBW_SATURATION_GPUS)
    busbw = nvls_efficiency(gpu_name) * nvlink_bytes_per_s * 2 * (k - 1) / (k + 1)
    n = ranks if ranks is not None and ranks > per_node else per_node
    return busbw * n / (2 * (n - 1))


def sharp_node_algbw(algorithm: str, nvlink_bytes_per_s: float, nvlink_fraction: float,
                     per_node: int, gpu_name: str | None, ranks: int | None = None) -> float:
    """The stage inside each node of an all-reduce over ``ranks`` GPUs the switches reduce
    across nodes: NVLS in the NVSwitch (:func:`nvls_node_algbw`), or for CollNet an NVLink
    reduce-scatter and all-gather, S (k - 1) / k each way twice at ``nvlink_fraction`` of the
    line rate."""
    k = per_node
    if k < 2:
        return math.inf
    if algorithm == "nvls":
        return nvls_node_algbw(nvlink_bytes_per_s, k, gpu_name, ranks)
    return nvlink_bytes_per_s * nvlink_fraction * k / (2 * (k - 1))


@dataclass(frozen=True)
class AlphaBeta:
    """Per-GPU link rates of one cluster."""

    nvlink_bytes_per_s: float
    """NVLink per direction per GPU (datasheet)."""
    nic_bytes_per_s: float
    """Scale-out NIC line rate available to one GPU (nic_gbps x NICs per node / GPUs per node)."""
    all_reduce: str = "auto"
    """The algorithm of all-reduces across nodes (network.nccl.algorithm, NCCL_ALGO): auto =
    the cost model's choice."""
    protocol: str = "auto"
    """NCCL_PROTO (network.nccl.protocol): LL, LL128, Simple or auto (the cost model's)."""
    transport: str = "roce"
    """``ib``, ``roce`` or ``efa`` (topology.transport): the NICs' achievable fraction of line
    rate."""
    net_latency_us: float = 0.0
    """The NCCL net plugin's latency per network hop (NET_PLUGIN_LATENCY_US by transport, or
    topology.net_latency_us)."""
    gpu_name: str | None = None
    """The GPU (its generation sets NVLink's achievable rate and NCCL's LL ceiling inside a
    node: nvlink_efficiency, ll_max_busbw)."""
    nvls: bool = False
    """NVLink SHARP in the node's NVSwitch (cluster.gpu nvls): NCCL's tuner may then run an
    all-reduce as NVLS inside one node and as NVLSTree across nodes."""
    sharp: bool = False
    """In-network reduction in the fabric's switches (topology.sharp, IB SHARP through NCCL's
    CollNet): all-reduces across nodes may run as NVLS (NVLS GPUs) or CollNet Direct."""
    host_cpu: str = "intel"
    """The hosts' CPU (topology.host_cpu): NCCL's network post overhead per inter-node ring
    step and its LL ceiling across nodes."""

    @classmethod
    def for_cluster(cls, gpu, topology, gpus_per_node: int, nccl=None) -> "AlphaBeta":
        nics = topology.nics_per_node or gpus_per_node
        nic = topology.nic_gbps * GIGA / BITS_PER_BYTE * nics / gpus_per_node
        return cls(nvlink_bytes_per_s=gpu.nvlink_bytes_per_s, nic_bytes_per_s=nic,
                   all_reduce=nccl.algorithm if nccl is not None else "auto",
                   protocol=nccl.protocol if nccl is not None else "auto",
                   transport=topology.transport, gpu_name=gpu.name,
                   nvls=bool(getattr(gpu, "nvls", False)), sharp=topology.sharp,
                   host_cpu=topology.host_cpu,
                   net_latency_us=net_plugin_latency_us(topology.transport,
                                                        topology.net_latency_us))

    @property
    def nvlink_rate(self) -> float:
        """Achievable NVLink bandwidth per GPU (line rate x nvlink_efficiency by generation)."""
        return self.nvlink_bytes_per_s * nvlink_efficiency(self.gpu_name)

    @property
    def net_bytes_per_s(self) -> float:
        """Achievable NIC bandwidth per GPU (line rate x NET_BUSBW_EFFICIENCY[transport])."""
        return self.nic_bytes_per_s * NET_BUSBW_EFFICIENCY[self.transport]

    def busbw(self, group: Group) -> float:
        nv = self.nvlink_rate
        if group.nodes == 1:
            return nv
        return min(nv, group.per_node * self.net_bytes_per_s)

    def time_s(self, kind: str, group: Group, nbytes: float) -> float:
        """Seconds for one collective of ``kind`` over ``group`` moving ``nbytes`` (see module)."""
        return _alpha_beta_time(self, kind, group.size, group.per_node, float(nbytes))

    def _time_s(self, kind: str, group: Group, nbytes: float) -> float:
        n = group.size
        if n <= 1 or nbytes <= 0:
            return 0.0
        if kind == "all_to_all":
            return all_to_all_s(group, nbytes, self.nvlink_rate, self.net_bytes_per_s,
                                self.gpu_name, self.net_latency_us, self.transport)
        # the fabric's achievable rates (NVLink's by generation, the NIC's by transport), a
        # send across nodes at its measured rate (p2p_net_derate)
        bw = (self.net_bytes_per_s * p2p_net_derate(self.transport)
              if crosses_net_as_p2p(kind, group) else self.nvlink_rate)
        if kind == "p2p":
            return p2p_latency_s(group.nodes == 1, self.net_latency_us) + nbytes / bw
        if kind in A2A_LEGS:                           # one leg of a hierarchical one
            rail = kind == "rail_all_to_all"
            if (group.nodes if rail else min(group.per_node, n)) <= 1:
                return 0.0
            return all_to_all_latency_s(kind, group, self.net_latency_us) + nbytes / bw
        return self._tuned(kind, group, nbytes)[0]

    def nvls_tree_algbw(self, group: Group) -> float:
        """Algorithm bandwidth of NVLSTree across ``group.nodes`` nodes: the slower of the
        NVLS stage inside each node (:func:`nvls_node_algbw`) and the network, where each of
        the per_node heads' NICs carries 2 S / per_node each way in NCCL's double binary tree
        (TREE_BUSBW_RATIO), S / per_node on two nodes (one tree edge; NCCL's tuner doubles
        NVLSTree's inter-node bandwidth on <= 2 nodes, tuning.cc)."""
        net = group.per_node * self.net_bytes_per_s * (
            1.0 if group.nodes <= 2 else TREE_BUSBW_RATIO)
        return min(net, nvls_node_algbw(self.nvlink_bytes_per_s, group.per_node,
                                        self.gpu_name, group.size))

    def sharp_algbw(self, group: Group, algorithm: str) -> float:
        """Algorithm bandwidth of an all-reduce across nodes with the switches reducing (IB
        SHARP; ``algorithm`` nvls or collnet): inside each node the k = per_node GPUs
        reduce-scatter and, at the end, all-gather (:func:`sharp_node_algbw`), and each GPU's
        NIC sends its S / k to the switches' aggregation tree and receives the reduced S / k
        back, however many nodes take part. The stages pipeline: the slower sets the rate."""
        node = sharp_node_algbw(algorithm, self.nvlink_bytes_per_s,
                                nvlink_efficiency(self.gpu_name), group.per_node,
                                self.gpu_name, group.size)
        return min(group.per_node * self.net_bytes_per_s, node)

    def sharp_algorithm(self, group: Group) -> str | None:
        """NCCL's in-network all-reduce across nodes on this cluster: NVLS on NVLS GPUs with 2+
        per node, CollNet otherwise (Direct on NVSwitch nodes; with one rank per node NCCL runs
        CollNet Chain, whose latency is within 1 us of Direct's: tuning.cc); None without SHARP
        or inside one node."""
        if not self.sharp or group.nodes < 2:
            return None
        return "nvls" if self.nvls and group.per_node > 1 else "collnet"

    def plugin_choice(self, kind: str, group: Group, nbytes: float) -> tuple[str, str] | None:
        """(algorithm, protocol) the net plugin's tuner imposes (aws-ofi-nccl's p5 / p5e
        regions on EFA: :mod:`simulator.network.ofi_tuner`), or None where NCCL's cost model
        chooses; NCCL_ALGO / NCCL_PROTO set by the user keep precedence."""
        if (kind != "all_reduce" or self.all_reduce != "auto" or self.protocol != "auto"
                or not region_tuner_applies(self.transport, self.gpu_name)):
            return None
        return p5_all_reduce_choice(nbytes, group.size, group.nodes, self.nvls)

    def _tuned(self, kind: str, group: Group, nbytes: float) -> tuple[float, str, str]:
        """(time, algorithm, protocol) of the algorithm and protocol NCCL runs: the net
        plugin's choice where it makes one, else the least latency + bytes / bandwidth
        (NCCL's cost structure, tuning.cc) over ring, tree and, on NVLS GPUs, NVLS inside one
        node or NVLSTree (with its pipeline fill) across nodes, and with SHARP in the switches
        NVLS or CollNet Direct across nodes (:meth:`sharp_algbw`). The fill is weighed because
        NCCL's own NVLSTree bandwidth (its graph's per-channel rates) is not modelled here
        and the fill is what keeps NVLSTree off mid-size messages on many nodes: 1,984 H200
        measure 350 GB/s busbw at 512 MiB by default (nccl-tests#283), NVIDIA's forced
        NVLSTree ~275 at 2,048 H100. The time returned is the chosen algorithm's: a ring across
        nodes runs as :func:`ring_run_s` has it and a tree as :func:`tree_run_s`, not as NCCL's
        model estimates them."""
        factor = BUSBW_FACTOR[kind](group.size)
        busbw = self.busbw(group)
        # ring moves factor x S per rank at busbw; NCCL's trees run at half the bus bandwidth
        # of a ring per direction but logarithmic latency
        bw_time = {"ring": nbytes * factor / busbw, "tree": nbytes / (busbw * TREE_BUSBW_RATIO)}
        protocol = self.protocol
        if kind != "all_reduce":
            algos = ("ring",)
        elif group.nodes == 1:                 # NCCL_ALGO binds across nodes only
            algos = ("ring", "tree", "nvls") if self.nvls else ("ring", "tree")
        elif self.all_reduce != "auto":
            algos = (self.all_reduce,)
        else:                                  # NVLS needs 2+ of the group's GPUs per node
            algos = ("ring", "tree", "nvlstree") if self.nvls and group.per_node > 1 else (
                "ring", "tree")
            sharp = self.sharp_algorithm(group)
            algos += (sharp,) if sharp else ()
        plugin = self.plugin_choice(kind, group, nbytes)
        if plugin is not None:
            algos, protocol = (plugin[0],), plugin[1]
        net_us = self.net_latency_us
        best = (math.inf, "ring", "Simple")
        floor = {}                                 # LL's floor by algorithm (ll_floor_s)
        for algo in algos:
            if algo in SIMPLE_ONLY and protocol not in ("auto", "Simple"):
                continue                           # NVLS, NVLSTree and CollNet: Simple only
            if algo in ("nvls", "collnet") and group.nodes > 1:     # the switches reduce
                t = (nccl_latency_s(algo, "Simple", kind, group, net_us)
                     + nbytes / self.sharp_algbw(group, algo))
                best = min(best, (t, algo, "Simple"))
                continue
            if algo == "nvls":                     # the NVSwitch reduces inside the node
                t = (nccl_latency_s("nvls", "Simple", kind, group, net_us)
                     + nbytes / nvls_node_algbw(self.nvlink_bytes_per_s, group.size,
                                                self.gpu_name))
                best = min(best, (t, "nvls", "Simple"))
                continue
            if algo == "nvlstree":                 # plus the tree's pipeline fill
                t = (nccl_latency_s("nvlstree", "Simple", kind, group, net_us)
                     + nbytes / self.nvls_tree_algbw(group)
                     + nvls_tree_fill_s(nbytes, group.nodes, group.per_node,
                                        self.nic_bytes_per_s, self.transport))
                best = min(best, (t, "nvlstree", "Simple"))
                continue
            floor[algo] = ll_floor_s(algo, kind, group, nbytes, self.gpu_name, self.host_cpu)
            t, proto = fastest_protocol(protocol,
                                        lambda p, a=algo: nccl_latency_s(
                                            a, p, kind, group, net_us, self.host_cpu, nbytes),
                                        bw_time[algo], floor[algo],
                                        nbytes if algo == "tree" else 0.0)
            best = min(best, (t, algo, proto))
        t, algo, proto = best
        if algo == "ring" and group.nodes > 1:     # NCCL chose it; this is how long it runs
            t = ring_run_s(proto, kind, group, bw_time["ring"], net_us=net_us,
                           host_cpu=self.host_cpu, transport=self.transport,
                           ll_floor=floor["ring"])
        elif algo == "tree" and group.nodes > 1:
            t = tree_run_s(proto, group, nbytes, bw_time["tree"], net_us=net_us,
                           host_cpu=self.host_cpu, transport=self.transport,
                           ll_floor=floor["tree"])
        return t, algo, proto

    def algorithm(self, kind: str, group: Group, nbytes: float) -> str:
        """The algorithm NCCL runs this collective with (:meth:`_tuned`: ``ring``, ``tree``,
        ``nvls`` inside one node, ``nvlstree`` across nodes, ``nvls`` / ``collnet`` across
        nodes with SHARP for all-reduce, ``ring`` otherwise), or the one forced for
        all-reduces across nodes: the fabric runs the same choice."""
        if kind != "all_reduce" or group.size <= 1 or nbytes <= 0:
            return "ring"
        return self._tuned(kind, group, float(nbytes))[1]

    def choice(self, kind: str, group: Group, nbytes: float) -> tuple[str, str]:
        """(algorithm, protocol) NCCL's cost model runs an all-reduce, all-gather or
        reduce-scatter with on a non-blocking fabric (forced ones as forced)."""
        if kind not in PROTOCOL_KINDS or group.size <= 1 or nbytes <= 0:
            raise ValueError(f"no NCCL tuning for {kind} over {group.size} ranks, {nbytes} B")
        return self._tuned(kind, group, float(nbytes))[1:]

    def protocol_for(self, kind: str, group: Group, nbytes: float) -> str:
        """NCCL_PROTO as the fabric should run this collective: the net plugin's protocol
        where its tuner chooses (:meth:`plugin_choice`), else :attr:`protocol` (``auto`` lets
        the fabric take the fastest on its own bandwidth)."""
        if group.size <= 1 or nbytes <= 0:
            return self.protocol
        plugin = self.plugin_choice(kind, group, float(nbytes))
        return plugin[1] if plugin is not None else self.protocol


@functools.lru_cache(maxsize=1 << 16)
def _alpha_beta_time(ab: AlphaBeta, kind: str, size: int, per_node: int, nbytes: float) -> float:
    """Memoised: sweeps ask the same few (kind, group shape, size) questions thousands of times
    (the answer does not depend on the group's role or stage)."""
    return ab._time_s(kind, Group(size=size, per_node=per_node), nbytes)
