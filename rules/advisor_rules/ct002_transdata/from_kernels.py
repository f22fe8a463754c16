"""Groups from ``kernel_details`` alone: sandwiches in kernel order and weight conversions, from formats and shapes."""

from __future__ import annotations

from typing import Any

import pandas as pd

from advisor_rules._common import cell_path_in_layer, kernel_scope, layer_of_scope
from advisor_rules.ct002_transdata.groups import SPECIAL_FORMATS, TRANS_OPS, Group, norm_fmt


def from_kernels(rank: Any) -> dict[str, Group]:
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
    is_t = k["type"].isin(TRANS_OPS).to_numpy()
    fin = k["input_formats"].map(norm_fmt).to_numpy()
    fout = k["output_formats"].map(norm_fmt).to_numpy()
    groups: dict[str, Group] = {}
    if "input_shapes" in k:
        param = params_from_kernels(k, is_t, fout)
        if param is not None:
            groups["param"] = param
    unaligned = unaligned_kernel_matmuls(k)
    grads: dict[str, Group] = {}
    for i in range(len(k) - 2):
        if not is_t[i] or is_t[i + 1] or not is_t[i + 2]:
            continue
        if not (fin[i] in SPECIAL_FORMATS and fout[i] == fin[i + 2] and fout[i + 2] == fin[i]):
            continue
        if cell_of(k.at[i, "name"]) in unaligned or cell_of(k.at[i + 2, "name"]) in unaligned:
            continue  # conversions of an unaligned MatMul's cell: AL001
        x = str(k.at[i + 1, "name"])
        scope = kernel_scope(x) or x
        xtype = str(k.at[i + 1, "type"])
        key = ".".join(cell_path_in_layer(scope)) or xtype
        g = groups.setdefault(f"sandwich|{key}|{xtype}", Group("sandwich", key, f"{xtype} ({key})"))
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


def unaligned_kernel_matmuls(k: pd.DataFrame) -> set[str]:
    """Cells (forward scope, see :func:`cell_of`) of MatMul kernels with a dim (of an operand's last two)
    not a multiple of 16: the TransData launched in those cells pad for the MatMul (AL001)."""
    if "input_shapes" not in k:
        return set()
    out = set()
    for i in k.index[k["type"].astype(str).str.contains("MatMul")]:
        if any(d > 0 and d % 16 for shape in shapes_of(k.at[i, "input_shapes"]) for d in shape[-2:]):
            out.add(cell_of(k.at[i, "name"]))
    return out


def params_from_kernels(k: pd.DataFrame, is_t: Any, fout: Any) -> Group | None:
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
        ins = shapes_of(k.at[i, "input_shapes"])
        if len(ins) < 2:
            continue
        weights.setdefault(cell, set()).add(ins[1])
        fmts = [norm_fmt(f) for f in str(k.at[i, "input_formats"]).split(";")]
        if fmts and fmts[0] in SPECIAL_FORMATS:  # the activation is converted too: a same-shaped TransData is ambiguous
            acts.setdefault(cell, set()).update([ins[0], *shapes_of(k.at[i, "output_shapes"] if "output_shapes" in k else None)])
    if not weights:
        return None
    g = Group("param", "param", "weights")
    for i in k.index[is_t & ~names.str.startswith("Gradients/").to_numpy() & scopes.notna().to_numpy()]:
        cell = str(scopes[i]).rpartition("/")[0]
        ins = shapes_of(k.at[i, "input_shapes"])
        if fout[i] not in SPECIAL_FORMATS or not ins or ins[0] not in weights.get(cell, ()) or ins[0] in acts.get(cell, ()):
            continue
        if names[i] not in g.kernel_names:
            g.kernel_names.append(names[i])
        lay = layer_of_scope(cell)
        weight = (f"layers.{lay}." if lay is not None else "") + ".".join(cell_path_in_layer(cell + "/x-op0"))
        if weight not in g.params:
            g.params.append(weight)
        if lay is not None:
            g.layers.add(lay)
        g.formats = f"{norm_fmt(k.at[i, 'input_formats'])}→{fout[i]}"
    return g if g.kernel_names else None


def cell_of(kernel_name: Any) -> str:
    """The forward cell a kernel belongs to: ``Gradients/`` and ``Grad_*`` segments and the op segment dropped."""
    scope = kernel_scope(str(kernel_name)) or str(kernel_name)
    segs = [x for x in scope.removeprefix("Gradients/").split("/")[:-1] if not x.startswith("Grad_")]
    return "/".join(segs)


def shapes_of(text: Any) -> list[tuple[int, ...]]:
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
