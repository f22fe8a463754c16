"""Groups from ``kernel_details`` alone: sandwiches in kernel order and weight conversions, from formats and shapes.

Works on the rank's op view: formats, shapes and cells come from its distinct ops; kernel
order from its timeline, searched with numpy (no loop over kernel rows). The sandwich
search needs the timeline, so it runs where the view was built (``rank_evidence``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor_rules._common import cell_path_in_layer, layer_of_scope, unaligned_matmul_cells
from advisor_rules.ct002_transdata.groups import SPECIAL_FORMATS, TRANS_OPS, Group

if TYPE_CHECKING:  # pragma: no cover - heavy imports are made where used
    import numpy as np
    import pandas as pd


def from_kernels(view: Any) -> dict[str, Group]:
    """Sandwiches in kernel order: TransData special→ND, one op X, TransData back (formats from the columns).

    Also counted: further TransData just before X into the same format (X's other inputs),
    and TransData of X's backward (``…/<cell>/Grad_<X>/TransData-op*``: MindSpore names a
    backward op after its forward op).
    """
    import numpy as np

    if view is None or not view.has_columns("input_formats", "output_formats", "start_ns") or view.timeline is None:
        return {}
    first_pos = _first_positions(view)
    ops = view.ops[first_pos < np.iinfo(np.int64).max]  # kernels without a start time are not in kernel order
    groups: dict[str, Group] = {}
    if view.has_columns("input_shapes"):
        param = params_from_ops(ops, first_pos)
        if param is not None:
            groups["param"] = param
    for key, g in sandwiches(view, first_pos, unaligned_matmul_cells(ops)).items():
        groups[key] = g
    return groups


def _first_positions(view: Any) -> np.ndarray:
    """Per op: its first position in kernel order (ops never launched with a start time sort last)."""
    import numpy as np

    seq = view.timeline.op
    first = np.full(len(view.ops), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, seq, np.arange(len(seq), dtype=np.int64))  # one pass; np.unique would sort every kernel
    return first


def _stable_order(streams: np.ndarray) -> np.ndarray:
    """``np.argsort(streams, kind="stable")``, as a radix sort when the ids span less than 2^15 (a device has a
    few dozen streams): numpy sorts 16-bit integers in linear time, 64-bit ones by merging (5x slower at 1 M)."""
    import numpy as np

    if len(streams) == 0:
        return np.zeros(0, np.intp)
    lo, hi = int(streams.min()), int(streams.max())
    if lo == hi:  # one stream: already in order
        return np.arange(len(streams))
    if hi - lo < (1 << 15):
        return np.argsort((streams - lo).astype(np.int16), kind="stable")
    return np.argsort(streams, kind="stable")


def sandwiches(view: Any, first_pos: np.ndarray, unaligned: set[str]) -> dict[str, Group]:
    """TransData special→ND, op X, TransData ND→special, in kernel order on their stream; grouped by X's cell path
    and type.

    Kernel order is each stream's own (the timeline's ``Stream ID``): HCCL kernels and AI_CPU/DSA kernels of
    other streams start in between on a real device (msprof-analyze's sample: AI_CPU on stream 17 beside the
    AI cores' 16, HCCL rows without a stream) and never break a sandwich; communication kernels never sit in one.
    The three kernels are consecutive on one stream, or — X on another stream (an op that falls back to
    AI_CPU) — the two TransData are consecutive on theirs and X is the one kernel that starts after the first
    ends and ends before the second starts (the data dependence a → X → b). A profile without stream ids is
    one stream.
    """
    import numpy as np
    import pandas as pd

    ops = view.ops
    tl = view.timeline
    comm_op = ops["is_comm"].to_numpy(bool)
    glob = np.flatnonzero(~comm_op[tl.op])  # non-communication kernels, by start
    order = glob[_stable_order(tl.stream[glob])]  # per stream, each in start order
    seq = tl.op[order].astype(np.int64)
    strm = tl.stream[order]
    n = len(seq)
    if n < 3:
        return {}
    is_t_op = ops["type"].isin(TRANS_OPS).to_numpy()
    fmt_codes, fmt_names = pd.factorize(pd.concat([ops["in_format"], ops["out_format"]], ignore_index=True).fillna(""))
    fin_op, fout_op = fmt_codes[: len(ops)], fmt_codes[len(ops):]
    special = np.isin(fmt_names, list(SPECIAL_FORMATS))
    is_t, fin, fout = is_t_op[seq], fin_op[seq], fout_op[seq]
    cell_blocked = ops["forward_cell"].isin(unaligned).to_numpy()  # conversions of an unaligned MatMul's cell: AL001

    def pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Positions ``a`` whose TransData leaves a special format that the TransData at ``b`` restores."""
        keep = special[fin[a]] & (fout[a] == fin[b]) & (fout[b] == fin[a]) & (strm[a] == strm[b])
        return keep & ~cell_blocked[seq[a]] & ~cell_blocked[seq[b]]

    # X on the TransData's stream: three consecutive kernels
    i = np.flatnonzero(is_t[:-2] & ~is_t[1:-1] & is_t[2:])
    i = i[pairs(i, i + 2)]
    x, b = seq[i + 1], seq[i + 2]
    # X on another stream: two consecutive TransData, and one kernel elsewhere strictly between them in time
    j = np.flatnonzero(is_t[:-1] & is_t[1:])
    j = j[pairs(j, j + 1)]
    if len(j):
        g_start, g_end = tl.start_ns[glob], tl.end_ns[glob]
        a_end, b_start = tl.end_ns[order[j]], tl.start_ns[order[j + 1]]
        lo = np.searchsorted(g_start, a_end, "left")
        hi = np.searchsorted(g_start, b_start, "left")
        one = (hi - lo) == 1
        k = np.where(one, lo, 0)
        ok = one & (g_end[k] <= b_start) & (tl.stream[glob[k]] != strm[j]) & ~is_t_op[tl.op[glob[k]]]
        j, k = j[ok], k[ok]
        i = np.concatenate([i, j])
        x = np.concatenate([x, tl.op[glob[k]].astype(np.int64)])
        b = np.concatenate([b, seq[j + 1]])
        by_pos = np.argsort(i, kind="stable")
        i, x, b = i[by_pos], x[by_pos], b[by_pos]
    if not len(i):
        return {}
    # A run of TransData with the same formats ending at each candidate: its start, vectorised.
    same_as_prev = np.zeros(n, bool)
    same_as_prev[1:] = is_t[1:] & is_t[:-1] & (fin[1:] == fin[:-1]) & (fout[1:] == fout[:-1]) & (strm[1:] == strm[:-1])
    run_start = np.maximum.accumulate(np.where(same_as_prev, 0, np.arange(n)))
    triples = np.stack([seq[i], x, b], axis=1)
    uniq, inverse = np.unique(triples, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    when = tl.start_ns[order[i]]  # groups in the order their sandwiches first (and last) run
    first_occ = np.full(len(uniq), np.iinfo(np.int64).max, np.int64)
    last_occ = np.full(len(uniq), np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first_occ, inverse, when)
    np.maximum.at(last_occ, inverse, when)
    # every op in a candidate's run, per triple (positions marked with a difference array)
    mark = np.zeros(n + 1, np.int64)
    np.add.at(mark, run_start[i], 1)
    np.add.at(mark, i + 1, -1)
    in_run = np.flatnonzero(np.cumsum(mark)[:n] > 0)
    owner = inverse[np.minimum(np.searchsorted(i, in_run), len(i) - 1)]  # the candidate whose run holds the position
    # per triple, the ops of its run walked back from the candidate (each op at its last position … first)
    run = pd.DataFrame({"t": owner, "op": seq[in_run], "pos": in_run}).groupby(["t", "op"], sort=False)["pos"].min()
    run_t = run.index.get_level_values(0).to_numpy()
    by_t_pos = np.lexsort((-run.to_numpy(), run_t))
    run_t, run_op = run_t[by_t_pos], run.index.get_level_values(1).to_numpy()[by_t_pos]
    bounds = np.searchsorted(run_t, np.arange(len(uniq) + 1))

    groups: dict[str, Group] = {}
    grads: dict[str, Group] = {}
    names = ops["name"].to_numpy()
    scopes, types = ops["scope"].to_numpy(), ops["type"].to_numpy()
    for t in np.argsort(first_occ, kind="stable"):
        a, x, b = (int(v) for v in uniq[t])
        scope = scopes[x] or names[x]
        xtype = str(types[x])
        key = ".".join(cell_path_in_layer(scope)) or xtype
        g = groups.setdefault(f"sandwich|{key}|{xtype}", Group("sandwich", key, f"{xtype} ({key})"))
        for op in run_op[bounds[t]:bounds[t + 1]].tolist():
            if names[op] not in g.kernel_names:
                g.kernel_names.append(str(names[op]))
        if names[b] not in g.kernel_names:
            g.kernel_names.append(str(names[b]))
        cell, _, op_seg = str(scope).rpartition("/")
        grads[f"{cell.split('/', 1)[-1]}/Grad_{op_seg.split('-op')[0]}/"] = g
        lay = layer_of_scope(scope)
        if lay is not None:
            g.layers.add(lay)
    for t in np.argsort(last_occ, kind="stable"):  # the formats of the group's last sandwich in kernel order
        a, _, b = (int(v) for v in uniq[t])
        x = int(uniq[t][1])
        scope = scopes[x] or names[x]
        key = ".".join(cell_path_in_layer(scope)) or str(types[x])
        groups[f"sandwich|{key}|{types[x]}"].formats = (
            f"{fmt_names[fin_op[a]]}→{fmt_names[fout_op[a]]} … {fmt_names[fin_op[b]]}→{fmt_names[fout_op[b]]}")
    if grads:
        trans = np.flatnonzero(is_t_op)
        index, grad_groups = _fragment_index(grads), list(grads.values())
        for op in trans[np.argsort(first_pos[trans], kind="stable")].tolist():
            nm = str(names[op])
            for g in _groups_named_in(nm, index, grad_groups):
                if nm not in g.kernel_names:
                    g.kernel_names.append(nm)
    return groups


def _groups_named_in(name: str, index: dict[str, list[tuple[int, str]]], groups: list[Group]) -> list[Group]:
    """The groups whose fragment (``<cell>/Grad_<op>/``, :func:`_fragment_index`) ``name`` contains, in the
    fragments' order: what ``[g for frag, g in grads.items() if frag in name]`` gives, without trying every
    fragment on every name (a fragment in the name has its ``/Grad_<op>/`` on one of the name's ``/Grad_``)."""
    hits: set[int] = set()
    q = name.find("/Grad_")
    while q >= 0:
        end = name.find("/", q + 1)
        if end >= 0:
            hits.update(order for order, cell in index.get(name[q:end + 1], ()) if name.endswith(cell, 0, q))
        q = name.find("/Grad_", q + 1)
    return [groups[i] for i in sorted(hits)]


def _fragment_index(grads: dict[str, Group]) -> dict[str, list[tuple[int, str]]]:
    """``/Grad_<op>/`` → [(the fragment's position in ``grads``, its ``<cell>`` part)]."""
    index: dict[str, list[tuple[int, str]]] = {}
    for order, frag in enumerate(grads):
        cut = frag.rfind("/Grad_")  # the op name after it has no "/": this is the fragment's own
        index.setdefault(frag[cut:], []).append((order, frag[:cut]))
    return index


def params_from_ops(ops: pd.DataFrame, first_pos: np.ndarray) -> Group | None:
    """TransData into a special format of a Linear's weight, from ``kernel_details`` alone.

    A forward MatMul kernel of a cell reads (activation, weight): its second input shape is
    the weight's. A TransData of the same cell (forward scope; the backward MatMul reads the
    weight through a conversion in the forward cell too) into a special format whose input
    has the weight's shape converts the weight — on every use — unless the MatMul also takes
    its activation in that format and the activation has the same shape (then it is ambiguous
    and left out).
    """
    import numpy as np

    forward = (~ops["name"].str.startswith("Gradients/") & ops["scope"].notna()).to_numpy(bool)
    weights: dict[str, set[tuple[int, ...]]] = {}
    acts: dict[str, set[tuple[int, ...]]] = {}
    mm = ops["type"].astype(str).str.contains("MatMul").to_numpy(bool) & forward
    # distinct ops, only the columns read (a namedtuple per op of the whole view costs more)
    for scope, ins, in_formats, outs in zip(*(ops[c].to_numpy()[mm] for c in
                                              ("scope", "in_shapes", "in_formats", "out_shapes"))):
        cell = str(scope).rpartition("/")[0]
        if len(ins) < 2:
            continue
        weights.setdefault(cell, set()).add(ins[1])
        if in_formats and in_formats[0] in SPECIAL_FORMATS:  # the activation is converted too: ambiguous
            acts.setdefault(cell, set()).update([ins[0], *outs])
    if not weights:
        return None
    g = Group("param", "param", "weights")
    # forward TransData into a special format (any other is skipped below), in kernel order
    trans = np.flatnonzero(ops["type"].isin(TRANS_OPS).to_numpy(bool) & forward
                           & ops["out_format"].isin(SPECIAL_FORMATS).to_numpy(bool))
    trans = trans[np.argsort(first_pos[ops.index.to_numpy()[trans]], kind="stable")]
    weight_of: dict[str, tuple[int | None, str]] = {}
    for scope, name, ins, in_format, out_format in zip(*(ops[c].to_numpy()[trans] for c in
                                                         ("scope", "name", "in_shapes", "in_format", "out_format"))):
        cell = str(scope).rpartition("/")[0]
        if not ins or ins[0] not in weights.get(cell, ()) or ins[0] in acts.get(cell, ()):
            continue
        if name not in g.kernel_names:
            g.kernel_names.append(str(name))
        if cell not in weight_of:
            lay = layer_of_scope(cell)
            weight_of[cell] = (lay, (f"layers.{lay}." if lay is not None else "")
                               + ".".join(cell_path_in_layer(cell + "/x-op0")))
        lay, weight = weight_of[cell]
        if weight not in g.params:
            g.params.append(weight)
        if lay is not None:
            g.layers.add(lay)
        g.formats = f"{in_format}→{out_format}"
    return g if g.kernel_names else None
