"""The simulated device: an Ascend 910B-like hardware profile (every number an assumption).

:class:`HardwareProfile` is a pydantic model whose defaults describe one Atlas 800T A2
(910B) device and its node. The defaults are documented public figures or typical achieved
values; ``README.md`` ("Hardware profile") says what each one is based on. Every field can be
overridden from a YAML/JSON file (``--hardware FILE``, a mapping of field names, optionally
under a top-level ``hardware:`` key) or one at a time (``--set hardware.hbm_bandwidth_gbps=1800``).

Units are in the field names: ``_tflops`` (10¹² FLOP/s), ``_gbps`` (GB/s, 10⁹ bytes/s),
``_us`` (µs), ``_mhz``, ``_gib`` (2³⁰ bytes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor_core.simulate.errors import SimulationInputError

__all__ = ["HardwareProfile", "load_hardware", "apply_hardware_overrides"]


class HardwareProfile(BaseModel):
    """One device and its node, as the cost model sees them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "Ascend 910B (simulated, Atlas 800T A2-like)"
    # --- AI core (cube) -----------------------------------------------------------------
    cube_tflops_fp16: float = Field(313.0, gt=0, description="nominal cube peak, fp16")
    cube_tflops_bf16: float = Field(313.0, gt=0, description="nominal cube peak, bf16")
    cube_tflops_fp32: float = Field(75.0, gt=0, description="fp32 (HF32 path) cube peak")
    matmul_efficiency: float = Field(0.78, gt=0, le=1, description="achieved share of peak for aligned MatMuls")
    unaligned_matmul_penalty: float = Field(1.25, ge=1, description="time factor when K or N is not a multiple of 16")
    flash_attention_efficiency: float = Field(0.60, gt=0, le=1, description="achieved share of peak for FlashAttention")
    # --- AI core (vector) ---------------------------------------------------------------
    vector_tflops_fp16: float = Field(19.6, gt=0, description="vector unit peak (for compute-bound vector ops)")
    ai_core_count: int = Field(24, gt=0, description="cube cores (AIC)")
    vector_core_count: int = Field(48, gt=0, description="vector cores (AIV)")
    ai_core_frequency_mhz: float = Field(1800.0, gt=0)
    # --- memory -------------------------------------------------------------------------
    hbm_bandwidth_gbps: float = Field(1600.0, gt=0, description="HBM2e peak bandwidth")
    hbm_efficiency: float = Field(0.85, gt=0, le=1, description="achieved share for streaming vector kernels")
    hbm_capacity_gib: float = Field(64.0, gt=0)
    kernel_launch_overhead_us: float = Field(2.0, ge=0, description="fixed cost added to every device kernel")
    # --- interconnect -------------------------------------------------------------------
    devices_per_node: int = Field(8, gt=0)
    hccs_bandwidth_gbps: float = Field(196.0, gt=0, description="achieved intra-node collective bandwidth per device")
    hccs_latency_us: float = Field(5.0, ge=0, description="per ring step, intra-node")
    rdma_bandwidth_gbps: float = Field(25.0, gt=0, description="200 Gb/s RoCE NIC per device")
    rdma_latency_us: float = Field(20.0, ge=0, description="per ring step, inter-node")
    collective_launch_us: float = Field(8.0, ge=0, description="fixed HCCL op overhead")
    pcie_h2d_bandwidth_gbps: float = Field(24.0, gt=0, description="host to device copies (device queue)")
    # --- host ---------------------------------------------------------------------------
    host_cpu_cores_per_node: int = Field(192, gt=0)
    host_memory_gib: float = Field(1536.0, gt=0)
    host_disk_bandwidth_gbps: float = Field(2.0, gt=0, description="dataset read bandwidth per device")

    @property
    def host_cores_per_device(self) -> int:
        """Host cores one device's data pipeline may use (cores per node / devices per node)."""
        return max(1, self.host_cpu_cores_per_node // self.devices_per_node)

    def cube_tflops(self, dtype: str) -> float:
        """Nominal cube peak for a MindFormers dtype name (``float16``, ``bfloat16``, ``float32``)."""
        d = dtype.lower()
        if d in ("bfloat16", "bf16"):
            return self.cube_tflops_bf16
        if d in ("float32", "fp32"):
            return self.cube_tflops_fp32
        return self.cube_tflops_fp16


def _parse_mapping(path: Path) -> dict[str, Any]:
    from ruamel.yaml import YAML

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SimulationInputError(f"--hardware {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = YAML(typ="safe", pure=True).load(text)  # JSON is YAML
    except Exception as exc:  # noqa: BLE001 - any parse error becomes one message
        raise SimulationInputError(f"--hardware {path}: not valid YAML/JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("hardware"), dict):
        data = data["hardware"]
    if not isinstance(data, dict):
        raise SimulationInputError(f"--hardware {path}: expected a mapping of hardware fields")
    return data


def _build(values: dict[str, Any], where: str) -> HardwareProfile:
    try:
        return HardwareProfile(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first.get("loc", ())) or "?"
        raise SimulationInputError(f"{where}: hardware.{key}: {first.get('msg')}") from None


def load_hardware(path: str | Path | None = None) -> HardwareProfile:
    """The default profile, or the defaults overridden by the fields in ``path``."""
    if path is None:
        return HardwareProfile()
    return _build(_parse_mapping(Path(path)), f"--hardware {path}")


def apply_hardware_overrides(hw: HardwareProfile, overrides: dict[str, Any]) -> HardwareProfile:
    """A copy of ``hw`` with ``{field: value}`` applied (validated; unknown fields rejected)."""
    if not overrides:
        return hw
    values = hw.model_dump()
    values.update(overrides)
    return _build(values, "--set")
