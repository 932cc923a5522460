"""CPU activation offloading: what copying the first N layers' activations to host costs.

Megatron-Core's ``cpu_offloading`` runs Transformer Engine's double-buffered group offload
handler (``get_cpu_offload_context``): as the forward of offloaded layer i ends, what it keeps
for the backward is copied to host memory on a side stream while layer i + 1 computes, and
layer i + 2 waits for that copy to finish (two buffers); in the backward, layer i's copy comes
back while layer i + 1's backward runs, and layer i's backward waits for it. The layer after
the last offloaded one stays on the GPU (Megatron: N below the layer count), so each offloaded
layer hides its copy behind the next layer's compute:

    stall_fwd(i) = max(0, A_i / r - F_{i+1}),   stall_bwd(i) = max(0, A_i / r - B_{i+1})

with A_i the layer's activation bytes (:func:`workloads.memory.layer_activation_bytes`), r the
GPU's host-memory copy rate and F, B the next layer's forward and backward compute. The copies
also read or write HBM at r (a few percent of its bandwidth; not charged).

Fine-grained offloading (``parallel.offload_modules``, Megatron-Core's
``--fine-grained-activation-offloading``) copies the listed modules' inputs of every layer on a
side stream, queued behind one another: in a steady state each layer's copies must fit in its
own forward (out) and backward (back), or the stream falls behind by the difference,
max(0, M / r - F) and max(0, M / r - B) a layer (:func:`module_stalls_s`)."""

from __future__ import annotations

import numpy as np

HOST_COPY_EFFICIENCY = 0.86
"""Fraction of the host link's per-direction rate a pinned-memory copy engine sustains: PCIe
Gen5 x16 moves about 55 of its 64 GB/s a direction (128b/130b encoding, TLP headers); an
engineering estimate taken for NVLink-C2C too, not a fit."""


def copy_rate(gpu) -> float:
    """Bytes a second one direction of ``gpu``'s host link copies (HOST_COPY_EFFICIENCY of it)."""
    return gpu.host_memory_bytes_per_s * HOST_COPY_EFFICIENCY


def offload_stalls_s(moe_layer: np.ndarray, act_bytes: dict, fwd_s: dict, bwd_s: dict,
                     rate: float) -> tuple[float, float]:
    """(forward, backward) seconds one micro-batch waits for the copies of the offloaded
    layers, whose kinds are ``moe_layer[:n]``; ``moe_layer[n]`` is the kind of the first layer
    kept. ``act_bytes`` / ``fwd_s`` / ``bwd_s`` map a kind (is MoE) to one layer's activation
    bytes and its forward / backward compute; ``rate``: bytes a second (:func:`copy_rate`)."""
    kinds = np.asarray(moe_layer, dtype=bool)
    if kinds.size < 2:
        return 0.0, 0.0
    per = {k: act_bytes[k] / rate for k in act_bytes}
    copy = np.where(kinds[:-1], per.get(True, 0.0), per.get(False, 0.0))
    nxt = kinds[1:]
    f_next = np.where(nxt, fwd_s.get(True, 0.0), fwd_s.get(False, 0.0))
    b_next = np.where(nxt, bwd_s.get(True, 0.0), bwd_s.get(False, 0.0))
    return (float(np.maximum(copy - f_next, 0.0).sum()),
            float(np.maximum(copy - b_next, 0.0).sum()))


def module_stalls_s(copy_s: float, fwd_s: float, bwd_s: float) -> tuple[float, float]:
    """(forward, backward) seconds one layer of fine-grained offloading adds to a micro-batch:
    its copies (``copy_s`` each way, at the copy rate already) beyond its own compute."""
    return max(0.0, copy_s - fwd_s), max(0.0, copy_s - bwd_s)
