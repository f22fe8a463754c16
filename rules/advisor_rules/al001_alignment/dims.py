"""Evidence: the MatMul dims of a run — from the profile, the IR or the config — and the config key behind each."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor_rules.al001_alignment.shapes import MATMUL_OPS, align_of, by_weight_roles, matmul_mkn, rank_matmuls


@dataclass
class Dim:
    """One unaligned per-rank value (K, N or M) and where it was seen."""

    value: int
    role: str  # K | N | M
    align: int
    config_key: str | None = None
    divisor: int = 1
    kernels: list[tuple[Any, str]] = field(default_factory=list)  # (rank, kernel name), a few per rank
    ir_nodes: list[tuple[str, Any]] = field(default_factory=list)  # (IR file, node)
    ops: set[str] = field(default_factory=set)
    time_us: float = 0.0
    count: float = 0.0  # unaligned kernels per step


def dim_key(d: Dim) -> str:
    """The config key a dim is reported under (``dim <value>`` when no key sets it)."""
    return d.config_key or f"dim {d.value}"


def dims_from_kernels(view: Any, rank: Any, dims: dict[tuple[int, str], Dim]) -> None:
    """Add the K, N and M dims of the rank's MatMul ops to ``dims`` (time and launches per step for unaligned ones)."""
    for r, _b, m, kk, n, align in rank_matmuls(rank, view):
        for value, role in ((kk, "K"), (n, "N"), (m, "M")):
            d = dims.setdefault((value, role), Dim(value, role, align))
            d.ops.add(str(r.type))
            if value % align:
                if sum(1 for rk, _ in d.kernels if rk is rank) < 2 and (rank, str(r.name)) not in d.kernels:
                    d.kernels.append((rank, str(r.name)))
                d.time_us += float(r.per_step_us)
                d.count += r.count / view.steps


def static_mkn(n: Any) -> tuple[int, int, int] | None:
    """Positional (M, K, N) of an IR MatMul node with static tensor shapes (``None`` otherwise)."""
    ins = [t for t in n.in_types if getattr(t, "kind", None) == "tensor"]
    outs = [t for t in n.out_types if getattr(t, "kind", None) == "tensor"]
    if len(ins) < 2 or not outs or not ins[0].shape or not ins[1].shape or not outs[0].shape:
        return None
    if any(x < 0 for x in (*ins[0].shape, *ins[1].shape, *outs[0].shape)):
        return None  # dynamic: never flagged
    return matmul_mkn(list(ins[0].shape), list(ins[1].shape), list(outs[0].shape))


def reads_parameter(ir: Any, node: Any, i: int) -> bool:
    """Does operand ``i`` of ``node`` come from a Parameter (directly, or through its ``Load`` and AMP's ``Cast``)?"""
    refs = node.operand_refs
    cur = ir.resolve(node, refs[i]) if len(refs) > i else None
    for _ in range(4):
        if cur is None:
            return False
        if not hasattr(cur, "op"):
            return True  # an IRParam
        if cur.op not in ("Load", "Cast") or not cur.operand_refs:
            return False
        cur = ir.resolve(cur, cur.operand_refs[0])
    return False


def ir_weights(ir: Any) -> dict[str, tuple[int, int]]:
    """``unique_id`` of each forward MatMul node that reads a Parameter → its weight's (K, N): the contracted dim
    and the weight's other dim (backward nodes name their forward node by ``forward_unique_id``)."""
    out: dict[str, tuple[int, int]] = {}
    for n in ir.iter_nodes():
        if n.op not in MATMUL_OPS or not n.unique_id or n.forward_unique_id:
            continue
        mkn = static_mkn(n)
        if mkn is None:
            continue
        m, kk, nn = mkn
        if reads_parameter(ir, n, 1):
            out[n.unique_id] = (kk, nn)
        elif reads_parameter(ir, n, 0):
            out[n.unique_id] = (kk, m)
    return out


def dims_from_ir(ir: Any, dims: dict[tuple[int, str], Dim]) -> None:
    """Add the dims of the IR's MatMul nodes with static shapes to ``dims`` (a few nodes each, for locations).

    Roles come from the layer's weight (the forward node's Parameter operand), so the weight-gradient
    product, which contracts over the tokens, keeps the weight's K and N and its tokens as M.
    """
    weights = ir_weights(ir)
    for n in ir.iter_nodes():
        if n.op not in MATMUL_OPS or n.is_duplicated:
            continue
        mkn = static_mkn(n)
        if mkn is None:
            continue
        ins = [t for t in n.in_types if getattr(t, "kind", None) == "tensor"]
        m, kk, nn = by_weight_roles(*mkn, weights.get(n.unique_id or "") or weights.get(n.forward_unique_id or ""))
        align = align_of(ins[0].dtype)
        for value, role in ((kk, "K"), (nn, "N"), (m, "M")):
            d = dims.setdefault((value, role), Dim(value, role, align))
            d.ops.add(n.op)
            if value % align and len(d.ir_nodes) < 4:
                d.ir_nodes.append((str(getattr(ir, "path", "") or ""), n))


def dims_from_config(cfg: Any, dims: dict[tuple[int, str], Dim]) -> None:
    """Config alone: the model dims a Llama layer's MatMuls have per device."""
    mp = cfg.model_parallel
    h = cfg.hidden_size
    f, _ = cfg.ffn_hidden_size()
    v = cfg.vocab_size
    q = (cfg.num_heads or 0) * (cfg.head_dim or 0) or h
    for value, role in ((h, "K"), (f and f // mp, "N"), (v and v // mp, "N"), (q and q // mp, "N")):
        if value:
            dims.setdefault((int(value), role), Dim(int(value), role, 16)).ops.add("config")


def map_config_keys(cfg: Any, mp: int, dims: dict[tuple[int, str], Dim]) -> None:
    """Trace each dim to the config key that sets it (and the ``model_parallel`` divisor it is sliced by)."""
    f, f_src = cfg.ffn_hidden_size()
    heads, hd = cfg.num_heads, cfg.head_dim
    cand = [
        ("model.hidden_size", cfg.hidden_size),
        ("model.intermediate_size" if f_src.startswith("/") else "model.multiple_of", f),
        ("model.vocab_size", cfg.vocab_size),
        ("model.seq_length", cfg.seq_length),
    ]
    if heads and hd and heads * hd != cfg.hidden_size:
        cand.append(("model.head_dim", heads * hd))
    for d in dims.values():
        for key, val in cand:
            if not val:
                continue
            for div in ((1, mp) if mp > 1 else (1,)):
                if val % div == 0 and val // div == d.value:
                    d.config_key, d.divisor = key, div
                    break
            if d.config_key:
                break
        if d.role == "M" and d.config_key not in ("model.seq_length",):
            d.config_key = None  # batch×seq M dims are only reported when seq_length sets them
