"""Building a rank's op view from its kernel table, in columnar code.

A training step launches the same kernels every step and every micro batch, so a
million kernel rows are a few thousand distinct ops. The build:

1. reads the signature columns once, as Arrow with dictionary-encoded text (only
   the columns the file has; nothing converted to Python objects);
2. turns each signature column into integer codes and the codes into one group id
   per row (numpy, no Python loop over rows);
3. aggregates durations per group (count, total, mean, min, max, steps seen);
4. takes the text of one row per group and parses it — names into scope, cell,
   layer and direction; shapes, dtypes and formats into tuples — once per distinct
   op (Python loops over distinct ops only);
5. keeps the per-row timeline (op id, start, end, duration, step, stream) as numpy
   arrays sorted by start, for the few analyses that need kernel order.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor_core.opview.columns import SIGNATURE_COLUMNS, op_view_columns
from advisor_core.opview.names import describe_name
from advisor_core.opview.tensors import norm_format, parse_dtypes, parse_formats, parse_shapes
from advisor_core.opview.view import COMM_CORE_NAMES, OpView, Timeline

TEXT_COLUMNS = tuple(c for c in SIGNATURE_COLUMNS if c != "stream_id")


def build_op_view(rank: Any) -> OpView | None:
    """The op view of ``rank`` (``None`` without a usable kernel table).

    Steps: the kernels' ``Step ID`` when the file has one, else the rank's step
    windows (``ProfilerStep``, else cut from the kernels themselves; each kernel
    assigned to the window it starts in), else the whole profile is one step.
    """
    if not rank.usable("kernels"):
        return None
    have = set(rank.columns("kernels") or [])
    table = rank.arrow_table("kernels", op_view_columns(have))
    if table is None:
        return None
    windows = None
    if "step_id" not in have or table.column("step_id").null_count == table.num_rows:  # a DB export's is empty
        from advisor_core.analyses.step_time import step_windows

        windows = step_windows(rank, kernels=table)  # cut from this table, not a second read of the kernels
    src = rank.table_source("kernels")
    return op_view_from_table(table, windows=windows, source=str(src[0]) if src else "kernels")


def op_view_from_table(table: pa.Table, *, windows: pd.DataFrame | None = None, source: str = "kernels") -> OpView:
    """The op view of a canonical kernel table (Arrow; see module docstring).

    ``windows`` (``step``, ``start_ns``, ``end_ns``) assigns steps when the table has no
    ``step_id``.
    """
    n = table.num_rows
    sig = [c for c in SIGNATURE_COLUMNS if c in table.column_names]
    codes = [_codes(table.column(c)) for c in sig]
    group, first = _group_ids(codes, n)
    n_ops = len(first)

    dur = _float_array(table.column("duration_us"))
    dur0 = np.nan_to_num(dur, nan=0.0)
    start = _int_array(table.column("start_ns")) if "start_ns" in table.column_names else None
    step, steps, step_ids = _steps(table, start, windows, n)

    count = np.bincount(group, minlength=n_ops)
    total = np.bincount(group, weights=dur0, minlength=n_ops)
    min_us, max_us = _min_max(group, dur, n_ops)
    seen_key = group * (len(step_ids) + 1)
    seen_key += step
    seen_key += 1
    seen_key = pc.unique(pa.array(seen_key)).to_numpy()  # Arrow's hash: ~3x pd.unique on a million keys
    seen_ops = seen_key // (len(step_ids) + 1)
    seen_step = seen_key % (len(step_ids) + 1) - 1
    steps_seen = np.bincount(seen_ops[seen_step >= 0], minlength=n_ops)
    first_step = _per_op_extreme(seen_ops, seen_step, n_ops, np.minimum)
    last_step = _per_op_extreme(seen_ops, seen_step, n_ops, np.maximum)

    ops = _describe(table.take(pa.array(first)), sig)
    ops["count"] = count
    ops["total_us"] = total.astype(np.float64)
    ops["mean_us"] = np.divide(total, count, out=np.zeros(n_ops), where=count > 0)
    ops["min_us"] = min_us
    ops["max_us"] = max_us
    ops["per_step_us"] = total / steps
    ops["steps_seen"] = steps_seen
    ops["first_step"] = pd.array([step_ids[i] if i >= 0 else None for i in first_step], dtype="Int64")
    ops["last_step"] = pd.array([step_ids[i] if i >= 0 else None for i in last_step], dtype="Int64")
    ops.index.name = "op"

    timeline = None
    if start is not None:
        stream = _int_array(table.column("stream_id")) if "stream_id" in table.column_names else None
        timeline = Timeline.build(group, start, dur, step, stream)
    return OpView(ops=ops, steps=steps, step_ids=tuple(step_ids), rows=n, source=source, timeline=timeline,
                  has=tuple(table.column_names))


# -- grouping ------------------------------------------------------------------------------------

def _codes(col: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """Integer codes of a column (−1 for missing) and how many distinct codes there can be."""
    if pa.types.is_integer(col.type):
        lo, hi = pc.min_max(col).values()
        if lo.is_valid and hi.as_py() - lo.as_py() < _DIRECT_CODES:  # small ids (streams): the value is the code
            shifted = pc.subtract(pc.cast(col, pa.int64()), lo.as_py())
            return (pc.fill_null(shifted, -1) if col.null_count else shifted).to_numpy(), hi.as_py() - lo.as_py() + 1
        values = (pc.fill_null(col, -(2**62)) if col.null_count else col).to_numpy()
        codes, uniq = pd.factorize(values)
        return codes, len(uniq)
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    if col.num_chunks == 0:
        return np.zeros(0, np.int32), 0
    # One array, not a conversion per CSV block (130 at 1 M rows). Concatenating unifies the chunks'
    # dictionaries, and is quick when they are one already (as the CSV loader hands them out).
    combined = col.combine_chunks()
    indices = combined.indices
    return (pc.fill_null(indices, -1) if indices.null_count else indices).to_numpy(zero_copy_only=False), \
        len(combined.dictionary)


_DIRECT_CODES = 1 << 16


def _group_ids(codes: list[tuple[np.ndarray, int]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """One group id per row (groups numbered in order of first appearance) and each group's first row.

    The codes of the signature columns are combined into one integer key (mixed radix,
    re-numbered by hashing before it could overflow) and the key factorised.
    """
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    key = np.zeros(n, np.int64)
    card = 1
    for c, size in codes:
        radix = size + 1  # +1 for missing (−1 → 0)
        if card * radix >= 2**62:
            key, card = _factorize(key)
        key *= radix  # in place: a new array per step would cost a fresh 8 MB (and its page faults) at 1 M rows
        key += c
        key += 1
        card *= radix
    group, _ = _factorize(key)  # numbered in order of first appearance
    running = np.maximum.accumulate(group)
    is_first = np.empty(n, bool)
    is_first[0] = True
    is_first[1:] = group[1:] > running[:-1]
    return group, np.flatnonzero(is_first)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, int]:
    """int64 codes of ``values`` numbered in order of first appearance, and how many distinct values.

    Arrow's dictionary encoding numbers values as it first meets them, as ``pd.factorize``
    does, in about a quarter of its time on a million keys.
    """
    enc = pc.dictionary_encode(pa.array(values))
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(enc.dictionary)


def _min_max(group: np.ndarray, dur: np.ndarray, n_ops: int) -> tuple[np.ndarray, np.ndarray]:
    """Each group's shortest and longest duration, missing ones skipped (NaN for a group with none)."""
    lo = np.full(n_ops, np.inf)
    hi = np.full(n_ops, -np.inf)
    np.fmin.at(lo, group, dur)  # fmin/fmax skip NaN; numpy's indexed ufuncs are ~6x a pandas groupby here
    np.fmax.at(hi, group, dur)
    none = np.bincount(group, weights=~np.isnan(dur), minlength=n_ops) == 0
    lo[none] = np.nan
    hi[none] = np.nan
    return lo, hi


def _per_op_extreme(ops: np.ndarray, steps: np.ndarray, n_ops: int, ufunc: Any) -> np.ndarray:
    out = np.full(n_ops, -1, np.int64)
    ok = steps >= 0
    if ok.any():
        fill = np.iinfo(np.int64).max if ufunc is np.minimum else -1
        acc = np.full(n_ops, fill, np.int64)
        ufunc.at(acc, ops[ok], steps[ok])
        out = np.where(acc == fill, -1, acc) if ufunc is np.minimum else acc
    return out


def _steps(table: pa.Table, start: np.ndarray | None, windows: pd.DataFrame | None,
           n: int) -> tuple[np.ndarray, int, list[int]]:
    """Per row: index into the step list (−1 outside any step); the step count; the step ids."""
    if "step_id" in table.column_names and table.column("step_id").null_count < n:
        col = table.column("step_id")
        ids = np.sort(pc.unique(col).drop_null().to_numpy())  # a hash of a million ids, then a sort of a few
        raw = pc.fill_null(col, -(2**62)).to_numpy() if col.null_count else col.to_numpy()
        idx = np.searchsorted(ids, raw)
        if col.null_count:
            idx[raw == -(2**62)] = -1
        return idx.astype(np.int64, copy=False), max(len(ids), 1), [int(x) for x in ids]
    if windows is not None and len(windows) and start is not None:
        w = windows.sort_values("start_ns")
        starts = w["start_ns"].to_numpy(np.int64)
        ends = w["end_ns"].to_numpy(np.int64)
        pos = np.searchsorted(starts, start, side="right") - 1
        inside = (pos >= 0) & (start < ends[np.clip(pos, 0, len(ends) - 1)]) & (start != _NO_START)
        order = np.argsort(w["step"].to_numpy())
        ids = w["step"].to_numpy()[order]
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        idx = np.where(inside, back[np.clip(pos, 0, len(order) - 1)], -1)
        return idx.astype(np.int64), len(ids), [int(x) for x in ids]
    return np.zeros(n, np.int64), 1, [0]


_NO_START = np.iinfo(np.int64).min


def _float_array(col: pa.ChunkedArray) -> np.ndarray:
    return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


def _int_array(col: pa.ChunkedArray) -> np.ndarray:
    """int64 values, missing as the smallest int64."""
    return pc.fill_null(pc.cast(col, pa.int64()), _NO_START).to_numpy()


# -- describing the distinct ops -------------------------------------------------------------------

def _describe(rows: pa.Table, sig: Sequence[str]) -> pd.DataFrame:
    """One row per op: its signature text and what is parsed from it (Python over distinct ops only)."""
    cols: dict[str, list[Any]] = {c: _pylist(rows.column(c)) for c in sig}
    names = [str(x) if x is not None else "" for x in cols["name"]]
    parsed = {nm: _parse_name(nm) for nm in dict.fromkeys(names)}
    out: dict[str, Any] = {"name": names}
    for c in ("type", "accelerator_core"):
        out[c] = [str(x) if x is not None else None for x in cols.get(c, [None] * len(names))]
    if "stream_id" in cols:
        out["stream_id"] = pd.array(cols["stream_id"], dtype="Int64")
    out["scope"] = [parsed[nm][0] for nm in names]
    out["primitive"] = [parsed[nm][1] for nm in names]
    out["cell"] = [parsed[nm][2] for nm in names]
    out["forward_cell"] = [parsed[nm][3] for nm in names]
    out["backward"] = [parsed[nm][4] for nm in names]
    out["grad"] = [parsed[nm][5] for nm in names]
    out["layer"] = pd.array([parsed[nm][6] for nm in names], dtype="Int64")
    out["recompute"] = [parsed[nm][7] for nm in names]
    cores = out["accelerator_core"]
    out["is_comm"] = [c in COMM_CORE_NAMES if c else False for c in cores]
    for c in TEXT_COLUMNS[2:]:
        out[c] = [str(x) if x is not None else None for x in cols.get(c, [None] * len(names))]
    out["in_shapes"] = [_shapes(v) for v in out["input_shapes"]]
    out["out_shapes"] = [_shapes(v) for v in out["output_shapes"]]
    out["in_dtypes"] = [_dtypes(v) for v in out["input_dtypes"]]
    out["out_dtypes"] = [_dtypes(v) for v in out["output_dtypes"]]
    out["in_formats"] = [_formats(v) for v in out["input_formats"]]
    out["out_formats"] = [_formats(v) for v in out["output_formats"]]
    out["in_format"] = [_format(v) for v in out["input_formats"]]
    out["out_format"] = [_format(v) for v in out["output_formats"]]
    frame = pd.DataFrame({k: pd.Series(v, dtype=object) if isinstance(v, list) else v for k, v in out.items()})
    frame.index = pd.RangeIndex(len(frame))
    # an empty table must still have the column types rules compute with
    return frame.astype({"backward": bool, "recompute": bool, "is_comm": bool})


def _pylist(col: pa.ChunkedArray) -> list[Any]:
    """The column's values as Python objects; a dictionary column decoded first (ten times faster than per scalar)."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return col.to_pylist()


def _parse_name(name: str) -> tuple[Any, ...]:
    return tuple(describe_name(name))


# Tensor descriptions repeat across ops and across the ranks of a run: parsed once per process.
_shapes = lru_cache(maxsize=1 << 16)(parse_shapes)
_dtypes = lru_cache(maxsize=1 << 16)(parse_dtypes)
_formats = lru_cache(maxsize=1 << 16)(parse_formats)
_format = lru_cache(maxsize=1 << 16)(norm_format)
