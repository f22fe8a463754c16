"""Cost model primitives: how long one device kernel or one collective takes.

Every duration follows from shapes, dtypes and the :class:`HardwareProfile`; nothing here is a
per-scenario constant. All results are nanoseconds (float; the schedule rounds to integer ns).

* MatMul-like: ``2·M'·K'·N'`` FLOPs on dims padded up to 16 (the cube works on 16×16 fractal
  blocks), over ``peak(dtype) × matmul_efficiency``; × ``unaligned_matmul_penalty`` when a dim of
  the layer's weight (K or N of the forward product) is not a multiple of 16 — in ND layout those
  are the innermost, contiguous axes of every operand of the forward and both backward products,
  while the token axis is always an outer one: the weight gradient ``dW = dYᵀ·X`` contracts over
  the tokens, yet it is the weight's dims that decide (``weight=``); never faster than moving its
  operands over HBM.
* Vector ops, Cast, TransData: bytes read + written over ``hbm_bandwidth × hbm_efficiency``.
* FlashAttention: FLOPs over ``peak × flash_attention_efficiency``.
* Every kernel pays ``kernel_launch_overhead_us``.
* Collectives, alpha-beta: ring AllReduce ``2(n−1)/n · bytes / bw + 2(n−1) · latency``,
  AllGather/ReduceScatter ``(n−1)/n · bytes / bw + (n−1) · latency`` (``bytes`` = the full,
  gathered tensor), Send/Receive ``bytes / bw + latency``; plus ``collective_launch_us``.
  ``bw``/``latency`` are HCCS when every member is in one node, RDMA otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor_core.simulate.hardware import HardwareProfile

__all__ = ["pad16", "MatMulCost", "matmul_cost", "vector_ns", "flash_attention_ns", "collective_ns", "link_of", "nz_shape"]

US = 1000.0  # ns per µs


def pad16(n: int) -> int:
    return -(-n // 16) * 16


def nz_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """FRACTAL_NZ device shape of an ND tensor ``(..., m, n)``: ``(..., ⌈n/16⌉, ⌈m/16⌉, 16, 16)``."""
    if len(shape) < 2:
        return (-(-shape[0] // 16) if shape else 1, 1, 16, 16)
    *lead, m, n = shape
    return (*lead, -(-n // 16), -(-m // 16), 16, 16)


@dataclass(frozen=True)
class MatMulCost:
    ns: float
    flops: float  # useful FLOPs (unpadded)
    compute_ns: float  # cube busy time
    memory_ns: float  # time to stream operands
    unaligned: bool


def matmul_cost(m: int, k: int, n: int, dtype: str, elem_bytes: int, hw: HardwareProfile, batch: int = 1,
                weight: tuple[int, int] | None = None) -> MatMulCost:
    """One ``(m, k) × (k, n)`` product (``batch`` of them), per device; ``weight``: the layer weight's (K, N) when
    they are not this product's k and n (the weight gradient), for the alignment test."""
    unaligned = bool(weight[0] % 16 or weight[1] % 16) if weight is not None else bool(k % 16 or n % 16)
    padded = 2.0 * batch * pad16(m) * pad16(k) * pad16(n)
    compute = padded / (hw.cube_tflops(dtype) * 1e12 * hw.matmul_efficiency) * 1e9
    if unaligned:
        compute *= hw.unaligned_matmul_penalty
    nbytes = batch * (m * k + k * n + m * n) * elem_bytes
    memory = nbytes / (hw.hbm_bandwidth_gbps * 1e9 * hw.hbm_efficiency) * 1e9
    ns = max(compute, memory) + hw.kernel_launch_overhead_us * US
    return MatMulCost(ns, 2.0 * batch * m * k * n, compute, memory, unaligned)


def vector_ns(nbytes: float, hw: HardwareProfile, flops: float = 0.0) -> float:
    """A memory-bound vector kernel moving ``nbytes`` (optionally bounded by vector FLOPs)."""
    mem = nbytes / (hw.hbm_bandwidth_gbps * 1e9 * hw.hbm_efficiency) * 1e9
    comp = flops / (hw.vector_tflops_fp16 * 1e12) * 1e9 if flops else 0.0
    return max(mem, comp) + hw.kernel_launch_overhead_us * US


def flash_attention_ns(flops: float, dtype: str, hw: HardwareProfile) -> float:
    return flops / (hw.cube_tflops(dtype) * 1e12 * hw.flash_attention_efficiency) * 1e9 + hw.kernel_launch_overhead_us * US


def link_of(ranks: list[int], hw: HardwareProfile) -> str:
    """``HCCS`` when every rank of the group is in one node, else ``RDMA``."""
    nodes = {r // hw.devices_per_node for r in ranks}
    return "HCCS" if len(nodes) <= 1 else "RDMA"


def collective_ns(op: str, nbytes: float, n: int, link: str, hw: HardwareProfile) -> float:
    """Transfer time of one collective over a group of ``n`` ranks (no waiting for peers)."""
    bw = (hw.hccs_bandwidth_gbps if link == "HCCS" else hw.rdma_bandwidth_gbps) * 1e9
    lat = (hw.hccs_latency_us if link == "HCCS" else hw.rdma_latency_us) * US
    base = hw.collective_launch_us * US
    if op in ("send", "receive"):
        return base + nbytes / bw * 1e9 + lat
    if n <= 1:
        return base
    if op == "allReduce":
        return base + 2.0 * (n - 1) / n * nbytes / bw * 1e9 + 2 * (n - 1) * lat
    if op in ("allGather", "reduceScatter"):
        return base + (n - 1) / n * nbytes / bw * 1e9 + (n - 1) * lat
    raise ValueError(f"unknown collective {op}")


def transit_bytes(op: str, nbytes: float, n: int) -> float:
    """Bytes one rank sends for a collective (what communication.json calls Transit Size)."""
    if op in ("send", "receive"):
        return nbytes
    if n <= 1:
        return 0.0
    if op == "allReduce":
        return 2.0 * (n - 1) / n * nbytes
    return (n - 1) / n * nbytes

