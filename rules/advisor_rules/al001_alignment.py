"""AL001: MatMul-like dimensions not multiples of 16 (32 for int8) on Ascend."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

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
    ASSUMED_CUBE_TFLOPS,
    cell_path_in_layer,
    ir_location,
    kernel_scope,
    severity_for_share,
)

MATMUL_OPS = {"MatMul", "MatMulExt", "BatchMatMul", "BatchMatMulExt", "Dense", "MatMulV2", "MatMulV3", "BatchMatMulV2",
              "GroupedMatmul", "QuantBatchMatmul", "QuantBatchMatmulV3", "MatmulReduceScatter", "AllGatherMatmul"}
_SHAPE = re.compile(r"-?\d+")


def _align(dtype: str | None) -> int:
    return 32 if dtype and "INT8" in dtype.upper() else 16


@dataclass
class _Dim:
    value: int
    role: str  # K | N | M
    align: int
    config_key: str | None = None
    divisor: int = 1
    kernels: list[str] = field(default_factory=list)
    ir_nodes: list[Any] = field(default_factory=list)
    ops: set[str] = field(default_factory=set)
    time_us: float = 0.0
    expected_us: float = 0.0
    transdata_us: float = 0.0


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


class Alignment16(Rule):
    """MatMul-like dimensions that are not multiples of 16 (32 for int8).

    What
        Reads the K and N dimensions (the weight's dims) of every MatMul-like op —
        MatMul/MatMulExt/BatchMatMul/FlashAttention/GroupedMatmul — per rank, after
        tensor-parallel slicing: from ``kernel_details.csv`` ``Input/Output Shapes``,
        from the IR type lines (``step_parallel_end`` gives per-rank shapes), or,
        with the config alone, from the model dimensions divided by
        ``model_parallel``. Dynamic dims (-1, -2) and the batch×sequence M dimension
        are not flagged. Each unaligned dim is traced back to the config key that
        sets it (``hidden_size``, ``intermediate_size``, ``vocab_size``,
        ``seq_length``, heads × head_dim) when one does.

    Why
        The cube unit computes on 16×16 fractals: an unaligned K or N is padded
        (wasted work), runs a slower tail path, and its operands need ND↔FRACTAL_NZ
        ``TransData`` conversions with padding. The seed guide: "it is recommended
        that the calculation on the AI core be 16-alignment".

    Example
        ``hidden_size: 4100`` → every q/k/v/o projection has K or N = 4100; the
        profile shows those MatMuls at 78 % of the throughput of the aligned ones
        plus a TransData per weight.

    Fix
        Set the config dim to the nearest multiple of 16 × ``model_parallel`` (vocab
        rounds up so every token id still fits; ``hidden_size`` also stays divisible
        by ``num_heads``). The patch changes the model, so it is unsafe: it needs
        retraining or checkpoint conversion.

    Time at stake (with a profile): for the unaligned kernels, measured time minus
    the time at the throughput the aligned MatMuls of the same profile achieve on
    the aligned shape, plus the TransData kernels on those tensors.
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
        cube_tflops: float = Field(ASSUMED_CUBE_TFLOPS, gt=0, description="throughput assumed without aligned reference kernels")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        mp = cfg.model_parallel if cfg is not None else 1
        dims: dict[tuple[int, str], _Dim] = {}
        rank = next(iter(ctx.run), None) if ctx.run is not None else None
        step_us = ctx.step_time_us(rank) if rank is not None else None
        source = "config"
        if rank is not None and {"type", "input_shapes", "output_shapes"} <= set(rank.columns("kernels") or []):
            self._from_kernels(rank, dims)
            source = "kernel_details.csv"
        elif ctx.ir_graph("parallel") is not None or ctx.ir_graph("frontend") is not None:
            ir = ctx.ir_graph("parallel") or ctx.ir_graph("frontend")
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
            by_key.setdefault(d.config_key or f"dim {d.value}", []).append(d)
        for key, group in sorted(by_key.items(), key=lambda kv: -sum(x.time_us for x in kv[1])):
            yield self._finding(ctx, key, group, step_us, source, rank)

    # -- evidence --------------------------------------------------------------------------------
    def _from_kernels(self, rank: Any, dims: dict[tuple[int, str], _Dim]) -> None:
        cols = rank.columns("kernels") or []
        want = [c for c in ("name", "type", "duration_us", "input_shapes", "output_shapes", "input_dtypes", "step_id") if c in cols]
        k = rank.table("kernels", want)
        steps = max(int(k["step_id"].dropna().nunique()), 1) if "step_id" in k else 1
        mm = k[k["type"].isin(MATMUL_OPS)]
        recs = []
        for r in mm.itertuples():
            shapes = _parse_shapes(r.input_shapes)
            out = _parse_shapes(r.output_shapes)
            if len(shapes) < 2 or not out:
                continue
            mkn = _kn(shapes[0], shapes[1], out[0])
            if mkn is None or min(mkn) < 0:
                continue
            recs.append((r, mkn))
        # Achieved throughput of aligned matmuls: the reference for "what this would cost aligned".
        aligned_flops = sum(2 * m * kk * n for r, (m, kk, n) in recs if kk % 16 == 0 and n % 16 == 0)
        aligned_us = sum(float(r.duration_us) for r, (m, kk, n) in recs if kk % 16 == 0 and n % 16 == 0)
        rate = aligned_flops / aligned_us if aligned_us > 0 else self.options.cube_tflops * 1e6  # FLOP per µs
        for r, (m, kk, n) in recs:
            align = _align(getattr(r, "input_dtypes", None) if "input_dtypes" in mm else None)
            for value, role in ((kk, "K"), (n, "N"), (m, "M")):
                d = dims.setdefault((value, role), _Dim(value, role, align))
                d.ops.add(str(r.type))
                if value % align:
                    d.kernels.append(str(r.name))
                    d.time_us += float(r.duration_us) / steps
                    kk2 = _round_to(kk, align)
                    n2 = _round_to(n, align)
                    d.expected_us += (2 * m * kk2 * n2 / rate) / steps
        # TransData kernels moving tensors with an unaligned trailing dim belong to the same cost.
        td = k[k["type"].isin(("TransData", "TransDataRNN"))]
        for r in td.itertuples():
            shapes = _parse_shapes(r.input_shapes)
            for (value, role), d in dims.items():
                if value % d.align and shapes and value in shapes[0][-2:]:
                    d.transdata_us += float(r.duration_us) / steps
                    break

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
                if value % align:
                    d.ir_nodes.append(n)
                    d.expected_us += 0.0

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

    # -- finding ---------------------------------------------------------------------------------
    def _finding(self, ctx: RuleContext, key: str, group: list[_Dim], step_us: float | None, source: str, rank: Any) -> Finding:
        cfg = ctx.config
        d0 = group[0]
        waste = sum(max(d.time_us - d.expected_us, 0.0) for d in group) + sum(d.transdata_us for d in group)
        measured = any(d.kernels for d in group)
        pad = _round_to(d0.value, d0.align)
        pad_pct = 100.0 * (pad - d0.value) / d0.value
        share = 100.0 * waste / step_us if (step_us and measured) else None
        ops = sorted({o for d in group for o in d.ops})
        roles = "/".join(sorted({d.role for d in group}))
        msg = [f"{roles} = {d0.value} in {', '.join(ops)} is not a multiple of {d0.align}: padded to {pad} (+{pad_pct:.2f}% work)."]
        if measured:
            kn = sum(len(d.kernels) for d in group)
            msg.append(
                f"{kn} unaligned MatMul kernel(s) take {sum(d.time_us for d in group):.1f} µs per step where "
                f"{sum(d.expected_us for d in group):.1f} µs would be expected at the throughput of the aligned ones"
                + (f"; TransData on these tensors adds {sum(d.transdata_us for d in group):.1f} µs" if any(d.transdata_us for d in group) else "")
                + "."
            )
        patches = []
        locations: list[Location] = []
        new_value = None
        if cfg is not None and d0.config_key:
            new_value = self._aligned_value(cfg, d0)
            cur = cfg.get(d0.config_key)
            per_rank = f" (per rank after model_parallel={d0.divisor}: {d0.value})" if d0.divisor > 1 else ""
            msg.append(f"It comes from {d0.config_key.split('.', 1)[1]} = {cur}{per_rank}.")
            if new_value is not None and d0.config_key != "model.multiple_of":
                p = ctx.config_patch(
                    f"set {d0.config_key.split('.', 1)[1]} to {new_value}",
                    [(d0.config_key, new_value)],
                    safety=Safety.UNSAFE,
                    description="changes the model's shape: retrain or convert checkpoints",
                )
                if p:
                    patches.append(p)
            elif d0.config_key == "model.multiple_of":
                p = ctx.config_patch("set multiple_of to 256", [("model.multiple_of", 256)], safety=Safety.UNSAFE,
                                     description="FFN size is derived from hidden_size and multiple_of")
                if p:
                    patches.append(p)
            loc = ctx.config_location(d0.config_key)
            if loc:
                locations.append(loc)
        for d in group:
            for n in d.ir_nodes[:2]:
                ir_path = next((str(getattr(g, "path", "")) for g in [ctx.ir_graph("parallel") or ctx.ir_graph("frontend")] if g), "")
                locations.append(ir_location(ir_path, n, note=".".join(cell_path_in_layer(n.scope)) or None))
            for kname in d.kernels[:2]:
                src = rank.table_source("kernels") if rank is not None else None
                locations.append(Location(kind="profile", path=str(src[0]) if src else None, table="kernels",
                                          op=kernel_scope(kname) or kname, rank=rank.rank_id if rank is not None else None))
        if not measured:
            msg.append("Without a profile the time at stake is not measured; the padding waste above is the lower bound.")
        title = (f"{d0.config_key.split('.', 1)[1]} gives unaligned MatMul dim {d0.value}" if d0.config_key
                 else f"MatMul dim {d0.value} is not a multiple of {d0.align}")
        saving = waste if measured else None
        return Finding(
            code=self.code,
            rule=self.name,
            title=title,
            message=" ".join(msg),
            severity=severity_for_share(share) if share is not None else Severity.LOW,
            saving_us=saving,
            step_time_us=step_us,
            confidence=0.8 if measured else 0.5,
            evidence=[
                Evidence(name="dim", value=d0.value, threshold=f"multiple of {d0.align}", source=source),
                Evidence(name="padded_to", value=pad),
                Evidence(name="padding_waste", value=round(pad_pct, 3), unit="%"),
            ]
            + ([Evidence(name="time_at_stake", value=round(waste, 3), unit="µs")] if measured else [])
            + ([Evidence(name="proposed", value=new_value)] if new_value is not None else []),
            locations=locations,
            patches=patches,
            tags=list(self.tags),
        )

    @staticmethod
    def _aligned_value(cfg: Any, d: _Dim) -> int | None:
        key = d.config_key
        cur = cfg.get(key)
        if not isinstance(cur, int) or isinstance(cur, bool):
            return None
        step = d.align * d.divisor
        if key == "model.hidden_size" and cfg.num_heads:
            step = step * cfg.num_heads // math.gcd(step, cfg.num_heads)
        up = _round_to(cur, step)
        down = (cur // step) * step
        if key == "model.vocab_size" or down <= 0:
            return up  # every token id must still fit
        return down if (cur - down) < (up - cur) else up


def _round_to(v: int, m: int) -> int:
    return ((v + m - 1) // m) * m
