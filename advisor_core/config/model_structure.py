"""The MindFormers Llama decoder layer as cells and primitives: the shared model of what is inside a layer.

Three parts of the product need the same picture of a MindFormers layer:

* ``select_recompute`` patterns are matched against *cell attribute names*
  (``feed_forward\\.w1\\.activation\\.silu``): lint must know which names exist;
* whether a configured op is really recomputed depends on *who consumes its
  output* — backward ops, or a ``Reshape`` that is not recomputed (the seed's
  Silu-Mul case);
* the simulator turns the same op list into kernels, IR nodes and memory.

The layer follows MindFormers' legacy ``LLamaDecodeLayer``::

    attention_norm (LlamaRMSNorm: cast → norm → rcast)
    attention      (LLamaAttention: wq/wk/wv Linear, apply_rotary_emb, flash_attention,
                    merger_head_transpose, reshape, wo Linear)
    add            (residual)
    ffn_norm       (LlamaRMSNorm)
    feed_forward   (LlamaFeedForward: w1 Linear with SiLU activation, w3 Linear, mul, w2 Linear)
    add            (residual)

A MindFormers ``Linear`` reshapes its input to 2-D, multiplies, applies its
activation cell and reshapes back to 3-D with one ``reshape`` primitive. With
fine-grained multi-copy (``fine_grain_interleave`` > 1) inputs are already 2-D
and the reshapes disappear — which is why recomputing SiLU and Mul saves memory
there and not otherwise (``seeds/004``).

Shapes are symbolic per micro batch, before tensor-parallel slicing: ``b`` micro
batch, ``s`` sequence, ``h`` hidden, ``f`` FFN inner, ``q`` = heads × head_dim,
``k`` = kv heads × head_dim. ``split`` names the dimension tensor parallelism
(``model_parallel``) divides on that tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable


@dataclass(frozen=True)
class LayerOp:
    """One primitive call inside a decoder layer.

    ``path`` is the cell path from the layer to the primitive attribute, e.g.
    ``("feed_forward", "w1", "activation", "silu")``. ``inputs`` name tensors
    produced by earlier ops (their ``out``), ``"x"`` (layer input) or
    ``"param:<name>"`` (weights). ``saved`` lists the inputs (by position) that
    the op's backward reads, i.e. what training keeps in memory unless it is
    recomputed. ``cell_output`` marks the op whose result leaves its cell.
    """

    id: str
    path: tuple[str, ...]
    prim: str
    inputs: tuple[str, ...]
    out: str
    shape: tuple[str, ...]
    dtype: str = "compute"  # compute | fp32 | int
    saved: tuple[int, ...] = ()
    cell_output: bool = False
    split: str | None = None  # dimension divided by model_parallel, if any
    flops: str | None = None  # symbolic FLOP formula for matmul-like ops (forward)
    comm: str | None = None  # expected forward communication after this op (e.g. "AllReduce")

    @property
    def attr(self) -> str:
        return self.path[-1]

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Cell:
    """A cell: its attribute name, class, child cells and primitive attributes."""

    name: str
    cls: str
    children: tuple["Cell", ...] = ()
    prims: tuple[str, ...] = ()

    def child(self, name: str) -> "Cell | None":
        for c in self.children:
            if c.name == name:
                return c
        return None

    def attributes(self) -> list[str]:
        return [c.name for c in self.children] + list(self.prims)


def _linear(prefix: tuple[str, ...], name: str, inp: str, out_dim: str, in_dim: str, *, col: bool, act: str | None,
            reshape: bool, wname: str) -> list[LayerOp]:
    """Ops of a MindFormers ``Linear``: [reshape] → matmul → [activation] → [reshape]."""
    p = prefix + (name,)
    ops: list[LayerOp] = []
    cur = inp
    if reshape:
        ops.append(LayerOp(f"{'.'.join(p)}.reshape_in", p + ("reshape",), "Reshape", (cur,), f"{name}_2d", ("b*s", in_dim),
                           split=None if col else in_dim))
        cur = f"{name}_2d"
    mm_out = f"{name}_mm"
    ops.append(
        LayerOp(
            f"{'.'.join(p)}.matmul",
            p + ("matmul",),
            "MatMul",
            (cur, f"param:{wname}"),
            mm_out,
            ("b*s", out_dim),
            saved=(0, 1),
            split=out_dim if col else None,
            flops=f"2*b*s*{in_dim}*{out_dim}",
            comm=None if col else "AllReduce",
        )
    )
    cur = mm_out
    if act:
        ops.append(LayerOp(f"{'.'.join(p)}.activation.{act}", p + ("activation", act), "SiLU", (cur,), f"{name}_act",
                           ("b*s", out_dim), saved=(0,), cell_output=True, split=out_dim if col else None))
        cur = f"{name}_act"
    if reshape:
        ops.append(LayerOp(f"{'.'.join(p)}.reshape_out", p + ("reshape",), "Reshape", (cur,), f"{name}_out",
                           ("b", "s", out_dim), cell_output=True, split=out_dim if col else None))
    else:
        last = ops[-1]
        ops[-1] = LayerOp(last.id, last.path, last.prim, last.inputs, f"{name}_out", last.shape, last.dtype, last.saved,
                          True, last.split, last.flops, last.comm)
    return ops


def _rmsnorm(name: str, inp: str) -> list[LayerOp]:
    p = (name,)
    return [
        LayerOp(f"{name}.cast", p + ("cast",), "Cast", (inp,), f"{name}_f32", ("b", "s", "h"), dtype="fp32"),
        LayerOp(f"{name}.norm", p + ("norm",), "RmsNorm", (f"{name}_f32", f"param:{name}.weight"), f"{name}_n32",
                ("b", "s", "h"), dtype="fp32", saved=(0, 1)),
        LayerOp(f"{name}.rcast", p + ("rcast",), "Cast", (f"{name}_n32",), f"{name}_out", ("b", "s", "h"), cell_output=True),
    ]


def llama_layer_ops(*, fine_grain_interleave: bool = False, rotary_fp32: bool = False) -> list[LayerOp]:
    """The forward ops of one decoder layer, in execution order.

    ``rotary_fp32`` (``rotary_dtype: float32`` with a 16-bit compute dtype) adds
    the Cast pairs MindFormers puts around the rotary embedding.
    """
    reshape = not fine_grain_interleave
    ops: list[LayerOp] = []
    ops += _rmsnorm("attention_norm", "x")
    a = ("attention",)
    ops += _linear(a, "wq", "attention_norm_out", "q", "h", col=True, act=None, reshape=reshape, wname="attention.wq.weight")
    ops += _linear(a, "wk", "attention_norm_out", "k", "h", col=True, act=None, reshape=reshape, wname="attention.wk.weight")
    ops += _linear(a, "wv", "attention_norm_out", "k", "h", col=True, act=None, reshape=reshape, wname="attention.wv.weight")
    q_in, k_in = "wq_out", "wk_out"
    if rotary_fp32:
        ops += [
            LayerOp("attention.apply_rotary_emb.cast_q", a + ("apply_rotary_emb", "cast"), "Cast", ("wq_out",), "q32", ("b", "s", "q"), dtype="fp32", split="q"),
            LayerOp("attention.apply_rotary_emb.cast_k", a + ("apply_rotary_emb", "cast"), "Cast", ("wk_out",), "k32", ("b", "s", "k"), dtype="fp32", split="k"),
        ]
        q_in, k_in = "q32", "k32"
    ops += [
        LayerOp("attention.apply_rotary_emb.rotary_q", a + ("apply_rotary_emb", "rotary_mul"), "RotaryMul", (q_in,), "q_rot",
                ("b", "s", "q"), dtype="fp32" if rotary_fp32 else "compute", saved=(), split="q"),
        LayerOp("attention.apply_rotary_emb.rotary_k", a + ("apply_rotary_emb", "rotary_mul"), "RotaryMul", (k_in,), "k_rot",
                ("b", "s", "k"), dtype="fp32" if rotary_fp32 else "compute", saved=(), split="k"),
    ]
    if rotary_fp32:
        ops += [
            LayerOp("attention.apply_rotary_emb.rcast_q", a + ("apply_rotary_emb", "rcast"), "Cast", ("q_rot",), "q_c", ("b", "s", "q"), split="q"),
            LayerOp("attention.apply_rotary_emb.rcast_k", a + ("apply_rotary_emb", "rcast"), "Cast", ("k_rot",), "k_c", ("b", "s", "k"), split="k", cell_output=True),
        ]
        q_fa, k_fa = "q_c", "k_c"
    else:
        q_fa, k_fa = "q_rot", "k_rot"
    ops += [
        # MindFormers' FlashAttention is a cell whose single primitive is also named flash_attention.
        LayerOp("attention.flash_attention", a + ("flash_attention", "flash_attention"), "FlashAttentionScore", (q_fa, k_fa, "wv_out"), "attn",
                ("b", "s", "q"), saved=(0, 1, 2), cell_output=True, split="q", flops="4*b*s*s*q"),
        LayerOp("attention.merger_head_transpose", a + ("merger_head_transpose",), "Transpose", ("attn",), "attn_t", ("b", "s", "q"), split="q"),
        LayerOp("attention.reshape", a + ("reshape",), "Reshape", ("attn_t",), "attn_flat", ("b", "s", "q"), split="q"),
    ]
    ops += _linear(a, "wo", "attn_flat", "h", "q", col=False, act=None, reshape=reshape, wname="attention.wo.weight")
    ops.append(LayerOp("add", ("add",), "Add", ("x", "wo_out"), "h1", ("b", "s", "h")))
    ops += _rmsnorm("ffn_norm", "h1")
    f = ("feed_forward",)
    ops += _linear(f, "w1", "ffn_norm_out", "f", "h", col=True, act="silu", reshape=reshape, wname="feed_forward.w1.weight")
    ops += _linear(f, "w3", "ffn_norm_out", "f", "h", col=True, act=None, reshape=reshape, wname="feed_forward.w3.weight")
    ops.append(LayerOp("feed_forward.mul", f + ("mul",), "Mul", ("w3_out", "w1_out"), "gated", ("b", "s", "f"), saved=(0, 1), split="f"))
    ops += _linear(f, "w2", "gated", "h", "f", col=False, act=None, reshape=reshape, wname="feed_forward.w2.weight")
    ops.append(LayerOp("add_1", ("add",), "Add", ("h1", "w2_out"), "y", ("b", "s", "h"), cell_output=True))
    return ops


def cell_tree(ops: Iterable[LayerOp]) -> Cell:
    """The layer's cell tree (attribute names only), derived from an op list."""
    classes = {
        "attention_norm": "LlamaRMSNorm",
        "ffn_norm": "LlamaRMSNorm",
        "attention": "LLamaAttention",
        "feed_forward": "LlamaFeedForward",
        "apply_rotary_emb": "LlamaRotaryEmbedding",
        "activation": "LlamaSiLU",
        "flash_attention": "FlashAttention",
    }

    def build(name: str, paths: list[tuple[str, ...]]) -> Cell:
        children: dict[str, list[tuple[str, ...]]] = {}
        prims: list[str] = []
        for p in paths:
            if len(p) == 1:
                if p[0] not in prims:
                    prims.append(p[0])
            else:
                children.setdefault(p[0], []).append(p[1:])
        kids = []
        for n, sub in children.items():
            kids.append(build(n, sub))
        if name in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
            cls = "Linear"
        else:
            cls = classes.get(name, "Cell")
        return Cell(name, cls, tuple(kids), tuple(p for p in prims if p not in children))

    paths = []
    for op in ops:
        paths.append(op.path)
    return build("layer", paths)


@dataclass(frozen=True)
class LayerStructure:
    """Ops of a layer plus lookup helpers."""

    ops: tuple[LayerOp, ...]
    tree: Cell = field(compare=False)

    @property
    def by_out(self) -> dict[str, LayerOp]:
        return {o.out: o for o in self.ops}

    def consumers(self, tensor: str) -> list[LayerOp]:
        return [o for o in self.ops if tensor in o.inputs]

    def op(self, op_id: str) -> LayerOp:
        for o in self.ops:
            if o.id == op_id:
                return o
        raise KeyError(op_id)


def llama_layer(*, fine_grain_interleave: bool = False, rotary_fp32: bool = False) -> LayerStructure:
    ops = tuple(llama_layer_ops(fine_grain_interleave=fine_grain_interleave, rotary_fp32=rotary_fp32))
    return LayerStructure(ops, cell_tree(ops))


def cell_paths(tree: Cell) -> list[tuple[str, ...]]:
    """Every attribute path in the tree (cells and primitives), for pattern checks."""
    out: list[tuple[str, ...]] = []

    def walk(c: Cell, prefix: tuple[str, ...]) -> None:
        for k in c.children:
            out.append(prefix + (k.name,))
            walk(k, prefix + (k.name,))
        for p in c.prims:
            out.append(prefix + (p,))

    walk(tree, ())
    return out
