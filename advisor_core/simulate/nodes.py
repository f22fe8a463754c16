"""Graph nodes: the one description from which IR dumps, kernels and costs are all written.

A :class:`Node` is one IR node of a pipeline stage's graph. The same object gives

* its IR text (operator, operands, attribute blocks, host/device/kernel-object type lines,
  ``# Fullname with scope``, ``# In file``) in each dump it belongs to (``ir`` bit mask);
* its device kernel (``kernel``): kernel name, op type, core, nominal duration — the
  profile's ``kernel_details.csv`` ``Name`` is ``full_name + "/" + kernel name``, so every
  kernel joins to the IR node that launched it.

Full names are assigned once per stage graph by :func:`assign_full_names`: ``<prefix>/<Prim>-op<k>``
with ``k`` counted per (prefix, primitive) in graph order, so inserting a node of another
primitive (a TransData, a backend Cast) never renumbers the others.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from advisor_core.simulate.costs import nz_shape
from advisor_core.simulate.workload import DTYPE_BYTES, ir_dtype

__all__ = ["TType", "Arg", "KernelSpec", "CommSpec", "Node", "FRONT", "PARALLEL", "BUILD", "ALL_IR", "assign_full_names",
           "stable_hash", "lit"]

FRONT = 1  # NN_validate_SSSS.ir
PARALLEL = 2  # step_parallel_end_SSSS.ir
BUILD = 4  # graph_build_0_SSSS.ir
ALL_IR = FRONT | PARALLEL | BUILD


def stable_hash(text: str, digits: int = 19) -> int:
    """Deterministic positive integer of ``digits`` digits (instance-name hashes, group hashes)."""
    h = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")
    return h % (10**digits)


@dataclass(frozen=True)
class TType:
    """A tensor type: per-device shape, dtype, device format, and the parameter it is (if any)."""

    shape: tuple[int, ...]
    dtype: str
    fmt: str = "ND"  # ND | FRACTAL_NZ
    ref: str | None = None  # parameter name → Ref[Tensor[..]]

    @property
    def device_shape(self) -> tuple[int, ...]:
        return nz_shape(self.shape) if self.fmt == "FRACTAL_NZ" else self.shape

    @property
    def elements(self) -> int:
        n = 1
        for d in self.device_shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.elements * DTYPE_BYTES[self.dtype]

    def with_fmt(self, fmt: str) -> "TType":
        return TType(self.shape, self.dtype, fmt, None)

    def with_dtype(self, dtype: str) -> "TType":
        return TType(self.shape, dtype, self.fmt, None)

    def host(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        shape = f"({dims})"
        if self.ref is not None:
            return f"<Ref[Tensor[{ir_dtype(self.dtype)}]], {shape}, ref_key={self.ref}, is_parameter>"
        return f"<Tensor[{ir_dtype(self.dtype)}], {shape}>"

    def device(self) -> str:
        fmt = "FRACTAL_NZ" if self.fmt == "FRACTAL_NZ" else "DefaultFormat"
        dims = ", ".join(str(d) for d in self.device_shape)
        return f"<{ir_dtype(self.dtype)}x{fmt}[const vector]{{{dims}}}>"

    def cann_shape(self) -> str:
        return ",".join(str(d) for d in self.shape)

    @property
    def cann_format(self) -> str:
        return "FRACTAL_NZ" if self.fmt == "FRACTAL_NZ" else "ND"


@dataclass(frozen=True)
class Arg:
    """One operand: a node (``ref`` = node key), a parameter (``param``) or a literal value."""

    ref: str | None = None
    param: str | None = None
    text: str | None = None  # literal operand text (``Bool(0)``, ``I64(43)``, ``UMonad[U]``)
    scalar: str | None = None  # literal's abstract type (``Bool``, ``Int64``, ``UMonad``)


def lit(text: str, scalar: str) -> Arg:
    return Arg(text=text, scalar=scalar)


@dataclass(frozen=True)
class CommSpec:
    """A collective or point-to-point operation on one group."""

    op: str  # allReduce | allGather | reduceScatter | send | receive
    group: str  # mp | dp | pp_next | pp_prev
    nbytes: float  # full tensor bytes (gathered size for AllGather)
    link: str  # HCCS | RDMA
    transit_ns: float  # transfer time, no waiting
    transit_bytes: float  # bytes one rank sends


@dataclass
class KernelSpec:
    """The device kernel a node launches."""

    kernel: str  # aclnnMatmul_MatMulV3Common_MatMulV3, trans_TransData_13, hcom_allReduce_
    op_type: str  # Type column: MatMulV3, TransData, Cast, hcom_allReduce_
    core: str  # AI_CORE | AI_VECTOR_CORE | MIX_AIC | HCCL
    ns: float  # nominal duration (transfer time for communication)
    comm: CommSpec | None = None
    cube_fraction: float = 0.0  # share of the duration the cube (mac) is busy
    vec_fraction: float = 0.0
    mte2_fraction: float = 0.0
    block_dim: int = 0
    flops: float = 0.0
    category: str = "compute"  # compute | transdata | cast | comm | recompute


@dataclass(eq=False)
class Node:
    """One IR node (see module docstring)."""

    key: str
    prim: str
    prefix: str
    phase: str  # fwd | bwd | rc | head | opt | gcomm | p2p
    layer: int | None
    args: list[Arg]
    in_types: list[TType | None]
    out: TType | None
    ir: int = ALL_IR
    instance: str | None = None
    prim_attrs: list[tuple[str, str]] = field(default_factory=list)
    cnode_attrs: list[tuple[str, str]] = field(default_factory=list)
    primal_attrs: list[tuple[str, str]] = field(default_factory=list)
    strategy: str | None = None
    sources: tuple[str, ...] = ()
    kernel: KernelSpec | None = None
    frontend_prim: bool = True  # written PrimFunc_<Prim> (yaml-defined ops)
    build_attrs: list[tuple[str, str]] = field(default_factory=list)  # primitive attrs only the kernel graph shows
    out_tuple: int = 1  # >1: the output is a tuple of that many ``out`` tensors (Split)
    full_name: str = ""
    op_id: str | None = None  # LayerOp id in the decoder-layer structure (layer nodes)
    rc_of: str | None = None  # recompute copy: key of the original node

    @property
    def op_text(self) -> str:
        return f"PrimFunc_{self.prim}" if self.frontend_prim else self.prim


def assign_full_names(nodes: list[Node]) -> None:
    """``<prefix>/<Prim>-op<k>``, ``k`` counted per (prefix, primitive) in list order."""
    counters: dict[tuple[str, str], int] = {}
    for n in nodes:
        k = counters.get((n.prefix, n.prim), 0)
        counters[(n.prefix, n.prim)] = k + 1
        n.full_name = f"{n.prefix}/{n.prim}-op{k}"
