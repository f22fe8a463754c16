"""Injected faults: the only problems a simulation has that the training config does not imply.

Everything else the simulator shows (unaligned dimensions, fp32 rotary casts, recompute
patterns, data workers, a missing ``all_reduce_fusion_config``) follows from the config. A
fault stands for something in *model or data code* or in the compiler's choices that no YAML
key controls:

* :class:`CastRoundTrip` — a lossy fp32→fp16→fp32 ``Cast`` pair written in model code (with the
  ``# In file`` location the IR carries);
* :class:`NDFormatOp` — an operator that only accepts ND inside an NZ chain, so the backend wraps
  it in ``TransData`` NZ→ND / ND→NZ in every layer;
* :class:`ParamTransData` — weights kept in ND and converted to FRACTAL_NZ by ``TransData`` on
  every step instead of once;
* :class:`StrategyMismatch` — a shard strategy override on one operator that disagrees with its
  neighbours, forcing ``redistribution_op_*`` AllGather/Split/Concat chains;
* :class:`ExpensiveMapOp` — a costly per-sample transform (Python by default) in the dataset map;
* :class:`DataWarmup` — the first batches cost more to produce (a cold shard cache), so the
  first steps wait for data while the steady state keeps up;
* :class:`SlowHostToDevice` — the host→device link moves batches slowly: the pipeline keeps the
  host queue full while the device queue runs empty.

Cluster faults hit one rank, as a sick device or host does in a large job (the cluster
rules, ``CL``, trace them back to that rank):

* :class:`SlowKernelRank` — one device's kernels of some type run slower (a throttled or
  degraded AI core);
* :class:`SlowDataRank` — one rank's host feeds its device late every step (a slower disk,
  a busy host CPU);
* :class:`DegradedLink` — one rank's outgoing link transfers at a fraction of its bandwidth (a
  flapping HCCS port or RoCE NIC); its collective peers wait for it.

Op names are dotted paths inside a decoder layer (``feed_forward.mul``), as in
:mod:`advisor_core.config.model_structure`.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from advisor_core.simulate.errors import SimulationInputError

__all__ = [
    "CastRoundTrip",
    "NDFormatOp",
    "ParamTransData",
    "StrategyMismatch",
    "ExpensiveMapOp",
    "DataWarmup",
    "SlowHostToDevice",
    "SlowKernelRank",
    "SlowDataRank",
    "DegradedLink",
    "Fault",
    "parse_faults",
]


class _FaultBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @property
    def label(self) -> str:
        return self.kind  # type: ignore[attr-defined]


class CastRoundTrip(_FaultBase):
    """``x = cast(cast(x, float16), float32)`` after ``after`` (an fp32 tensor) in every layer."""

    kind: Literal["cast_roundtrip"] = "cast_roundtrip"
    after: str = "ffn_norm.norm"
    source: str = "mindformers/models/llama/llama_layer.py:231"
    code: str = "x = self.cast(self.cast(x, mstype.float16), mstype.float32)"


class NDFormatOp(_FaultBase):
    """``op`` accepts only ND: TransData NZ→ND on its inputs and ND→NZ on its output, every layer.

    ``core="AI_CPU"``: the op has no AI-core kernel and falls back to AI_CPU (the usual reason an op accepts
    only ND); its kernels, forward and backward, run on the AI_CPU stream, so in kernel order the TransData
    pair around it is consecutive on the AI-core stream and the op sits on another stream between them.
    """

    kind: Literal["nd_format_op"] = "nd_format_op"
    op: str = "feed_forward.mul"
    core: Literal["AI_VECTOR_CORE", "AI_CPU"] = "AI_VECTOR_CORE"


class ParamTransData(_FaultBase):
    """Layer weights stay ND: a TransData ND→NZ per weight use, every step (``params``: suffixes; empty = all)."""

    kind: Literal["param_transdata"] = "param_transdata"
    params: tuple[str, ...] = ()


class StrategyMismatch(_FaultBase):
    """``shard()`` override on ``op`` that does not split the model-parallel axis (``((dp, 1), (dp, 1))``)."""

    kind: Literal["strategy_mismatch"] = "strategy_mismatch"
    op: str = "feed_forward.mul"


class ExpensiveMapOp(_FaultBase):
    """An extra per-sample transform in the dataset map (``python``: runs under the GIL)."""

    kind: Literal["expensive_map"] = "expensive_map"
    transform: str = "PyFunc(tokenize_and_pack)"
    per_sample_us: float = Field(2500.0, gt=0)
    python: bool = True


class DataWarmup(_FaultBase):
    """The first ``batches`` batches each take ``extra_us`` more to produce (shards fetched on first use)."""

    kind: Literal["data_warmup"] = "data_warmup"
    batches: int = Field(3, ge=1)
    extra_us: float = Field(250000.0, gt=0)


class SlowHostToDevice(_FaultBase):
    """Batches cross the host→device link at ``gbps`` GB/s (a shared or degraded PCIe link, a far NUMA node)."""

    kind: Literal["slow_host_to_device"] = "slow_host_to_device"
    gbps: float = Field(0.5, gt=0)


class SlowKernelRank(_FaultBase):
    """Kernels whose op type contains ``op_type`` (every kernel when empty) take ``factor``× as long on ``rank``."""

    kind: Literal["slow_kernel_rank"] = "slow_kernel_rank"
    rank: int = Field(3, ge=0)
    op_type: str = "MatMul"
    factor: float = Field(1.4, gt=1.0)


class SlowDataRank(_FaultBase):
    """``rank``'s device waits ``extra_wait_us`` more for its batch at the start of every step."""

    kind: Literal["slow_data_rank"] = "slow_data_rank"
    rank: int = Field(5, ge=0)
    extra_wait_us: float = Field(20000.0, gt=0)


class DegradedLink(_FaultBase):
    """``rank``'s outgoing ``link`` (``HCCS``, ``RDMA``; empty: every link) moves data ``factor``× slower."""

    kind: Literal["degraded_link"] = "degraded_link"
    rank: int = Field(6, ge=0)
    link: str = "HCCS"
    factor: float = Field(4.0, gt=1.0)


Fault = Annotated[
    Union[CastRoundTrip, NDFormatOp, ParamTransData, StrategyMismatch, ExpensiveMapOp, DataWarmup, SlowHostToDevice,
          SlowKernelRank, SlowDataRank, DegradedLink], Field(discriminator="kind")
]
_ADAPTER = TypeAdapter(list[Fault])


def parse_faults(data: object) -> list[Fault]:
    """Faults from plain data (``[{"kind": "nd_format_op", "op": "feed_forward.mul"}, …]``)."""
    try:
        return list(_ADAPTER.validate_python(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise SimulationInputError(f"fault {loc}: {first.get('msg')}") from None
