"""Shared state and helpers while one stage graph is built: ids, kernels with their costs, groups.

Kernel costs come from :mod:`.costs` and depend only on shapes, dtypes and the hardware
profile; they are cached by those inputs (every layer of a stage has the same shapes).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from advisor_core.simulate import costs
from advisor_core.simulate.hardware import HardwareProfile
from advisor_core.simulate.kernels import HCCL_OPS, kernel_names
from advisor_core.simulate.nodes import CommSpec, KernelSpec, TType, stable_hash
from advisor_core.simulate.workload import DTYPE_BYTES, Workload

__all__ = ["BuildCtx", "SCOPE_ROOT", "GroupInfo"]

# The cell path MindFormers' Llama training wrapper gives every forward node.
SCOPE_ROOT = (
    "Default/network-MFPipelineWithLossScaleCell/network-_VirtualDatasetCell/_backbone-{wrapper}"
    "/network-LlamaForCausalLM"
)
SOURCE_ROOT = "/home/ma-user/work/mindformers/"


@dataclass(frozen=True)
class GroupInfo:
    """One communication group kind as seen from a stage (sizes equal for every rank of it)."""

    kind: str  # mp | dp | pp
    size: int
    link: str  # HCCS | RDMA


@dataclass
class BuildCtx:
    w: Workload
    hw: HardwareProfile
    stage: int
    groups: dict[str, GroupInfo]
    uid: itertools.count = field(default_factory=lambda: itertools.count(10000))
    rc_id: itertools.count = field(default_factory=lambda: itertools.count(1))
    transdata_n: itertools.count = field(default_factory=lambda: itertools.count(1))
    _cache: dict = field(default_factory=dict)

    @property
    def root(self) -> str:
        return SCOPE_ROOT.format(wrapper="PipelineCell" if self.w.pp > 1 else "GradAccumulationCell")

    @property
    def cdtype(self) -> str:
        return self.w.compute_dtype

    def next_uid(self) -> str:
        return str(next(self.uid))

    # -- kernels -----------------------------------------------------------------------------
    def matmul(self, m: int, k: int, n: int, dtype: str, *, category: str = "compute",
               weight: tuple[int, int] | None = None) -> KernelSpec:
        key = ("mm", m, k, n, dtype, weight)
        c = self._cache.get(key)
        if c is None:
            c = self._cache[key] = costs.matmul_cost(m, k, n, dtype, DTYPE_BYTES[dtype], self.hw, weight=weight)
        name, op_type, core = kernel_names("MatMul")
        return KernelSpec(name, op_type, core, c.ns, cube_fraction=min(1.0, c.compute_ns / c.ns),
                          mte2_fraction=min(1.0, c.memory_ns / c.ns), block_dim=self.hw.ai_core_count, flops=c.flops,
                          category=category)

    def vector(self, prim: str, types_in: list[TType | None], out: TType | None, *, out_count: int = 1,
               category: str = "compute", flops: float = 0.0) -> KernelSpec:
        nbytes = sum(t.nbytes for t in types_in if t is not None) + (out.nbytes * out_count if out is not None else 0)
        key = ("vec", nbytes, flops)
        ns = self._cache.get(key)
        if ns is None:
            ns = self._cache[key] = costs.vector_ns(nbytes, self.hw, flops)
        name, op_type, core = kernel_names(prim)
        if prim == "TransData":
            name = name.format(n=next(self.transdata_n))
            category = "transdata"
        elif prim == "Cast":
            category = "cast" if category == "compute" else category
        mem_share = min(1.0, (ns - self.hw.kernel_launch_overhead_us * 1000) / ns) if ns else 0.0
        return KernelSpec(name, op_type, core, ns, vec_fraction=0.35 * mem_share, mte2_fraction=mem_share,
                          block_dim=self.hw.vector_core_count, category=category)

    def flash(self, prim: str, flops: float) -> KernelSpec:
        ns = costs.flash_attention_ns(flops, self.cdtype, self.hw)
        name, op_type, core = kernel_names(prim)
        busy = 1.0 - self.hw.kernel_launch_overhead_us * 1000 / ns
        return KernelSpec(name, op_type, core, ns, cube_fraction=0.62 * busy, vec_fraction=0.3 * busy,
                          mte2_fraction=0.25 * busy, block_dim=self.hw.ai_core_count, flops=flops)

    def comm(self, prim: str, group: str, nbytes: float) -> KernelSpec:
        op = HCCL_OPS[prim]
        g = self.groups[group]
        n = 2 if op in ("send", "receive") else g.size
        ns = costs.collective_ns(op, nbytes, n, g.link, self.hw)
        spec = CommSpec(op, group, nbytes, g.link, ns, costs.transit_bytes(op, nbytes, n))
        name, op_type, core = kernel_names(prim)
        return KernelSpec(name, op_type, core, ns, comm=spec, category="comm")

    # -- misc ----------------------------------------------------------------------------------
    def source(self, path: str, line: int, code: str, indent: int = 8) -> str:
        """One ``# In file`` payload: ``<file>:<line>, <c1>~<c2>/<code>/``."""
        return f"{SOURCE_ROOT}{path}:{line}, {indent}~{indent + len(code)}/{' ' * indent}{code}/"

    def instance_hash(self, full_name_hint: str) -> int:
        return stable_hash(full_name_hint)
