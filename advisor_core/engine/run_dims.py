"""What a run's own evidence says about its model and its layout, without the config.

Read from the IR dumps' parameters and nodes (the final front-end graph, else the parallel
graph) of a few ranks, or, when the IR shows none of it (or there is no IR), from the kernels'
scopes and shapes of the profile's first and last rank (pipeline parallel puts the output head
on the last). Sizes are as one rank holds them: a model-parallel slice of the config's size, and
for column-parallel weights perhaps an optimizer-shard slice of that.

* decoder layers per rank (``model.layers.N.`` parameters, ``N-LLamaDecodeLayer`` scopes),
  whether the rank holds the output head (``lm_head``/``norm_out``) and exchanges
  activations with another stage (``Send``/``Receive``);
* the model width (1-D ``…norm…`` weights, never sliced by model parallel);
* the FFN width: ``feed_forward.w2`` input dim (row-parallel: sliced by exactly
  ``model_parallel``), ``w1``/``w3`` output dim (column-parallel);
* the vocabulary: the embedding table's and ``lm_head``'s rows;
* the attention heads: ``FlashAttentionScore``'s ``head_num`` (heads per model-parallel rank), and
  the attention width ``num_heads × head_dim``: ``attention.wo`` input dim (row-parallel).

:mod:`advisor_core.engine.consistency` holds a training config against this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from advisor_core.config.parameter_names import OPTIMIZER_STATE_PREFIXES

NORM_KERNELS = ("RmsNorm", "LayerNorm", "LayerNormV3", "AddRmsNorm")
#: IR dumps of at most this many ranks are read (first, last and evenly between).
MAX_IR_RANKS = 4

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_HEAD = re.compile(r"(?:^|\.)(?:lm_head|norm_out)\.")
_FFN_ROW = re.compile(r"feed_forward\.w2\.weight$")
_ATTN_ROW = re.compile(r"attention\.wo\.weight$")
_FFN_COL = re.compile(r"feed_forward\.w[13]\.weight$")
_VOCAB = re.compile(r"(?:^|\.)(?:tok_embeddings\.embedding_weight|word_embeddings\.embedding_table|lm_head\.weight)$")


@dataclass(frozen=True)
class Seen:
    """One size the run shows: ``size`` at ``where``; ``exact`` when it is sliced by exactly
    ``model_parallel`` (so the slicing factor gives the run's model parallel)."""

    size: int
    where: str
    exact: bool = False
    shows: str = "are {} wide"  # how ``where`` shows ``size``: "are 5500 wide", "have 16001 rows"


@dataclass
class RankShape:
    """The decoder layers one rank's graph (or kernels) hold."""

    rank: int | None
    where: str
    layers: set[int] = field(default_factory=set)
    has_head: bool = False
    pipelined: bool = False  # Send/Receive to another pipeline stage


@dataclass
class RunShape:
    """Everything :func:`run_shape` found; ``layers_from`` says whether the layers came from the
    ``"IR dumps"`` or the ``"kernels"``."""

    ranks: list[RankShape] = field(default_factory=list)
    dims: dict[str, list[Seen]] = field(default_factory=dict)  # hidden, ffn, vocab, heads, qwidth
    ir_rank_ids: list[int] = field(default_factory=list)
    layers_from: str = ""

    def add(self, role: str, seen: list[Seen]) -> None:
        if seen and not self.dims.get(role):
            self.dims[role] = seen


def run_shape(run: Any, ir: Any) -> RunShape:
    """Read the run's layers, dims and stage split from the IR ``ir`` and the profile ``run``."""
    shape = RunShape()
    if ir is not None:
        shape.ir_rank_ids = sorted(r for r in ir.ranks if r is not None)
        _from_ir(ir, shape)
    if run is not None and not shape.ranks and not shape.dims:
        _from_kernels(run, shape)  # builds two ranks' op views on the client: only when the IR showed nothing
    return shape


# -- IR ------------------------------------------------------------------------------
def _sample(ids: list[Any]) -> list[Any]:
    if len(ids) <= MAX_IR_RANKS:
        return ids
    step = (len(ids) - 1) / (MAX_IR_RANKS - 1)
    return [ids[i] for i in sorted({round(i * step) for i in range(MAX_IR_RANKS)})]


def _from_ir(ir: Any, shape: RunShape) -> None:
    dumps = sorted(ir.ranks.values(), key=lambda r: (r.rank is None, r.rank or 0))
    found: dict[str, list[Seen]] = {}
    for rd in _sample(dumps):
        parsed, f = _graph_of(rd)
        if parsed is None:
            continue
        where = f"{'' if rd.rank is None else f'rank_{rd.rank}/'}{f.path.name}"
        rank = RankShape(rd.rank, where)
        for p in parsed.params or []:
            name = p.name or ""
            dims = getattr(p.type, "shape", None) if p.type is not None else None
            if name.startswith(OPTIMIZER_STATE_PREFIXES):
                continue
            m = _LAYER.search(name)
            if m:
                rank.layers.add(int(m.group(1)))
            rank.has_head = rank.has_head or bool(_HEAD.search(name))
            if not dims or any(d is None or d <= 0 for d in dims):
                continue
            if len(dims) == 1 and "norm" in name.lower():
                found.setdefault("hidden", []).append(Seen(int(dims[0]), f"the norm weights in {where}"))
            elif len(dims) == 2 and _FFN_ROW.search(name):
                found.setdefault("ffn", []).append(Seen(int(dims[1]), f"the feed_forward.w2 weights in {where}", True))
            elif len(dims) == 2 and _ATTN_ROW.search(name):
                found.setdefault("qwidth", []).append(Seen(int(dims[1]), f"the attention.wo weights in {where}", True))
            elif len(dims) == 2 and _FFN_COL.search(name):
                found.setdefault("ffn", []).append(Seen(int(dims[0]), f"the feed_forward.w1/w3 weights in {where}"))
            elif len(dims) == 2 and _VOCAB.search(name):
                found.setdefault("vocab", []).append(Seen(int(dims[0]), f"the embedding/lm_head weights in {where}",
                                                       shows="have {} rows"))
        for node in parsed.nodes_by_op("FlashAttentionScore"):
            heads = node.primitive_attrs.get("head_num")
            if isinstance(heads, int) and heads > 0:
                found.setdefault("heads", []).append(Seen(heads, f"FlashAttentionScore's head_num in {where}", True,
                                                          shows="is {}"))
        rank.pipelined = bool(parsed.nodes_by_op("Send") or parsed.nodes_by_op("Receive"))
        if rank.layers:
            shape.ranks.append(rank)
    for role, seen in found.items():
        shape.add(role, _distinct(seen))
    if shape.ranks:
        shape.layers_from = "IR dumps"


def _graph_of(rd: Any) -> tuple[Any, Any]:
    for getter in (rd.final_frontend, rd.parallel_graph):
        f = getter()
        if f is None:
            continue
        parsed = rd.parse(f)
        if parsed is not None and parsed.params:
            return parsed, f
    return None, None


def _distinct(seen: list[Seen]) -> list[Seen]:
    """One entry per (size, where): a layer's weights repeat in every layer."""
    out: dict[tuple[int, str], Seen] = {}
    for s in seen:
        out.setdefault((s.size, s.where), s)
    return list(out.values())


# -- kernels -------------------------------------------------------------------------
def _from_kernels(run: Any, shape: RunShape) -> None:
    ranks = sorted(run, key=lambda r: r.rank_id)
    # the first and the last rank: under pipeline parallel, the first and the last stage
    chosen = ranks if len(ranks) <= 2 else [ranks[0], ranks[-1]]
    found: dict[str, list[Seen]] = {}
    kernel_ranks = []
    for rank in chosen:
        view = rank.op_view()
        if view is None or view.ops.empty:
            continue
        ops = view.ops
        where = f"the kernels of rank {rank.rank_id}"
        names = ops["name"].astype(str)
        layers = ops["layer"].dropna()
        rs = RankShape(rank.rank_id, where, {int(x) for x in layers.unique()},
                       has_head=bool(names.str.contains(r"/(?:lm_head|norm_out)-", regex=True).any()),
                       pipelined=bool(ops["type"].astype(str).str.contains(r"send|receive", case=False).any()))
        if rs.layers:
            kernel_ranks.append(rs)
        norms = ops[ops["type"].isin(NORM_KERNELS)]
        widths = {int(s[0][-1]) for s in norms["out_shapes"] if s and s[0] and s[0][-1] > 0}
        kinds = "/".join(sorted(set(norms["type"])))
        found.setdefault("hidden", []).extend(Seen(w, f"the {kinds} kernels of rank {rank.rank_id}") for w in widths)
        forward = ops[~ops["grad"].astype(bool) & ops["type"].astype(str).str.startswith("MatMul")]
        fnames = forward["name"].astype(str)
        w2 = forward[fnames.str.contains(r"/feed_forward-[^/]*/w2-", regex=True)]
        found.setdefault("ffn", []).extend(
            Seen(int(s[0][-1]), f"the feed_forward.w2 MatMul kernels of rank {rank.rank_id}", True)
            for s in set(w2["in_shapes"]) if s and s[0] and s[0][-1] > 0)
        wo = forward[fnames.str.contains(r"/attention-[^/]*/wo-", regex=True)]
        found.setdefault("qwidth", []).extend(
            Seen(int(s[0][-1]), f"the attention.wo MatMul kernels of rank {rank.rank_id}", True)
            for s in set(wo["in_shapes"]) if s and s[0] and s[0][-1] > 0)
        head = forward[fnames.str.contains(r"/lm_head-", regex=True)]
        found.setdefault("vocab", []).extend(
            Seen(int(s[0][-1]), f"the lm_head MatMul kernels of rank {rank.rank_id}",
                 shows="output {} logits per token")
            for s in set(head["out_shapes"]) if s and s[0] and s[0][-1] > 0)
    for role, seen in found.items():
        shape.add(role, _distinct(seen))
    if not shape.ranks and kernel_ranks:
        shape.ranks = kernel_ranks
        shape.layers_from = "kernels"
