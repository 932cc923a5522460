"""The scenario's `network:` section: routing, congestion control, ECN, DCQCN and PFC knobs.

DCQCN timers are the ConnectX firmware's (alpha update 1 us, decrease check 4 us, increase
timer 300 us, one fast-recovery step); the increase steps, minimum rate and byte counter are
those of the DCQCN "Mellanox version" of the packet-level reference (validation/ns3/README.md:
additive 20 Mb/s, hyper 200 Mb/s, R_min 1 Gb/s, no byte counter), the parameters the fluid
model is validated with. ConnectX itself ships rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s,
rpg_min_rate 1 Mb/s and rpg_byte_reset 32767 B (validation/network.md); set those under
``network.dcqcn`` to model it (not validated against a packet-level run).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulator.calibration import CHANNELS_PER_NIC_DEFAULT
from workloads.units import KB

REFERENCE_PORT_GBPS = 100.0
"""ECN thresholds and PFC headroom are given per 100 Gb/s of port speed (the ns-3 reference's
convention)."""


def port_scale_bytes(capacity_bytes_per_s):
    """Bytes that one "kB per 100 Gb/s" threshold stands for on a port of this capacity
    (thresholds scale linearly with port speed)."""
    return capacity_bytes_per_s * 8 / 1e9 / REFERENCE_PORT_GBPS * KB


HEADROOM_BDP_FACTOR = 3.0
"""PFC headroom of a switch ingress port in bandwidth-delay products of its cable (rate x
one-way propagation): the ns-3 reference's switch (HPCC ``third.cc``: ``rate * delay / 8 *
3``). Bytes in flight after XOFF are the cable's round trip (two BDPs) plus what the sender
has in serialization and takes to react, which vendors' headroom calculators size from cable
length, MTU and response time; the reference rounds that to a third BDP."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ECNConfig(_Strict):
    """RED-style ECN marking on egress queues: 0 below Kmin, linear to Pmax at Kmax, 1 above.
    Thresholds are per 100 Gb/s of port speed and scale linearly with it."""

    kmin_kb: float = Field(default=400, ge=0, le=1e6)
    kmax_kb: float = Field(default=1600, gt=0, le=1e6)
    pmax: float = Field(default=0.2, ge=0, le=1)

    @model_validator(mode="after")
    def _order(self):
        if self.kmin_kb > self.kmax_kb:
            raise ValueError(f"kmin_kb ({self.kmin_kb}) must be <= kmax_kb ({self.kmax_kb})")
        return self


class DCQCNConfig(_Strict):
    """DCQCN reaction-point parameters (Zhu et al., SIGCOMM 2015; mlx5 firmware names in
    network.md: dce_tcp_g, dce_tcp_rtt, rate_reduce_monitor_period, rpg_time_reset,
    rpg_byte_reset, rpg_threshold, rpg_ai_rate, rpg_hai_rate, rpg_min_rate)."""

    g: float = Field(default=1 / 256, gt=0, le=1)
    """Alpha gain: alpha <- (1 - g) alpha + g on CNP."""
    alpha_update_us: float = Field(default=1, gt=0, le=1e6)
    rate_decrease_us: float = Field(default=4, gt=0, le=1e6)
    rate_increase_timer_us: float = Field(default=300, gt=0, le=1e7)
    byte_counter_kb: float = Field(default=0, ge=0, le=1e9)
    """Byte counter for rate increase (rpg_byte_reset; ConnectX 32.767): an increase event
    every this many kB sent, besides the timer; stages then follow the DCQCN paper (fast
    recovery while max(T, BC) < F, hyper increase once min(T, BC) > F). 0 = off (timer only,
    as in the packet-level reference)."""
    fast_recovery_steps: int = Field(default=1, ge=0, le=1000)
    ai_mbps: float = Field(default=20, gt=0, le=1e6)
    hai_mbps: float = Field(default=200, gt=0, le=1e6)
    min_rate_mbps: float = Field(default=1000, gt=0, le=1e6)
    reaction_point: Literal["sampled", "mean_field"] = "sampled"
    """sampled: every flow draws its CNPs (seeded) and runs the reaction-point state machine;
    mean_field: every flow follows the expected dynamics (Zhu et al., CoNEXT 2016), no draws."""


class PFCThresholdConfig(_Strict):
    """Ingress PFC thresholds: dynamic (alpha x free shared buffer) or static."""

    mode: Literal["dynamic", "static"] = "dynamic"
    alpha: float = Field(default=0.125, gt=0, le=64)
    """Dynamic-threshold factor (1/8: the ns-3 reference and Broadcom's default) of an ingress
    port as fast as the NICs."""
    alpha_speed_scaling: bool = True
    """A faster ingress port gets a larger alpha: x2 per doubling of its speed over the NICs'
    (rounded up), at most 1, as the ns-3 reference's switch sets it (HPCC ``third.cc``,
    ``pfc_a_shift``: 1/8 at 100 Gb/s, 1/2 for a 400 Gb/s uplink). A bundled uplink carrying
    several hosts' traffic then holds its share of the buffer before it pauses; off: one alpha
    for every port."""
    headroom_kb: float | None = Field(default=None, ge=0, le=1e6)
    """Per port per 100 Gb/s, absorbs in-flight bytes after XOFF. Unset (default): sized
    from the cable, ``HEADROOM_BDP_FACTOR`` x the port's rate x the cable's propagation delay
    (37.5 kB at 100 Gb/s and 1 us), as the ns-3 reference's switch sizes it; a number: that
    many kB per 100 Gb/s whatever the cable."""
    reserve_kb: float = Field(default=4, ge=0, le=1e6)
    resume_gap_kb: float = Field(default=3, ge=0, le=1e6)
    """XON is sent this far below the XOFF threshold."""
    static_xoff_kb: float | None = Field(default=None, gt=0, le=1e6)
    """XOFF threshold for ``mode: static``."""

    @model_validator(mode="after")
    def _static(self):
        if self.mode == "static" and self.static_xoff_kb is None:
            raise ValueError("mode static needs static_xoff_kb")
        return self


class NCCLConfig(_Strict):
    """NCCL's choices that a user can force, as its environment variables do."""

    algorithm: Literal["auto", "ring", "tree", "nvlstree", "nvls", "collnet"] = "auto"
    """NCCL_ALGO for all-reduces across nodes: auto = NCCL's cost model over ring, tree and, on
    GPUs with NVLink SHARP (cluster.gpu nvls), NVLSTree; with in-network reduction
    (cluster.topology.sharp) also NVLS across nodes (NVLS GPUs) or CollNet Direct (others); on
    EFA with H100 / H200, aws-ofi-nccl's p5 region tuner (simulator.network.ofi_tuner) on 3+
    nodes. nvlstree needs NVLS GPUs; nvls and collnet need topology.sharp.
    All-reduces inside one node, and other collectives, keep the cost model's choice (NVLSTree
    has no single-node form). Forcing an algorithm or a protocol turns the plugin's tuner off."""
    protocol: Literal["auto", "LL", "LL128", "Simple"] = "auto"
    """NCCL_PROTO for all-reduce, all-gather and reduce-scatter: auto = the cost model's
    choice (the minimum of each protocol's latency + bytes / (bandwidth x its payload fraction),
    tuning.cc); LL halves the bandwidth for the lowest latency, LL128 keeps 120 of 128 bytes,
    Simple all of them at the highest latency. NVLSTree runs Simple only. Send / receive and
    all-to-all keep their own (point-to-point) costs."""

    channels_per_nic: int = Field(default=CHANNELS_PER_NIC_DEFAULT, ge=1, le=32)
    """Ring / tree channels on each NIC rail, each its own connection (queue pairs, RoCE source
    port) and its own ring with 1 / channels of the data. NCCL finds one channel per NIC and
    doubles them (2; NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = this x NICs per node sets it);
    the default here is 1 for speed (simulator.calibration.CHANNELS_PER_NIC_DEFAULT). Under ECMP
    more channels spread a ring over more paths (as network.queue_pairs does)."""

    qps_per_connection: int = Field(default=1, ge=1, le=1024)
    """NCCL_IB_QPS_PER_CONNECTION: queue pairs of each connection (each its own RoCE source
    port, so ECMP may put them on other paths); the same setting as network.queue_pairs, of
    which a scenario sets one. NCCL's default is 1."""
    split_data_on_qps: bool = False
    """NCCL_IB_SPLIT_DATA_ON_QPS: true cuts every message of a connection into one part per
    queue pair; false (NCCL's default, net_ib.cc in 2.28) posts each message whole on the
    next queue pair in turn, so a connection of m messages (NCCL_BUFFSIZE / NCCL_STEPS each)
    uses min(m, queue pairs) of them (simulator.network.collectives.qps_used). Collectives
    only: `clustersim flows` splits every flow over its queue pairs."""

    channels: int | None = Field(default=None, ge=1, le=64)
    """NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS: the channels of a collective across nodes
    (at most NCCL's MAXCHANNELS, 64), a multiple of the node's NICs (cluster.topology
    nics_per_node, else one per GPU): the same as channels_per_nic = channels / NICs, of
    which a scenario sets one."""

    @model_validator(mode="after")
    def _one_channel_count(self) -> "NCCLConfig":
        if self.channels is not None and "channels_per_nic" in self.model_fields_set:
            raise ValueError(f"network.nccl.channels ({self.channels}) and "
                             f"network.nccl.channels_per_nic ({self.channels_per_nic}) both set "
                             f"the channels; set one")
        return self

    @model_validator(mode="after")
    def _nvlstree_is_simple(self) -> "NCCLConfig":
        if self.algorithm in ("nvlstree", "nvls", "collnet") and \
                self.protocol not in ("auto", "Simple"):
            raise ValueError(f"network.nccl.protocol {self.protocol} cannot run "
                             f"algorithm {self.algorithm} (NCCL runs it Simple only)")
        return self


class NetworkConfig(_Strict):
    routing: Literal["ecmp", "spray", "adaptive"] = "ecmp"
    mtu_bytes: int = Field(default=4096, ge=256, le=65536)
    """RoCE payload per packet (ConnectX active MTU 4096; the ns-3 reference uses 1000)."""
    header_bytes: int = Field(default=62, ge=0, le=1024)
    """Wire bytes per packet beyond the payload: Ethernet 14 + FCS 4 + IPv4 20 + UDP 8 + BTH 12
    + ICRC 4 (the ns-3 reference counts 48)."""
    ack_bytes: int = Field(default=0, ge=0, le=1024)
    """Wire bytes of the acknowledgement a receiving NIC returns per data packet, in the
    data's queues (0: acknowledgements not modelled). Under ``ecmp`` an ACK hashes its own
    5-tuple (on InfiniBand, the subnet manager routes it to its own destination), so it
    need not come back the way its data went; under ``spray`` / ``adaptive`` (and on EFA) it
    takes the data path's cables in reverse.
    The HPCC ns-3 RDMA model (the packet-level reference) returns 60 B per 1,048 B packet, 5.7 %
    of a full link's rate in the other direction. Only ``clustersim flows`` (and its Python
    API) takes it; a training step's collectives do not."""
    queue_pairs: int = Field(default=1, gt=0, le=1024)
    """Flows (queue pairs) per connection; Llama 3 used 16."""
    congestion_control: Literal["none", "dcqcn"] = "dcqcn"
    """none = ideal max-min fair sharing; dcqcn = the DCQCN fluid model."""
    pfc: bool = True
    ecn: ECNConfig = ECNConfig()
    dcqcn: DCQCNConfig = DCQCNConfig()
    pfc_threshold: PFCThresholdConfig = PFCThresholdConfig()
    nccl: NCCLConfig = NCCLConfig()

    @model_validator(mode="after")
    def _one_qp_count(self) -> "NetworkConfig":
        q, nq = self.queue_pairs, self.nccl.qps_per_connection
        if q != 1 and nq != 1 and q != nq:
            raise ValueError(f"network.queue_pairs ({q}) and network.nccl.qps_per_connection "
                             f"({nq}) both set the queue pairs per connection; set one")
        return self

    @property
    def connection_qps(self) -> int:
        """Queue pairs per connection: network.queue_pairs or network.nccl.qps_per_connection,
        whichever the scenario sets (both 1 by default)."""
        return max(self.queue_pairs, self.nccl.qps_per_connection)
