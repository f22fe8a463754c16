"""Reading one profiler CSV into a canonical, column-projected DataFrame.

A :class:`CsvTableSpec` lists the canonical columns of a table, each with every
header spelling producers have used (``Block Dim``/``Block Num``, ``Step Id``/
``Step ID``, ``Op Name``/``Name`` …) and a kind that says how values are turned
into a documented dtype. :func:`read_csv_table` reads only the requested columns
(projection pushed into ``pyarrow.csv``) and converts them:

=========  ====================================================================
kind       result dtype and conversion
=========  ====================================================================
``str``    ``string[pyarrow]``; ``N/A`` and empty → missing
``shape``  ``string[pyarrow]``; the surrounding literal ``"`` CANN writes is removed
``int``    ``Int64`` (nullable)
``id``     ``Int64``; the ``4294967295`` (0xFFFFFFFF) sentinel → missing
``float``  ``float64``; missing → NaN
``ts_us``  ``Int64`` **nanoseconds** since the epoch, exact: a microsecond string
           such as ``"1736413971558972.912\\t"`` (trailing TAB allowed) is read as
           a scale-3 decimal and reinterpreted, never through float64 (whose
           spacing at 1.7e15 µs is 0.25 µs)
=========  ====================================================================

Columns not in the spec (PMU metrics, whose set depends on ``aic_metrics``) are
available under their snake_case name (``aic_mac_ratio``, ``aicore_time_us``,
``cube_utilization_pct``) and read as ``float64``. A request for an ``aic_``/
``aiv_`` metric falls back to the bare older header (``mac_ratio`` ↔
``aic_mac_ratio``, ``vec_ratio`` ↔ ``aiv_vec_ratio``).

Problems never raise: a missing required column, rows with the wrong number of
fields (a truncated last line), values that do not parse as numbers and bad
UTF-8 each produce one diagnostic naming the file (and line or column), and the
rest of the table is still returned where that makes sense.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.textio import decode_utf8, probe_file

if TYPE_CHECKING:  # pandas is imported where a frame is made: the Arrow read runs before it is (see loaders.readahead)
    import pandas as pd

# Only what CANN and the frameworks write for "no value": a kernel may be named "None".
NULL_VALUES = ["N/A", ""]
ID_SENTINEL = 4294967295
_DECIMAL_US = pa.decimal128(24, 3)
_DECIMAL_NS = pa.decimal128(24, 0)

KINDS = ("str", "shape", "int", "id", "float", "ts_us")


@dataclass(frozen=True)
class Col:
    """A canonical column: its name, the header spellings it may have, and its kind."""

    name: str
    headers: tuple[str, ...]
    kind: str
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown column kind {self.kind!r} for {self.name}")


@dataclass(frozen=True)
class CsvTableSpec:
    """The canonical shape of one CSV table.

    ``required`` columns must be present for the table to be usable at all;
    ``extra_kind`` is the kind given to columns the spec does not list (``None``
    drops them).
    """

    name: str
    title: str
    columns: tuple[Col, ...]
    required: tuple[str, ...] = ()
    extra_kind: str | None = None
    doc: str = ""

    def col(self, name: str) -> Col | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    @property
    def canonical_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def normalize_header(header: str) -> str:
    """Spelling-insensitive key: case, spaces and underscores do not matter."""
    return re.sub(r"[\s_]+", "", header.strip().strip('"').lower())


_UNIT_SUFFIXES = (
    ("(us)", "_us"),
    ("(ms)", "_ms"),
    ("(ns)", "_ns"),
    ("(%)", "_pct"),
    ("(mb)", "_mb"),
    ("(kb)", "_kb"),
    ("(gb/s)", "_gbps"),
    ("(byte)", "_bytes"),
)


def snake_case(header: str) -> str:
    """``aicore_time(us)`` → ``aicore_time_us``; ``cube_utilization( %)`` → ``cube_utilization_pct``."""
    h = re.sub(r"\(\s+", "(", header.strip().lower())
    for unit, suffix in _UNIT_SUFFIXES:
        if h.endswith(unit):
            h = h[: -len(unit)] + suffix
            break
    h = re.sub(r"[^0-9a-z]+", "_", h)
    return h.strip("_")


@dataclass
class HeaderInfo:
    """The header row of a CSV file, resolved against a spec."""

    headers: list[str]
    canonical_to_header: dict[str, str]
    extra_to_header: dict[str, str]
    ends_with_newline: bool

    @property
    def available(self) -> list[str]:
        return list(self.canonical_to_header) + list(self.extra_to_header)


def read_header(path: Path, spec: CsvTableSpec, sink: DiagnosticSink, *, what: str) -> HeaderInfo | None:
    """Read and resolve the header line; ``None`` (with a diagnostic) if unusable."""
    probe = probe_file(path, sink, what=what)
    if probe is None:
        return None
    with open(path, "rb") as fh:
        first = fh.readline(1 << 20)
        fh.seek(0, io.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 1))
        last_byte = fh.read(1)
    text = decode_utf8(first, path, sink, what=what).rstrip("\r\n")
    if not text.strip():
        sink.error("no-header", f"{what} has no header line", path, line=1)
        return None
    try:
        headers = next(csv.reader([text]))
    except csv.Error as exc:
        sink.error("bad-csv", f"{what}: the header line cannot be parsed as CSV ({exc})", path, line=1)
        return None
    by_norm: dict[str, str] = {}
    for h in headers:
        by_norm.setdefault(normalize_header(h), h)
    canonical: dict[str, str] = {}
    for col in spec.columns:
        for spelling in col.headers:
            h = by_norm.get(normalize_header(spelling))
            if h is not None:
                canonical[col.name] = h
                break
    claimed = set(canonical.values())
    extras: dict[str, str] = {}
    if spec.extra_kind is not None:
        for h in headers:
            if h in claimed or not h.strip():
                continue
            extras.setdefault(snake_case(h), h)
    return HeaderInfo(headers, canonical, extras, last_byte == b"\n")


def _resolve_metric_fallback(name: str, extras: dict[str, str]) -> str | None:
    """``aic_mac_ratio`` may be written ``mac_ratio`` by older CANN (and ``aiv_vec_*`` as ``vec_*``)."""
    for prefix in ("aic_", "aiv_"):
        if name.startswith(prefix):
            bare = name[len(prefix):]
            if bare in extras:
                return extras[bare]
    for prefix in ("aic_", "aiv_"):
        if prefix + name in extras:
            return extras[prefix + name]
    return None


@dataclass
class CsvReadResult:
    """What :func:`read_csv_table` produced."""

    frame: pd.DataFrame | None
    missing: list[str] = field(default_factory=list)  # requested columns the file does not have
    skipped_rows: int = 0
    arrow: pa.Table | None = None  # set instead of ``frame`` when read with ``arrow=True``


DICT_STRING = pa.dictionary(pa.int32(), pa.string())


def _arrow_type(kind: str, dictionary: bool = False) -> pa.DataType:
    if dictionary and kind in ("str", "shape"):
        return DICT_STRING
    return {
        "str": pa.string(),
        "shape": pa.string(),
        "int": pa.int64(),
        "id": pa.int64(),
        "float": pa.float64(),
        "ts_us": _DECIMAL_US,
    }[kind]


def _pandas_dtype(kind: str):  # type: ignore[no-untyped-def]
    import pandas as pd

    if kind in ("str", "shape"):
        return pd.StringDtype("pyarrow")
    if kind in ("int", "id", "ts_us"):
        return pd.Int64Dtype()
    return "float64"


def _decimal_us_to_ns(col: pa.ChunkedArray) -> pa.ChunkedArray:
    # A scale-3 decimal of microseconds *is* an integer count of nanoseconds:
    # reinterpret the scale (zero-copy) and cast, no arithmetic, no float.
    return pa.chunked_array(
        [pc.cast(chunk.view(_DECIMAL_NS), pa.int64()) for chunk in col.chunks], pa.int64()
    )


_US_RE = re.compile(r"^\s*\"?\s*(-?\d+)(?:\.(\d*))?\s*\"?\s*$")


def us_text_to_ns(text: str | None) -> int | None:
    """Exact conversion of one microsecond string (``"1736413971558972.912\\t"``) to ns."""
    if text is None:
        return None
    m = _US_RE.match(text)
    if not m:
        return None
    whole, frac = m.group(1), (m.group(2) or "")
    frac = (frac + "000")[:3]
    sign = -1 if whole.startswith("-") else 1
    ns = int(whole) * 1000 + sign * int(frac)
    # Beyond int64 nanoseconds (year 2262) a value is garbage, not a timestamp.
    return ns if -(2**63) <= ns < 2**63 else None


_MAX_WHOLE_US = (2**63 - 1) // 1000
_US_PARTS = r'^\s*"?\s*(?P<whole>-?\d{1,16})(?:\.(?P<frac>\d*))?\s*"?\s*$'


def _strings_to_ns(col: pa.ChunkedArray) -> tuple[pa.Array, list[int]]:
    """:func:`us_text_to_ns` over a text column, in Arrow compute: ns values and the rows that are not timestamps.

    Up to 16 integer digits of µs (year 2286 in ns would need 17, which int64 cannot hold).
    """
    text = pc.cast(col, pa.string()).combine_chunks() if col.num_chunks != 1 else pc.cast(col.chunk(0), pa.string())
    parts = pc.extract_regex(text, _US_PARTS)
    whole_txt = pc.struct_field(parts, "whole")
    frac_txt = pc.utf8_slice_codeunits(pc.utf8_rpad(pc.fill_null(pc.struct_field(parts, "frac"), ""), 3, "0"), 0, 3)
    whole = pc.cast(whole_txt, pa.int64())
    # beyond int64 nanoseconds (year 2262) a value is garbage, not a timestamp
    whole = pc.if_else(pc.less(pc.abs(whole), _MAX_WHOLE_US), whole, pa.scalar(None, pa.int64()))
    sign = pc.if_else(pc.starts_with(whole_txt, "-"), -1, 1)
    ns = pc.add_checked(pc.multiply_checked(whole, 1000), pc.multiply(sign, pc.cast(frac_txt, pa.int64())))
    bad_mask = pc.and_(pc.is_valid(text), pc.is_null(ns))
    bad = np.flatnonzero(pc.fill_null(bad_mask, False).to_numpy(zero_copy_only=False)).tolist()
    return ns, bad


def _convert_column(
    arr: pa.ChunkedArray, kind: str, header: str, path: Path, sink: DiagnosticSink, what: str
) -> pa.ChunkedArray:
    """Turn a column read as text into its kind, reporting values that do not fit."""
    if kind in ("str", "shape"):
        return arr
    if kind == "ts_us":
        converted, bad = _strings_to_ns(arr)
    else:
        import pandas as pd

        target = pa.int64() if kind in ("int", "id") else pa.float64()
        trimmed = pc.utf8_trim_whitespace(arr)
        as_num = pd.to_numeric(pd.Series(trimmed.to_pylist(), dtype="object"), errors="coerce")
        bad = [int(i) for i in as_num.index[as_num.isna() & pd.Series(trimmed.to_pylist()).notna()]]
        if kind in ("int", "id"):
            as_num = as_num.where(as_num.isna() | (as_num == as_num.round()))
            converted = pa.array(as_num.astype("Int64"), pa.int64(), from_pandas=True)
        else:
            converted = pa.array(as_num.astype("float64"), target, from_pandas=True)
    if bad:
        first = bad[0]
        sample = arr.take([first]).to_pylist()[0]
        sink.warning(
            "bad-value",
            f"{what}: {len(bad)} value(s) in column '{header}' are not numbers "
            f"(first: {sample!r} at line {first + 2}); treated as missing",
            path,
            line=first + 2,
            key=header,
        )
    return pa.chunked_array([converted])


READ_BLOCK_BYTES = 4 << 20


def read_csv_table(
    path: Path,
    spec: CsvTableSpec,
    columns: Sequence[str] | None,
    sink: DiagnosticSink,
    *,
    what: str | None = None,
    header: HeaderInfo | None = None,
    arrow: bool = False,
    threads: bool = True,
) -> CsvReadResult | None:
    """Read ``columns`` (canonical names; ``None`` = every column present) of ``path``.

    With ``arrow=True`` the result's ``arrow`` is a :class:`pyarrow.Table` with canonical
    column names, text columns dictionary-encoded (one dictionary for the whole column)
    and ``frame`` is ``None``: what the op view reads, without a pandas copy.
    ``threads=False`` reads on the calling thread alone (Arrow's thread pool untouched).

    Returns ``None`` (after one error diagnostic) when the file cannot be used at
    all: unreadable, empty, binary, no header, or a required column is absent.
    Requested optional columns the file lacks come back filled with missing
    values of the documented dtype and are listed in ``missing``.
    """
    what = what or path.name
    header = header or read_header(path, spec, sink, what=what)
    if header is None:
        return None
    absent_required = [c for c in spec.required if c not in header.canonical_to_header]
    if absent_required:
        wanted = [spec.col(c).headers[0] for c in absent_required if spec.col(c)]  # type: ignore[union-attr]
        sink.error(
            "missing-column",
            f"{what} lacks required column(s) {', '.join(repr(w) for w in wanted)} "
            f"(header has: {', '.join(header.headers[:12])}{' …' if len(header.headers) > 12 else ''})",
            path,
            line=1,
        )
        return None

    wanted_names = list(columns) if columns is not None else header.available
    plan: list[tuple[str, str, str]] = []  # (canonical, file header, kind)
    missing: list[str] = []
    for name in dict.fromkeys(wanted_names):
        if name in header.canonical_to_header:
            plan.append((name, header.canonical_to_header[name], spec.col(name).kind))  # type: ignore[union-attr]
        elif name in header.extra_to_header:
            plan.append((name, header.extra_to_header[name], spec.extra_kind or "float"))
        elif spec.extra_kind is not None and (fb := _resolve_metric_fallback(name, header.extra_to_header)):
            plan.append((name, fb, spec.extra_kind))
        else:
            missing.append(name)

    invalid: list[tuple[int | None, int, int, str]] = []

    def on_invalid(row: pacsv.InvalidRow) -> str:
        invalid.append((row.number, row.expected_columns, row.actual_columns, row.text or ""))
        return "skip"

    # 4 MiB blocks: a quarter of the per-block dictionaries (and their unification) of the 1 MiB default, as fast
    read_opts = pacsv.ReadOptions(use_threads=threads, block_size=READ_BLOCK_BYTES)
    parse_opts = pacsv.ParseOptions(invalid_row_handler=on_invalid)
    include = list(dict.fromkeys(h for _, h, _ in plan))
    types = {h: _arrow_type(kind, dictionary=arrow) for _, h, kind in plan}
    table: pa.Table | None = None
    if include:
        conv = pacsv.ConvertOptions(
            include_columns=include,
            column_types=types,
            null_values=NULL_VALUES,
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
            # With arrow=True every text column is dictionary-encoded: its UTF-8 is checked once per distinct
            # value below (_unified_utf8), not per row in the reader (~9 % of a 1 M-row read).
            check_utf8=not arrow,
        )
        try:
            table = pacsv.read_csv(path, read_options=read_opts, parse_options=parse_opts, convert_options=conv)
            if arrow:
                table = _unified_utf8(table)
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
            table = None  # a value did not fit its type, or bad UTF-8: slow path below
        except OSError as exc:
            sink.error("unreadable", f"{what} cannot be read: {exc}", path)
            return None
        if table is None:
            invalid.clear()
            table = _read_as_text(path, include, read_opts, parse_opts, sink, what, retry=invalid.clear)
            if table is None:
                return None
            arrays = {}
            for canon, h, kind in plan:
                if h in arrays:
                    continue
                arrays[h] = _convert_column(table.column(h), kind, h, path, sink, what)
            table = pa.table({h: arrays[h] for h in include})
    if invalid:
        _, expected, actual, text = invalid[0]
        # Multi-threaded parsing does not number rows: find the line ourselves.
        line = _line_of_row(path, text)
        where = f"line {line}" if line is not None else "a row"
        sink.warning(
            "malformed-rows",
            f"{what}: {len(invalid)} row(s) with the wrong number of fields were skipped "
            f"({where}: expected {expected} fields, got {actual}{'; file looks truncated' if not header.ends_with_newline else ''})",
            path,
            line=line,
        )

    nrows = table.num_rows if table is not None else 0
    if arrow:
        return _arrow_result(table, plan, missing, spec, nrows, wanted_names, len(invalid), path, sink, what)
    import pandas as pd

    out: dict[str, pd.Series] = {}
    for canon, h, kind in plan:
        col = _finish_column(table.column(h), kind, h, path, sink, what)  # type: ignore[union-attr]
        out[canon] = _to_series(col, kind)
    for name in missing:
        c = spec.col(name)
        kind = c.kind if c else (spec.extra_kind or "float")
        out[name] = pd.Series(pd.array([None] * nrows, dtype=_pandas_dtype(kind)))
    # copy=False: the Series already own fresh buffers; copying them again costs ~20 % of a load.
    frame = pd.DataFrame(out, index=pd.RangeIndex(nrows), copy=False) if out else pd.DataFrame(index=pd.RangeIndex(nrows))
    ordered = [n for n in dict.fromkeys(wanted_names) if n in frame.columns]
    return CsvReadResult(frame[ordered], missing=missing, skipped_rows=len(invalid))


def _finish_column(col: pa.ChunkedArray, kind: str, h: str, path: Path, sink: DiagnosticSink,
                   what: str) -> pa.ChunkedArray:
    """Canonical values of a column as read: ns timestamps, shapes unquoted, id sentinels missing."""
    if kind == "ts_us" and pa.types.is_decimal(col.type):
        try:
            return _decimal_us_to_ns(col)
        except pa.ArrowInvalid:  # beyond int64 ns: report per value through the text path
            return _convert_column(pc.cast(col, pa.string()), "ts_us", h, path, sink, what)
    if kind == "shape":
        if pa.types.is_dictionary(col.type):
            return _map_dictionary(col, lambda d: pc.utf8_trim(d, characters='"'))
        return pc.utf8_trim(col, characters='"')
    if kind == "id":
        sentinel = pc.equal(col, pa.scalar(ID_SENTINEL, col.type if pa.types.is_integer(col.type) else pa.int64()))
        if not pc.any(sentinel).as_py():  # the usual case: no copy of a million ids
            return col
        return pc.if_else(sentinel, pa.scalar(None, pa.int64()), col)
    return col


def _map_dictionary(col: pa.ChunkedArray, fn: Any) -> pa.ChunkedArray:
    """Apply a string function to the dictionary of each chunk (the indices stay).

    Chunks that share one dictionary (a unified column) share its result, computed once. Values the
    function makes equal are merged when the column has one dictionary, so it stays one whose codes
    tell values apart (what the op view groups by).
    """
    done: dict[tuple[int, ...], pa.Array] = {}
    chunks = []
    for c in col.chunks:
        key = _dictionary_identity(c.dictionary)
        if key not in done:
            done[key] = fn(c.dictionary)
        chunks.append(pa.DictionaryArray.from_arrays(c.indices, done[key]))
    if len(done) == 1 and chunks:
        (mapped,) = done.values()
        encoded = pc.dictionary_encode(mapped)
        if len(encoded.dictionary) < len(mapped):  # e.g. '"1,2"' and '1,2' in one file: one value after the trim
            chunks = [pa.DictionaryArray.from_arrays(pc.take(encoded.indices, c.indices), encoded.dictionary)
                      for c in chunks]
    return pa.chunked_array(chunks, col.type)


def _dictionary_identity(dictionary: pa.Array) -> tuple[int, ...]:
    """The same key for chunks that share one dictionary: where its buffers are, and which slice of them."""
    return (dictionary.offset, len(dictionary), *(b.address if b is not None else 0 for b in dictionary.buffers()))


def _unified_utf8(table: pa.Table) -> pa.Table:
    """``table`` with one dictionary per text column, once its values are known to be UTF-8.

    The reader leaves the UTF-8 check to this (see ``check_utf8`` in :func:`read_csv_table`): the
    distinct values of a column are all in its unified dictionary, so one check of each dictionary covers
    every row. Raises ``pa.ArrowInvalid`` on bad UTF-8 (the caller then reads the file as text).
    """
    table = table.unify_dictionaries()
    for col in table.columns:
        if pa.types.is_dictionary(col.type) and col.num_chunks:
            col.chunk(0).dictionary.validate(full=True)
    return table


def _arrow_result(table: pa.Table | None, plan: list[tuple[str, str, str]], missing: list[str], spec: CsvTableSpec,
                  nrows: int, wanted: Sequence[str], skipped: int, path: Path, sink: DiagnosticSink,
                  what: str) -> CsvReadResult:
    arrays: dict[str, pa.ChunkedArray] = {}
    for canon, h, kind in plan:
        col = _finish_column(table.column(h), kind, h, path, sink, what)  # type: ignore[union-attr]
        if kind in ("str", "shape") and not pa.types.is_dictionary(col.type):
            col = col.dictionary_encode()  # the slow path reads text
        elif kind == "float" and col.type != pa.float64():
            col = pc.cast(col, pa.float64())
        arrays[canon] = col
    for name in missing:
        c = spec.col(name)
        kind = c.kind if c else (spec.extra_kind or "float")
        typ = _arrow_type(kind, dictionary=True)
        arrays[name] = pa.chunked_array([pa.nulls(nrows, pa.int64() if kind == "ts_us" else typ)])
    ordered = [n for n in dict.fromkeys(wanted) if n in arrays]
    out = pa.table({n: arrays[n] for n in ordered}) if ordered else pa.table({})
    # One dictionary per column (the reader builds one per block): codes comparable across rows. The fast
    # path unified them already (_unified_utf8); the slow path's text was encoded per chunk.
    return CsvReadResult(None, missing=missing, skipped_rows=skipped,
                         arrow=out if _one_dictionary_each(out) else out.unify_dictionaries())


def _one_dictionary_each(table: pa.Table) -> bool:
    """Does every dictionary column of ``table`` have one dictionary for all its chunks?"""
    for col in table.columns:
        if pa.types.is_dictionary(col.type) and col.num_chunks > 1:
            first = _dictionary_identity(col.chunk(0).dictionary)
            if any(_dictionary_identity(c.dictionary) != first for c in col.chunks[1:]):
                return False
    return True


@lru_cache(maxsize=1)
def _types_mapper() -> Any:
    import pandas as pd

    return {
        pa.string(): pd.StringDtype("pyarrow"),
        pa.large_string(): pd.StringDtype("pyarrow"),
        pa.int64(): pd.Int64Dtype(),
    }.get


def _line_of_row(path: Path, text: str) -> int | None:
    """1-based line number of the first line of ``path`` equal to ``text``."""
    if not text:
        return None
    needle = text.encode("utf-8", errors="replace")
    with open(path, "rb") as fh:
        for i, line in enumerate(fh):
            if line.rstrip(b"\r\n") == needle:
                return i + 1
    return None


def _to_series(col: pa.ChunkedArray, kind: str) -> pd.Series:
    series = col.to_pandas(types_mapper=_types_mapper())
    if kind == "float" and series.dtype != "float64":
        series = series.astype("float64")
    return series.reset_index(drop=True)


def _read_as_text(
    path: Path,
    include: list[str],
    read_opts: pacsv.ReadOptions,
    parse_opts: pacsv.ParseOptions,
    sink: DiagnosticSink,
    what: str,
    retry: Callable[[], None] = lambda: None,
) -> pa.Table | None:
    """Slow path: every requested column as text; bad UTF-8 replaced (with a warning).

    ``retry`` is called before the file is parsed a second time (decoded leniently): what the first parse
    reported through ``parse_opts`` (rows with the wrong number of fields) is then reported again."""
    conv = pacsv.ConvertOptions(
        include_columns=include,
        column_types={h: pa.string() for h in include},
        null_values=NULL_VALUES,
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
    )
    try:
        return pacsv.read_csv(path, read_options=read_opts, parse_options=parse_opts, convert_options=conv)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        pass
    # Not UTF-8: decode leniently ourselves (the warning names the first bad byte).
    data = decode_utf8(path.read_bytes(), path, sink, what=what).encode("utf-8")
    retry()
    try:
        return pacsv.read_csv(io.BytesIO(data), read_options=read_opts, parse_options=parse_opts, convert_options=conv)
    except pa.ArrowInvalid as exc:
        sink.error("bad-csv", f"{what} cannot be parsed as CSV: {exc}", path)
        return None


def count_rows(path: Path) -> int:
    """Data rows of a CSV file (lines minus the header), counted without parsing."""
    n = 0
    last = b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    if last != b"\n":
        n += 1
    return max(0, n - 1)


def specs_doc(specs: Iterable[CsvTableSpec]) -> str:
    """Markdown table of header variants → canonical names (for the README and docs)."""
    lines = ["| table | canonical column | dtype | header spellings accepted |", "|---|---|---|---|"]
    for spec in specs:
        for c in spec.columns:
            lines.append(
                f"| {spec.name} | `{c.name}` | {_pandas_dtype(c.kind)} | "
                + ", ".join(f"`{h}`" for h in c.headers)
                + " |"
            )
    return "\n".join(lines)
