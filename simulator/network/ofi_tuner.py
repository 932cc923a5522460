"""The algorithm / protocol choice of aws-ofi-nccl's region tuner on AWS p5 / p5e (EFA).

On EFA, NCCL loads the AWS net plugin's tuner, which replaces NCCL's cost model for the
all-reduce: the plane of (message bytes, ranks) is cut into polygons, each naming the
algorithm and protocol AWS measured fastest there (src/tuner/nccl_ofi_regions.cpp,
``region_init_internal_p5_p5e``, aws-ofi-nccl v1.16.3, the version of the p5 nccl-tests in
validation/network_scale). The tuner:

- checks the regions in order and takes the first that holds the point, edges included
  (``is_inside_region`` returns 0 on an edge, which counts);
- skips NVLSTree regions where NVLS is not supported;
- falls back to NCCL's own tuner on two nodes or fewer, outside every region, and for
  layouts other than 8 ranks per node (the regions for 2 and 1 rank per node are not
  transcribed here: clustersim's EFA nodes are 8-GPU p5 nodes);
- works in linear coordinates (v1.16.3; later versions moved to log-log).

p5en (EFAv3) has regions of its own that are not transcribed: this table is p5 / p5e's.
"""

from __future__ import annotations

import numpy as np

TUNER_MAX_SIZE = 100.0 * 2**30
"""Largest message the tuner's regions reach (TUNER_MAX_SIZE, nccl_ofi_tuner_region.h)."""
TUNER_MAX_RANKS = 1024.0 * 1024
"""Most ranks the tuner's regions reach (TUNER_MAX_RANKS)."""


def extend_region(a: tuple, b: tuple, z: tuple) -> tuple[float, float]:
    """The plugin's ``extend_region``: the point where the line through ``a`` and ``b`` leaves
    the box below ``z`` (same x as z, or same y)."""
    if a[0] == b[0]:
        return (a[0], z[1])
    if a[1] == b[1]:
        return (z[0], a[1])
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    y = m * z[0] + c
    return (z[0], y) if y < z[1] else ((z[1] - c) / m, z[1])


_MAX = (TUNER_MAX_SIZE, TUNER_MAX_RANKS)
_EXT_384MIB = extend_region((402653184, 2048), (402653184, 4096), _MAX)
"""Where the 384 MiB border (Tree / LL128 against NVLSTree) leaves the plane."""
_EXT_9GIB = extend_region((8053063680, 160), (9663676416, 192), _MAX)
"""Where the 7.5-9 GiB border (NVLSTree against Ring / Simple) leaves the plane."""

P5_ALL_REDUCE_REGIONS: tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...] = (
    ("tree", "LL128", ((0, 16), (31457280, 16), (37748736, 32), (117440512, 64),
                       (301989888, 128), (301989888, 256), (335544320, 512),
                       (536870912, 1024), (402653184, 2048), (402653184, 4096),
                       _EXT_384MIB, (0, _EXT_384MIB[1]))),
    ("nvlstree", "Simple", ((31457281, 16), (TUNER_MAX_SIZE, 16), (31457281, 16))),
    ("ring", "LL128", ((31457280, 17), (1073741824, 17), (2147483648, 64), (2147483648, 128),
                       (1342177280, 160), (2147483648, 256), (1074790400, 256),
                       (444596224, 160), (301989888, 128), (117440512, 64),
                       (37748736, 32))),
    ("nvlstree", "Simple", ((2147483648, 128), (6442450944, 128), (8053063680, 160),
                            (9663676416, 192), _EXT_9GIB, _EXT_384MIB,
                            (402653184, 4096), (402653184, 2048), (536870912, 1024),
                            (335544320, 512), (301989888, 256), (310378496, 160),
                            (444596224, 160), (1074790400, 256), (2684354560, 256),
                            (2147483648, 224), (1342177280, 160))),
    ("ring", "Simple", ((1073741824, 17), (_EXT_9GIB[0], 17), _EXT_9GIB,
                        (9663676416, 192), (8053063680, 160), (2684354560, 64),
                        (1610612736, 32))),
)
"""p5 / p5e all-reduce regions for 8 ranks per node, in the plugin's order: (algorithm,
protocol, vertices as (bytes, ranks)). Transcribed from aws-ofi-nccl v1.16.3
src/tuner/nccl_ofi_regions.cpp (unchanged up to the 2026-08 main branch but for the switch to
log-log coordinates)."""

RANKS_PER_NODE = 8
"""The layout the transcribed regions are for (``nRanks == 8 * nNodes``)."""


def region_side(point: tuple[float, float], vertices) -> int:
    """1 inside the polygon, 0 on its boundary, -1 outside (the plugin's
    ``is_inside_region``, by ray casting; degenerate polygons hold their edges only)."""
    v = np.asarray(vertices, dtype=float)
    a, b = v, np.roll(v, -1, axis=0)
    p = np.asarray(point, dtype=float)
    ab, ap = b - a, p - a
    cross = ab[:, 0] * ap[:, 1] - ab[:, 1] * ap[:, 0]
    scale = np.hypot(*ab.T) * np.hypot(*ap.T)
    within = ((np.minimum(a, b) <= p) & (p <= np.maximum(a, b))).all(axis=1)
    if ((np.abs(cross) <= 1e-12 * scale) & within).any():
        return 0
    crosses = (a[:, 1] > p[1]) != (b[:, 1] > p[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        x_at = a[:, 0] + (p[1] - a[:, 1]) * ab[:, 0] / ab[:, 1]
    return 1 if (crosses & (p[0] < x_at)).sum() % 2 else -1


def p5_all_reduce_choice(nbytes: float, ranks: int, nodes: int, nvls: bool
                         ) -> tuple[str, str] | None:
    """(algorithm, protocol) the p5 / p5e region tuner runs an all-reduce of ``nbytes`` over
    ``ranks`` on ``nodes`` with, or None where it leaves the choice to NCCL's cost model."""
    if nodes <= 2 or ranks != RANKS_PER_NODE * nodes:
        return None
    for algo, proto, vertices in P5_ALL_REDUCE_REGIONS:
        if algo == "nvlstree" and not nvls:
            continue
        if region_side((float(nbytes), float(ranks)), vertices) >= 0:
            return algo, proto
    return None


REGION_TUNER_GPUS = ("h100", "h200")
"""GPUs of the instances whose regions are transcribed: p5 (H100) and p5e (H200)."""


def region_tuner_applies(transport: str, gpu_name: str | None) -> bool:
    """Whether NCCL runs with the p5 / p5e region tuner: EFA (``topology.transport: efa``)
    with H100 or H200 GPUs. On other EFA instances (p4d's A100, P6's B200) this table does not
    hold, and clustersim leaves the choice to NCCL's cost model."""
    return transport == "efa" and (gpu_name or "").lower().startswith(REGION_TUNER_GPUS)
