"""AL001: MatMul-like dimensions not multiples of 16 (32 for int8) on Ascend."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple

import pandas as pd
from pydantic import Field

from advisor_core.engine import (
    Evidence,
    Finding,
    Location,
    Need,
    Requirements,
    Rule,
    RuleContext,
    RuleOptions,
    Safety,
    Severity,
)
from advisor_rules._common import (
    DTYPE_BYTES,
    cell_path_in_layer,
    ir_location,
    ir_parameters,
    is_model_weight,
    kernel_cell,
    kernel_scope,
    llama_parameters,
    one_f_one_b_step_saving,
    severity_for_share,
    stage_busy_and_micro,
    stage_representatives,
)

MATMUL_OPS = {"MatMul", "MatMulExt", "BatchMatMul", "BatchMatMulExt", "Dense", "MatMulV2", "MatMulV3", "BatchMatMulV2",
              "GroupedMatmul", "QuantBatchMatmul", "QuantBatchMatmulV3", "MatmulReduceScatter", "AllGatherMatmul"}
_TRANSDATA = {"TransData", "TransDataRNN"}
_COMM_CORES = {"HCCL", "COMMUNICATION"}
_SHAPE = re.compile(r"-?\d+")
_OP_SEG = re.compile(r"^[A-Za-z]\w*-op\d+$")


def _align(dtype: str | None) -> int:
    return 32 if dtype and "INT8" in dtype.upper() else 16


@dataclass
class _Dim:
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


@dataclass
class _Stage:
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


class _Fix(NamedTuple):
    value: int  # the key's new value (the patch)
    changes: list[tuple[str, int]]
    note: str  # what else changes with it
    dim: int  # the new unsliced MatMul dim it gives


def _parse_shapes(text: Any) -> list[list[int]]:
    if text is None or (isinstance(text, float) and math.isnan(text)) or text is pd.NA:
        return []
    out = []
    for part in str(text).split(";"):
        dims = [int(x) for x in _SHAPE.findall(part)]
        if dims:
            out.append(dims)
    return out


def _kn(a: list[int], b: list[int], out: list[int]) -> tuple[int, int, int] | None:
    """(M, K, N) of a 2-D-ish matmul from input/output shapes, transposes inferred."""
    if len(a) < 2 or len(b) < 2 or len(out) < 2:
        return None
    m, n = out[-2], out[-1]
    k = a[-1] if a[-2] == m else a[-2]
    return m, k, n


def _pad(v: int, a: int) -> int:
    return -(-v // a) * a


class Alignment16(Rule):
    """MatMul-like dimensions that are not multiples of 16 (32 for int8).

    What
        Reads the K and N dimensions of every MatMul-like op — forward ``x·Wᵀ`` and the
        backward ``dX``/``dW`` products, transposes inferred from the shapes — per rank,
        after tensor-parallel slicing: from ``kernel_details.csv`` ``Input/Output
        Shapes`` of one rank per pipeline stage (the head and its vocab dim live on the
        last stage only), from the IR type lines, or, with the config alone, from the
        model dimensions divided by ``model_parallel``. Dynamic dims and the
        batch×sequence M dimension are not flagged. Each unaligned dim is traced back to
        the config key that sets it (``hidden_size``, ``intermediate_size``,
        ``vocab_size``, ``seq_length``, heads × head_dim): one finding per key.

    Why
        The cube unit computes on 16×16 fractals: an unaligned K or N is padded, runs a
        slower non-fractal path, and its operands need ND↔FRACTAL_NZ ``TransData``
        conversions (seed guide: "it is recommended that the calculation on the AI core
        be 16-alignment").

    Example
        ``hidden_size: 4100`` → the q/k/v/o projections have K or N = 4100: those
        MatMuls reach ~80 % of the throughput of the aligned ones in the same profile,
        and each Linear gets TransData on its activation, output, dY, dX and dW.

    Fix
        Pad the config dim up to the next multiple of 16 × ``model_parallel`` (where the
        dim is sliced), so every device's slice is a multiple of 16: a trained
        checkpoint converts by zero-padding, no trained weight is dropped, and the cube
        already pays for the padded size. ``hidden_size`` keeps ``num_heads × head_dim``
        consistent: with an explicit ``head_dim`` the attention width does not change;
        with ``head_dim`` tied to ``hidden_size`` both are rounded; without ``head_dim``
        the nearest multiple of ``num_heads`` × 16 is used. The patch changes the model
        (unsafe: retrain or convert checkpoints).

    Time at stake (with a profile), per key X, per stage, per step:
        * a MatMul whose only unaligned dim(s) come from X: measured time minus its
          padded FLOPs after the fix at the throughput the aligned MatMuls of the same
          profile achieve (≈ time × (1 − 1/penalty); the penalty is measured, 1.25
          assumed without aligned MatMuls). A MatMul also unaligned on another key Y
          keeps its penalty: fixing X alone saves nothing there (only the padded-FLOP
          change), and the message says which keys must be fixed together;
        * the TransData kernels of a Linear cell whose forward MatMul has X as its only
          unaligned key disappear (weight-format conversions — a TransData on a
          ``Load`` of a parameter in ``graph_build``, or weight-shaped outside the
          gradient scope without IR — are not alignment costs and stay);
        * other kernels reading the dim grow by new/old (bytes scale with the dim).
        Stages combine as 1F1B does (``_common.one_f_one_b_step_saving``): with m micro
        batches and per-micro-batch stage times tₛ the step is ≈ Σtₛ + (m−1)·max tₛ.

    Memory: padding adds parameters. For each weight (IR parameter shapes per rank, else
    the Llama structure from the config) whose shape has the dim, the added elements ×
    (weight + optimizer-state bytes, divided by ``data_parallel`` with
    ``enable_parallel_optimizer``, + a gradient-accumulation buffer when micro batches
    accumulate); the largest stage is reported. Activations grow too (not counted).
    """

    code = "AL001"
    name = "alignment-16"
    summary = "MatMul dimensions not multiples of 16"
    severity = Severity.MEDIUM
    requires = Requirements(
        any_of=(
            Need.table("kernels", ("type", "input_shapes", "output_shapes")),
            Need.ir("frontend"),
            Need.ir("parallel"),
            Need.config("model.hidden_size"),
        )
    )
    tags = ("compute", "shapes", "alignment")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        min_dim: int = Field(64, ge=1, description="ignore dims smaller than this (small heads, tiny layers)")
        unaligned_penalty: float = Field(1.25, ge=1.0,
                                         description="MatMul slowdown assumed when the profile has no aligned MatMul to compare")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        mp = cfg.model_parallel if cfg is not None else 1
        dims: dict[tuple[int, str], _Dim] = {}
        reps = []
        if ctx.run is not None:
            pp = cfg.pipeline_stages if cfg is not None else 1
            reps = [(s, r) for s, r in stage_representatives(ctx.run, pp, cfg.device_count if cfg is not None else None)
                    if {"type", "input_shapes", "output_shapes"} <= set(r.columns("kernels") or [])]
        source = "config"
        tables: dict[int, pd.DataFrame] = {}
        if reps:
            for s, r in reps:
                tables[s] = self._kernels(r)
                self._dims_from_kernels(tables[s], r, dims)
            source = "kernel_details.csv"
        elif ctx.ir_graph("parallel") is not None or ctx.ir_graph("frontend") is not None:
            irs = ctx.ir_ranks()
            for rd in {id(x): x for x in (irs[:1] + irs[-1:])}.values():  # first and last stage
                ir = ctx.ir_graph("parallel", rd) or ctx.ir_graph("frontend", rd)
                if ir is not None:
                    self._from_ir(ir, dims)
            source = "IR"
        elif cfg is not None:
            self._from_config(cfg, dims)
        if cfg is not None:
            self._map_config(cfg, mp, dims)
        flagged = [d for d in dims.values() if d.value % d.align and d.value >= self.options.min_dim and d.role != "M"]
        flagged += [d for d in dims.values() if d.role == "M" and d.value % d.align and d.config_key]
        if not flagged:
            ctx.skip(f"every MatMul K/N dim is a multiple of 16 ({source}; {len(dims)} dims checked)")
            return
        by_key: dict[str, list[_Dim]] = {}
        for d in flagged:
            by_key.setdefault(self._key(d), []).append(d)
        new_values = {key: self._new_value(cfg, group[0]) for key, group in by_key.items()}
        # per-rank old value → (key, new per-rank value), for every flagged key the fix changes
        value_map: dict[int, tuple[str, int]] = {}
        for key, group in by_key.items():
            fix = new_values[key]
            if fix is None:
                continue
            for d in group:
                value_map[d.value] = (key, fix.dim // d.divisor)
            full = group[0].value * group[0].divisor
            if full % 16 and full not in value_map:
                value_map[full] = (key, fix.dim)  # the unsliced dim (e.g. a data-parallel embedding)
        stages = [self._stage_saving(s, r, tables[s], value_map, self._param_transdata_scopes(ctx, r.rank_id)) for s, r in reps]
        findings = [self._finding(ctx, key, group, new_values[key], stages, value_map, source) for key, group in by_key.items()]
        yield from sorted(findings, key=lambda f: -(f.saving_us or 0.0))

    @staticmethod
    def _key(d: _Dim) -> str:
        return d.config_key or f"dim {d.value}"

    # -- evidence --------------------------------------------------------------------------------
    @staticmethod
    def _kernels(rank: Any) -> pd.DataFrame:
        cols = rank.columns("kernels") or []
        want = [c for c in ("name", "type", "accelerator_core", "duration_us", "input_shapes", "output_shapes",
                            "input_dtypes", "step_id") if c in cols]
        k = rank.table("kernels", want)
        steps = max(int(k["step_id"].dropna().nunique()), 1) if "step_id" in k else 1
        k = k.assign(per_step=k["duration_us"].astype(float) / steps)
        k.attrs["steps"] = steps
        return k

    @staticmethod
    def _matmuls(k: pd.DataFrame) -> list[tuple[Any, int, int, int, int, int]]:
        """(row, batch, M, K, N, align) of every MatMul-like kernel with static shapes."""
        out = []
        for r in k[k["type"].isin(MATMUL_OPS)].itertuples():
            shapes = _parse_shapes(r.input_shapes)
            o = _parse_shapes(r.output_shapes)
            if len(shapes) < 2 or not o:
                continue
            mkn = _kn(shapes[0], shapes[1], o[0])
            if mkn is None or min(mkn) < 0:
                continue
            batch = math.prod(o[0][:-2]) if len(o[0]) > 2 else 1
            out.append((r, batch, *mkn, _align(getattr(r, "input_dtypes", None))))
        return out

    def _dims_from_kernels(self, k: pd.DataFrame, rank: Any, dims: dict[tuple[int, str], _Dim]) -> None:
        for r, _b, m, kk, n, align in self._matmuls(k):
            for value, role in ((kk, "K"), (n, "N"), (m, "M")):
                d = dims.setdefault((value, role), _Dim(value, role, align))
                d.ops.add(str(r.type))
                if value % align:
                    if sum(1 for rk, _ in d.kernels if rk is rank) < 2:
                        d.kernels.append((rank, str(r.name)))
                    d.time_us += float(r.per_step)
                    d.count += 1.0 / k.attrs["steps"]

    def _from_ir(self, ir: Any, dims: dict[tuple[int, str], _Dim]) -> None:
        for n in ir.iter_nodes():
            if n.op not in MATMUL_OPS or n.is_duplicated:
                continue
            ins = [t for t in n.in_types if getattr(t, "kind", None) == "tensor"]
            outs = [t for t in n.out_types if getattr(t, "kind", None) == "tensor"]
            if len(ins) < 2 or not outs or not ins[0].shape or not ins[1].shape or not outs[0].shape:
                continue
            if any(x < 0 for x in (*ins[0].shape, *ins[1].shape, *outs[0].shape)):
                continue  # dynamic: never flagged
            mkn = _kn(list(ins[0].shape), list(ins[1].shape), list(outs[0].shape))
            if mkn is None:
                continue
            m, kk, nn = mkn
            align = _align(ins[0].dtype)
            for value, role in ((kk, "K"), (nn, "N"), (m, "M")):
                d = dims.setdefault((value, role), _Dim(value, role, align))
                d.ops.add(n.op)
                if value % align and len(d.ir_nodes) < 4:
                    d.ir_nodes.append((str(getattr(ir, "path", "") or ""), n))

    def _from_config(self, cfg: Any, dims: dict[tuple[int, str], _Dim]) -> None:
        mp = cfg.model_parallel
        h = cfg.hidden_size
        f, _ = cfg.ffn_hidden_size()
        v = cfg.vocab_size
        q = (cfg.num_heads or 0) * (cfg.head_dim or 0) or h
        for value, role in ((h, "K"), (f and f // mp, "N"), (v and v // mp, "N"), (q and q // mp, "N")):
            if value:
                dims.setdefault((int(value), role), _Dim(int(value), role, 16)).ops.add("config")

    def _map_config(self, cfg: Any, mp: int, dims: dict[tuple[int, str], _Dim]) -> None:
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

    # -- time at stake -----------------------------------------------------------------------------
    def _stage_saving(self, stage: int, rank: Any, k: pd.DataFrame, value_map: dict[int, tuple[str, int]],
                      ir_scopes: set[str] | None) -> _Stage:
        st = _Stage(stage, rank)
        comp = ~k["accelerator_core"].isin(list(_COMM_CORES)) if "accelerator_core" in k else pd.Series(True, index=k.index)
        mms = self._matmuls(k)
        busy, micro = stage_busy_and_micro(rank)
        st.busy_us, st.micro = busy or 0.0, micro or 1

        def ukeys(dvals: Iterable[int], align: int) -> set[str]:
            return {value_map[v][0] if v in value_map else f"dim {v}" for v in dvals if v % align}

        def pflops(b: int, m: int, kk: int, n: int, a: int, new: bool = False) -> float:
            f = (lambda v: value_map[v][1] if new and v in value_map else v)
            return 2.0 * b * _pad(f(m), a) * _pad(f(kk), a) * _pad(f(n), a)

        aligned = [(pflops(b, m, kk, n, a), float(r.duration_us)) for r, b, m, kk, n, a in mms if not ukeys((kk, n), a)]
        ref_us = sum(t for _, t in aligned)
        rate = sum(f for f, _ in aligned) / ref_us if ref_us > 0 else None  # padded FLOP per µs, aligned MatMuls
        cell_keys: dict[str, set[str]] = {}
        unaligned_flops, unaligned_us = 0.0, 0.0
        for r, b, m, kk, n, a in mms:
            cell, bwd = kernel_cell(str(r.name))[:2]
            u = ukeys((kk, n), a)
            if not bwd:
                cell_keys.setdefault(cell, set()).update(u)
            if not u:
                continue
            unaligned_flops += pflops(b, m, kk, n, a)
            unaligned_us += float(r.duration_us)
            t = float(r.per_step)
            if len(u) == 1:
                (x,) = u
                after = (pflops(b, m, kk, n, a, new=True) / rate / k.attrs["steps"] if rate
                         else t / self.options.unaligned_penalty * pflops(b, m, kk, n, a, new=True) / pflops(b, m, kk, n, a))
                st.penalty_us[x] = st.penalty_us.get(x, 0.0) + t - after
            else:
                for x in u:
                    st.masked.setdefault(x, set()).update(u - {x})
                    st.penalty_us[x] = st.penalty_us.get(x, 0.0) + t * (1 - pflops(b, m, kk, n, a, new=True) / pflops(b, m, kk, n, a))
        if rate and unaligned_us > 0:
            st.penalty = rate / (unaligned_flops / unaligned_us)
        weight_td = self._weight_transdata(k, mms, ir_scopes)
        for r in k[k["type"].isin(_TRANSDATA)].itertuples():
            cell, _ = kernel_cell(str(r.name))[:2]
            u = cell_keys.get(cell, set())
            if len(u) == 1 and r.Index not in weight_td:
                (x,) = u
                st.transdata_us[x] = st.transdata_us.get(x, 0.0) + float(r.per_step)
        # other kernels move bytes proportional to the dim: they grow (or shrink) with it
        other = k[comp & ~k["type"].isin(MATMUL_OPS | _TRANSDATA)]
        if value_map:
            token = r"(?<!\d)(?:" + "|".join(str(v) for v in value_map) + r")(?!\d)"
            other = other[other["input_shapes"].astype(str).str.contains(token, regex=True)]
        else:
            other = other.iloc[:0]
        for r in other.itertuples():
            seen = {v for s in _parse_shapes(r.input_shapes) for v in s if v in value_map}
            for v in seen:
                x, nv = value_map[v]
                st.saving[x] = st.saving.get(x, 0.0) - float(r.per_step) * (nv / v - 1.0)
        for x in set(st.penalty_us) | set(st.transdata_us):
            st.saving[x] = st.saving.get(x, 0.0) + st.penalty_us.get(x, 0.0) + st.transdata_us.get(x, 0.0)
        return st

    @staticmethod
    def _weight_transdata(k: pd.DataFrame, mms: list[Any], ir_scopes: set[str] | None) -> set[Any]:
        """Rows of TransData kernels that convert a weight's format (not an alignment cost).

        With the rank's ``graph_build`` dump: TransData nodes reading a parameter (through its
        ``Load``). Without: a TransData shaped like its cell's weight, outside the gradient
        scope, and not also shaped like the activation it would convert.
        """
        td = k[k["type"].isin(_TRANSDATA)]
        if td.empty:
            return set()
        if ir_scopes is not None:
            return {r.Index for r in td.itertuples() if kernel_scope(str(r.name)) in ir_scopes}
        weights: dict[str, tuple[set[tuple[int, ...]], set[tuple[int, ...]]]] = {}
        for r, *_ in mms:
            cell, bwd = kernel_cell(str(r.name))[:2]
            shapes = _parse_shapes(r.input_shapes)
            if not bwd and len(shapes) >= 2:
                w, a = weights.setdefault(cell, (set(), set()))
                w.add(tuple(shapes[1]))
                a.add(tuple(shapes[0]))
        out = set()
        for r in td.itertuples():
            cell, bwd = kernel_cell(str(r.name))[:2]
            shapes = _parse_shapes(r.input_shapes)
            if bwd or not shapes or cell not in weights:
                continue
            w, a = weights[cell]
            if tuple(shapes[0]) in w and tuple(shapes[0]) not in a:
                out.add(r.Index)
        return out

    @staticmethod
    def _param_transdata_scopes(ctx: RuleContext, rank_id: int | None) -> set[str] | None:
        """Full names of ``graph_build`` TransData nodes whose input is a parameter (``None`` without the dump)."""
        rd = next((x for x in ctx.ir_ranks() if x.rank == rank_id), None)
        ir = ctx.ir_graph("backend", rd) if rd is not None else None
        if ir is None:
            return None
        out = set()
        for n in ir.iter_nodes():
            if n.op not in _TRANSDATA or not n.kernel_full_name:
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

    # -- memory ------------------------------------------------------------------------------------
    @staticmethod
    def _memory_delta(ctx: RuleContext, stages: list[_Stage], value_map: dict[int, tuple[str, int]], key: str) -> float | None:
        cfg = ctx.config
        vm = {v: nv for v, (x, nv) in value_map.items() if x == key}
        if not vm:
            return None
        by_rank = {rd.rank: rd for rd in ctx.ir_ranks()}
        pp = cfg.pipeline_stages if cfg is not None else 1
        stage_ids: list[tuple[int | None, int | None]] = [(s.stage, s.rank.rank_id) for s in stages]
        if not stage_ids:
            stage_ids = [(s, None) for s in range(pp)] if pp > 1 else [(None, None)]
        dp = cfg.data_parallel if cfg is not None else 1
        shard = dp if cfg is not None and cfg.get("parallel.enable_parallel_optimizer") is True else 1
        accumulate = cfg is not None and ((cfg.pipeline_stages > 1 and cfg.micro_batch_num > 1)
                                          or (cfg.pipeline_stages <= 1 and cfg.gradient_accumulation_steps > 1))
        best = None
        for stage, rid in stage_ids:
            ir = None
            if rid is not None and rid in by_rank:
                ir = ctx.ir_graph("frontend", by_rank[rid]) or ctx.ir_graph("parallel", by_rank[rid])
            elif rid is None and stage is None:
                ir = ctx.ir_graph("frontend") or ctx.ir_graph("parallel")
            params = ir_parameters(ir) if ir is not None else []
            if not params and cfg is not None:
                params = llama_parameters(cfg, stage if pp > 1 else None)
            if not params:
                continue
            states: dict[str, int] = {}  # weight name → bytes of its optimizer states per element
            for name, _shape, dtype in params:
                if not is_model_weight(name) and name.startswith(("adam_m.", "adam_v.", "moment1.", "moment2.")):
                    base = name.split(".", 1)[1]
                    states[base] = states.get(base, 0) + DTYPE_BYTES.get(dtype or "", 4)
            total = 0.0
            for name, shape, dtype in params:
                if not is_model_weight(name):
                    continue
                factor = math.prod(vm[d] / d if d in vm else 1.0 for d in shape)
                if factor == 1.0:
                    continue
                wb = DTYPE_BYTES.get(dtype or "", 2)
                per = (wb + states.get(name, 8)) / shard + (wb if accumulate else 0)
                total += math.prod(shape) * (factor - 1.0) * per
            best = total if best is None or abs(total) > abs(best) else best
        return best

    # -- finding ---------------------------------------------------------------------------------
    def _finding(self, ctx: RuleContext, key: str, group: list[_Dim], new: _Fix | None,
                 stages: list[_Stage], value_map: dict[int, tuple[str, int]], source: str) -> Finding:
        cfg = ctx.config
        d0 = max(group, key=lambda d: d.time_us)
        measured = bool(stages) and any(d.kernels for d in group)
        micro = max([s.micro for s in stages] or [1])
        saving = one_f_one_b_step_saving({s.stage: s.saving.get(key, 0.0) for s in stages},
                                         {s.stage: s.busy_us for s in stages}, micro) if measured else None
        slowest = max(stages, key=lambda s: s.busy_us) if stages else None
        step_us = ctx.step_time_us(slowest.rank) if slowest is not None else None
        share = 100.0 * saving / step_us if (step_us and saving is not None) else None
        pad = _pad(d0.value, d0.align)
        ops = sorted({o for d in group for o in d.ops})
        roles = "/".join(sorted({d.role for d in group}))
        values = sorted({d.value for d in group})
        msg = [f"{roles} = {', '.join(map(str, values))} in {', '.join(ops)} is not a multiple of {d0.align} "
               f"(padded to {pad}, +{100.0 * (pad - d0.value) / d0.value:.2f}% work)."]
        masked = sorted({y for s in stages for y in s.masked.get(key, set())})
        if measured and saving is not None:
            pen = sum(s.penalty_us.get(key, 0.0) for s in stages)
            td = sum(s.transdata_us.get(key, 0.0) for s in stages)
            p = next((s.penalty for s in stages if s.penalty), None)
            msg.append(
                f"{round(sum(d.count for d in group))} unaligned MatMul kernel(s) on it take "
                f"{sum(d.time_us for d in group) / 1000:.2f} ms per step"
                + (f" (the aligned MatMuls of this profile run {p:.2f}× faster per padded FLOP)" if p else "")
                + f". Fixing {self._short(key)} alone removes {pen / 1000:.2f} ms of MatMul penalty"
                + (f" and {td / 1000:.2f} ms of TransData" if td else "")
                + (f" (summed over {len(stages)} pipeline stages; under 1F1B the step gains" if len(stages) > 1 else "; the step gains")
                + f" {saving / 1000:.2f} ms" + (")." if len(stages) > 1 else ".")
            )
        if masked:
            msg.append(f"MatMuls that also have {', '.join(self._short(y) for y in masked)} unaligned keep their penalty "
                       f"and TransData until those are fixed too.")
        patches = []
        locations: list[Location] = []
        if cfg is not None and d0.config_key:
            cur = cfg.get(d0.config_key)
            per_rank = f" (per rank after model_parallel={d0.divisor}: {d0.value})" if d0.divisor > 1 else ""
            msg.append(f"It comes from {self._short(d0.config_key)} = {cur}{per_rank}.")
            if new is not None:
                changes, note = new.changes, new.note
                msg.append(note)
                title = ", ".join(f"{self._short(k)} to {v}" for k, v in changes)
                p = ctx.config_patch(f"set {title}", changes, safety=Safety.UNSAFE,
                                     description="changes the model's shape: retrain or convert checkpoints (zero-pad). " + note)
                if p:
                    patches.append(p)
            loc = ctx.config_location(d0.config_key)
            if loc:
                locations.append(loc)
        for d in group:
            for ir_path, n in d.ir_nodes[:2]:
                locations.append(ir_location(ir_path, n, note=".".join(cell_path_in_layer(n.scope)) or None))
            for rk, kname in d.kernels[:4]:
                src = rk.table_source("kernels")
                locations.append(Location(kind="profile", path=str(src[0]) if src else None, table="kernels",
                                          op=kernel_scope(kname) or kname, rank=rk.rank_id))
        mem = self._memory_delta(ctx, stages, value_map, key) if new is not None else None
        if mem:
            msg.append(f"The padding adds {mem / 2**20:.1f} MiB of parameters and optimizer state per device.")
        if not measured:
            msg.append("Without a profile the time at stake is not measured.")
        title = (f"{self._short(d0.config_key)} gives unaligned MatMul dim {d0.value}" if d0.config_key
                 else f"MatMul dim {d0.value} is not a multiple of {d0.align}")
        return Finding(
            code=self.code,
            rule=self.name,
            title=title,
            message=" ".join(msg),
            severity=severity_for_share(share) if share is not None else Severity.LOW,
            saving_us=saving,
            memory_delta_bytes=mem,
            step_time_us=step_us,
            confidence=0.8 if measured else 0.5,
            evidence=[
                Evidence(name="dim", value=d0.value, threshold=f"multiple of {d0.align}", source=source),
                Evidence(name="padded_to", value=pad),
            ]
            + ([Evidence(name="saving_if_fixed_alone", value=round(saving, 3), unit="µs")] if saving is not None else [])
            + ([Evidence(name="masked_by", value=", ".join(masked))] if masked else [])
            + ([Evidence(name="proposed", value=new.value)] if new is not None else []),
            locations=locations,
            patches=patches,
            tags=list(self.tags),
        )

    @staticmethod
    def _short(key: str) -> str:
        return key.split(".", 1)[1] if key.startswith("model.") else key

    @staticmethod
    def _new_value(cfg: Any, d: _Dim) -> _Fix | None:
        """The config change that aligns ``d`` (see Fix), and the new unsliced dim it gives."""
        key = d.config_key
        if cfg is None or key is None:
            return None
        if key == "model.multiple_of":
            f, _ = cfg.ffn_hidden_size()
            return _Fix(256, [(key, 256)], "The FFN size is derived from hidden_size and multiple_of.", _pad(f or 0, 256))
        cur = cfg.get(key)
        if not isinstance(cur, int) or isinstance(cur, bool):
            return None
        step = d.align * d.divisor
        heads = cfg.num_heads
        if key == "model.hidden_size" and heads:
            hd_explicit = cfg.int_of("model.head_dim")
            if hd_explicit and heads * hd_explicit == cur:
                hd = _pad(hd_explicit, d.align)
                return _Fix(heads * hd, [(key, heads * hd), ("model.head_dim", hd)],
                            f"head_dim rounds with it ({hd_explicit} → {hd}) so num_heads × head_dim stays equal to hidden_size.",
                            heads * hd)
            if hd_explicit:
                return _Fix(_pad(cur, step), [(key, _pad(cur, step))],
                            f"num_heads × head_dim = {heads * hd_explicit} is set by head_dim and does not change; "
                            "every hidden-sized weight (embedding, norms, projections, lm_head) is zero-padded.", _pad(cur, step))
            step = step * heads // math.gcd(step, heads)
            up, down = _pad(cur, step), (cur // step) * step
            new = down if 0 < down and (cur - down) < (up - cur) else up
            return _Fix(new, [(key, new)], f"hidden_size stays a multiple of num_heads={heads} (head_dim = hidden_size / "
                                           f"num_heads = {new // heads}).", new)
        if key == "model.head_dim":
            hd = _pad(cur, d.align)
            return _Fix(hd, [(key, hd)], "The attention projections change width with it.", (heads or 1) * hd)
        if key == "model.seq_length":
            up, down = _pad(cur, step), (cur // step) * step
            new = down if 0 < down and (cur - down) < (up - cur) else up
            return _Fix(new, [(key, new)], "The dataset's sequence length must match.", new)
        new = _pad(cur, step)
        note = "Every token id still fits; the extra logits are never a label." if key == "model.vocab_size" else \
            "Zero-padded rows/columns keep a converted checkpoint's function."
        return _Fix(new, [(key, new)], note, new)
