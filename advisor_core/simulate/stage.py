"""One pipeline stage's graph: embedding, its decoder layers, the head and loss, p2p, gradients, optimizer.

Every rank of a stage runs the same graph (only communication group names differ), so the
graph is built once per stage. :class:`StageGraph` holds the nodes in IR order plus the
execution sequences the schedule replays per micro batch:

* ``fwd_seq``: [Receive] embedding, layers, head + loss, [Send];
* ``bwd_seq``: [Receive] head grads, per layer (last first) its recompute copies then its
  backward, embedding grad, [Send];
* gradient buckets (``all_reduce_fusion_config`` split points over this rank's parameter list,
  in order of first use; one bucket without it), then the optimizer.

Memory bookkeeping rides along: ``mem_delta[key]`` is the bytes a kernel's end allocates (+) or
frees (−): a layer's saved activations at its last forward kernel and its last backward kernel,
the logits at the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from advisor_core.config.model_structure import LayerStructure
from advisor_core.config.recompute import RecomputePlan, effective_recompute, full_layer_saved
from advisor_core.simulate.buildctx import BuildCtx
from advisor_core.simulate.layer import LayerGraph, LayerSpec, build_layer
from advisor_core.simulate.nodes import BUILD, FRONT, PARALLEL, Arg, Node, TType, assign_full_names, lit
from advisor_core.simulate.workload import DTYPE_BYTES

__all__ = ["StageGraph", "Bucket", "build_stage"]

FP = FRONT | PARALLEL
ALL = FRONT | PARALLEL | BUILD


@dataclass
class Bucket:
    key: str  # the fused AllReduce node (kernel graph)
    params: list[str]
    nbytes: int
    ready_after: str  # key of the backward kernel whose end completes the bucket


@dataclass
class StageGraph:
    stage: int
    layers: tuple[int, ...]
    nodes: list[Node] = field(default_factory=list)
    by_key: dict[str, Node] = field(default_factory=dict)
    params: list[tuple[str, TType]] = field(default_factory=list)  # trainable, rank-local order
    extra_params: list[tuple[str, TType]] = field(default_factory=list)  # inputs, optimizer states
    fwd_seq: list[str] = field(default_factory=list)
    bwd_seq: list[str] = field(default_factory=list)
    opt_seq: list[str] = field(default_factory=list)
    buckets: list[Bucket] = field(default_factory=list)
    mem_delta: dict[str, int] = field(default_factory=dict)
    layer_graphs: dict[int, LayerGraph] = field(default_factory=dict)
    layer_specs: dict[int, LayerSpec] = field(default_factory=dict)
    loss_key: str = ""
    static_bytes: int = 0
    layer_fwd_end: dict[int, str] = field(default_factory=dict)
    layer_bwd_end: dict[int, str] = field(default_factory=dict)

    def kernel_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.kernel is not None and n.ir & BUILD]


def _kernel_keys(nodes: list[Node]) -> list[str]:
    return [n.key for n in nodes if n.kernel is not None and n.ir & BUILD]


class _StageBuilder:
    def __init__(self, ctx: BuildCtx, structure: LayerStructure, plan: RecomputePlan, faults: list[object]) -> None:
        self.ctx = ctx
        self.w = ctx.w
        self.st = structure
        self.plan = plan
        self.faults = faults
        self.s = ctx.stage
        self.g = StageGraph(self.s, self.w.stage_layers[self.s])
        self.first = self.s == 0
        self.last = self.s == self.w.pp - 1
        self.model_prefix = f"{ctx.root}/model-LlamaModel"
        self.fwd: list[Node] = []
        self.bwd: list[Node] = []
        self.tail: list[Node] = []

    def node(self, where: list[Node], **kw) -> Node:  # type: ignore[no-untyped-def]
        n = Node(**kw)
        where.append(n)
        return n

    @property
    def x_type(self) -> TType:
        return TType((self.w.micro_batch_size, self.w.seq, self.w.hidden), self.ctx.cdtype)

    # -- pieces --------------------------------------------------------------------------------------
    def embedding(self) -> tuple[str, list[str]]:
        w, c = self.w, self.ctx
        prefix = f"{self.model_prefix}/tok_embeddings-LlamaEmbedding"
        v = w.vocab if w.vocab_emb_dp else w.vocab // w.mp
        wt = TType((v, w.hidden), w.param_dtype, "ND", "model.tok_embeddings.embedding_weight")
        ids = TType((w.micro_batch_size, w.seq), "int32", "ND", None)
        self.g.extra_params.append(("input_ids", ids))
        self.g.params.append(("model.tok_embeddings.embedding_weight", wt))
        load = self.node(self.fwd, key="emb.load", prim="Load", prefix=prefix, phase="fwd", layer=None,
                         args=[Arg(param="model.tok_embeddings.embedding_weight"), lit("UMonad[U]", "UMonad")],
                         in_types=[wt, None], out=TType(wt.shape, wt.dtype), frontend_prim=False,
                         cnode_attrs=[("checkpoint", "Bool(1)")])
        out = self.x_type
        gather = self.node(self.fwd, key="emb.gather", prim="Gather", prefix=prefix, phase="fwd", layer=None,
                           args=[Arg(ref=load.key), Arg(param="input_ids"), lit("I64(0)", "Int64")],
                           in_types=[load.out, ids, None], out=out, instance="gather",
                           prim_attrs=[("batch_dims", "I64(0)"), ("in_strategy", f"((1, 1), ({w.dp}, 1))")],
                           strategy=f"((1, 1), ({w.dp}, 1))", cnode_attrs=[("checkpoint", "Bool(1)")],
                           primal_attrs=[("unique_id", f'"{c.next_uid()}"'), ("micro", "I64(0)")],
                           kernel=c.vector("Gather", [ids, out], out))
        grad = self.node(self.bwd_tail, key="emb.bwd", prim="EmbeddingDenseBackward",
                         prefix=f"Gradients/{prefix}/Grad_Gather", phase="bwd", layer=None,
                         args=[Arg(ref="@dy"), Arg(param="input_ids")], in_types=[out, ids], out=TType(wt.shape, wt.dtype),
                         cnode_attrs=[("checkpoint", "Bool(1)")],
                         kernel=c.vector("EmbeddingDenseBackward", [out, ids, TType(wt.shape, wt.dtype)], TType(wt.shape, wt.dtype)))
        self.param_grad["model.tok_embeddings.embedding_weight"] = grad.key
        return gather.key, [grad.key]

    def p2p(self, where: list[Node], kind: str, direction: str, src_key: str | None, tag: str) -> Node:
        """Send/Receive between neighbouring stages (``direction``: next | prev)."""
        t = self.x_type
        group = "pp_next" if direction == "next" else "pp_prev"
        peer = "@@NEXTRANK@@" if direction == "next" else "@@PREVRANK@@"
        prefix = self.model_prefix if kind == "Send" else f"{self.ctx.root}"
        attrs = [("sr_tag", "I64(0)"), ("dest_rank" if kind == "Send" else "src_rank", f"I64({peer})"),
                 ("group", f'"@@{group.upper()}GROUP@@"'), ("shape", "(" + ", ".join(str(d) for d in t.shape) + ")"),
                 ("dtype", {"float16": "F16", "bfloat16": "BF16", "float32": "F32"}[t.dtype]), ("no_eliminate", "Bool(1)")]
        args = [Arg(ref=src_key)] if src_key else [lit("UMonad[U]", "UMonad")]
        return self.node(where, key=f"p2p.{tag}", prim=kind, prefix=prefix, phase="p2p", layer=None, args=args,
                         in_types=[t if src_key else None], out=t, frontend_prim=False, prim_attrs=attrs,
                         ir=FRONT | BUILD, cnode_attrs=[("checkpoint", "Bool(1)")],
                         kernel=self.ctx.comm(kind, group, t.nbytes))

    def head(self, x_key: str) -> tuple[list[str], list[str]]:
        """Final norm, lm_head, loss (last stage); returns (forward keys, backward keys)."""
        w, c = self.w, self.ctx
        fwd0 = len(self.fwd)
        x = self.x_type
        x32 = x.with_dtype("float32")
        nprefix = f"{self.model_prefix}/norm_out-LlamaRMSNorm"
        gamma = TType((w.hidden,), "float32", "ND", "model.norm_out.weight")
        self.g.params.append(("model.norm_out.weight", gamma))
        gload = self.node(self.fwd, key="head.norm.load", prim="Load", prefix=nprefix, phase="head", layer=None,
                          args=[Arg(param="model.norm_out.weight"), lit("UMonad[U]", "UMonad")], in_types=[gamma, None],
                          out=TType(gamma.shape, "float32"), frontend_prim=False)
        cast = self.node(self.fwd, key="head.norm.cast", prim="Cast", prefix=nprefix, phase="head", layer=None,
                         args=[Arg(ref=x_key), lit("I64(43)", "Int64")], in_types=[x, None], out=x32, instance="cast",
                         prim_attrs=[("output_names", "[output]"), ("input_names", "[x, dst_type]")],
                         build_attrs=[("is_backend_cast", "Bool(0)")], kernel=c.vector("Cast", [x], x32))
        norm = self.node(self.fwd, key="head.norm", prim="RmsNorm", prefix=nprefix, phase="head", layer=None,
                         args=[Arg(ref=cast.key), Arg(ref=gload.key)], in_types=[x32, gload.out], out=x32, instance="norm",
                         prim_attrs=[("epsilon", "F32(1e-05)")], kernel=c.vector("RmsNorm", [x32, gamma], x32))
        rcast = self.node(self.fwd, key="head.norm.rcast", prim="Cast", prefix=nprefix, phase="head", layer=None,
                          args=[Arg(ref=norm.key), lit(f"I64({42 if x.dtype == 'float16' else 45})", "Int64")],
                          in_types=[x32, None], out=x, instance="rcast",
                          prim_attrs=[("output_names", "[output]"), ("input_names", "[x, dst_type]")],
                          build_attrs=[("is_backend_cast", "Bool(0)")], kernel=c.vector("Cast", [x32], x))
        lprefix = f"{self.ctx.root}/lm_head-Linear"
        m, k, n = w.micro_batch_size * w.seq, w.hidden, w.vocab // w.mp
        wt = TType((n, k), w.param_dtype, "ND", "lm_head.weight")
        self.g.params.append(("lm_head.weight", wt))
        wload = self.node(self.fwd, key="head.lm.load", prim="Load", prefix=lprefix, phase="head", layer=None,
                          args=[Arg(param="lm_head.weight"), lit("UMonad[U]", "UMonad")], in_types=[wt, None],
                          out=TType(wt.shape, wt.dtype), frontend_prim=False)
        x2 = TType((m, k), x.dtype)
        resh = self.node(self.fwd, key="head.lm.reshape", prim="Reshape", prefix=lprefix, phase="head", layer=None,
                         args=[Arg(ref=rcast.key), lit(f"(I64({m}), I64({k}))", "Tuple[Int64*2]")], in_types=[x, None],
                         out=x2, instance="reshape", ir=FP)
        a_key, a_t = resh.key, x2
        unaligned = bool(k % 16 or n % 16)
        if unaligned:
            a_t = x2.with_fmt("FRACTAL_NZ")
            td = self.node(self.fwd, key="head.lm.ua_in", prim="TransData", prefix=lprefix, phase="head", layer=None,
                           args=[Arg(ref=resh.key)], in_types=[x2], out=a_t, ir=BUILD, frontend_prim=False,
                           prim_attrs=[("src_format", '"ND"'), ("dst_format", '"FRACTAL_NZ"')],
                           kernel=c.vector("TransData", [x2], a_t))
            a_key = td.key
        logits = TType((m, n), x.dtype)
        mm = self.node(self.fwd, key="head.lm.matmul", prim="MatMul", prefix=lprefix, phase="head", layer=None,
                       args=[Arg(ref=a_key), Arg(ref=wload.key), lit("Bool(0)", "Bool"), lit("Bool(1)", "Bool")],
                       in_types=[a_t, wload.out, None, None], out=logits, instance="matmul",
                       prim_attrs=[("transpose_a", "Bool(0)"), ("transpose_b", "Bool(1)"),
                                   ("in_strategy", f"(({w.dp}, 1), ({w.mp}, 1))")],
                       strategy=f"(({w.dp}, 1), ({w.mp}, 1))", cnode_attrs=[("checkpoint", "Bool(1)")],
                       primal_attrs=[("unique_id", f'"{c.next_uid()}"'), ("micro", "I64(0)")],
                       kernel=c.matmul(m, k, n, x.dtype))
        last = mm.key
        if unaligned:
            last = self.node(self.fwd, key="head.lm.ua_out", prim="TransData", prefix=lprefix, phase="head", layer=None,
                             args=[Arg(ref=mm.key)], in_types=[logits.with_fmt("FRACTAL_NZ")], out=logits, ir=BUILD,
                             frontend_prim=False, prim_attrs=[("src_format", '"FRACTAL_NZ"'), ("dst_format", '"ND"')],
                             kernel=c.vector("TransData", [logits.with_fmt("FRACTAL_NZ")], logits)).key
        lossp = f"{self.ctx.root}/loss-CrossEntropyLoss"
        l32 = logits.with_dtype("float32")
        lcast = self.node(self.fwd, key="head.loss.cast", prim="Cast", prefix=lossp, phase="head", layer=None,
                          args=[Arg(ref=last), lit("I64(43)", "Int64")], in_types=[logits, None], out=l32, instance="cast",
                          prim_attrs=[("output_names", "[output]"), ("input_names", "[x, dst_type]")],
                          build_attrs=[("is_backend_cast", "Bool(0)")], kernel=c.vector("Cast", [logits], l32))
        labels = TType((m,), "int32")
        if not any(p[0] == "input_ids" for p in self.g.extra_params):
            self.g.extra_params.insert(0, ("input_ids", TType((w.micro_batch_size, w.seq), "int32")))
        loss_t = TType((), "float32")
        ce = self.node(self.fwd, key="head.loss.ce", prim="SoftmaxCrossEntropyWithLogits", prefix=lossp, phase="head",
                       layer=None, args=[Arg(ref=lcast.key), Arg(param="input_ids")], in_types=[l32, labels], out=loss_t,
                       instance="sparse_softmax_cross_entropy", kernel=c.vector("SoftmaxCrossEntropyWithLogits", [l32, labels], l32))
        self.g.loss_key = ce.key
        if w.mp > 1:
            stat = TType((m,), "float32")
            self.node(self.fwd, key="head.loss.allreduce", prim="AllReduce", prefix=lossp, phase="head", layer=None,
                      args=[Arg(ref=ce.key)], in_types=[stat], out=stat, frontend_prim=False,
                      prim_attrs=[("group", '"@@MPGROUP@@"'), ("fusion", "I64(0)"), ("op", '"sum"'),
                                  ("group_ranks", '"@@MPRANKS@@"')],
                      instance=f"forward_op_{c.instance_hash(lossp + '/AllReduce')}", kernel=c.comm("AllReduce", "mp", stat.nbytes))
        fwd_keys = _kernel_keys(self.fwd[fwd0:])
        self.g.mem_delta[fwd_keys[-1]] = self.g.mem_delta.get(fwd_keys[-1], 0) + 2 * l32.nbytes
        # backward
        b: list[Node] = []
        ce_g = self.node(b, key="head.bwd.ce", prim="SoftmaxCrossEntropyWithLogitsGrad", prefix=f"Gradients/{lossp}/Grad_SoftmaxCrossEntropyWithLogits",
                         phase="bwd", layer=None, args=[Arg(ref=ce.key), Arg(ref=lcast.key)], in_types=[loss_t, l32], out=l32,
                         kernel=c.vector("SoftmaxCrossEntropyWithLogitsGrad", [l32], l32))
        cg = self.node(b, key="head.bwd.cast", prim="Cast", prefix=f"Gradients/{lossp}/Grad_Cast", phase="bwd", layer=None,
                       args=[Arg(ref=ce_g.key), lit(f"I64({42 if x.dtype == 'float16' else 45})", "Int64")],
                       in_types=[l32, None], out=logits, kernel=c.vector("Cast", [l32], logits))
        gp = f"Gradients/{lprefix}/Grad_MatMul"
        dy_key = cg.key
        if unaligned:
            dy_key = self.node(b, key="head.bwd.ua_dy", prim="TransData", prefix=gp, phase="bwd", layer=None,
                               args=[Arg(ref=cg.key)], in_types=[logits], out=logits.with_fmt("FRACTAL_NZ"), ir=BUILD,
                               frontend_prim=False, prim_attrs=[("src_format", '"ND"'), ("dst_format", '"FRACTAL_NZ"')],
                               kernel=c.vector("TransData", [logits], logits.with_fmt("FRACTAL_NZ"))).key
        dx = self.node(b, key="head.bwd.dx", prim="MatMul", prefix=gp, phase="bwd", layer=None,
                       args=[Arg(ref=dy_key), Arg(ref=wload.key), lit("Bool(0)", "Bool"), lit("Bool(0)", "Bool")],
                       in_types=[logits, wload.out, None, None], out=x2, kernel=c.matmul(m, n, k, x.dtype))
        dw = self.node(b, key="head.bwd.dw", prim="MatMul", prefix=gp, phase="bwd", layer=None,
                       args=[Arg(ref=dy_key), Arg(ref=resh.key), lit("Bool(1)", "Bool"), lit("Bool(0)", "Bool")],
                       in_types=[logits, x2, None, None], out=TType((n, k), x.dtype), kernel=c.matmul(n, m, k, x.dtype, weight=(k, n)))
        self.param_grad["lm_head.weight"] = dw.key
        g_key = dx.key
        if unaligned:
            for nm, t, src in (("ua_dx", x2, dx.key), ("ua_dw", TType((n, k), x.dtype), dw.key)):
                td = self.node(b, key=f"head.bwd.{nm}", prim="TransData", prefix=gp, phase="bwd", layer=None,
                               args=[Arg(ref=src)], in_types=[t.with_fmt("FRACTAL_NZ")], out=t, ir=BUILD, frontend_prim=False,
                               prim_attrs=[("src_format", '"FRACTAL_NZ"'), ("dst_format", '"ND"')],
                               kernel=c.vector("TransData", [t.with_fmt("FRACTAL_NZ")], t))
                if nm == "ua_dx":
                    g_key = td.key
        if w.mp > 1:
            g_key = self.node(b, key="head.bwd.dx_allreduce", prim="AllReduce", prefix=gp, phase="bwd", layer=None,
                              args=[Arg(ref=g_key)], in_types=[x2], out=x2, frontend_prim=False,
                              prim_attrs=[("group", '"@@MPGROUP@@"'), ("fusion", "I64(0)"), ("op", '"sum"')],
                              kernel=c.comm("AllReduce", "mp", x2.nbytes)).key
        np_ = f"Gradients/{nprefix}"
        c1 = self.node(b, key="head.bwd.rcast", prim="Cast", prefix=f"{np_}/Grad_Cast", phase="bwd", layer=None,
                       args=[Arg(ref=g_key), lit("I64(43)", "Int64")], in_types=[x, None], out=x32, kernel=c.vector("Cast", [x], x32))
        ng = self.node(b, key="head.bwd.norm", prim="RmsNormGrad", prefix=f"{np_}/Grad_RmsNorm", phase="bwd", layer=None,
                       args=[Arg(ref=c1.key), Arg(ref=cast.key), Arg(ref=gload.key)], in_types=[x32, x32, gload.out], out=x32,
                       kernel=c.vector("RmsNormGrad", [x32, x32, gamma], x32))
        self.param_grad["model.norm_out.weight"] = ng.key
        c2 = self.node(b, key="head.bwd.cast0", prim="Cast", prefix=f"{np_}/Grad_Cast", phase="bwd", layer=None,
                       args=[Arg(ref=ng.key), lit(f"I64({42 if x.dtype == 'float16' else 45})", "Int64")], in_types=[x32, None],
                       out=x, kernel=c.vector("Cast", [x32], x))
        for n_ in b:
            n_.ir = n_.ir & (FRONT | BUILD)
            n_.cnode_attrs = n_.cnode_attrs or [("checkpoint", "Bool(1)")]
            if n_.prim in ("AllReduce", "TransData"):
                n_.frontend_prim = False
        self.bwd.extend(b)
        self.head_dy = c2.key
        bwd_keys = _kernel_keys(b)
        self.g.mem_delta[bwd_keys[0]] = self.g.mem_delta.get(bwd_keys[0], 0) - 2 * l32.nbytes
        return fwd_keys, bwd_keys

    # -- assembly ------------------------------------------------------------------------------------
    def layer_spec(self, layer: int) -> LayerSpec:
        st = self.st
        if layer in self.plan.full_layers:
            return LayerSpec(layer, frozenset(), frozenset(), True, full_layer_saved(st))
        configured = frozenset(self.plan.configured_ops(layer, st))
        eff = effective_recompute(st, configured)
        return LayerSpec(layer, configured, eff.duplicated, False, eff.saved_after)

    def build(self) -> StageGraph:
        w, g = self.w, self.g
        self.param_grad: dict[str, str] = {}
        self.bwd_tail: list[Node] = []
        fwd_seq: list[str] = []
        if self.first:
            x_key, emb_bwd = self.embedding()
        else:
            recv = self.p2p(self.fwd, "Receive", "prev", None, "recv_fwd")
            x_key, emb_bwd = recv.key, []
        fwd_seq += _kernel_keys(self.fwd)
        x_type = self.x_type
        layer_bwd: dict[int, tuple[list[str], list[str]]] = {}
        for layer in g.layers:
            spec = self.layer_spec(layer)
            lg = build_layer(self.ctx, self.st, spec, x_key, x_type, self.faults)
            g.layer_graphs[layer] = lg
            g.layer_specs[layer] = spec
            self.fwd.extend(lg.fwd)
            keys = _kernel_keys(lg.fwd)
            fwd_seq += keys
            act = sum(b for _, b, _ in lg.saved)
            g.mem_delta[keys[-1]] = g.mem_delta.get(keys[-1], 0) + act
            g.layer_fwd_end[layer] = keys[-1]
            bk = _kernel_keys(lg.bwd)
            g.mem_delta[bk[-1]] = g.mem_delta.get(bk[-1], 0) - act
            g.layer_bwd_end[layer] = bk[-1]
            layer_bwd[layer] = (_kernel_keys(lg.rc), bk)
            g.params.extend(p for p in lg.params if p[0] not in {q[0] for q in g.params})
            self.param_grad.update(lg.param_grad)
            x_key, x_type = lg.out_key, lg.out_type  # type: ignore[assignment]
        head_b: list[str] = []
        if self.last:
            hf, head_b = self.head(x_key)
            fwd_seq += hf
        else:
            send = self.p2p(self.fwd, "Send", "next", x_key, "send_fwd")
            fwd_seq.append(send.key)
        bwd_seq: list[str] = []
        if not self.last:
            recv_b = self.p2p(self.bwd, "Receive", "next", None, "recv_bwd")
            bwd_seq.append(recv_b.key)
            dy_src = recv_b.key
        else:
            dy_src = self.head_dy
        # each layer's backward starts from the gradient the layer above (or the head) produced
        for layer in reversed(g.layers):
            lg = g.layer_graphs[layer]
            for n in lg.bwd:
                n.args = [Arg(ref=dy_src) if a.ref == lg.out_key else a for a in n.args]
            dy_src = lg.bwd_out
        bwd_seq += head_b
        for layer in reversed(g.layers):
            lg = g.layer_graphs[layer]
            self.bwd.extend(lg.rc)
            self.bwd.extend(lg.bwd)
            rc_keys, bk = layer_bwd[layer]
            bwd_seq += rc_keys + bk
        self.bwd.extend(self.bwd_tail)
        bwd_seq += emb_bwd
        if not self.first:
            send_b = self.p2p(self.bwd, "Send", "prev", self.bwd[-1].key if self.bwd else None, "send_bwd")
            bwd_seq.append(send_b.key)
        g.fwd_seq, g.bwd_seq = fwd_seq, bwd_seq
        self.gradients_and_optimizer()  # g.params is in order of first use in the forward graph
        g.nodes = self.fwd + self.bwd + self.tail
        # embedding grad placeholder operand → last layer backward output
        last_dy = g.layer_graphs[g.layers[0]].bwd_out if g.layers else None
        for n in g.nodes:
            n.args = [Arg(ref=last_dy) if a.ref == "@dy" else a for a in n.args]
        assign_full_names(g.nodes)
        g.by_key = {n.key: n for n in g.nodes}
        g.static_bytes = self.static_bytes()
        return g

    def gradients_and_optimizer(self) -> None:
        w, c, g = self.w, self.ctx, self.g
        params = g.params
        bounds = [0]
        for k in w.fusion_config or ():
            if 0 < k < len(params):
                bounds.append(k)
        bounds.append(len(params))
        bounds = sorted(set(bounds))
        position = {k: i for i, k in enumerate(g.bwd_seq)}
        pdict = dict(params)
        pindex = {nm: i for i, (nm, _) in enumerate(params)}
        reducer = f"Default/network-MFPipelineWithLossScaleCell/grad_reducer-DistributedGradReducer"
        for bi in range(len(bounds) - 1):
            names = [p[0] for p in params[bounds[bi]:bounds[bi + 1]]]
            if not names:
                continue
            if w.dp > 1:
                for nm in names:  # front end: one AllReduce per gradient, tagged with its fusion group
                    t = pdict[nm]
                    self.tail.append(Node(f"gar.{nm}", "AllReduce", reducer, "gcomm", None, [Arg(ref=self.param_grad[nm])],
                                          [TType(t.shape, c.cdtype)], TType(t.shape, c.cdtype), ir=FRONT, frontend_prim=False,
                                          prim_attrs=[("group", '"@@DPGROUP@@"'), ("fusion", f"I64({bi + 1})"), ("op", '"sum"'),
                                                      ("index", f"I64({pindex[nm]})"), ("no_eliminate", "Bool(1)")],
                                          cnode_attrs=[("checkpoint", "Bool(1)")]))
            nbytes = sum(_elements(pdict[nm].shape) * DTYPE_BYTES[c.cdtype] for nm in names)
            ready = max(names, key=lambda nm: position.get(self.param_grad[nm], -1))
            if w.dp > 1:
                shape = (_elements_sum([pdict[nm].shape for nm in names]),)
                t = TType(shape, c.cdtype)
                node = Node(f"bucket{bi}", "AllReduce", reducer, "gcomm", None, [Arg(ref=self.param_grad[ready])], [t], t,
                            ir=BUILD, frontend_prim=False,
                            prim_attrs=[("group", '"@@DPGROUP@@"'), ("fusion", f"I64({bi + 1})"), ("op", '"sum"'),
                                        ("group_ranks", '"@@DPRANKS@@"'), ("no_eliminate", "Bool(1)")],
                            cnode_attrs=[("checkpoint", "Bool(1)")], kernel=c.comm("AllReduce", "dp", nbytes))
                self.tail.append(node)
                g.buckets.append(Bucket(node.key, names, nbytes, self.param_grad[ready]))
        oprefix = "Default/network-MFPipelineWithLossScaleCell/optimizer-FP32StateAdamWeightDecay"
        shard = w.dp if w.parallel_optimizer else 1
        for i, (nm, t) in enumerate(params):
            n_el = max(1, _elements(t.shape) // shard)
            st = TType((n_el,), "float32")
            pt = TType((n_el,), t.dtype)
            gkey = self.param_grad[nm]
            grad_t = TType((n_el,), c.cdtype)
            args = [Arg(ref=gkey)]
            if c.cdtype != "float32":
                cast = Node(f"opt.cast.{nm}", "Cast", oprefix, "opt", None, [Arg(ref=gkey), lit("I64(43)", "Int64")],
                            [grad_t, None], st, ir=BUILD,
                            prim_attrs=[("is_backend_cast", "Bool(1)"), ("dst_type", "F32")], cnode_attrs=[],
                            kernel=c.vector("Cast", [grad_t], st))
                self.tail.append(cast)
                args = [Arg(ref=cast.key)]
            m_name, v_name = f"adam_m.{nm}", f"adam_v.{nm}"
            g.extra_params += [(m_name, TType(t.shape, "float32", "ND", m_name)), (v_name, TType(t.shape, "float32", "ND", v_name))]
            opt = Node(f"opt.adam.{nm}", "AdamWeightDecay", oprefix, "opt", None,
                       [Arg(param=nm), Arg(param=m_name), Arg(param=v_name)] + args,
                       [TType(t.shape, t.dtype, "ND", nm), TType(t.shape, "float32", "ND", m_name),
                        TType(t.shape, "float32", "ND", v_name), st], pt, instance="adam_weight_decay",
                       prim_attrs=[("use_locking", "Bool(0)")], cnode_attrs=[("checkpoint", "Bool(1)")],
                       kernel=c.vector("AdamWeightDecay", [pt, st, st, st, st, st], pt))
            self.tail.append(opt)
            g.opt_seq += [k for k in ([f"opt.cast.{nm}"] if c.cdtype != "float32" else []) + [opt.key]]

    def static_bytes(self) -> int:
        """Weights + optimizer states (÷ dp with the parallel optimizer) + an accumulation gradient (seed 004)."""
        w = self.w
        n = sum(_elements(t.shape) for _, t in self.g.params)
        pbytes = DTYPE_BYTES[w.param_dtype]
        t = w.dp if w.parallel_optimizer else 1
        static = (pbytes + 8) * n // t
        if w.micro_batches > 1:
            static += 2 * n
        return static


def _elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _elements_sum(shapes: list[tuple[int, ...]]) -> int:
    return sum(_elements(s) for s in shapes)


def build_stage(ctx: BuildCtx, structure: LayerStructure, plan: RecomputePlan, faults: list[object]) -> StageGraph:
    """Build the graph of pipeline stage ``ctx.stage`` (see module docstring)."""
    return _StageBuilder(ctx, structure, plan, faults).build()
