"""The scenario's ``failures:`` and ``checkpoint:`` sections (validated, every default sourced).

Durations are seconds unless the name says otherwise. Defaults marked *assumption* have no
published figure; set them from your own cluster's logs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from simulator.config.failure_catalogue import PRESETS, catalogue

HEARTBEAT_DETECTION_S = 30.0
"""Crash detection: a 10 s agent heartbeat, declared dead after three misses (*assumption*;
MegaScale reports detection plus diagnosis under 10 minutes on average)."""
WATCHDOG_TIMEOUT_S = 600.0
"""A hang is noticed when the NCCL watchdog fires: PyTorch's default process-group timeout and
Megatron-LM's ``--distributed-timeout-minutes`` default are both 10 minutes."""
DIAGNOSIS_S = 300.0
"""Locating the faulty node (self-checks, NCCL tests): MegaScale, detection plus diagnosis
under 10 minutes on average (*assumption* for the split)."""
SWAP_S = 120.0
"""Cordoning the faulty node and scheduling a spare in its place (*assumption*)."""
LAUNCH_S = 120.0
"""Container start, Python imports, CUDA context and model construction (*assumption*)."""
REPAIR_HOURS = 72.0
"""Time until a repaired node returns to the spare pool (*assumption*)."""


class Recovery(BaseModel):
    """What one interruption costs before training resumes."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    heartbeat_s: float = Field(default=HEARTBEAT_DETECTION_S, ge=0, le=1e6)
    watchdog_timeout_s: float = Field(default=WATCHDOG_TIMEOUT_S, ge=0, le=1e6)
    diagnosis_s: float = Field(default=DIAGNOSIS_S, ge=0, le=1e7)
    swap_s: float = Field(default=SWAP_S, ge=0, le=1e7)
    launch_s: float = Field(default=LAUNCH_S, ge=0, le=1e7)
    init: Literal["tcpstore", "redis", "barrier-free"] = "barrier-free"
    """Communication-group initialisation (MegaScale section 3.5, 2,048 GPUs: TCPStore 1047 s,
    Redis 361 s, both O(n^2); without global barriers < 5 s, O(n)). Default barrier-free: the
    O(n^2) schemes would cost hours per restart at 16,384 GPUs, which Llama 3's > 90 % effective
    training time rules out."""
    reload: Literal["storage", "peer"] = "peer"
    """``storage``: every rank reads its weights and optimizer shard (weights dp times);
    ``peer``: one reader per data-parallel group, then a broadcast over the fabric (MegaScale
    section 4.4)."""
    spares: int | None = Field(default=None, ge=0, le=10_000_000)
    """Spare nodes on standby; null = always one available. With a pool, a replacement waits
    while every spare is in repair."""
    repair_hours: float = Field(default=REPAIR_HOURS, gt=0, le=1e6)


class FailuresConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    preset: str = "llama3-405b"
    """Failure catalogue: llama3-405b (Llama 3 Table 5 + planned), meta-rsc1, meta-rsc2, none."""
    rates: dict[str, float] = Field(default_factory=dict)
    """Per-component overrides, interruptions per 1,000 unit-days (``clustersim failures
    --components`` lists names and units)."""
    scale: float = Field(default=1.0, ge=0, le=1e6)
    """Multiplies every rate (what if hardware were twice as reliable: 0.5)."""
    distribution: Literal["exponential", "weibull"] = "exponential"
    weibull_shape: float = Field(default=0.78, gt=0.05, le=20)
    """Shape k of the time between job interruptions when ``distribution: weibull``; k < 1 means
    failures cluster (Schroeder and Gibson, DSN 2006, report k = 0.7-0.8 for HPC systems)."""
    recovery: Recovery = Recovery()

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"unknown failure preset {v!r}; expected one of {list(PRESETS)}")
        return v

    @field_validator("rates")
    @classmethod
    def _known_components(cls, rates: dict[str, float], info: ValidationInfo):
        preset = info.data.get("preset")
        names = [c.name for c in catalogue(preset)] if rates and preset else []
        for name, rate in rates.items():
            if name not in names:
                raise ValueError(f"unknown component {name!r} for preset {preset!r}; expected "
                                 f"one of {names}")
            if not 0 <= rate <= 1e9:
                raise ValueError(f"{name}: rate must be >= 0 interruptions per 1,000 unit-days "
                                 f"(got {rate})")
        return rates


STORAGE_WRITE_GBYTE_PER_S = 273.0
"""Aggregate checkpoint write bandwidth: Narayanan et al. 2021 section 5.10 (Selene), 273 GB/s
measured saves (40 % of the file system's peak)."""
STORAGE_READ_GBYTE_PER_S = 1000.0
"""Aggregate read bandwidth: Narayanan et al. 2021 section 5.10, initial load at 1 TB/s."""


class CheckpointConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    strategy: Literal["sync", "two-stage", "in-memory"] = "two-stage"
    """``sync``: the step stalls while the state is written to storage; ``two-stage``
    (MegaScale, Megatron async save): stalls for the GPU-to-host copy only, then persists in
    the background; ``in-memory`` (Gemini, SOSP 2023): host copy plus a replica in a peer's
    memory, reloaded over the fabric."""
    interval_min: float | Literal["auto"] = "auto"
    """Minutes of training between checkpoints, or auto: Young/Daly's optimum for the
    blocking time and the job's MTBF."""
    write_gbyte_per_s: float = Field(default=STORAGE_WRITE_GBYTE_PER_S, gt=0, le=1e7)
    read_gbyte_per_s: float = Field(default=STORAGE_READ_GBYTE_PER_S, gt=0, le=1e7)

    @field_validator("interval_min")
    @classmethod
    def _positive(cls, v):
        if v != "auto" and not 0 < v <= 1e7:
            raise ValueError(f"must be > 0 minutes or 'auto' (got {v})")
        return v
