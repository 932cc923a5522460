"""Megatron-Core's flexible pipeline layout (``--pipeline-model-parallel-layout``).

A string lists the virtual pipeline stages in order, separated by ``|``: ``E`` the embedding,
``t`` a transformer (decoder) layer, ``m`` a multi-token-prediction layer, ``L`` the loss;
``x*n`` repeats a symbol and ``(...)*n`` a group; commas are cosmetic. Virtual stage k runs on
pipeline rank k mod pp as model chunk k // pp (megatron/core/transformer/
pipeline_parallel_layer_layout.py). DeepSeek-V3 on pp 8 x vpp 4 (Megatron-Bridge's H100
recipe): ``Et|(tt|)*30mL``, the embedding and one layer first, two layers on each of the next
30 virtual stages, the MTP layer and the loss alone on the last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

F = "parallel.pipeline_layout"
SYMBOLS = "EtmL"


@dataclass(frozen=True)
class PipelineLayout:
    """A parsed layout on ``pp`` ranks: per (stage, chunk), its decoder and MTP layers."""

    decoder: tuple[tuple[int, ...], ...]
    """Decoder layers of each (stage, chunk)."""
    mtp: tuple[tuple[int, ...], ...]
    """MTP layers of each (stage, chunk)."""

    @property
    def vpp(self) -> int:
        return len(self.decoder[0])


MAX_SYMBOLS = 1_000_000
"""Longest unrolled layout accepted (a guard against a repeat count that would exhaust
memory)."""


def _unroll(text: str) -> str:
    text = text.replace(",", "").replace(" ", "")

    grown = [len(text)]

    def repeat(g: re.Match) -> str:
        grown[0] += len(g.group(1)) * int(g.group(2)) - len(g.group(0))
        if grown[0] > MAX_SYMBOLS:
            raise ValueError(f"{F}: unrolls past {MAX_SYMBOLS:,} symbols")
        return g.group(1) * int(g.group(2))

    for pattern in (r"\(([^()]+)\)\*(\d+)", r"(.)\*(\d+)"):
        text = re.sub(pattern, repeat, text)
    return text


def parse(text: str, pp: int) -> list[str]:
    """The virtual stages of ``text`` (each a string of symbols); ValueError names the rule."""
    stages = _unroll(text).split("|")
    bad = sorted({ch for st in stages for ch in st if ch not in SYMBOLS})
    if bad:
        raise ValueError(f"{F} {text!r}: unknown symbol(s) {''.join(bad)!r} (E embedding, "
                         f"t transformer layer, m MTP layer, L loss; x*n and (...)*n repeat)")
    if len(stages) % pp:
        raise ValueError(f"{F} {text!r} has {len(stages)} virtual stages, not a multiple of "
                         f"parallel.pp ({pp})")
    flat = "".join(stages)
    if flat.count("E") != 1 or flat.count("L") != 1 or not flat.startswith("E") or \
            not flat.endswith("L"):
        raise ValueError(f"{F} {text!r}: the embedding E must come first and the loss L last, "
                         f"each exactly once")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        raise ValueError(f"{F} {text!r}: decoder layers t must come before MTP layers m")
    return stages


def pipeline_layout(text: str, pp: int, num_layers: int, mtp_layers: int) -> PipelineLayout:
    """Parse and check ``text`` against the model: its t count is num_layers, its m count
    mtp_num_layers, all MTP layers in one virtual stage, the last chunk of its rank (Megatron's
    rules)."""
    stages = parse(text, pp)
    v = len(stages) // pp
    grid = [[stages[c * pp + i] for c in range(v)] for i in range(pp)]
    t = sum(st.count("t") for st in stages)
    if t != num_layers:
        raise ValueError(f"{F} {text!r} places {t} transformer layers; workload.model."
                         f"num_layers is {num_layers}")
    m = sum(st.count("m") for st in stages)
    if m != mtp_layers:
        raise ValueError(f"{F} {text!r} places {m} MTP layers; workload.model.mtp_num_layers "
                         f"is {mtp_layers}")
    holding = [(i, c) for i in range(pp) for c in range(v) if "m" in grid[i][c]]
    if len(holding) > 1 or holding and holding[0][1] != v - 1:
        raise ValueError(f"{F} {text!r}: all MTP layers must sit in one virtual stage, the last "
                         f"model chunk of its pipeline rank (Megatron-Core)")
    return PipelineLayout(decoder=tuple(tuple(st.count("t") for st in row) for row in grid),
                          mtp=tuple(tuple(st.count("m") for st in row) for row in grid))
