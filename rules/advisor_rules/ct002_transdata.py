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
    StageEvidence,
    cell_path_in_layer,
    fill_stages_without_ir,
    ir_location,
    kernel_scope,
    layer_of_scope,
    one_f_one_b_step_saving,
    pipeline_micro_batches,
    severity_for_share,
    source_location,
    stage_evidence,
    tensor_bytes,
    user_source,
)

_TRANS = ("TransData", "TransDataRNN")
_SPECIAL = ("FRACTAL_NZ", "NC1HWC0", "FRACTAL_Z", "FracZ", "NDC1HWC0", "FRACTAL_ZN_RNN")
_MATMUL = {"MatMul", "BatchMatMul", "MatMulV2", "MatMulV3", "BatchMatMulV2", "MatMulExt", "BatchMatMulExt", "Dense"}


def _norm_fmt(fmt: Any) -> str:
    f = "" if fmt is None or fmt is pd.NA or (isinstance(fmt, float) and fmt != fmt) else str(fmt)
    f = f.upper().replace("FORMAT_", "")
    return {"DEFAULTFORMAT": "ND", "NCHW": "ND", "FRACZ": "FRACTAL_Z"}.get(f, f)


@dataclass
class _Group:
    kind: str  # sandwich | param | back-to-back
    key: str
    culprit: str  # what the user should look at (op or parameter)
    trans: list[Any] = field(default_factory=list)  # IR TransData nodes
    culprit_nodes: list[Any] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # weights converted (kind param)
    layers: set[int] = field(default_factory=set)
    formats: str = ""
    kernel_names: list[str] = field(default_factory=list)  # profile-only detection
    path: str | None = None
    cost: dict[int, float] = field(default_factory=dict)  # µs per step by pipeline stage
    measured: bool = False
    how: str = ""

    def add(self, node: Any) -> None:
        if all(node is not t for t in self.trans):
            self.trans.append(node)


class TransDataExcess(Rule):
    """TransData format conversions that a consistent layout would avoid.

    What
        On Ascend, MatMul-like kernels want ``FRACTAL_NZ`` while many vector ops
        work on ``ND``; the backend inserts ``TransData`` where neighbours disagree.
        From the backend kernel graph (``graph_build_*``, ``hwopt_d_end_graph_*``)
        this rule finds (1) a TransData pair around a single op — ``NZ→ND``, the
        op, ``ND→NZ`` — i.e. one op that forces ``ND`` inside an ``NZ`` chain, in
        every layer, together with the TransData that feed that op's backward
        (nodes whose ``forward_unique_id`` is the op's); (2) TransData on a
        parameter (directly or through ``Load``): the weight is stored ND and
        re-laid-out for its MatMul on every use, forward and backward, every step,
        instead of once; (3) back-to-back TransData that cancel out. Without the IR,
        the sandwich is found in ``kernel_details.csv`` from the kernel order and the
        ``Input/Output Formats`` columns. TransData that an unaligned MatMul needs
        (its producer or consumer is a MatMul with a dim not a multiple of 16) are
        AL001's and left out; everything else is judged whatever the shapes.

    Why
        A TransData reads and writes the whole tensor (with padding to 16): pure
        data movement, often several per layer in forward and backward. The seed
        guide: remove redundant Cast and TransData operators.

    Example
        ``trans_TransData_13`` (FRACTAL_NZ → ND) before and ``trans_TransData_14``
        (ND → FRACTAL_NZ) after ``attention.merger_head_transpose`` in all 32 layers:
        64 conversions, 1.9 ms per step. Or: 28 weights (``attention.wq`` …
        ``feed_forward.w2``) converted ND → FRACTAL_NZ before each forward and backward
        MatMul: 56 TransData per micro batch, 10 ms per step.

    Fix
        Model code (no config key controls this; no patch). ND-forcing op: replace it
        with an op that accepts the special format, or fuse it into its neighbour.
        Weights: keep each weight in the layout its MatMul consumes — convert it once
        (at checkpoint load / parameter creation) instead of per use; do not reshape,
        transpose or otherwise touch the parameter in ``construct`` before the MatMul
        (use the MatMul's ``transpose_b``), so the backend can store it in FRACTAL_NZ.
        The finding names the op or weights and the source line of their consumer.

    Time per step: the group's TransData kernels (``kernel_details``, joined to the IR
    nodes by full name) summed over the profiled steps ÷ steps — removing the
    conversions removes those kernels. With pipeline parallel one rank per stage is
    measured with its own stage's IR, and the per-stage savings become step time as
    1F1B does (the slowest stage runs every micro batch on the critical path, the others
    one). Without a profile: bytes read + written at an assumed HBM bandwidth.
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
        units = stage_evidence(ctx)
        first = next((u.rank for u in units if u.rank is not None), None)
        step_us = ctx.step_time_us(first) if first is not None else None
        groups: dict[str, _Group] = {}
        for unit in units:
            ir = ctx.ir_graph("backend", unit.dumps) if unit.dumps is not None else None
            if ir is not None:
                found = self._from_ir(ir)
            elif unit.rank is not None:
                found = self._from_kernels(unit.rank)
            else:
                continue
            for key, g in found.items():
                self._cost(g, unit)
                main = groups.get(key)
                if main is None:
                    groups[key] = g
                    continue
                main.layers |= g.layers
                main.params += [p for p in g.params if p not in main.params]
                main.cost.update(g.cost)
                main.measured = main.measured or g.measured
                main.trans += g.trans
                main.kernel_names += [nm for nm in g.kernel_names if nm not in main.kernel_names]
        if not groups:
            ctx.skip("no TransData sandwich, parameter TransData or cancelling pair found")
            return
        busy = {u.stage: u.busy_us or 0.0 for u in units}
        micro = pipeline_micro_batches(ctx, units)
        for g in groups.values():
            fill_stages_without_ir(ctx, g.cost, units)
            saving = one_f_one_b_step_saving(g.cost, busy, micro) if len(g.cost) > 1 else sum(g.cost.values())
            f = self._finding(ctx, g, saving, step_us, first, micro)
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
    def _unaligned_matmul(node: Any) -> bool:
        """A MatMul-like node with a tensor dim (of its last two) not a multiple of 16: AL001's TransData."""
        if node is None or getattr(node, "op", None) not in _MATMUL:
            return False
        for t in [*node.in_types, *node.out_types]:
            shape = getattr(t, "shape", None) or ()
            if any(d is not None and d > 0 and d % 16 for d in shape[-2:]):
                return True
        return False

    @staticmethod
    def _param_of(ir: Any, node: Any) -> Any | None:
        """The parameter ``node`` reads (directly, or through ``Load``), else ``None``."""
        if not node.operand_refs:
            return None
        base = ir.resolve(node, node.operand_refs[0])
        if getattr(base, "op", None) == "Load" and base.operand_refs:
            base = ir.resolve(base, base.operand_refs[0])
        return base if base is not None and not hasattr(base, "op") else None

    def _from_ir(self, ir: Any) -> dict[str, _Group]:
        consumers: dict[tuple[str, int], list[Any]] = {}
        for n in ir.iter_nodes():
            for ref in n.operand_refs:
                if ref.kind == "node" and ref.index is not None:
                    consumers.setdefault((n.graph, ref.index), []).append(n)

        def users(n: Any) -> list[Any]:
            return consumers.get((n.graph, n.index), []) if n.index is not None else []

        groups: dict[str, _Group] = {}
        used: set[int] = set()
        trans = sorted((n for op in _TRANS for n in ir.nodes_by_op(op)), key=lambda n: n.line or 0)
        for t in trans:
            if id(t) in used:
                continue
            src, dst = self._formats(t)
            # (2) on a parameter: every use of the weight converts it again
            param = self._param_of(ir, t)
            if param is not None:
                name = (getattr(param, "name", None) or str(param)).removeprefix("%")
                g = groups.setdefault("param", _Group("param", "param", "weights", path=str(ir.path)))
                g.add(t)
                if name not in g.params:
                    g.params.append(name)
                g.formats = f"{src}→{dst}"
                g.culprit_nodes += [u for u in users(t) if u.op not in _TRANS][:1] if not g.culprit_nodes else []
                _add_layer(g, t)
                used.add(id(t))
                continue
            prod = ir.resolve(t, t.operand_refs[0]) if t.operand_refs else None
            if self._unaligned_matmul(prod) or any(self._unaligned_matmul(u) for u in users(t)):
                continue  # the padding conversions of an unaligned MatMul: AL001
            # (3) back-to-back
            if getattr(prod, "op", None) in _TRANS and id(prod) not in used:
                p_src, p_dst = self._formats(prod)
                if p_src == dst:
                    key = ".".join(cell_path_in_layer(t.scope)) or (t.scope or "")
                    g = groups.setdefault(f"b2b|{key}", _Group("back-to-back", key, key, path=str(ir.path)))
                    g.add(prod)
                    g.add(t)
                    g.formats = f"{p_src}→{p_dst}→{dst}"
                    _add_layer(g, t)
                    used.update({id(prod), id(t)})
                    continue
            # (1) sandwich: this TransData leaves a special format; its single consumer X feeds a TransData back
            if src in _SPECIAL and dst not in _SPECIAL:
                # a recompute copy (duplicated: Bool(1)) reads the same saved input: not a second consumer
                us = [u for u in users(t) if not getattr(u, "is_duplicated", False)]
                if len(us) != 1 or us[0].op in _TRANS or us[0].op in _MATMUL:
                    continue
                x = us[0]
                back = [b for b in users(x) if b.op in _TRANS and self._formats(b) == (dst, src)]
                if not back:
                    continue
                key = ".".join(cell_path_in_layer(x.scope)) or f"{x.op}"
                g = groups.setdefault(f"sandwich|{key}|{x.op}", _Group("sandwich", key, f"{x.op} ({key})", path=str(ir.path)))
                for n in (t, *back):
                    g.add(n)
                    used.add(id(n))
                if all(x is not c for c in g.culprit_nodes):
                    g.culprit_nodes.append(x)
                g.formats = f"{src}→{dst} … {dst}→{src}"
                _add_layer(g, x)
        # The backward of an ND-forcing op is ND-only too: TransData feeding it (or fed by it) belong to its group.
        by_uid = {c.unique_id: g for g in groups.values() if g.kind == "sandwich" for c in g.culprit_nodes if c.unique_id}
        for t in trans:
            if id(t) in used:
                continue
            prod = ir.resolve(t, t.operand_refs[0]) if t.operand_refs else None
            us = users(t)
            fids = {u.forward_unique_id for u in us} if us else set()
            g = None
            if us and len(fids) == 1 and next(iter(fids)) in by_uid:
                g = by_uid[next(iter(fids))]
            elif getattr(prod, "forward_unique_id", None) in by_uid:
                g = by_uid[prod.forward_unique_id]
            if g is not None:
                g.add(t)
                used.add(id(t))
        return groups

    # -- from kernel_details alone ------------------------------------------------------------------
    def _from_kernels(self, rank: Any) -> dict[str, _Group]:
        """Sandwiches in kernel order: TransData special→ND, one op X, TransData back (formats from the columns).

        Also counted: further TransData just before X into the same format (X's other inputs),
        and TransData of X's backward (``…/<cell>/Grad_<X>/TransData-op*``: MindSpore names a
        backward op after its forward op).
        """
        cols = rank.columns("kernels") or []
        if not {"input_formats", "output_formats", "start_ns"} <= set(cols):
            return {}
        want = ["name", "type", "start_ns", "duration_us", "input_formats", "output_formats", "input_shapes", "output_shapes"]
        k = rank.table("kernels", [c for c in want if c in cols])
        k = k[k["start_ns"].notna()].sort_values("start_ns").reset_index(drop=True)
        is_t = k["type"].isin(_TRANS).to_numpy()
        fin = k["input_formats"].map(_norm_fmt).to_numpy()
        fout = k["output_formats"].map(_norm_fmt).to_numpy()
        groups: dict[str, _Group] = {}
        if "input_shapes" in k:
            param = self._params_from_kernels(k, is_t, fout)
            if param is not None:
                groups["param"] = param
        unaligned = self._unaligned_kernel_matmuls(k)
        grads: dict[str, _Group] = {}
        for i in range(len(k) - 2):
            if not is_t[i] or is_t[i + 1] or not is_t[i + 2]:
                continue
            if not (fin[i] in _SPECIAL and fout[i] == fin[i + 2] and fout[i + 2] == fin[i]):
                continue
            if _cell_of(k.at[i, "name"]) in unaligned or _cell_of(k.at[i + 2, "name"]) in unaligned:
                continue  # conversions of an unaligned MatMul's cell: AL001
            x = str(k.at[i + 1, "name"])
            scope = kernel_scope(x) or x
            xtype = str(k.at[i + 1, "type"])
            key = ".".join(cell_path_in_layer(scope)) or xtype
            g = groups.setdefault(f"sandwich|{key}|{xtype}", _Group("sandwich", key, f"{xtype} ({key})"))
            j = i
            while j >= 0 and is_t[j] and fin[j] == fin[i] and fout[j] == fout[i]:
                nm = str(k.at[j, "name"])
                if nm not in g.kernel_names:
                    g.kernel_names.append(nm)
                j -= 1
            if str(k.at[i + 2, "name"]) not in g.kernel_names:
                g.kernel_names.append(str(k.at[i + 2, "name"]))
            g.formats = f"{fin[i]}→{fout[i]} … {fin[i + 2]}→{fout[i + 2]}"
            cell, _, op_seg = scope.rpartition("/")
            grads[f"{cell.split('/', 1)[-1]}/Grad_{op_seg.split('-op')[0]}/"] = g
            lay = layer_of_scope(scope)
            if lay is not None:
                g.layers.add(lay)
        if grads:
            for nm in k.loc[is_t, "name"].astype(str):
                for frag, g in grads.items():
                    if frag in nm and nm not in g.kernel_names:
                        g.kernel_names.append(nm)
        return groups

    @staticmethod
    def _unaligned_kernel_matmuls(k: pd.DataFrame) -> set[str]:
        """Cells (forward scope, see :func:`_cell_of`) of MatMul kernels with a dim (of an operand's last two)
        not a multiple of 16: the TransData launched in those cells pad for the MatMul (AL001)."""
        if "input_shapes" not in k:
            return set()
        out = set()
        for i in k.index[k["type"].astype(str).str.contains("MatMul")]:
            if any(d > 0 and d % 16 for shape in _shapes(k.at[i, "input_shapes"]) for d in shape[-2:]):
                out.add(_cell_of(k.at[i, "name"]))
        return out

    @staticmethod
    def _params_from_kernels(k: pd.DataFrame, is_t: Any, fout: Any) -> _Group | None:
        """TransData into a special format of a Linear's weight, from ``kernel_details`` alone.

        A forward MatMul kernel of a cell reads (activation, weight): its second input shape is
        the weight's. A TransData of the same cell (forward scope; the backward MatMul reads the
        weight through a conversion in the forward cell too) into a special format whose input
        has the weight's shape converts the weight — on every use — unless the MatMul also takes
        its activation in that format and the activation has the same shape (then it is ambiguous
        and left out).
        """
        names = k["name"].astype(str)
        scopes = names.map(kernel_scope)
        weights: dict[str, set[tuple[int, ...]]] = {}
        acts: dict[str, set[tuple[int, ...]]] = {}
        mm = k["type"].astype(str).str.contains("MatMul") & ~names.str.startswith("Gradients/") & scopes.notna()
        for i in k.index[mm]:
            cell = str(scopes[i]).rpartition("/")[0]
            ins = _shapes(k.at[i, "input_shapes"])
            if len(ins) < 2:
                continue
            weights.setdefault(cell, set()).add(ins[1])
            fmts = [_norm_fmt(f) for f in str(k.at[i, "input_formats"]).split(";")]
            if fmts and fmts[0] in _SPECIAL:  # the activation is converted too: a same-shaped TransData is ambiguous
                acts.setdefault(cell, set()).update([ins[0], *_shapes(k.at[i, "output_shapes"] if "output_shapes" in k else None)])
        if not weights:
            return None
        g = _Group("param", "param", "weights")
        for i in k.index[is_t & ~names.str.startswith("Gradients/").to_numpy() & scopes.notna().to_numpy()]:
            cell = str(scopes[i]).rpartition("/")[0]
            ins = _shapes(k.at[i, "input_shapes"])
            if fout[i] not in _SPECIAL or not ins or ins[0] not in weights.get(cell, ()) or ins[0] in acts.get(cell, ()):
                continue
            if names[i] not in g.kernel_names:
                g.kernel_names.append(names[i])
            lay = layer_of_scope(cell)
            weight = (f"layers.{lay}." if lay is not None else "") + ".".join(cell_path_in_layer(cell + "/x-op0"))
            if weight not in g.params:
                g.params.append(weight)
            if lay is not None:
                g.layers.add(lay)
            g.formats = f"{_norm_fmt(k.at[i, 'input_formats'])}→{fout[i]}"
        return g if g.kernel_names else None

    # -- time -----------------------------------------------------------------------------------------
    def _cost(self, g: _Group, unit: StageEvidence) -> None:
        """µs per step of the group's TransData kernels on ``unit``'s stage (bytes estimate without a profile)."""
        if g.trans:
            names = dict.fromkeys(n.kernel_full_name for n in g.trans if n.kernel_full_name in unit.times)
            measured = [unit.times[nm] for nm in names]
        elif g.kernel_names and unit.rank is not None:
            kd = unit.rank.table("kernels", ["name", "duration_us"])
            sums = kd.loc[kd["name"].isin(g.kernel_names)].groupby("name")["duration_us"].sum()
            measured = [float(v) for v in sums.to_numpy()]
        else:
            measured = []
        if measured:
            g.cost[unit.stage] = sum(measured) / unit.steps
            g.measured = True
            g.how = f"{len(measured)} TransData kernel(s) measured per stage"
            return
        nbytes = 0.0
        for n in g.trans:
            t = n.in_types[0] if n.in_types else None
            nbytes += 2 * (tensor_bytes(getattr(t, "shape", None), getattr(t, "dtype", None)) or 0.0)
        g.cost[unit.stage] = nbytes / (self.options.hbm_gbps * 1e3)
        g.how = f"estimated from {nbytes / 1e6:.2f} MB moved at {self.options.hbm_gbps:.0f} GB/s"

    # -- reporting --------------------------------------------------------------------------------------
    def _finding(self, ctx: RuleContext, g: _Group, cost: float, step_us: float | None, rank: Any, micro: int) -> Finding | None:
        share = 100.0 * cost / step_us if step_us else None
        if share is not None and share < self.options.min_share_pct:
            return None
        n_trans = len(g.trans) or len(g.kernel_names)
        layers = sorted(g.layers)
        in_layers = f" in {len(layers)} layer(s)" if layers else ""
        how = g.how
        if len(g.cost) > 1:
            per = ", ".join(f"stage {s}: {c:.1f}" for s, c in sorted(g.cost.items()))
            how += (f"; kernel µs per step by pipeline stage ({per}) → step time under 1F1B with {micro} micro batches "
                    "(the slowest stage carries every micro batch, the others one)")
        src = next((user_source(x) for x in g.culprit_nodes if user_source(x)), None)
        if g.kind == "sandwich":
            title = f"{g.culprit} forces TransData pairs ({g.formats}){in_layers}"
            why = "the op does not accept the special format its neighbours use, so the tensor is converted out and back"
            fix = ("replace it with an op that accepts that format, or fuse it into its neighbour (its backward converts "
                   "the gradient the same way)")
        elif g.kind == "param":
            cells = list(dict.fromkeys(_weight_cell(p) for p in g.params))
            title = (f"{len(g.params)} weight(s) converted {g.formats} by TransData on every step"
                     f"{in_layers} ({', '.join(cells[:4])}{', …' if len(cells) > 4 else ''})")
            why = ("each weight is stored in ND and re-laid-out for its MatMul at every use (forward and backward, "
                   "every micro batch) instead of once")
            fix = ("keep each weight in the layout its MatMul consumes: convert it once (at checkpoint load or parameter "
                   "creation) instead of per use, and do not reshape/transpose/cast the parameter in construct before the "
                   "MatMul (use the MatMul's transpose_b) so the backend can store it in FRACTAL_NZ")
        else:
            title = f"TransData pairs that cancel out ({g.formats}){in_layers}"
            why = "a conversion is immediately undone"
            fix = "remove the op between them that requests the round trip"
        msg = [f"{n_trans} TransData conversion(s): {why}."]
        if g.kind == "param":
            msg.append(f"Weights: {', '.join(g.params[:6])}{', …' if len(g.params) > 6 else ''}.")
        msg.append(f"Time: {cost:.1f} µs per step ({how})" + (f", {share:.2f}% of the step." if share is not None else "."))
        if src:
            msg.append(("Consumed at" if g.kind == "param" else "Created at") + f" {src[0]}:{src[1]}: `{src[2]}`.")
        msg.append(f"Fix: {fix} (model code; no config key controls this).")
        locations: list[Location] = []
        for n in (g.trans[:3] + g.culprit_nodes[:1]) if g.kind == "param" else (g.culprit_nodes[:2] + g.trans[:3]):
            locations.append(ir_location(str(g.path), n))
        if g.culprit_nodes:
            s = source_location(g.culprit_nodes[0])
            if s:
                locations.append(s)
        if g.kernel_names and rank is not None:
            src_file = rank.table_source("kernels")
            locations.append(Location(kind="profile", path=str(src_file[0]) if src_file else None, table="kernels",
                                      op=g.kernel_names[0], rank=rank.rank_id))
        evidence = [
            Evidence(name="transdata_count", value=n_trans),
            Evidence(name="transdata_time_per_step", value=round(cost, 3), unit="µs", source=how),
            Evidence(name="formats", value=g.formats),
        ]
        if layers:
            evidence.append(Evidence(name="layers", value=len(layers)))
        if g.params:
            evidence.append(Evidence(name="weights", value=len(g.params)))
        return Finding(
            code=self.code,
            rule=self.name,
            title=title,
            message=" ".join(msg),
            severity=severity_for_share(share),
            saving_us=cost,
            step_time_us=step_us,
            confidence=0.85 if g.measured else 0.55,
            evidence=evidence,
            locations=locations,
            tags=list(self.tags),
        )


def _add_layer(g: _Group, node: Any) -> None:
    lay = layer_of_scope(node.scope)
    if lay is not None:
        g.layers.add(lay)


def _cell_of(kernel_name: Any) -> str:
    """The forward cell a kernel belongs to: ``Gradients/`` and ``Grad_*`` segments and the op segment dropped."""
    scope = kernel_scope(str(kernel_name)) or str(kernel_name)
    segs = [x for x in scope.removeprefix("Gradients/").split("/")[:-1] if not x.startswith("Grad_")]
    return "/".join(segs)


def _shapes(text: Any) -> list[tuple[int, ...]]:
    """``"4096,4096;2048,4096"`` → ``[(4096, 4096), (2048, 4096)]`` (unparsable parts skipped)."""
    if text is None or text is pd.NA or not isinstance(text, str):
        return []
    out = []
    for part in text.strip('"').split(";"):
        try:
            out.append(tuple(int(d) for d in part.split(",") if d.strip()))
        except ValueError:
            continue
    return out


def _weight_cell(param: str) -> str:
    """``para9_model.layers.0.feed_forward.w1.weight`` → ``feed_forward.w1`` (the Linear the weight belongs to)."""
    name = param.split("_", 1)[1] if param.startswith("para") and "_" in param else param
    parts = name.split(".")
    if "layers" in parts:
        i = parts.index("layers")
        parts = parts[i + 2:]
    return ".".join(p for p in parts if p not in ("weight", "bias", "embedding_weight")) or name
