"""CT002: TransData (format conversion) kernels that a consistent layout would avoid."""

from __future__ import annotations

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
    Severity,
)
from advisor_rules._common import (
    ASSUMED_HBM_GBPS,
    cell_path_in_layer,
    ir_location,
    kernel_scope,
    kernel_time_by_scope,
    layer_of_scope,
    severity_for_share,
    source_location,
    tensor_bytes,
    user_source,
)

_TRANS = ("TransData", "TransDataRNN")
_SPECIAL = ("FRACTAL_NZ", "NC1HWC0", "FRACTAL_Z", "FracZ", "NDC1HWC0", "FRACTAL_ZN_RNN")


def _norm_fmt(fmt: Any) -> str:
    f = str(fmt or "").upper().replace("FORMAT_", "")
    return {"DEFAULTFORMAT": "ND", "NCHW": "ND", "FRACZ": "FRACTAL_Z"}.get(f, f)


@dataclass
class _Group:
    kind: str  # sandwich | param | back-to-back
    key: str
    culprit: str  # what the user should look at (op or parameter)
    trans: list[Any] = field(default_factory=list)  # IR TransData nodes
    culprit_nodes: list[Any] = field(default_factory=list)
    layers: set[int] = field(default_factory=set)
    formats: str = ""
    kernel_names: list[str] = field(default_factory=list)  # profile-only detection
    path: str | None = None


class TransDataExcess(Rule):
    """TransData format conversions that a consistent layout would avoid.

    What
        On Ascend, MatMul-like kernels want ``FRACTAL_NZ`` while many vector ops
        work on ``ND``; the backend inserts ``TransData`` where neighbours disagree.
        From the backend kernel graph (``graph_build_*``, ``hwopt_d_end_graph_*``)
        this rule finds (1) a TransData pair around a single op — ``NZ→ND``, the
        op, ``ND→NZ`` — i.e. one op that forces ``ND`` inside an ``NZ`` chain, in
        every layer; (2) TransData on a parameter, which re-lays the weight out on
        every step instead of once; (3) back-to-back TransData that cancel out.
        Without the IR, the same sandwich is found in ``kernel_details.csv`` from
        the kernel order and the ``Input/Output Formats`` columns. TransData on
        tensors whose dims are not multiples of 16 are left to AL001.

    Why
        A TransData reads and writes the whole tensor (with padding to 16): pure
        data movement, often several per layer in forward and backward. The seed
        guide: remove redundant Cast and TransData operators.

    Example
        ``trans_TransData_13`` (FRACTAL_NZ → ND) before and ``trans_TransData_14``
        (ND → FRACTAL_NZ) after ``attention.merger_head_transpose`` in all 32 layers:
        64 conversions, 1.9 ms per step.

    Fix
        Model code: replace the op that forces ND with one that accepts the NZ
        layout (or fuse it into its neighbour), keep weights in their compute
        format once instead of converting them each step. The finding names the op
        and its source line; there is no config key for this (display only).
    """

    code = "CT002"
    name = "transdata-excess"
    summary = "TransData conversions forced by an inconsistent layout"
    severity = Severity.MEDIUM
    requires = Requirements(any_of=(Need.ir("backend"), Need.table("kernels", ("name", "type", "duration_us", "start_ns"))))
    tags = ("compute", "format", "transdata")
    fix_availability = "never"

    class Options(RuleOptions):
        min_share_pct: float = Field(0.5, ge=0, description="report groups costing at least this share of the step, %")
        hbm_gbps: float = Field(ASSUMED_HBM_GBPS, gt=0, description="bandwidth assumed without a profile, GB/s")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        rank = next(iter(ctx.run), None) if ctx.run is not None else None
        step_us = ctx.step_time_us(rank) if rank is not None else None
        groups: list[_Group]
        ir = ctx.ir_graph("backend")
        if ir is not None:
            groups = self._from_ir(ir)
            times, steps = kernel_time_by_scope(rank) if rank is not None else ({}, 1)
        elif rank is not None:
            groups = self._from_kernels(rank)
            times, steps = {}, 1
        else:
            groups, times, steps = [], {}, 1
        if not groups:
            ctx.skip("no TransData sandwich, parameter TransData or cancelling pair found")
            return
        kd = rank.table("kernels", ["name", "type", "duration_us"]) if rank is not None and rank.has_table("kernels") else None
        for g in groups:
            f = self._finding(ctx, g, times, steps, step_us, kd, rank)
            if f is not None:
                yield f

    # -- from the kernel graph --------------------------------------------------------------------
    @staticmethod
    def _formats(node: Any) -> tuple[str, str]:
        pa = node.primitive_attrs
        src = pa.get("src_format")
        dst = pa.get("dst_format")
        if (src is None or dst is None) and node.device_in and node.device_out:
            src = src or node.device_in[0].format
            dst = dst or node.device_out[0].format
        return _norm_fmt(src), _norm_fmt(dst)

    @staticmethod
    def _aligned(node: Any) -> bool:
        t = node.in_types[0] if node.in_types else None
        shape = getattr(t, "shape", None) or ()
        dims = [d for d in shape[-2:] if d is not None and d >= 0]
        return all(d % 16 == 0 for d in dims)

    def _from_ir(self, ir: Any) -> list[_Group]:
        consumers: dict[tuple[str, int], list[Any]] = {}
        for n in ir.iter_nodes():
            for ref in n.operand_refs:
                if ref.kind == "node" and ref.index is not None:
                    consumers.setdefault((n.graph, ref.index), []).append(n)
        groups: dict[str, _Group] = {}
        used: set[int] = set()
        trans = [n for op in _TRANS for n in ir.nodes_by_op(op)]
        for t in trans:
            if id(t) in used or not self._aligned(t):
                continue
            src, dst = self._formats(t)
            prod = ir.resolve(t, t.operand_refs[0]) if t.operand_refs else None
            # (2) on a parameter (directly, or through Load)
            base = prod
            if getattr(base, "op", None) == "Load" and base.operand_refs:
                base = ir.resolve(base, base.operand_refs[0])
            if base is not None and not hasattr(base, "op"):
                name = getattr(base, "name", None) or str(base)
                g = groups.setdefault(f"param|{name}", _Group("param", name, name, path=str(ir.path)))
                g.trans.append(t)
                g.formats = f"{src}→{dst}"
                used.add(id(t))
                continue
            # (3) back-to-back
            if getattr(prod, "op", None) in _TRANS and id(prod) not in used:
                p_src, p_dst = self._formats(prod)
                if p_src == dst:
                    key = ".".join(cell_path_in_layer(t.scope)) or (t.scope or "")
                    g = groups.setdefault(f"b2b|{key}", _Group("back-to-back", key, key, path=str(ir.path)))
                    g.trans += [prod, t]
                    g.formats = f"{p_src}→{p_dst}→{dst}"
                    _add_layer(g, t)
                    used.update({id(prod), id(t)})
                    continue
            # (1) sandwich: this TransData leaves a special format; its single consumer X feeds a TransData back
            if src in _SPECIAL and dst not in _SPECIAL:
                users = consumers.get((t.graph, t.index), []) if t.index is not None else []
                if len(users) != 1 or users[0].op in _TRANS:
                    continue
                x = users[0]
                back = [u for u in consumers.get((x.graph, x.index), []) if u.op in _TRANS] if x.index is not None else []
                back = [b for b in back if self._formats(b) == (dst, src)]
                if not back:
                    continue
                key = ".".join(cell_path_in_layer(x.scope)) or f"{x.op}"
                g = groups.setdefault(f"sandwich|{key}|{x.op}", _Group("sandwich", key, f"{x.op} ({key})", path=str(ir.path)))
                g.trans += [t, *back]
                g.culprit_nodes.append(x)
                g.formats = f"{src}→{dst} … {dst}→{src}"
                _add_layer(g, x)
                used.add(id(t))
                used.update(id(b) for b in back)
        return list(groups.values())

    # -- from kernel_details alone ------------------------------------------------------------------
    def _from_kernels(self, rank: Any) -> list[_Group]:
        cols = rank.columns("kernels") or []
        if not {"input_formats", "output_formats"} <= set(cols):
            return []
        k = rank.table("kernels", ["name", "type", "start_ns", "duration_us", "input_formats", "output_formats"])
        k = k[k["start_ns"].notna()].sort_values("start_ns").reset_index(drop=True)
        is_t = k["type"].isin(_TRANS)
        groups: dict[str, _Group] = {}
        for i in range(len(k) - 2):
            if not is_t.iloc[i] or is_t.iloc[i + 1] or not is_t.iloc[i + 2]:
                continue
            a_in, a_out = _norm_fmt(k.at[i, "input_formats"]), _norm_fmt(k.at[i, "output_formats"])
            c_in, c_out = _norm_fmt(k.at[i + 2, "input_formats"]), _norm_fmt(k.at[i + 2, "output_formats"])
            if a_in in _SPECIAL and a_out == c_in and c_out == a_in:
                x = k.at[i + 1, "name"]
                scope = kernel_scope(str(x)) or str(x)
                key = ".".join(cell_path_in_layer(scope)) or str(k.at[i + 1, "type"])
                g = groups.setdefault(key, _Group("sandwich", key, f"{k.at[i + 1, 'type']} ({key})"))
                g.kernel_names += [str(k.at[i, "name"]), str(k.at[i + 2, "name"])]
                g.formats = f"{a_in}→{a_out} … {c_in}→{c_out}"
                lay = layer_of_scope(scope)
                if lay is not None:
                    g.layers.add(lay)
        return list(groups.values())

    # -- reporting --------------------------------------------------------------------------------------
    def _finding(self, ctx: RuleContext, g: _Group, times: dict[str, float], steps: int, step_us: float | None,
                 kd: pd.DataFrame | None, rank: Any) -> Finding | None:
        measured: list[float] = []
        if g.trans:
            measured = [times[n.kernel_full_name] for n in g.trans if n.kernel_full_name in times]
        elif g.kernel_names and kd is not None:
            measured = [float(kd.loc[kd["name"] == nm, "duration_us"].sum()) for nm in dict.fromkeys(g.kernel_names)]
        if measured:
            cost = sum(measured) / steps
            how = f"{len(measured)} TransData kernel(s) measured"
        else:
            nbytes = 0.0
            for n in g.trans:
                t = n.in_types[0] if n.in_types else None
                nbytes += 2 * (tensor_bytes(getattr(t, "shape", None), getattr(t, "dtype", None)) or 0.0)
            cost = nbytes / (self.options.hbm_gbps * 1e3)
            how = f"estimated from {nbytes / 1e6:.2f} MB moved at {self.options.hbm_gbps:.0f} GB/s"
        share = 100.0 * cost / step_us if step_us else None
        if share is not None and share < self.options.min_share_pct:
            return None
        n_trans = len(g.trans) or len(g.kernel_names)
        layers = sorted(g.layers)
        in_layers = f" in {len(layers)} layer(s)" if layers else ""
        if g.kind == "sandwich":
            title = f"{g.culprit} forces TransData pairs ({g.formats}){in_layers}"
            why = "the op does not accept the special format its neighbours use, so the tensor is converted out and back"
            fix = "replace it with an op that accepts that format, or fuse it into its neighbour"
        elif g.kind == "param":
            title = f"parameter {g.culprit} is converted ({g.formats}) on every step"
            why = "the weight is stored in one layout and consumed in another, so it is re-laid-out every step"
            fix = "store the weight in its compute format once (convert at load), or consume it in its stored format"
        else:
            title = f"TransData pairs that cancel out ({g.formats}){in_layers}"
            why = "a conversion is immediately undone"
            fix = "remove the op between them that requests the round trip"
        msg = [f"{n_trans} TransData conversion(s): {why}.",
               f"Time: {cost:.1f} µs per step ({how})" + (f", {share:.2f}% of the step." if share is not None else ".")]
        src = next((user_source(x) for x in g.culprit_nodes if user_source(x)), None)
        if src:
            msg.append(f"Created at {src[0]}:{src[1]}: `{src[2]}`.")
        msg.append(f"Fix: {fix} (model code; no config key controls this).")
        locations: list[Location] = []
        for n in (g.culprit_nodes[:2] + g.trans[:3]):
            locations.append(ir_location(str(g.path), n))
        if g.culprit_nodes:
            s = source_location(g.culprit_nodes[0])
            if s:
                locations.append(s)
        if g.kernel_names and rank is not None:
            src_file = rank.table_source("kernels")
            locations.append(Location(kind="profile", path=str(src_file[0]) if src_file else None, table="kernels",
                                      op=g.kernel_names[0], rank=rank.rank_id))
        return Finding(
            code=self.code,
            rule=self.name,
            title=title,
            message=" ".join(msg),
            severity=severity_for_share(share),
            saving_us=cost,
            step_time_us=step_us,
            confidence=0.85 if measured else 0.55,
            evidence=[
                Evidence(name="transdata_count", value=n_trans),
                Evidence(name="transdata_time_per_step", value=round(cost, 3), unit="µs", source=how),
                Evidence(name="formats", value=g.formats),
            ]
            + ([Evidence(name="layers", value=len(layers))] if layers else []),
            locations=locations,
            tags=list(self.tags),
        )


def _add_layer(g: _Group, node: Any) -> None:
    lay = layer_of_scope(node.scope)
    if lay is not None:
        g.layers.add(lay)
