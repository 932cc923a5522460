"""GPU catalogue: peak FLOP/s, HBM capacity and bandwidth, NVLink bandwidth, each sourced."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from workloads.presets import preset_mapping, yaml_presets
from workloads.units import GIGA, TERA


NVL_TRAY_GPUS = 4
"""GPUs of one GB200 NVL72 compute tray (two Grace-Blackwell superchips; 18 trays per rack:
NVIDIA's GB200 NVL72 datasheet): the step a rack's used GPUs come in."""


class GPUSpec(BaseModel):
    """One GPU model. Peaks are dense tensor-core rates, decimal (1 TFLOP/s = 1e12 FLOP/s)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str | None = None
    source: str | None = None
    bf16_tflops: float = Field(gt=0, le=1e6)
    """Dense BF16/FP16 tensor-core peak: the denominator of MFU."""
    fp8_tflops: float | None = Field(default=None, gt=0, le=1e6)
    """Dense FP8 peak; None where the GPU has no FP8 tensor cores (A100)."""
    hbm_gib: float = Field(gt=0, le=1e5)
    """Device memory the framework can allocate from."""
    hbm_gbyte_per_s: float = Field(gt=0, le=1e6)
    nvlink_gbyte_per_s: float = Field(gt=0, le=1e6)
    """NVLink bandwidth per GPU per direction."""
    pcie_gbyte_per_s: float = Field(gt=0, le=1e5)
    """Host link per direction (PCIe Gen4 x16: 32 GB/s; Gen5: 64 GB/s)."""
    host_memory_gbyte_per_s: float | None = Field(default=None, gt=0, le=1e5)
    """GPU to CPU-memory rate per direction where it is not the PCIe link: a Grace superchip's
    NVLink-C2C share. None = ``pcie_gbyte_per_s``."""
    sms: int = Field(gt=0, le=10_000)
    """Streaming multiprocessors: GEMM tiles run in waves of this many (A100 108, H100 132)."""
    nvls: bool = False
    """NVSwitch with NVLink SHARP (third-generation NVSwitch on HGX H100 / H800 / H200, and
    B200's): NCCL's NVLS / NVLSTree algorithms reduce inside the switch."""
    nvlink_domain: int = Field(default=8, gt=0, le=1024)
    """GPUs one NVLink / NVSwitch domain joins in the system the GPU ships in (HGX boards 8,
    GB200 NVL72 72): the most a node (cluster.gpus_per_node) can hold, and nccl-tests' default
    --gpus-per-node."""
    mx_formats: bool = False
    """Block-scaled MX tensor-core formats (OCP Microscaling v1.0: MXFP8, MXFP6, MXFP4), in
    Blackwell's fifth-generation tensor cores: MXFP8 GEMMs at the FP8 rate."""

    def node_gpus(self, gpus: int) -> int:
        """The node ``gpus`` of this GPU run in when none is stated: one NVLink domain, or,
        where the job's GPUs are not whole domains of a rack-scale system (a domain of more
        than 8), the largest whole number of compute trays (NVL_TRAY_GPUS) that divides them,
        as NVIDIA runs 1,024 or 128 GB200 in racks of 64. HGX boards stay at their 8 (a job
        that is not whole boards is refused, as before)."""
        d = self.nvlink_domain
        if gpus <= d or gpus % d == 0 or d <= 8:
            return d
        return max((k for k in range(NVL_TRAY_GPUS, d + 1, NVL_TRAY_GPUS) if gpus % k == 0),
                   default=d)

    @property
    def peak_flops(self) -> float:
        """Dense BF16 peak in FLOP/s."""
        return self.bf16_tflops * TERA

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_gbyte_per_s * GIGA

    @property
    def pcie_bytes_per_s(self) -> float:
        return self.pcie_gbyte_per_s * GIGA

    @property
    def host_memory_bytes_per_s(self) -> float:
        """What copies between this GPU and host memory move per direction (link rate)."""
        return (self.host_memory_gbyte_per_s or self.pcie_gbyte_per_s) * GIGA

    @property
    def nvlink_bytes_per_s(self) -> float:
        return self.nvlink_gbyte_per_s * GIGA


def _catalogue() -> dict[str, dict]:
    return yaml_presets("topologies", "presets")["gpus"]


def list_gpus() -> list[str]:
    return sorted(_catalogue())


def gpu_mapping(name: str) -> dict:
    """Raw mapping of GPU preset ``name`` (a fresh dict)."""
    return preset_mapping(_catalogue(), name, "GPU")


def load_gpu(name: str) -> GPUSpec:
    return GPUSpec.model_validate(gpu_mapping(name))
