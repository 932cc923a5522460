"""The communication interface implemented by the fabric ("flow" fidelity).

``time_s(kind, group, nbytes)`` for a group that stays inside a server answers from the NVLink
alpha-beta model (design.md: intra-node collectives stay on NVLink). For a group that crosses
servers it lays out *every* replica of that group at that pipeline stage (all TP ranks x all DP
groups, ...), runs them together as one batch of flows on the fabric, and returns the slowest
group's time: groups really contend, and a collective waits for its slowest member. Results are
cached per (kind, role, stage, bytes); how often each runs in a step comes from the compiler
(:attr:`simulator.step.program.Program.collectives`), so the step's link usage can be reported.
The algorithm (ring or tree) is the one NCCL's cost model picks, as at screening fidelity.

With ``net`` (``congestion_control: dcqcn``) every batch runs through the DCQCN / PFC fluid
model (simulator.congestion.shapes) instead of max-min sharing, and the step's per-link queues,
pauses, marks and drops are reported too. ``congestion_control: none`` is the ideal max-min
model (nothing queues, so PFC has nothing to pause).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simulator import congestion
from simulator.calibration import CHANNELS_PER_NIC_DEFAULT
from simulator.network.alpha_beta import AlphaBeta
from simulator.network.cache import collective_key
from simulator.network.collectives import (
    CONGESTION_KEYS,
    add_congestion,
    fluid_inputs,
    route_phases,
    run_collective,
)
from simulator.network.fabric import Fabric
from simulator.step.groups import Group
from simulator.step.requests import CollectiveRequest
from workloads.layout import Layout
from workloads.ranks import replica_groups


@dataclass
class FabricComm:
    fabric: Fabric
    layout: Layout
    nvlink: AlphaBeta
    """The cluster's alpha-beta model: NVLink collectives, and NCCL's algorithm choice."""
    routing: str = "ecmp"
    queue_pairs: int = 1
    split_data_on_qps: bool = False
    """NCCL_IB_SPLIT_DATA_ON_QPS (network.nccl.split_data_on_qps: collectives.qps_used)."""
    channels_per_nic: int = CHANNELS_PER_NIC_DEFAULT
    """NCCL channels per NIC rail (network.nccl.channels_per_nic)."""
    net: object = None
    """A NetworkConfig with congestion_control dcqcn: run the fluid model."""
    seed: int = 0
    fluid_cache: dict = field(default_factory=dict)
    """Congested component shapes already simulated (shared by every batch of the step)."""
    results: dict = field(default_factory=dict)
    """(kind, role, stage, nbytes) -> collectives.CollectiveResult."""
    routed: dict = field(default_factory=dict)
    """Keys routed ahead by :meth:`prefetch` -> (groups, phases) (used once, then dropped)."""
    pool: object = None
    """The step's FormPool while its shapes run ahead (:meth:`prefetch` to :meth:`close`)."""
    groups: dict = field(default_factory=dict)
    """(kind, role, stage, nbytes) -> the Group the compiler asked about (for :meth:`usage`'s
    non-blocking reference time)."""
    cache: object = None
    """A :class:`simulator.network.cache.StepCache` shared by a sweep's points: batches are
    looked up by content before they run, and stored after (times only: no link frames)."""
    cached: dict = field(default_factory=dict)
    """(kind, role, stage, nbytes) -> time answered by ``cache``."""

    def key(self, kind: str, group: Group, nbytes: float) -> tuple | None:
        """The batch ``time_s`` runs on the fabric, or None (a trivial group, or NVLink)."""
        if group.size <= 1 or nbytes <= 0 or group.nodes == 1 or not group.role:
            return None
        return (kind, group.role, group.stage, float(nbytes))

    def time_s(self, kind: str, group: Group, nbytes: float) -> float:
        key = self.key(kind, group, nbytes)
        if key is None:
            return 0.0 if group.size <= 1 or nbytes <= 0 else \
                self.nvlink.time_s(kind, group, nbytes)
        self.groups.setdefault(key, group)
        if key in self.cached:
            return self.cached[key]
        if key not in self.results:
            groups, routed = self.routed.pop(key, (None, None))
            groups = groups if groups is not None else self._groups(key)
            algorithm = self._algorithm(kind, group, nbytes)
            protocol = self.nvlink.protocol_for(kind, group, nbytes)
            address = self._address(key, groups, algorithm, protocol)
            if address is not None and self._from_cache(key, address):
                return self.cached[key]
            self.results[key] = run_collective(self.fabric, kind, groups, nbytes,
                                               routing=self.routing,
                                               queue_pairs=self.queue_pairs,
                                               algorithm=algorithm,
                                               net=self.net, seed=self.seed,
                                               fluid_cache=self.fluid_cache, routed=routed,
                                               pool=self.pool, protocol=protocol,
                                               channels_per_nic=self.channels_per_nic,
                                               gpu_name=self.nvlink.gpu_name,
                                               split_data_on_qps=self.split_data_on_qps)
            if address is not None:
                self.cache.put(address, self.results[key].time_s)
        return self.results[key].time_s

    def _address(self, key, groups: list[np.ndarray], algorithm: str, protocol: str
                 ) -> str | None:
        """The batch's content address in :attr:`cache` (None without a cache)."""
        if self.cache is None:
            return None
        return collective_key(self.fabric, key[0], groups, key[3], routing=self.routing,
                              queue_pairs=self.queue_pairs, algorithm=algorithm, net=self.net,
                              seed=self.seed, protocol=protocol,
                              channels_per_nic=self.channels_per_nic,
                              split_data_on_qps=self.split_data_on_qps)

    def _from_cache(self, key, address: str) -> bool:
        """Whether :attr:`cache` knows the batch (its time then in :attr:`cached`)."""
        t = self.cache.get(address)
        if t is not None:
            self.cached[key] = t
        return t is not None

    def _algorithm(self, kind: str, group: Group, nbytes: float) -> str:
        """NCCL's choice for this collective, by the same cost model as the screening
        fidelity (:meth:`simulator.network.alpha_beta.AlphaBeta.algorithm`)."""
        return self.nvlink.algorithm(kind, group, nbytes)

    def _groups(self, key) -> list[np.ndarray]:
        return replica_groups(self.layout, key[1], key[2])

    def prefetch(self, requests: list[CollectiveRequest]) -> None:
        """Route the fabric batches of ``requests`` (those a compile will ask for,
        :func:`simulator.step.program.collective_requests`) now and, under the fluid
        model, start their congested shapes in worker processes as they are found, the
        largest batches first, so that they run while the step compiles; :meth:`time_s` then
        collects them (running itself any shape no worker has started). Call :meth:`close`
        after the compile. Without fork (or inside a pool's worker) only the routing is done
        ahead."""
        keys = [k for k in (self.key(*r) for r in requests) if k is not None]
        algo = {self.key(*r): self._algorithm(*r) for r in requests}
        proto = {self.key(*r): self.nvlink.protocol_for(*r) for r in requests}
        args = fluid_inputs(self.fabric, self.net) if self.net is not None else None
        fork = args is not None and congestion.can_fork_workers()
        work = 0.0                            # flow-steps of the shapes planned so far
        todo = [k for k in dict.fromkeys(keys) if k not in self.results and k not in self.routed
                and k not in self.cached]
        for key in sorted(todo, key=lambda k: -k[3]):
            groups = self._groups(key)
            address = self._address(key, groups, algo[key], proto[key])
            if address is not None and self._from_cache(key, address):
                continue
            phases = route_phases(self.fabric, key[0], groups, key[3], routing=self.routing,
                                  queue_pairs=self.queue_pairs, algorithm=algo[key],
                                  channels_per_nic=self.channels_per_nic,
                                  split_data_on_qps=self.split_data_on_qps)
            self.routed[key] = (groups, phases)
            if args is None:
                continue
            for ph in phases:
                ph.split, cost = congestion.plan_forms(ph.hops, ph.size, *args, self.net,
                                                       seed=self.seed, line_share=ph.share,
                                                       cache=self.fluid_cache, pool=self.pool)
                work += cost
                if self.pool is None and fork and congestion.pool_pays_off(work):
                    self.pool = congestion.FormPool()
                    self.pool.adopt(self.fluid_cache)   # the shapes planned so far

    def close(self, wait: bool = True) -> None:
        """Stop the step's worker processes (``wait=False`` after a failure)."""
        if self.pool is not None:
            self.pool.close(wait=wait)
            self.pool = None
        self.routed.clear()

    def times_per_step(self, key, calls: dict, per_micro_batch: int) -> int:
        """How often the batch ``key`` runs in a step, from the compiler's ``calls``
        (:attr:`simulator.step.program.Program.collectives`): tp / cp / ep / pp groups per
        micro-batch (pp: forward and backward, per chunk), dp / edp / emb groups once."""
        role = key[1]
        if role == "pp":
            return calls[key] * 2 * per_micro_batch * self.layout.vpp
        if role in ("tp", "cp", "ep", "zdp", "zedp", "zdps", "zedps"):
            return calls[key] * per_micro_batch
        return calls[key]

    def congestion(self, calls: dict, per_micro_batch: int) -> dict | None:
        """Per link over one step (fluid model only, else None): ``max_queue_bytes`` (largest
        backlog), ``queue_byte_s`` (backlog integrated over time), ``pause_s``, ``pauses``,
        ``marked_bytes``, ``dropped_bytes``; and ``queue_trace`` of the hottest links per
        batch (key -> frame, t_s from the batch's start)."""
        if self.net is None:
            return None
        L = self.fabric.num_links
        out = {k: np.zeros(L) for k in CONGESTION_KEYS}
        traces = {}
        for key, res in self.results.items():
            if res.congestion is None:
                continue
            add_congestion(out, res.congestion.get,
                           self.times_per_step(key, calls, per_micro_batch))
            traces[key] = res.congestion["queue_trace"]
        out["queue_trace"] = traces
        return out

    def usage(self, calls: dict, per_micro_batch: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
        """(bytes, busy seconds, max flows, heaviest collective) per link over one step, and
        one row per collective.

        Calls for tp / cp / ep / pp groups happen per micro-batch (``per_micro_batch`` times the
        compiler's count in ``calls``); dp / edp / emb groups once per step. The heaviest
        collective of a link is the row index of the batch that put the most bytes on it per
        step (-1: none). A row is (kind, role, stage, bytes, calls per step, time, flows,
        non-blocking time, its hottest link): the non-blocking time is what NCCL's cost model
        gives the same collective on a fabric that never contends (the screening fidelity's
        answer), so time / non-blocking is what this fabric's contention cost it; its hottest
        link is where it queued deepest under the fluid model, else the network link where most
        of its flows met at once (ties: the higher tier, then the busier).
        """
        L = self.fabric.num_links
        nbytes, busy = np.zeros(L), np.zeros(L)
        peak = np.zeros(L, dtype=np.int64)
        heaviest, most = np.full(L, -1), np.zeros(L)
        f = self.fabric
        tier = np.maximum(f.tier[f.link_src], f.tier[f.link_dst])
        network = (f.kind[f.link_src] != "nvswitch") & (f.kind[f.link_dst] != "nvswitch")
        rows = []
        for key, res in self.results.items():
            kind, role, stage, size = key
            times = self.times_per_step(key, calls, per_micro_batch)
            mine = res.link_bytes * times
            nbytes += mine
            busy += res.link_busy_s * times
            np.maximum(peak, res.link_max_flows, out=peak)
            more = mine > most
            heaviest[more], most[more] = len(rows), mine[more]
            rows.append((kind, role, stage, size, times, res.time_s, res.flows,
                         self.nvlink.time_s(kind, self.groups[key], size),
                         _hottest_link(res, network, tier)))
        return nbytes, busy, peak, heaviest, rows


def _hottest_link(res, network: np.ndarray, tier: np.ndarray) -> int:
    """Where a collective queued deepest (fluid model), else the network link where most of its
    flows met at once (ties: the higher tier, then the busier); -1 if it used no network link."""
    if res.congestion is not None and res.congestion["max_queue_bytes"].max() > 0:
        return int(np.argmax(res.congestion["max_queue_bytes"]))
    flows = np.where(network, res.link_max_flows, 0)
    if flows.max() <= 0:
        return -1
    return int(np.lexsort((res.link_busy_s, tier, flows))[-1])
