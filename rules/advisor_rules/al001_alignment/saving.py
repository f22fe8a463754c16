"""Time at stake per pipeline stage: the MatMul penalty, the TransData that go, and kernels that grow with a dim."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from advisor_core.engine import RuleContext
from advisor_rules._common import stage_busy_and_micro
from advisor_rules.al001_alignment.shapes import MATMUL_OPS, TRANSDATA_OPS, operand_shapes, pad_to, rank_matmuls

if TYPE_CHECKING:  # pragma: no cover - heavy imports are made where used
    import pandas as pd


@dataclass
class Stage:
    """What fixing each key saves on one pipeline stage (per step, µs), from one representative rank."""

    stage: int
    rank: Any
    micro: int = 1  # micro batches per step (a layer's forward MatMul repeats this often)
    busy_us: float = 0.0  # compute-stream kernel time per step
    saving: dict[str, float] = field(default_factory=dict)
    penalty_us: dict[str, float] = field(default_factory=dict)
    transdata_us: dict[str, float] = field(default_factory=dict)
    masked: dict[str, set[str]] = field(default_factory=dict)  # key → other keys unaligned on the same MatMuls
    penalty: float | None = None  # measured aligned/unaligned throughput ratio


def stage_saving(stage: int, rank: Any, view: Any, value_map: dict[int, tuple[str, int]],
                 ir_scopes: set[str] | None, unaligned_penalty: float) -> Stage:
    """What fixing each key saves per step on one stage (see the rule's Time at stake).

    Works on the rank's op view: every launch of an op has its shapes, so each op counts
    ``count`` times its padded FLOPs and its time is the sum over its launches.
    """
    st = Stage(stage, rank)
    ops = view.ops
    mms = rank_matmuls(rank, view)
    busy, micro = stage_busy_and_micro(rank)
    st.busy_us, st.micro = busy or 0.0, micro or 1

    def ukeys(dvals: Iterable[int], align: int) -> set[str]:
        return {value_map[v][0] if v in value_map else f"dim {v}" for v in dvals if v % align}

    def pflops(b: int, m: int, kk: int, n: int, a: int, new: bool = False) -> float:
        f = (lambda v: value_map[v][1] if new and v in value_map else v)
        return 2.0 * b * pad_to(f(m), a) * pad_to(f(kk), a) * pad_to(f(n), a)

    aligned = [(pflops(b, m, kk, n, a) * r.count, float(r.total_us)) for r, b, m, kk, n, a in mms
               if not ukeys((kk, n), a)]
    ref_us = sum(t for _, t in aligned)
    rate = sum(f for f, _ in aligned) / ref_us if ref_us > 0 else None  # padded FLOP per µs, aligned MatMuls
    cell_keys: dict[str, set[str]] = {}
    unaligned_flops, unaligned_us = 0.0, 0.0
    for r, b, m, kk, n, a in mms:
        cell, bwd = r.cell, bool(r.backward)
        u = ukeys((kk, n), a)
        if not bwd:
            cell_keys.setdefault(cell, set()).update(u)
        if not u:
            continue
        unaligned_flops += pflops(b, m, kk, n, a) * r.count
        unaligned_us += float(r.total_us)
        t = float(r.per_step_us)
        if len(u) == 1:
            (x,) = u
            after = (pflops(b, m, kk, n, a, new=True) * r.count / rate / view.steps if rate
                     else t / unaligned_penalty * pflops(b, m, kk, n, a, new=True) / pflops(b, m, kk, n, a))
            st.penalty_us[x] = st.penalty_us.get(x, 0.0) + t - after
        else:
            for x in u:
                st.masked.setdefault(x, set()).update(u - {x})
                st.penalty_us[x] = st.penalty_us.get(x, 0.0) + t * (1 - pflops(b, m, kk, n, a, new=True) / pflops(b, m, kk, n, a))
    if rate and unaligned_us > 0:
        st.penalty = rate / (unaligned_flops / unaligned_us)
    weight_td = weight_transdata(ops, mms, ir_scopes)
    td = ops["type"].isin(TRANSDATA_OPS).to_numpy(bool)
    for op, cell, t in zip(ops.index[td].tolist(), ops["cell"].to_numpy()[td], ops["per_step_us"].to_numpy()[td].tolist()):
        u = cell_keys.get(cell, set())
        if len(u) == 1 and op not in weight_td:
            (x,) = u
            st.transdata_us[x] = st.transdata_us.get(x, 0.0) + t
    # other ops move bytes proportional to the dim: they grow (or shrink) with it
    other = (~ops["is_comm"] & ~ops["type"].isin(MATMUL_OPS | TRANSDATA_OPS)).to_numpy(bool)
    for in_shapes, t in (zip(ops["in_shapes"].to_numpy()[other], ops["per_step_us"].to_numpy()[other].tolist())
                         if value_map else ()):  # distinct ops, the two columns read
        seen = {v for sh in in_shapes for v in sh if v in value_map}
        for v in seen:
            x, nv = value_map[v]
            st.saving[x] = st.saving.get(x, 0.0) - t * (nv / v - 1.0)
    for x in set(st.penalty_us) | set(st.transdata_us):
        st.saving[x] = st.saving.get(x, 0.0) + st.penalty_us.get(x, 0.0) + st.transdata_us.get(x, 0.0)
    return st


def weight_transdata(ops: pd.DataFrame, mms: list[Any], ir_scopes: set[str] | None) -> set[int]:
    """Op ids of TransData ops that convert a weight's format (not an alignment cost).

    With the rank's ``graph_build`` dump: TransData nodes reading a parameter (through its
    ``Load``). Without: a TransData shaped like its cell's weight, outside the gradient
    scope, and not also shaped like the activation it would convert.
    """
    td = ops[ops["type"].isin(TRANSDATA_OPS)]
    if td.empty:
        return set()
    if ir_scopes is not None:
        return {op for op, scope in zip(td.index.tolist(), td["scope"].to_numpy()) if scope in ir_scopes}
    weights: dict[str, tuple[set[tuple[int, ...]], set[tuple[int, ...]]]] = {}
    for r, *_ in mms:
        shapes = operand_shapes(r.in_shapes)
        if not r.backward and len(shapes) >= 2:
            w, a = weights.setdefault(r.cell, (set(), set()))
            w.add(tuple(shapes[1]))
            a.add(tuple(shapes[0]))
    out = set()
    for op, in_shapes, backward, cell in zip(td.index.tolist(), *(td[c].to_numpy() for c in ("in_shapes", "backward", "cell"))):
        if backward or cell not in weights:
            continue
        shapes = operand_shapes(in_shapes)
        if shapes and tuple(shapes[0]) in weights[cell][0] and tuple(shapes[0]) not in weights[cell][1]:
            out.add(op)
    return out


def param_transdata_scopes(ctx: RuleContext, rank_id: int | None) -> set[str] | None:
    """Full names of ``graph_build`` TransData nodes whose input is a parameter (``None`` without the dump)."""
    rd = next((x for x in ctx.ir_ranks() if x.rank == rank_id), None)
    ir = ctx.ir_graph("backend", rd) if rd is not None else None
    if ir is None:
        return None
    out = set()
    for n in ir.iter_nodes():
        if n.op not in TRANSDATA_OPS or not n.kernel_full_name:
            continue
        for ref in n.operand_refs:
            src = ir.resolve(n, ref)
            if src is not None and not hasattr(src, "op"):
                out.add(n.kernel_full_name)  # a parameter itself
            elif src is not None and src.op == "Load" and src.operand_refs and ref.kind == "node":
                first = ir.resolve(src, src.operand_refs[0])
                if first is not None and not hasattr(first, "op"):
                    out.add(n.kernel_full_name)
    return out
