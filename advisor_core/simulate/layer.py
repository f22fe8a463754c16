"""One decoder layer as graph nodes: forward, recompute copies, backward (with kernels and costs).

The layer follows :func:`advisor_core.config.model_structure.llama_layer` op by op; shapes are
per device (tensor-parallel dims divided by ``model_parallel``). On top of the structure:

* row-parallel Linears get their expected ``forward_op`` AllReduce (``model_parallel > 1``);
  column-parallel inputs get the backward AllReduce of their summed input gradients;
* MatMuls with K or N not a multiple of 16 get ``TransData`` ND↔FRACTAL_NZ on their activation
  operands and outputs (kernel graph only), and pay the unaligned penalty in their cost;
* faults add casts (:class:`CastRoundTrip`), TransData (:class:`NDFormatOp`,
  :class:`ParamTransData`) and redistribution chains (:class:`StrategyMismatch`);
* recompute follows :func:`advisor_core.config.recompute.effective_recompute`: exactly the
  duplicated ops get a copy (``duplicated: Bool(1)``) run before the layer's backward, and the
  backward reads the copies; configured-but-not-duplicated ops only carry ``recompute: Bool(1)``.
  Full-layer recompute copies the whole forward and keeps only the layer input.

Nodes are returned in execution order per phase; :class:`LayerGraph` also carries the layer's
parameters, which backward node produces each gradient, and the activation bytes it keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from advisor_core.config.model_structure import Cell, LayerOp, LayerStructure
from advisor_core.simulate.buildctx import BuildCtx
from advisor_core.simulate.faults import CastRoundTrip, NDFormatOp, ParamTransData, StrategyMismatch
from advisor_core.simulate.kernels import on_aicpu
from advisor_core.simulate.nodes import BUILD, FRONT, PARALLEL, Arg, KernelSpec, Node, TType, lit, stable_hash
from advisor_core.simulate.strategy import op_strategy, render_strategy, unsplit_strategy

__all__ = ["LayerGraph", "build_layer", "LayerSpec"]

FP = FRONT | PARALLEL
_CAST_IDS = {"float16": 42, "float32": 43, "bfloat16": 45}

# Where MindFormers' legacy Llama calls each primitive (file, line, code) — synthetic line numbers.
_SOURCES: dict[str, tuple[str, int, str]] = {
    "MatMul": ("mindformers/modules/layers.py", 531, "x = self.matmul(x, weight)"),
    "Reshape": ("mindformers/modules/layers.py", 527, "x = self.reshape(x, (-1, self.in_channels))"),
    "SiLU": ("mindformers/models/llama/llama_layer.py", 72, "return self.silu(x)"),
    "Mul": ("mindformers/models/llama/llama_layer.py", 318, "hidden = self.mul(hidden, gate)"),
    "RmsNorm": ("mindformers/models/llama/llama_layer.py", 141, "output = self.norm(x, self.weight)"),
    "Add": ("mindformers/models/llama/llama_transformer.py", 512, "h = self.add(x, h)"),
    "RotaryMul": ("mindformers/models/llama/llama_layer.py", 198, "xq_out = self.rotary_mul(xq, freqs_cos)"),
    "FlashAttentionScore": ("mindformers/modules/flash_attention.py", 221, "output = self.flash_attention(q, k, v, attn_mask)"),
    "Transpose": ("mindformers/models/llama/llama_transformer.py", 355, "x = self.merger_head_transpose(x, (0, 2, 1, 3))"),
}
_CAST_SOURCES = {
    "cast": ("mindformers/models/llama/llama_layer.py", 140, "x = self.cast(x, self.compute_type)"),
    "rcast": ("mindformers/models/llama/llama_layer.py", 142, "output = self.cast(output, original_type)"),
    "rotary_cast": ("mindformers/models/llama/llama_layer.py", 196, "xq = self.cast(xq, self.rotary_dtype)"),
    "rotary_rcast": ("mindformers/models/llama/llama_layer.py", 201, "xq_out = self.cast(xq_out, original_type)"),
}
_LAYER_SOURCE = ("mindformers/models/llama/llama_transformer.py", 497, "def construct(self, x, freqs_cis, mask=None):")


@dataclass
class LayerSpec:
    """What varies per layer: index, recompute choice, faults."""

    index: int
    configured: frozenset[str]
    duplicated: frozenset[str]
    full_recompute: bool
    saved: frozenset[str]  # tensors kept for backward (after recompute)


@dataclass
class LayerGraph:
    fwd: list[Node] = field(default_factory=list)
    rc: list[Node] = field(default_factory=list)
    bwd: list[Node] = field(default_factory=list)
    out_key: str = ""
    out_type: TType | None = None
    params: list[tuple[str, TType]] = field(default_factory=list)
    param_grad: dict[str, str] = field(default_factory=dict)
    saved: list[tuple[str, int, str]] = field(default_factory=list)  # (tensor, bytes, producer key)
    redistribution: list[str] = field(default_factory=list)  # keys of redistribution_op nodes
    bwd_out: str = ""  # key of the node producing the gradient of the layer input


@dataclass
class _Unit:
    """A forward op as built: its main node, the keys of its tensor inputs, extras for backward."""

    op: LayerOp
    main: Node
    in_keys: list[str]
    in_types: list[TType]
    weight: str | None = None  # parameter name
    weight_key: str | None = None  # key the MatMul reads the weight from
    mm: tuple[int, int, int] | None = None
    redistribute: bool = False
    full_types: list[TType] | None = None  # input types after redistribution (whole mp axis)
    nd_forced: bool = False
    extra_bwd: list[str] = field(default_factory=list)


class _LayerBuilder:
    def __init__(self, ctx: BuildCtx, structure: LayerStructure, spec: LayerSpec, x_key: str, x_type: TType,
                 faults: Iterable[object]) -> None:
        self.ctx = ctx
        self.w = ctx.w
        self.st = structure
        self.spec = spec
        self.l = spec.index
        self.faults = list(faults)
        self.g = LayerGraph()
        self.reg: dict[str, tuple[str, TType]] = {"x": (x_key, x_type)}
        self.nodes_by_key: dict[str, Node] = {}
        self.units: list[_Unit] = []
        self.loads: dict[str, tuple[str, TType]] = {}
        self.layer_prefix = f"{ctx.root}/model-LlamaModel/layers-CellList/{self.l}-LLamaDecodeLayer"
        self.vals = {"b": self.w.micro_batch_size, "s": self.w.seq, "h": self.w.hidden, "f": self.w.ffn,
                     "q": self.w.q, "k": self.w.kv}
        self.rc_key_of: dict[str, str] = {}
        self.uid_of: dict[str, str] = {}
        self.rc_ids: dict[str, int] = {}
        self.nd_ops = {f.op for f in self.faults if isinstance(f, NDFormatOp)}
        self.aicpu_ops = {f.op for f in self.faults if isinstance(f, NDFormatOp) and f.core == "AI_CPU"}
        self.mismatch_ops = {f.op for f in self.faults if isinstance(f, StrategyMismatch)} if self.w.mp > 1 else set()
        self.roundtrips = [f for f in self.faults if isinstance(f, CastRoundTrip)]
        pt = [f for f in self.faults if isinstance(f, ParamTransData)]
        self.param_td: tuple[str, ...] | None = (pt[0].params or ("",)) if pt else None

    # -- helpers -------------------------------------------------------------------------------
    def key(self, suffix: str) -> str:
        return f"L{self.l}.{suffix}"

    def add(self, n: Node, where: list[Node]) -> Node:
        self.nodes_by_key[n.key] = n
        where.append(n)
        return n

    def cell_prefix(self, path: tuple[str, ...]) -> str:
        parts = [self.layer_prefix]
        cell: Cell | None = self.st.tree
        for name in path[:-1]:
            child = cell.child(name) if cell is not None else None
            cls = child.cls if child is not None else "Cell"
            parts.append(f"{name}-{cls}")
            cell = child
        prefix = "/".join(parts)
        return ("recompute_" + prefix) if self.spec.full_recompute else prefix

    def grad_prefix(self, fwd_prefix: str, prim: str) -> str:
        base = fwd_prefix[len("recompute_"):] if fwd_prefix.startswith("recompute_") else fwd_prefix
        return f"Gradients/{base}/Grad_{prim}"

    def shape_of(self, op: LayerOp, unsplit: bool = False) -> tuple[int, ...]:
        out = []
        for sym in op.shape:
            v = 1
            for part in sym.split("*"):
                v *= self.vals[part]
            if sym == op.split and not unsplit:
                v //= self.w.mp
            out.append(v)
        return tuple(out)

    def dtype_of(self, op: LayerOp) -> str:
        return "float32" if op.dtype == "fp32" else self.ctx.cdtype

    def sources(self, prim: str, op: LayerOp | None) -> tuple[str, ...]:
        c = self.ctx
        outer = c.source(_LAYER_SOURCE[0], _LAYER_SOURCE[1], _LAYER_SOURCE[2], 4)
        if prim == "Cast" and op is not None:
            kind = "rotary_" if "rotary" in op.id else ""
            kind += "rcast" if op.attr == "rcast" else "cast"
            f, ln, code = _CAST_SOURCES[kind]
        elif prim in _SOURCES:
            f, ln, code = _SOURCES[prim]
        else:
            return (outer,)
        return (outer, c.source(f, ln, code))

    def recompute_attrs(self, op_id: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(primitive attrs, cnode attrs) carrying recompute evidence for a forward op."""
        prim_a: list[tuple[str, str]] = []
        cnode: list[tuple[str, str]] = [("checkpoint", "Bool(1)")]
        if self.spec.full_recompute:
            cnode.append(("recompute", "Bool(1)"))  # ids are given per copied node in build_recompute
        elif op_id in self.spec.duplicated:
            rid = self.rc_ids.setdefault(op_id, next(self.ctx.rc_id))
            prim_a.append(("recompute", "Bool(1)"))
            cnode += [("recompute_sub_graph", f"U64({self.l})"), ("recompute_id", f"I64({rid})"), ("recompute", "Bool(1)"),
                      ("need_cse_after_recompute", "Bool(1)")]
        elif op_id in self.spec.configured:
            prim_a.append(("recompute", "Bool(1)"))
            cnode.append(("recompute", "Bool(1)"))
        return prim_a, cnode

    def primal(self, uid: str) -> list[tuple[str, str]]:
        return [("unique_id", f'"{uid}"'), ("micro", "I64(0)")]

    def transdata(self, src_key: str, t_in: TType, src_fmt: str, dst_fmt: str, prefix: str, phase: str,
                  where: list[Node], name: str) -> tuple[str, TType]:
        tin = t_in.with_fmt(src_fmt)
        tout = t_in.with_fmt(dst_fmt)
        fmt_name = {"ND": "ND", "FRACTAL_NZ": "FRACTAL_NZ"}
        n = Node(self.key(name), "TransData", prefix, phase, self.l, [Arg(ref=src_key)], [tin], tout, ir=BUILD,
                 frontend_prim=False,
                 prim_attrs=[("src_format", f'"{fmt_name[src_fmt]}"'), ("dst_format", f'"{fmt_name[dst_fmt]}"'),
                             ("input_names", "(x)"), ("output_names", "(output)")],
                 cnode_attrs=[],
                 kernel=self.ctx.vector("TransData", [tin], tout))
        self.add(n, where)
        return n.key, tout

    # -- forward -------------------------------------------------------------------------------
    def load(self, pname: str, shape: tuple[int, ...], dtype: str, prefix: str) -> tuple[str, TType]:
        if pname in self.loads:
            return self.loads[pname]
        full = f"model.layers.{self.l}.{pname}"
        tparam = TType(shape, dtype, "ND", full)
        tval = TType(shape, dtype)
        n = Node(self.key(f"load.{pname}"), "Load", prefix, "fwd", self.l, [Arg(param=full), lit("UMonad[U]", "UMonad")],
                 [tparam, None], tval, frontend_prim=False,
                 cnode_attrs=[("checkpoint", "Bool(1)")], primal_attrs=[("unique_id", f'"{self.ctx.next_uid()}"')])
        self.add(n, self.g.fwd)
        self.g.params.append((full, tparam))
        key, t = n.key, tval
        if self.w.dp > 1:  # replicated over data parallel: its gradient is reduced by the mirror's bprop
            mirror = Node(self.key(f"mirror.{pname}"), "_MirrorOperator", prefix, "fwd", self.l, [Arg(ref=key)], [t], t,
                          ir=PARALLEL, instance="mirror_op", frontend_prim=False,
                          prim_attrs=[("group", '"@@DPGROUP@@"'), ("dev_num", f"I64({self.w.dp})"), ("mean_flag", "Bool(0)"),
                                      ("fusion", "I64(1)"), ("group_ranks", '"@@DPRANKS@@"')])
            self.add(mirror, self.g.fwd)
            key = mirror.key
        self.loads[pname] = (key, t)
        return key, t

    def weight_for_matmul(self, pname: str, shape: tuple[int, ...], prefix: str, phase: str, where: list[Node],
                          tag: str) -> tuple[str, TType]:
        key, t = self.load(pname, shape, self.w.param_dtype, prefix)
        if self.w.param_dtype != self.ctx.cdtype:
            cast = Node(self.key(f"wcast.{pname}.{tag}"), "Cast", prefix, phase, self.l,
                        [Arg(ref=key), lit(f"I64({_CAST_IDS[self.ctx.cdtype]})", "Int64")], [t, None],
                        t.with_dtype(self.ctx.cdtype), instance="cast",
                        prim_attrs=[("output_names", "[output]"), ("input_names", "[x, dst_type]")],
                        build_attrs=[("is_backend_cast", "Bool(0)")],
                        kernel=self.ctx.vector("Cast", [t], t.with_dtype(self.ctx.cdtype)))
            self.add(cast, where)
            key, t = cast.key, cast.out  # type: ignore[assignment]
        if self.param_td is not None and any(pname.endswith(p) for p in self.param_td):
            key, t = self.transdata(key, t, "ND", "FRACTAL_NZ", prefix, phase, where, f"ptd.{pname}.{tag}")
        return key, t

    def build_forward(self) -> None:
        for op in self.st.ops:
            self.forward_op(op)
        key, t = self.reg["y"]
        self.g.out_key, self.g.out_type = key, t

    def forward_op(self, op: LayerOp) -> None:
        prefix = self.cell_prefix(op.path)
        in_keys: list[str] = []
        in_types: list[TType] = []
        weight = None
        weight_key = None
        for name in op.inputs:
            if name.startswith("param:"):
                weight = name[6:]
                continue
            k, t = self.reg[name]
            in_keys.append(k)
            in_types.append(t)
        unit = _Unit(op, None, in_keys, in_types, weight=weight)  # type: ignore[arg-type]
        redistribute = op.id in self.mismatch_ops
        unit.redistribute = redistribute
        out_t = TType(self.shape_of(op, unsplit=redistribute), self.dtype_of(op))
        uid = self.ctx.next_uid()
        self.uid_of[op.id] = uid
        prim_a, cnode_a = self.recompute_attrs(op.id)
        args: list[Arg]
        kernel: KernelSpec | None = None
        strategy = None
        ndims = [len(t.shape) for t in in_types]
        prim_attrs: list[tuple[str, str]] = []
        instance = op.attr
        build_attrs: list[tuple[str, str]] = []

        if redistribute:
            in_keys, in_types = self.redistribution_in(op, prefix, in_keys, in_types)
            unit.full_types = list(in_types)
        if op.id in self.nd_ops:
            unit.nd_forced = True
            new_keys = []
            for i, (k, t) in enumerate(zip(in_keys, in_types)):
                nk, _ = self.transdata(k, t, "FRACTAL_NZ", "ND", prefix, "fwd", self.g.fwd, f"nd_in{i}.{op.id}")
                new_keys.append(nk)
            in_keys = new_keys

        if op.prim == "MatMul":
            in_dim, out_dim = op.flops.split("*")[-2:]  # "2*b*s*{in}*{out}"
            col = op.comm is None
            kdim = self.vals[in_dim] // (1 if col else self.w.mp)
            ndim = self.vals[out_dim] // (self.w.mp if col else 1)
            m = in_types[0].shape[0] if len(in_types[0].shape) == 2 else in_types[0].shape[0] * in_types[0].shape[1]
            unit.mm = (m, kdim, ndim)
            wkey, wt = self.weight_for_matmul(weight, (ndim, kdim), prefix, "fwd", self.g.fwd, "f")  # type: ignore[arg-type]
            unit.weight_key = wkey
            a_key, a_t = in_keys[0], in_types[0]
            unaligned = bool(kdim % 16 or ndim % 16)
            if unaligned:
                a_key, a_t = self.transdata(a_key, a_t, "ND", "FRACTAL_NZ", prefix, "fwd", self.g.fwd, f"ua_in.{op.id}")
            args = [Arg(ref=a_key), Arg(ref=wkey), lit("Bool(0)", "Bool"), lit("Bool(1)", "Bool")]
            types: list[TType | None] = [a_t, wt, None, None]
            kernel = self.ctx.matmul(m, kdim, ndim, self.ctx.cdtype)
            strategy = op_strategy(op, [2, 2], self.w.dp, self.w.mp)
            prim_attrs = [("transpose_a", "Bool(0)"), ("transpose_b", "Bool(1)"), ("input_names", "[x1, x2]"),
                          ("output_names", "[output]")]
            out_t = TType((m, ndim), self.ctx.cdtype)
        elif op.prim == "Reshape":
            shape_txt = "(" + ", ".join(f"I64({d})" for d in out_t.shape) + ")"
            args = [Arg(ref=in_keys[0]), lit(shape_txt, f"Tuple[Int64*{len(out_t.shape)}]")]
            types = [in_types[0], None]
        elif op.prim == "Cast":
            dst = out_t.dtype
            args = [Arg(ref=in_keys[0]), lit(f"I64({_CAST_IDS[dst]})", "Int64")]
            types = [in_types[0], None]
            kernel = self.ctx.vector("Cast", [in_types[0]], out_t)
            prim_attrs = [("output_names", "[output]"), ("input_names", "[x, dst_type]")]
            build_attrs = [("is_backend_cast", "Bool(0)")]
            strategy = op_strategy(op, ndims, self.w.dp, self.w.mp)
        elif op.prim == "RmsNorm":
            gkey, gt = self.load(weight, (self.w.hidden,), "float32", prefix)  # type: ignore[arg-type]
            args = [Arg(ref=in_keys[0]), Arg(ref=gkey)]
            types = [in_types[0], gt]
            kernel = self.ctx.vector("RmsNorm", [in_types[0], gt], out_t)
            strategy = op_strategy(op, ndims + [1], self.w.dp, self.w.mp)
            prim_attrs = [("epsilon", "F32(1e-05)")]
        elif op.prim == "FlashAttentionScore":
            args = [Arg(ref=k) for k in in_keys]
            types = list(in_types)
            b, s = self.vals["b"], self.vals["s"]
            flops = 4.0 * b * s * s * (self.w.q // self.w.mp)
            kernel = self.ctx.flash("FlashAttentionScore", flops)
            strategy = op_strategy(op, ndims, self.w.dp, self.w.mp)
            prim_attrs = [("head_num", f"I64({self.w.heads // self.w.mp})"), ("input_layout", '"BSH"'),
                          ("scale_value", f"F32({1.0 / (self.w.head_dim ** 0.5):.6g})")]
        else:  # elementwise vector ops: SiLU, Mul, Add, RotaryMul, Transpose
            args = [Arg(ref=k) for k in in_keys]
            types = list(in_types)
            if op.prim == "Transpose":
                args.append(lit("(I64(0), I64(1), I64(2))", "Tuple[Int64*3]"))
                types.append(None)
            kernel = self.ctx.vector(op.prim, list(in_types), out_t)
            strategy = (unsplit_strategy(ndims, self.w.dp) if redistribute
                        else op_strategy(op, ndims, self.w.dp, self.w.mp))

        main = Node(self.key(op.id), op.prim, prefix, "fwd", self.l, args, types, out_t, ir=FP | BUILD if op.prim != "Reshape" else FP,
                    instance=instance, prim_attrs=prim_a + prim_attrs + (
                        [("in_strategy", render_strategy(strategy))] if strategy is not None else []),
                    cnode_attrs=cnode_a, primal_attrs=self.primal(uid),
                    strategy=render_strategy(strategy) if strategy is not None else None,
                    sources=self.sources(op.prim, op), kernel=kernel, build_attrs=build_attrs, op_id=op.id)
        self.add(main, self.g.fwd)
        unit.main = main
        out_key = main.key
        if op.prim == "MatMul" and unit.mm is not None and (unit.mm[1] % 16 or unit.mm[2] % 16):
            out_key, _ = self.transdata(out_key, out_t, "FRACTAL_NZ", "ND", prefix, "fwd", self.g.fwd, f"ua_out.{op.id}")
        if unit.nd_forced:
            out_key, _ = self.transdata(out_key, out_t, "ND", "FRACTAL_NZ", prefix, "fwd", self.g.fwd, f"nd_out.{op.id}")
        if redistribute:
            out_key, out_t = self.redistribution_out(op, prefix, out_key, out_t)
        if op.comm == "AllReduce" and self.w.mp > 1:
            fullname_hint = f"{prefix}/AllReduce#{op.id}"
            ar = Node(self.key(f"fwd_ar.{op.id}"), "AllReduce", prefix, "fwd", self.l, [Arg(ref=out_key)], [out_t], out_t,
                      instance=f"forward_op_{stable_hash(fullname_hint)}", frontend_prim=False,
                      prim_attrs=[("comm_reuse", "Bool(1)"), ("group", '"@@MPGROUP@@"'), ("fusion", "I64(0)"),
                                  ("op", '"sum"'), ("rank_list", "@@MPRANKLIST@@"), ("group_ranks", '"@@MPRANKS@@"'),
                                  ("index", "I64(0)"), ("no_eliminate", "Bool(1)")],
                      cnode_attrs=[("checkpoint", "Bool(1)")],
                      primal_attrs=[("unique_id", f'"{self.ctx.next_uid()}"'), ("forward_comm_node_unique_id", f'"{uid}"'),
                                    ("micro", "I64(0)")],
                      kernel=self.ctx.comm("AllReduce", "mp", out_t.nbytes))
            self.add(ar, self.g.fwd)
            out_key = ar.key
        for rt in self.roundtrips:
            if rt.after in (op.id, op.dotted) and out_t.dtype == "float32":
                out_key = self.cast_roundtrip(rt, prefix, out_key, out_t)
        self.reg[op.out] = (out_key, out_t)
        self.units.append(unit)

    def cast_roundtrip(self, rt: CastRoundTrip, prefix: str, key: str, t: TType) -> str:
        file, _, line = rt.source.rpartition(":")
        src = (self.ctx.source(_LAYER_SOURCE[0], _LAYER_SOURCE[1], _LAYER_SOURCE[2], 4),
               self.ctx.source(file, int(line) if line.isdigit() else 1, rt.code))
        low = TType(t.shape, self.ctx.cdtype if self.ctx.cdtype != "float32" else "float16")
        for i, (src_t, dst_t) in enumerate(((t, low), (low, t))):
            n = Node(self.key(f"roundtrip{i}.{rt.after}"), "Cast", prefix, "fwd", self.l,
                     [Arg(ref=key), lit(f"I64({_CAST_IDS[dst_t.dtype]})", "Int64")], [src_t, None], dst_t, instance="cast",
                     prim_attrs=[("output_names", "[output]"), ("input_names", "[x, dst_type]")],
                     build_attrs=[("is_backend_cast", "Bool(0)")], cnode_attrs=[("checkpoint", "Bool(1)")],
                     primal_attrs=self.primal(self.ctx.next_uid()), sources=src,
                     kernel=self.ctx.vector("Cast", [src_t], dst_t, category="cast"), op_id=f"roundtrip.{rt.after}")
            self.add(n, self.g.fwd)
            fake = LayerOp(f"roundtrip{i}.{rt.after}", ("cast",), "Cast", ("?",), f"?roundtrip{i}", ("b",))
            self.units.append(_Unit(fake, n, [key], [src_t]))
            key = n.key
        return key

    # -- redistribution (strategy mismatch fault) ------------------------------------------------
    def redist_node(self, prim: str, name: str, prefix: str, args: list[Arg], types: list[TType | None], out: TType,
                    where: list[Node], phase: str, extra_attrs: list[tuple[str, str]], kernel: KernelSpec | None,
                    out_tuple: int = 1, instance: bool = True) -> Node:
        hint = f"{prefix}/{name}"
        n = Node(self.key(name), prim, prefix, phase, self.l, args, types, out,
                 instance=f"redistribution_op_{stable_hash(hint)}{prim}" if instance else None,
                 frontend_prim=prim not in ("AllGather",), prim_attrs=extra_attrs, kernel=kernel, out_tuple=out_tuple,
                 cnode_attrs=[("checkpoint", "Bool(1)")], ir=(FP | BUILD) if phase == "fwd" else (FRONT | BUILD))
        self.add(n, where)
        if instance:
            self.g.redistribution.append(n.key)
        return n

    def gather_full(self, key: str, t: TType, prefix: str, where: list[Node], phase: str, tag: str) -> tuple[str, TType]:
        """AllGather on axis 0 + Split + Concat: the sharded last axis made whole.

        As MindSpore's ``InsertRedistribution`` writes it: the Split's tuple output is taken
        apart by one ``TupleGetItem`` per piece and packed by a ``MakeTuple`` for the Concat
        (``InsertMakeTuple`` in ``step_parallel``); those two carry no instance name and launch
        no kernel.
        """
        mp = self.w.mp
        gathered = TType((t.shape[0] * mp,) + t.shape[1:], t.dtype)
        full = TType(t.shape[:-1] + (t.shape[-1] * mp,), t.dtype)
        ag = self.redist_node("AllGather", f"{tag}.allgather", prefix, [Arg(ref=key)], [t], gathered, where, phase,
                              [("group", '"@@MPGROUP@@"'), ("rank_size", f"I64({mp})"), ("group_ranks", '"@@MPRANKS@@"')],
                              self.ctx.comm("AllGather", "mp", gathered.nbytes), instance=phase == "fwd")
        sp = self.redist_node("Split", f"{tag}.split", prefix,
                              [Arg(ref=ag.key), lit("I64(0)", "Int64"), lit(f"I64({mp})", "Int64")], [gathered, None, None], t,
                              where, phase, [("axis", "I64(0)"), ("output_num", f"I64({mp})")],
                              self.ctx.vector("Split", [gathered], t, out_count=mp), out_tuple=mp, instance=phase == "fwd")
        ir = sp.ir
        items = [self.add(Node(self.key(f"{tag}.getitem{i}"), "TupleGetItem", prefix, phase, self.l,
                               [Arg(ref=sp.key), lit(f"I64({i})", "Int64")], [t, None], t, ir=ir, frontend_prim=False),
                          where) for i in range(mp)]
        mt = self.add(Node(self.key(f"{tag}.maketuple"), "MakeTuple", prefix, phase, self.l, [Arg(ref=n.key) for n in items],
                           [t] * mp, t, ir=ir, frontend_prim=False, out_tuple=mp), where)
        cc = self.redist_node("Concat", f"{tag}.concat", prefix, [Arg(ref=mt.key), lit(f"I64({len(t.shape) - 1})", "Int64")],
                              [t, None], full, where, phase, [("axis", f"I64({len(t.shape) - 1})")],
                              self.ctx.vector("Concat", [gathered], full), instance=phase == "fwd")
        return cc.key, full

    def slice_shard(self, key: str, full: TType, prefix: str, where: list[Node], phase: str, tag: str) -> tuple[str, TType]:
        shard = TType(full.shape[:-1] + (full.shape[-1] // self.w.mp,), full.dtype)
        nd = len(full.shape)
        begin = "(" + ", ".join("I64(0)" for _ in range(nd)) + ")"
        end = "(" + ", ".join(f"I64({d})" for d in shard.shape) + ")"
        ones = "(" + ", ".join("I64(1)" for _ in range(nd)) + ")"
        tup = f"Tuple[Int64*{nd}]"
        ss = self.redist_node("StridedSlice", f"{tag}.slice", prefix,
                              [Arg(ref=key), lit(begin, tup), lit(end, tup), lit(ones, tup)], [full, None, None, None], shard,
                              where, phase, [("begin_mask", "I64(0)"), ("end_mask", "I64(0)"), ("ellipsis_mask", "I64(0)"),
                                             ("new_axis_mask", "I64(0)"), ("shrink_axis_mask", "I64(0)")],
                              self.ctx.vector("StridedSlice", [full], shard), instance=phase == "fwd")
        return ss.key, shard

    def redistribution_in(self, op: LayerOp, prefix: str, keys: list[str], types: list[TType]) -> tuple[list[str], list[TType]]:
        nk, nt = [], []
        for i, (k, t) in enumerate(zip(keys, types)):
            k2, t2 = self.gather_full(k, t, prefix, self.g.fwd, "fwd", f"redist_in{i}.{op.id}")
            nk.append(k2)
            nt.append(t2)
        return nk, nt

    def redistribution_out(self, op: LayerOp, prefix: str, key: str, t: TType) -> tuple[str, TType]:
        return self.slice_shard(key, t, prefix, self.g.fwd, "fwd", f"redist_out.{op.id}")

    # -- recompute copies ----------------------------------------------------------------------
    def build_recompute(self) -> None:
        if self.spec.full_recompute:
            chosen = [n for n in self.g.fwd if n.prim not in ("Load", "_MirrorOperator")]
        else:
            chosen = [u.main for u in self.units if u.op.id in self.spec.duplicated and u.main.op_id == u.op.id]
        for n in chosen:
            rid = self.rc_ids.get(n.op_id or "", None)
            if self.spec.full_recompute:
                rid = next(self.ctx.rc_id)
                n.cnode_attrs = [("checkpoint", "Bool(1)"), ("recompute_sub_graph", f"U64({self.l})"),
                                 ("recompute_id", f"I64({rid})"), ("recompute", "Bool(1)"), ("need_cse_after_recompute", "Bool(1)")]
            cnode = [("checkpoint", "Bool(1)")]
            if rid is not None:
                cnode = [("recompute_sub_graph", f"U64({self.l})"), ("recompute_id", f"I64({rid})"), ("duplicated", "Bool(1)"),
                         ("need_cse_after_recompute", "Bool(1)")]
            args = [Arg(ref=self.rc_key_of.get(a.ref, a.ref)) if a.ref else a for a in n.args]
            prim_a = [a for a in n.prim_attrs if a[0] == "recompute"] if not self.spec.full_recompute else []
            rest = [a for a in n.prim_attrs if a[0] != "recompute"]
            copy = Node(n.key + ".rc", n.prim, n.prefix, "rc", self.l, args, list(n.in_types), n.out, ir=n.ir & (FRONT | BUILD),
                        instance=n.instance, prim_attrs=rest + prim_a, cnode_attrs=cnode,
                        primal_attrs=[("micro", "I64(0)")], sources=n.sources, frontend_prim=n.frontend_prim,
                        kernel=_copy_kernel(n.kernel), build_attrs=n.build_attrs, out_tuple=n.out_tuple, op_id=n.op_id,
                        rc_of=n.key)
            if n.kernel is not None and n.kernel.comm is None:
                copy.kernel.category = "recompute"  # type: ignore[union-attr]
            self.add(copy, self.g.rc)
            self.rc_key_of[n.key] = copy.key

    # -- backward ------------------------------------------------------------------------------
    def saved_ref(self, key: str) -> Arg:
        return Arg(ref=self.rc_key_of.get(key, key))

    def bnode(self, prim: str, name: str, fwd: Node, args: list[Arg], types: list[TType | None], out: TType | None,
              kernel: KernelSpec | None, *, ir: int = FRONT | BUILD, out_tuple: int = 1, grad_of: str | None = None) -> Node:
        uid = self.uid_of.get(fwd.op_id or "", None)
        primal = []
        if uid is not None:
            primal = [("forward_node_name", f'"{fwd.prim}_{uid}"'), ("forward_unique_id", f'"{uid}"'), ("micro", "I64(0)")]
        n = Node(self.key(f"bwd.{name}"), prim, self.grad_prefix(fwd.prefix, grad_of or fwd.prim), "bwd", self.l, args, types,
                 out, ir=ir, cnode_attrs=[("checkpoint", "Bool(1)")], primal_attrs=primal, kernel=kernel,
                 frontend_prim=prim not in ("AllReduce", "AllGather", "TransData"), out_tuple=out_tuple, op_id=fwd.op_id)
        self.add(n, self.g.bwd)
        return n

    def build_backward(self) -> None:
        g_key, g_t = self.g.out_key, self.g.out_type  # incoming gradient (dy of the layer output)
        col_groups = self.column_groups()
        for unit in reversed(self.units):
            op, main = unit.op, unit.main
            if main.prim == "Reshape":
                n = self.bnode("Reshape", op.id, main, [Arg(ref=g_key)], [main.out], main.in_types[0], None, ir=FRONT)
                g_key = n.key
                continue
            dy_t = main.out
            if unit.redistribute:
                dy_t_shard = TType(dy_t.shape[:-1] + (dy_t.shape[-1] // self.w.mp,), dy_t.dtype)
                g_key, dy_t = self.gather_full(g_key, dy_t_shard, main.prefix, self.g.bwd, "bwd", f"bwd_redist.{op.id}")
            if unit.nd_forced:
                g_key, _ = self.transdata(g_key, dy_t, "FRACTAL_NZ", "ND", self.grad_prefix(main.prefix, main.prim), "bwd",
                                          self.g.bwd, f"bwd_nd_in.{op.id}")
            g_key = self.backward_op(unit, g_key, dy_t)
            if unit.redistribute:
                for i, t in enumerate(unit.in_types):
                    g_key, _ = self.slice_shard(g_key, TType(t.shape[:-1] + (t.shape[-1] * self.w.mp,), t.dtype),
                                                main.prefix, self.g.bwd, "bwd", f"bwd_redist_out{i}.{op.id}")
            if op.id in col_groups:
                g_key = self.accumulate_col_grads(main, col_groups[op.id], g_key)
        self.g.bwd_out = g_key

    def backward_op(self, unit: _Unit, g_key: str, dy_t: TType) -> str:
        op, main = unit.op, unit.main
        p = main.prim
        gp = self.grad_prefix(main.prefix, p)
        if p == "MatMul":
            m, k, n = unit.mm  # type: ignore[misc]
            unaligned = bool(k % 16 or n % 16)
            dy = TType((m, n), self.ctx.cdtype)
            if unaligned:
                g_key, _ = self.transdata(g_key, dy, "ND", "FRACTAL_NZ", gp, "bwd", self.g.bwd, f"ua_dy.{op.id}")
            wkey, wt = self.weight_for_matmul(unit.weight, (n, k), main.prefix, "bwd", self.g.bwd, "b")  # type: ignore[arg-type]
            dx_t = TType((m, k), self.ctx.cdtype)
            dx = self.bnode("MatMul", f"{op.id}.dx", main, [Arg(ref=g_key), Arg(ref=wkey), lit("Bool(0)", "Bool"), lit("Bool(0)", "Bool")],
                            [dy, wt, None, None], dx_t, self.ctx.matmul(m, n, k, self.ctx.cdtype))
            x_key = unit.in_keys[0]
            dw_t = TType((n, k), self.ctx.cdtype)
            dw = self.bnode("MatMul", f"{op.id}.dw", main,
                            [Arg(ref=g_key), self.saved_ref(x_key), lit("Bool(1)", "Bool"), lit("Bool(0)", "Bool")],
                            [dy, unit.in_types[0], None, None], dw_t,
                            self.ctx.matmul(n, m, k, self.ctx.cdtype, weight=(k, n)))  # over the tokens
            out_key = dx.key
            if unaligned:
                out_key, _ = self.transdata(dx.key, dx_t, "FRACTAL_NZ", "ND", gp, "bwd", self.g.bwd, f"ua_dx.{op.id}")
                self.transdata(dw.key, dw_t, "FRACTAL_NZ", "ND", gp, "bwd", self.g.bwd, f"ua_dw.{op.id}")
            self.g.param_grad[f"model.layers.{self.l}.{unit.weight}"] = dw.key
            return out_key
        saved = [self.saved_ref(unit.in_keys[i]) for i in op.saved if i < len(unit.in_keys)]
        saved_t: list[TType | None] = [unit.in_types[i] for i in op.saved if i < len(unit.in_types)]
        if p == "Cast":
            n = self.bnode("Cast", op.id, main, [Arg(ref=g_key), lit(f"I64({_CAST_IDS[unit.in_types[0].dtype]})", "Int64")],
                           [dy_t, None], unit.in_types[0], self.ctx.vector("Cast", [dy_t], unit.in_types[0]))
            return n.key
        if p == "RmsNorm":
            gamma = f"model.layers.{self.l}.{unit.weight}"
            gkey, gt = self.loads[unit.weight]  # type: ignore[index]
            n = self.bnode("RmsNormGrad", op.id, main, [Arg(ref=g_key)] + saved + [Arg(ref=gkey)], [dy_t] + saved_t + [gt],
                           unit.in_types[0], self.ctx.vector("RmsNormGrad", [dy_t, unit.in_types[0], gt], unit.in_types[0]),
                           grad_of="RmsNorm")
            self.g.param_grad[gamma] = n.key
            return n.key
        if p == "FlashAttentionScore":
            b, s = self.vals["b"], self.vals["s"]
            flops = 2.5 * 4.0 * b * s * s * (self.w.q // self.w.mp)
            n = self.bnode("FlashAttentionScoreGrad", op.id, main, [Arg(ref=g_key)] + saved, [dy_t] + saved_t, dy_t,
                           self.ctx.flash("FlashAttentionScoreGrad", flops), out_tuple=3, grad_of="FlashAttentionScore")
            return n.key
        if p == "Mul":
            a_t, b_t = (unit.full_types or unit.in_types)[0], (unit.full_types or unit.in_types)[1]
            n1 = self.bnode("Mul", f"{op.id}.da", main, [Arg(ref=g_key), self.saved_ref(unit.in_keys[1])], [dy_t, b_t], a_t,
                            self.ctx.vector("Mul", [dy_t, b_t], a_t))
            n2 = self.bnode("Mul", f"{op.id}.db", main, [Arg(ref=g_key), self.saved_ref(unit.in_keys[0])], [dy_t, a_t], b_t,
                            self.ctx.vector("Mul", [dy_t, a_t], b_t))
            return n2.key if n1 else n2.key
        if p == "Add":
            n = self.bnode("AddN", op.id, main, [Arg(ref=g_key), Arg(ref=g_key)], [dy_t, dy_t], dy_t,
                           self.ctx.vector("AddN", [dy_t, dy_t], dy_t), grad_of="Add")
            return n.key
        grad_prim = {"SiLU": "SiLUGrad", "RotaryMul": "RotaryMulGrad", "Transpose": "Transpose"}.get(p)
        if grad_prim is None:
            return g_key
        in_t = unit.in_types[0]
        n = self.bnode(grad_prim, op.id, main, [Arg(ref=g_key)] + saved, [dy_t] + saved_t, in_t,
                       self.ctx.vector(grad_prim, [dy_t] + [t for t in saved_t], in_t), grad_of=p)
        return n.key

    def column_groups(self) -> dict[str, list[_Unit]]:
        """Column-parallel MatMuls grouped by the tensor they read (through Reshapes); keyed by the
        first of each group in forward order, whose backward runs last."""
        producers = {u.op.out: u for u in self.units}
        groups: dict[str, list[_Unit]] = {}
        for u in self.units:
            if u.op.prim != "MatMul" or u.op.comm is not None:
                continue
            src = u.op.inputs[0]
            while src in producers and producers[src].op.prim == "Reshape":
                src = producers[src].op.inputs[0]
            groups.setdefault(src, []).append(u)
        return {g[0].op.id: g for g in groups.values()}

    def accumulate_col_grads(self, first: Node, members: list[_Unit], g_key: str) -> str:
        m, k, _ = members[0].mm  # type: ignore[misc]
        dx_t = TType((m, k), self.ctx.cdtype)
        if len(members) > 1:
            addn = self.bnode("AddN", f"{first.op_id}.accum", first, [Arg(ref=g_key)] * len(members), [dx_t] * len(members),
                              dx_t, self.ctx.vector("AddN", [dx_t] * len(members), dx_t), grad_of="MatMul")
            g_key = addn.key
        if self.w.mp > 1:
            ar = self.bnode("AllReduce", f"{first.op_id}.dx_allreduce", first, [Arg(ref=g_key)], [dx_t], dx_t,
                            self.ctx.comm("AllReduce", "mp", dx_t.nbytes), grad_of="MatMul")
            ar.prim_attrs = [("group", '"@@MPGROUP@@"'), ("fusion", "I64(0)"), ("op", '"sum"'), ("group_ranks", '"@@MPRANKS@@"'),
                             ("index", "I64(0)"), ("no_eliminate", "Bool(1)")]
            g_key = ar.key
        return g_key

    # -- memory ----------------------------------------------------------------------------------
    def record_saved(self) -> None:
        for tensor in sorted(self.spec.saved):
            if tensor not in self.reg:
                continue
            key, t = self.reg[tensor]
            node = self.nodes_by_key.get(key)
            while node is not None and node.prim in ("TransData",) and node.args and node.args[0].ref:
                node = self.nodes_by_key.get(node.args[0].ref)
            self.g.saved.append((tensor, t.nbytes, node.key if node is not None else key))


def _copy_kernel(k: KernelSpec | None) -> KernelSpec | None:
    if k is None:
        return None
    return KernelSpec(k.kernel, k.op_type, k.core, k.ns, comm=k.comm, cube_fraction=k.cube_fraction,
                      vec_fraction=k.vec_fraction, mte2_fraction=k.mte2_fraction, block_dim=k.block_dim, flops=k.flops,
                      category=k.category)


def build_layer(ctx: BuildCtx, structure: LayerStructure, spec: LayerSpec, x_key: str, x_type: TType,
                faults: Iterable[object]) -> LayerGraph:
    """Build one decoder layer (see module docstring); ``x_key`` is the node producing its input."""
    b = _LayerBuilder(ctx, structure, spec, x_key, x_type, faults)
    b.build_forward()
    b.build_recompute()
    b.build_backward()
    b.record_saved()
    if b.aicpu_ops:  # an op that falls back to AI_CPU: its own kernels (forward, recompute, backward) run there
        for n in (*b.g.fwd, *b.g.rc, *b.g.bwd):
            if n.op_id in b.aicpu_ops and n.prim != "TransData" and n.kernel is not None and n.kernel.comm is None:
                n.kernel = on_aicpu(n.kernel)
    return b.g
