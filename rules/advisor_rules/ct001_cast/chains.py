"""Evidence from the IR: Cast chains in one rank's front-end and backend graphs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from advisor_core.engine import RuleContext
from advisor_rules._common import PRECISION, cell_path_in_layer, layer_of_scope, user_source
from advisor_rules.ct001_cast.origin import Origin, chain_origin

COMPUTE_16BIT = {"float16", "bfloat16", "fp16", "bf16"}
# Config keys whose 32-bit setting makes MindFormers cast around a block, by the cell it lives in.
CONFIG_CASTS = {
    "apply_rotary_emb": ("model.rotary_dtype", "rotary embedding"),
    "softmax": ("model.softmax_compute_type", "softmax"),
}


@dataclass
class Chain:
    """Casts with one cause (a round trip, a no-op, a backend fight, a config key), over layers and stages."""

    kind: str  # lossy-round-trip | lossless-round-trip | no-op | backend-fight | config
    nodes: list[Any]
    dtypes: list[str]
    key: str  # grouping key (same pattern across layers)
    config_key: str | None = None
    layers: set[int] = field(default_factory=set)
    path: str | None = None  # the IR file the chain was found in
    inner: list[Any] = field(default_factory=list)  # ops running in 32 bits between a config chain's casts
    cost: dict[int, float] = field(default_factory=dict)  # µs per step by pipeline stage (casts + inner ops)
    inner_cost: dict[int, float] = field(default_factory=dict)  # the inner ops' share of ``cost``
    measured: bool = False
    how: str = ""
    origin: Origin = field(default_factory=lambda: Origin("unknown"))  # who wrote the (non-backend) casts
    backend_first: bool = False  # backend-fight: the backend's cast comes first and the other undoes it
    kernel: tuple[str, str] | None = None  # backend-fight: (op, scope) of the kernel lacking the middle dtype


def dtype_of(t: Any) -> str | None:
    """The dtype of an IR tensor type (``None`` for none)."""
    return getattr(t, "dtype", None) if t is not None else None


def cast_dtypes(ir: Any, node: Any) -> tuple[str | None, str | None]:
    """(source, destination) dtype of a Cast as its kernel runs: the device types of a backend kernel graph.

    In ``graph_build`` the host types follow the graph (AMP's float16) while the device types say what the
    kernels really read and write: a backend cast after a kernel without float16 is ``Float16→Float16`` on
    the host line but ``Float32→Float16`` on the device line — a conversion, not a no-op. Without device
    types: the host type lines, else the compact dump's hints.
    """
    d_in, d_out = node.device_in, node.device_out
    src = getattr(d_in[0], "dtype", None) if d_in else None
    dst = getattr(d_out[0], "dtype", None) if d_out else None
    if src and dst:
        return src, dst
    return ir.in_dtype(node, 0), ir.out_dtype(node)


def detect(ctx: RuleContext, dumps: Any) -> dict[str, Chain]:
    """Chains in one rank's front-end and backend graphs, grouped by kind and key; casts seen in both count once."""
    chains: dict[str, Chain] = {}
    seen_scopes: set[str] = set()
    for stage in ("frontend", "backend"):
        ir = ctx.ir_graph(stage, dumps)
        if ir is None:
            continue
        fwd_by_uid = {n.unique_id: n for n in ir.iter_nodes() if n.unique_id}
        for chain in find_chains(ir, ctx, fwd_by_uid):
            scopes = tuple(n.scope or "" for n in chain.nodes + chain.inner)
            if any(s in seen_scopes for s in scopes if s):
                continue  # the same casts survive into the backend graph: count them once
            seen_scopes.update(s for s in scopes if s)
            key = f"{chain.kind}|{'backend-first|' if chain.backend_first else ''}{chain.key}"
            if key in chains:
                chains[key].nodes.extend(chain.nodes)
                chains[key].inner.extend(chain.inner)
                chains[key].layers |= chain.layers
                chains[key].dtypes = chains[key].dtypes or chain.dtypes
            else:
                chain.path = str(ir.path)
                chains[key] = chain
    # inner ops alone (no cast of that key found) are not a finding
    return {k: c for k, c in chains.items() if c.nodes}


def find_chains(ir: Any, ctx: RuleContext, fwd_by_uid: dict[str, Any]) -> Iterable[Chain]:
    """Every chain in one graph: round trips and no-ops, then the config-forced pairs and the ops between them."""
    casts = ir.nodes_by_op("Cast")
    cfg = ctx.config
    compute = cfg.compute_dtype if cfg is not None else None
    used: set[int] = set()
    consumers: dict[tuple[str, int], Any] | None = None
    for node in casts:
        if id(node) in used:
            continue
        src_dt, dst_dt = cast_dtypes(ir, node)
        if src_dt is None or dst_dt is None:
            continue
        prod = None
        for ref in node.operand_refs[:1]:
            p = ir.resolve(node, ref)
            prod = p if getattr(p, "op", None) == "Cast" else None
        layer = layer_of(node, fwd_by_uid)
        if src_dt == dst_dt:
            used.add(id(node))
            yield Chain("no-op", [node], [src_dt, dst_dt], chain_key(node, fwd_by_uid), layers=layer_set(layer),
                        origin=chain_origin([node], fwd_by_uid))
            continue
        if prod is not None and id(prod) not in used:
            p_src = cast_dtypes(ir, prod)[0]
            if p_src == dst_dt and p_src is not None:
                used.update({id(node), id(prod)})
                if node.is_backend_cast != prod.is_backend_cast:
                    kind = "backend-fight"
                else:
                    kind = "lossy-round-trip" if PRECISION.get(src_dt, 0) < PRECISION.get(p_src, 0) else "lossless-round-trip"
                chain = Chain(kind, [prod, node], [p_src, src_dt, dst_dt], chain_key(node, fwd_by_uid),
                              layers=layer_set(layer), origin=chain_origin([prod, node], fwd_by_uid),
                              backend_first=kind == "backend-fight" and prod.is_backend_cast)
                if kind == "backend-fight":
                    if chain.backend_first:  # the kernel that computed in the wider dtype feeds the backend's cast
                        k = ir.resolve(prod, prod.operand_refs[0]) if prod.operand_refs else None
                    else:  # the kernel the backend casts back for reads its cast
                        if consumers is None:
                            consumers = first_consumers(ir)
                        k = consumers.get((node.graph, node.index)) if node.index is not None else None
                    if getattr(k, "op", None):
                        chain.kernel = (k.op, k.scope or "")
                yield chain
                continue
    # Config-driven pairs: Cast up → op(s) → Cast down inside a cell a config key controls.
    if cfg is None or compute not in COMPUTE_16BIT:
        return
    active = {cell: key for cell, (key, _what) in CONFIG_CASTS.items() if str(cfg.get(key, "")).lower() in ("float32", "fp32")}
    if not active:
        return
    for node in casts:
        if id(node) in used:
            continue
        path = cell_path_in_layer(scope_of(node, fwd_by_uid))
        for cell, key in active.items():
            if cell in path:
                used.add(id(node))
                src_dt = dtype_of(node.in_types[0] if node.in_types else None) or "?"
                dst_dt = dtype_of(node.out_types[0] if node.out_types else None) or "?"
                yield Chain("config", [node], [src_dt, dst_dt], f"{key}|{'.'.join(path[:path.index(cell) + 1])}",
                             config_key=key, layers=layer_set(layer_of(node, fwd_by_uid)))
    # The ops between those casts (forward and backward) run on 32-bit data: they are part of the cost.
    for node in ir.iter_nodes():
        if node.op in ("Cast", "Load") or node.kernel_full_name is None:
            continue
        if not any(dtype_of(t) == "Float32" for t in node.in_types):
            continue
        path = cell_path_in_layer(scope_of(node, fwd_by_uid))
        for cell, key in active.items():
            if cell in path:
                yield Chain("config", [], [], f"{key}|{'.'.join(path[:path.index(cell) + 1])}", config_key=key,
                             inner=[node], layers=layer_set(layer_of(node, fwd_by_uid)))


def first_consumers(ir: Any) -> dict[tuple[str, int], Any]:
    """(graph, node index) → the first node reading that node's output."""
    out: dict[tuple[str, int], Any] = {}
    for n in ir.iter_nodes():
        for ref in n.operand_refs:
            if ref.kind == "node" and ref.index is not None:
                out.setdefault((n.graph, ref.index), n)
    return out


def scope_of(node: Any, fwd_by_uid: dict[str, Any]) -> str | None:
    """The scope of the node's forward op (backward nodes carry another instance's scope)."""
    fid = node.forward_unique_id
    if fid and fid in fwd_by_uid:
        return fwd_by_uid[fid].scope
    return node.scope


def layer_of(node: Any, fwd_by_uid: dict[str, Any]) -> int | None:
    """The decoder layer of the node's forward op (``None`` outside a layer)."""
    return layer_of_scope(scope_of(node, fwd_by_uid))


def chain_key(node: Any, fwd_by_uid: dict[str, Any]) -> str:
    """What groups a chain across layers: its cell path, else its source line, else its scope."""
    scope = scope_of(node, fwd_by_uid) or ""
    path = cell_path_in_layer(scope)
    if path:
        return ".".join(path)
    src = user_source(node)
    return f"{src[0]}:{src[1]}" if src else scope


def layer_set(v: int | None) -> set[int]:
    """``{v}``, or the empty set for ``None``."""
    return set() if v is None else {v}
