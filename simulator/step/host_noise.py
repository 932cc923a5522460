"""Host (OS) noise on network collectives: a detour of one host stalls its whole collective.

A collective that crosses the network moves its data through each rank's NCCL proxy thread,
which posts the transfers of every channel; the GPU kernels and the NIC run on as long as the
slots the proxy has already posted last (NCCL_STEPS slots of a NCCL_BUFFSIZE buffer per
channel, :func:`slack_s`). A detour of the proxy's core (a daemon, an interrupt storm, a page
reclaim) longer than that slack stops the host's sends, and a ring or tree stops with its
slowest member. Detours of source k arrive on each host as a Poisson process of rate
``rate_hz`` and last ``duration_us``; with H hosts in the collective, the fraction of time
at least one of them is stalled is 1 - exp(-H sum_k rate_k max(0, d_k - slack)) (the
M/D/infinity queue's busy probability), so the collective takes

    T' = T exp(H sum_k rate_k max(0, d_k - slack)).

That is the noise amplification Petrini et al. measured on ASCI Q (SC'03, "The Case of the
Missing Supercomputer Performance") and Hoefler et al. simulated (SC'10, "Characterizing the
Influence of System Noise on Large-Scale Applications by Simulation"): detours that cost
each host a fraction f of its time cost a synchronised job of H hosts about H f.
Collectives inside one node (NVLink, no proxy) are not affected. Analytic: no draws.
"""

from __future__ import annotations

import math

from simulator.calibration import NCCL_BUFFSIZE_BYTES

MAX_EXPONENT = 30.0
"""Beyond exp(30) (~1e13 x) a collective makes no progress at all; the exponent is capped
there so step times stay finite numbers."""


def slack_s(nic_bytes_per_s: float, channels_per_nic: int) -> float:
    """How long a channel's NIC keeps sending on what its proxy already posted: one staging
    buffer (NCCL_BUFFSIZE) at the channel's share of the NIC."""
    return NCCL_BUFFSIZE_BYTES / (nic_bytes_per_s / channels_per_nic)


def stall_factor(sources, hosts: int, slack: float) -> float:
    """T' / T of a collective over ``hosts`` hosts under detour ``sources`` (each with
    ``rate_hz`` and ``duration_us``); 1 inside one node or without sources."""
    if hosts <= 1 or not sources:
        return 1.0
    load = sum(s.rate_hz * max(0.0, s.duration_us * 1e-6 - slack) for s in sources)
    return math.exp(min(MAX_EXPONENT, hosts * load))
