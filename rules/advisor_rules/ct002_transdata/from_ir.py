"""Groups from the backend kernel graph: TransData on a weight, around one ND-only op, or undone at once."""

from __future__ import annotations

from typing import Any

from advisor_rules._common import cell_path_in_layer
from advisor_rules.ct002_transdata.groups import MATMUL_OPS, SPECIAL_FORMATS, TRANS_OPS, Group, add_layer, norm_fmt


def formats_of(node: Any) -> tuple[str, str]:
    """(source, destination) format of a TransData node: its attributes, else its device formats."""
    pa = node.primitive_attrs
    src = pa.get("src_format")
    dst = pa.get("dst_format")
    if (src is None or dst is None) and node.device_in and node.device_out:
        src = src or node.device_in[0].format
        dst = dst or node.device_out[0].format
    return norm_fmt(src), norm_fmt(dst)


def unaligned_matmul(node: Any) -> bool:
    """A MatMul-like node with a tensor dim (of its last two) not a multiple of 16: AL001's TransData."""
    if node is None or getattr(node, "op", None) not in MATMUL_OPS:
        return False
    for t in [*node.in_types, *node.out_types]:
        shape = getattr(t, "shape", None) or ()
        if any(d is not None and d > 0 and d % 16 for d in shape[-2:]):
            return True
    return False


def param_of(ir: Any, node: Any) -> Any | None:
    """The parameter ``node`` reads (directly, or through ``Load``), else ``None``."""
    if not node.operand_refs:
        return None
    base = ir.resolve(node, node.operand_refs[0])
    if getattr(base, "op", None) == "Load" and base.operand_refs:
        base = ir.resolve(base, base.operand_refs[0])
    return base if base is not None and not hasattr(base, "op") else None


def from_ir(ir: Any) -> dict[str, Group]:
    """Groups in one backend kernel graph: weights, cancelling pairs, sandwiches and their backward TransData."""
    consumers: dict[tuple[str, int], list[Any]] = {}
    for n in ir.iter_nodes():
        for ref in n.operand_refs:
            if ref.kind == "node" and ref.index is not None:
                consumers.setdefault((n.graph, ref.index), []).append(n)

    def users(n: Any) -> list[Any]:
        return consumers.get((n.graph, n.index), []) if n.index is not None else []

    groups: dict[str, Group] = {}
    used: set[int] = set()
    trans = sorted((n for op in TRANS_OPS for n in ir.nodes_by_op(op)), key=lambda n: n.line or 0)
    for t in trans:
        if id(t) in used:
            continue
        src, dst = formats_of(t)
        # (2) on a parameter: every use of the weight converts it again
        param = param_of(ir, t)
        if param is not None:
            name = (getattr(param, "name", None) or str(param)).removeprefix("%")
            g = groups.setdefault("param", Group("param", "param", "weights", path=str(ir.path)))
            g.add(t)
            if name not in g.params:
                g.params.append(name)
            g.formats = f"{src}→{dst}"
            g.culprit_nodes += [u for u in users(t) if u.op not in TRANS_OPS][:1] if not g.culprit_nodes else []
            add_layer(g, t)
            used.add(id(t))
            continue
        prod = ir.resolve(t, t.operand_refs[0]) if t.operand_refs else None
        if unaligned_matmul(prod) or any(unaligned_matmul(u) for u in users(t)):
            continue  # the padding conversions of an unaligned MatMul: AL001
        # (3) back-to-back
        if getattr(prod, "op", None) in TRANS_OPS and id(prod) not in used:
            p_src, p_dst = formats_of(prod)
            if p_src == dst:
                key = ".".join(cell_path_in_layer(t.scope)) or (t.scope or "")
                g = groups.setdefault(f"b2b|{key}", Group("back-to-back", key, key, path=str(ir.path)))
                g.add(prod)
                g.add(t)
                g.formats = f"{p_src}→{p_dst}→{dst}"
                add_layer(g, t)
                used.update({id(prod), id(t)})
                continue
        # (1) sandwich: this TransData leaves a special format; its single consumer X feeds a TransData back
        if src in SPECIAL_FORMATS and dst not in SPECIAL_FORMATS:
            # a recompute copy (duplicated: Bool(1)) reads the same saved input: not a second consumer
            us = [u for u in users(t) if not getattr(u, "is_duplicated", False)]
            if len(us) != 1 or us[0].op in TRANS_OPS or us[0].op in MATMUL_OPS:
                continue
            x = us[0]
            back = [b for b in users(x) if b.op in TRANS_OPS and formats_of(b) == (dst, src)]
            if not back:
                continue
            key = ".".join(cell_path_in_layer(x.scope)) or f"{x.op}"
            g = groups.setdefault(f"sandwich|{key}|{x.op}", Group("sandwich", key, f"{x.op} ({key})", path=str(ir.path)))
            for n in (t, *back):
                g.add(n)
                used.add(id(n))
            if all(x is not c for c in g.culprit_nodes):
                g.culprit_nodes.append(x)
            g.formats = f"{src}→{dst} … {dst}→{src}"
            add_layer(g, x)
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
