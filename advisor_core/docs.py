"""Generated reference documentation: ``docs/tables.md``, ``docs/rules.md``, ``docs/plugins.md``.

Usage::

    python -m advisor_core.docs {tables|rules|hooks|all} [--check] [--docs-dir DIR]

* ``tables`` writes ``docs/tables.md``: every normalised table, the files it is
  read from, and every header spelling (or JSON key) behind each canonical
  column, with its dtype. Built from the loader specs
  (:class:`~advisor_core.loaders.csvtable.CsvTableSpec`, the column tuples of the
  JSON loaders) and the loader catalogue; dtypes of the non-CSV tables are those
  the readers actually produce.
* ``rules`` writes ``docs/rules.md``: one section per *built-in* rule (the
  ``ascend-advisor`` distribution's entry point; third-party plugins are left out
  so the page does not depend on what happens to be installed), with its
  metadata, options and help page — the same text ``advisor explain CODE`` prints.
* ``hooks`` refreshes the generated regions of ``docs/plugins.md`` (hookspecs,
  the Rule / RuleContext API, the finding and patch models, the test kit's case
  schema); the prose around them is hand-written and kept. A region sits between
  ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->``.

``--check`` writes nothing: it prints a unified diff for every document that is
out of date and exits 1 (0 when all are current).
"""

from __future__ import annotations

import argparse
import difflib
import enum
import inspect
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

TARGETS: dict[str, str] = {"tables": "tables.md", "rules": "rules.md", "hooks": "plugins.md"}
DEFAULT_DOCS_DIR = Path(__file__).resolve().parent.parent / "docs"

# ---------------------------------------------------------------------------------------------
# Small text helpers
# ---------------------------------------------------------------------------------------------

_ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):`(~?)([^`]+)`")


def _roles(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        target = m.group(2)
        return f"`{target.split('.')[-1] if m.group(1) else target}`"

    return _ROLE.sub(sub, text).replace("``", "`")


def rst_to_md(text: str | None) -> str:
    """A docstring (reST-flavoured, as this code base writes them) as Markdown.

    Roles become code spans, double backticks single ones, and a paragraph ending
    in ``::`` introduces a fenced code block made of the indented lines after it.
    """
    if not text:
        return ""
    lines = inspect.cleandoc(text).splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            head = line.rstrip()[:-2].rstrip()
            if head:
                out.append(_roles(head) + ":")
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out.extend(["", "```", *inspect.cleandoc("\n".join(block)).splitlines(), "```", ""])
            continue
        out.append(_roles(line))
        i += 1
    return "\n".join(out).strip()


def _first_paragraph(text: str | None) -> str:
    md = rst_to_md(text)
    para = md.split("\n\n", 1)[0]
    return " ".join(p.strip() for p in para.splitlines())


def _escape_html(text: str) -> str:
    """``<`` and ``>`` outside code spans, so ``NPU:<id>`` is not taken for an HTML tag."""
    parts = re.split(r"(`+[^`]*?`+)", text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts)


def _cell(text: Any) -> str:
    """Text for a Markdown table cell (one line, pipes and angle brackets escaped)."""
    return _escape_html(" ".join(str(text).split())).replace("|", "\\|")


def _code(text: Any) -> str:
    s = str(text)
    tick = "``" if "`" in s else "`"
    pad = " " if "`" in s else ""
    return f"{tick}{pad}{s}{pad}{tick}"


def _type_name(tp: Any) -> str:
    if tp is None or tp is type(None):
        return "None"
    if isinstance(tp, str):
        s = tp.strip().strip("'\"")
    elif isinstance(tp, type) and not getattr(tp, "__args__", None):
        s = tp.__name__
    else:
        s = str(tp)
    s = s.replace("typing.", "").replace("NoneType", "None")
    # advisor_core.engine.findings.Severity -> Severity; <class 'str'> -> str
    s = re.sub(r"<class '([\w.]+)'>", r"\1", s)
    s = re.sub(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*)", "", s)
    return s


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return _toml_value(value.value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return "[" + ", ".join(_toml_value(v) for v in items) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value))


def _field_default(fi: Any) -> Any:
    from pydantic_core import PydanticUndefined

    if fi.default_factory is not None:
        try:
            return fi.default_factory()
        except TypeError:  # pragma: no cover - factories taking validated data
            return "…"
    if fi.default is PydanticUndefined:
        return PydanticUndefined
    return fi.default


def _default_text(fi: Any) -> str:
    from pydantic_core import PydanticUndefined

    d = _field_default(fi)
    if d is PydanticUndefined:
        return "*required*"
    if isinstance(d, enum.Enum):
        d = d.value
    return _code(repr(d))


def _constraints(fi: Any) -> str:
    parts = []
    for m in fi.metadata:
        for attr, sym in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "min length"), ("max_length", "max length"), ("multiple_of", "multiple of")):
            v = getattr(m, attr, None)
            if v is not None:
                parts.append(f"{sym} {v}")
    return ", ".join(parts)


def _model_fields_table(model: Any, *, with_source: dict[str, str] | None = None) -> list[str]:
    """Markdown table of a pydantic model's fields."""
    head = "| field | type | default | description |"
    if with_source is not None:
        head = "| field | type | source | description |"
    lines = [head, "|---|---|---|---|"]
    for name, fi in model.model_fields.items():
        desc = fi.description or ""
        if with_source is not None:
            third = with_source.get(name, "")
        else:
            third = _default_text(fi)
        lines.append(f"| `{name}` | {_cell(_code(_type_name(fi.annotation)))} | {_cell(third)} | {_cell(desc)} |")
    return lines


# ---------------------------------------------------------------------------------------------
# docs/tables.md
# ---------------------------------------------------------------------------------------------

_FOLDERS = {
    "apo": "ASCEND_PROFILER_OUTPUT/",
    "root": "",
    "framework": "FRAMEWORK/",
    "cann": "PROF_*/mindstudio_profiler_output/",
    "cann_device": "PROF_*/device_*/summary/",
}


def _pattern_text(pattern: Any) -> str:
    name = pattern.regex
    for a, b in ((r"\d{14}", "{timestamp}"), ("(?:_{id})?", "[_{id}]"), (r"\.", "."), (".*", "*")):
        name = name.replace(a, b)
    folder = _FOLDERS.get(pattern.folder, pattern.folder + "/")
    text = f"`{folder}{name}`"
    if pattern.folder == "framework":
        text += " (or `raw/`)"
    return text


def _artifact_lines(kinds: Iterable[str]) -> list[str]:
    from advisor_core.discover.artifacts import ARTIFACT_PATTERNS

    out = []
    for n, kind in enumerate(kinds, 1):
        pats = [p for p in ARTIFACT_PATTERNS if p.kind == kind]
        desc = next((p.description for p in pats if p.description), "")
        where = ", ".join(_pattern_text(p) for p in pats) or "(no built-in file pattern)"
        out.append(f"{n}. `{kind}`{' — ' + desc if desc else ''}: {where}")
    return out


# Where the columns of the tables not read through a single CSV spec come from. Every entry
# must name a column the loader declares (checked when the page is generated); columns of a
# derived table that share a name with a column of its input CSV spec are filled in from it.
_TS_NOTE = "µs text → exact ns"
_SOURCES: dict[str, dict[str, str]] = {
    "step_trace": {
        "step": "`Step` (empty → missing); legacy `step_num` (MindSpore's own average row `-` is dropped)",
        "whole_run": "true for the single whole-collection row (`Step` = 0 or empty) MindSpore ≥ 2.5 writes",
        "device_id": "`Device_id` / `Device id` / `Device ID` (modern file only)",
        "total_us": "legacy `total` × 10 ns; otherwise `computing_us + communication_not_overlapped_us + free_us`",
        "iteration_interval_us": "legacy `iteration_interval` × 10 ns (step gap: waiting for data); NaN otherwise",
        "fp_bp_us": "legacy `fp_and_bp` (or `fp`) × 10 ns; NaN otherwise",
        "tail_us": "legacy `tail` × 10 ns (gradient AllReduce + update); NaN otherwise",
    },
    "trace_events": {
        "ph": "`ph`; rows for `X`, `B`, `E`, `i`, `I`, `C` (metadata `M` and flow events are folded into names)",
        "name": "`name`",
        "cat": "`cat`",
        "pid": "`pid`, as text",
        "tid": "`tid`, as text",
        "ts_ns": "`ts` (string or number, µs) → exact ns",
        "dur_us": "`dur` (number or string), µs",
        "process_name": "`args.name` of the `process_name` metadata event of the pid",
        "thread_name": "`args.name` of the `thread_name` metadata event of (pid, tid)",
        "device_id": "`NPU <id>` in the `args.labels` of the pid's `process_labels` metadata event",
        "args": "`args` (a dict; only returned when asked for)",
    },
    "communication": {
        "rank": "`cluster_communication.json` only: the rank key; missing in the per-rank file",
        "step": "step key `step` / `step<N>` → N (missing for a bare `step`)",
        "group_kind": "group key `p2p` / `collective` (cluster file: the rank-set key)",
        "op_name": "op key before `@` (e.g. `hcom_allReduce__123_0_1`); `Total Op Info` is skipped",
        "group": "op key after `@` (group hash)",
        "op_type": "derived from `op_name`: longest of send, receive, allreduce, allgather, reducescatter, broadcast, alltoall(v/vc), batchsendrecv … (else `other`)",
        "start_ns": f"`Communication Time Info` › `Start Timestamp(us)`, {_TS_NOTE}",
        "elapse_us": "`Elapse Time(ms)` × 1000",
        "transit_us": "`Transit Time(ms)` × 1000",
        "wait_us": "`Wait Time(ms)` × 1000",
        "synchronization_us": "`Synchronization Time(ms)` × 1000",
        "idle_us": "`Idle Time(ms)` (or the misspelt `Idel Time(ms)`) × 1000",
        "wait_ratio": "`Wait Time Ratio` (0–1)",
        "synchronization_ratio": "`Synchronization Time Ratio` (0–1)",
        "transit_size_mb": "sum of `Transit Size(MB)` over every link of `Communication Bandwidth Info`",
    },
    "communication_bandwidth": {
        "rank": "`cluster_communication.json` only: the rank key",
        "step": "step key `step` / `step<N>` → N",
        "op_name": "op key before `@`",
        "group": "op key after `@`",
        "link_type": "key of `Communication Bandwidth Info`: RDMA, HCCS, PCIE, SDMA, SIO … (unknown types kept)",
        "transit_size_mb": "`Transit Size(MB)`",
        "transit_us": "`Transit Time(ms)` × 1000",
        "bandwidth_gbps": "`Bandwidth(GB/s)`",
        "large_packet_ratio": "`Large Packet Ratio`",
    },
    "communication_matrix": {
        "step": "step key `step` / `step<N>` → N",
        "group_kind": "group key `p2p` / `collective`",
        "op_key": "op key as written",
        "op_type": "op key before the first `-`",
        "rank_set": "op key after `@`",
        "src_rank": "link key `src-dst`: `src`",
        "dst_rank": "link key `src-dst`: `dst`",
        "transport_type": "`Transport Type`",
        "transit_size_mb": "`Transit Size(MB)`",
        "transit_us": "`Transit Time(ms)` × 1000",
        "bandwidth_gbps": "`Bandwidth(GB/s)`",
        "op_name": "`Op Name`",
    },
    "minddata_pipeline": {
        "op_id": "CSV `op_id`; JSON `op_info[].op_id`",
        "op_type": "CSV `op_type`; JSON `op_info[].op_type`",
        "num_workers": "CSV `num_workers`; JSON `op_info[].num_workers`",
        "queue_sizes": "CSV `output_queue_size` (list literal); JSON `metrics.output_queue.size` — sampled output-queue sizes",
        "queue_average_size": "CSV `output_queue_average_size`; JSON mean of the samples",
        "queue_length": "CSV `output_queue_length`; JSON `metrics.output_queue.length` (capacity)",
        "queue_usage_rate": "CSV `output_queue_usage_rate`; JSON average ÷ length (0–1)",
        "queue_empty_freq": "share of queue samples equal to 0 (0–1), computed",
        "sample_interval_ms": "CSV `sample_interval`; JSON `sampling_interval`",
        "parent_id": "CSV `parent_id`; JSON: the op listing this one in `children`",
        "children_ids": "CSV `children_id` (list literal); JSON `op_info[].children`",
    },
    "minddata_cpu": {
        "op_id": "`op_info[].op_id`",
        "avg_sys_pct": "mean of `op_info[].metrics.sys_utilization`",
        "avg_user_pct": "mean of `op_info[].metrics.user_utilization`",
        "avg_cpu_pct": "`avg_sys_pct + avg_user_pct`",
    },
    "host_queue": {
        "step": "third field of each line (`type sub_type step value [timestamp]`)",
        "queue_size": "value of a type-1 (connector size) line",
        "queue_capacity": "sub_type of a type-1 line",
        "get_ms": "value of a type-0 line with sub_type 0",
        "push_ms": "value of a type-0 line with sub_type 1",
        "total_ms": "value of a type-0 line with sub_type 2",
    },
}

# Columns whose reader gives Python objects (an empty sample cannot show it).
_OBJECT_DTYPES = {
    ("trace_events", "args"): "object (dict)",
    ("minddata_pipeline", "queue_sizes"): "object (list[int])",
    ("minddata_pipeline", "children_ids"): "object (list[int])",
    ("minddata_summary", "children_ids"): "object (list[int])",
}


def _sample_inputs() -> dict[str, str]:
    """The smallest valid file of each non-CSV artifact kind (header only, empty JSON)."""
    from advisor_core.loaders import minddata as mdl
    from advisor_core.loaders import steps

    def header(spec: Any) -> str:
        return ",".join(c.headers[0] for c in spec.columns) + "\n"

    return {
        "step_trace_time": header(steps.STEP_TRACE_TIME),
        "trace_view": "[]",
        "communication": "{}",
        "communication_matrix": "{}",
        "minddata_pipeline_raw": header(mdl.PIPELINE_RAW),
        "minddata_pipeline_summary_json": '{"op_ids": []}',
        "minddata_cpu_utilization": "{}",
        "device_queue_profiling": "0 0 1 1.0\n",
    }


def reader_dtypes(loader: Any) -> dict[str, str]:
    """Column → dtype the loader's reader produces (read from a minimal sample file)."""
    from advisor_core.diagnostics import DiagnosticSink

    samples = _sample_inputs()
    kind = next((k for k in loader.artifacts if k in samples), None)
    if kind is None:
        return {}
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"{kind}.sample"
        p.write_text(samples[kind], encoding="utf-8")
        res = loader.read(p, kind, None, DiagnosticSink())
    if res is None:
        return {}
    out = {c: str(t) for c, t in res.frame.dtypes.items()}
    for (table, col), dt in _OBJECT_DTYPES.items():
        if table == loader.name and col in out:
            out[col] = dt
    return out


def all_csv_specs() -> list[Any]:
    """Every module-level :class:`CsvTableSpec` of the loader package, in definition order."""
    import importlib
    import pkgutil

    import advisor_core.loaders as pkg
    from advisor_core.loaders.csvtable import CsvTableSpec

    specs: list[Any] = []
    seen: set[int] = set()
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for value in vars(mod).values():
            if isinstance(value, CsvTableSpec) and id(value) not in seen:
                seen.add(id(value))
                specs.append(value)
    return specs


def _input_specs() -> dict[str, list[tuple[str, Any]]]:
    """Derived tables → (artifact kind, CSV spec) of the files they are built from."""
    from advisor_core.loaders import minddata as mdl
    from advisor_core.loaders import steps

    return {
        "step_trace": [("step_trace_time", steps.STEP_TRACE_TIME), ("legacy_step_trace", steps.LEGACY_STEP_TRACE)],
        "minddata_pipeline": [("minddata_pipeline_raw", mdl.PIPELINE_RAW)],
    }


def _spec_table(spec: Any, *, with_required: bool = True) -> list[str]:
    from advisor_core.loaders.csvtable import _pandas_dtype

    lines = ["| column | dtype | header spellings accepted | meaning |", "|---|---|---|---|"]
    for c in spec.columns:
        req = " **(required)**" if with_required and c.name in spec.required else ""
        lines.append(
            f"| `{c.name}`{req} | {_pandas_dtype(c.kind)} | "
            + ", ".join(_code(h) for h in c.headers)
            + f" | {_cell(c.doc)} |"
        )
    return lines


def _csv_kind_note(spec: Any) -> list[str]:
    kinds = sorted({c.kind for c in spec.columns})
    notes = {
        "ts_us": "`*_ns` timestamp columns are read from the µs text exactly (no float64 rounding).",
        "id": "id columns map the `4294967295` sentinel to missing.",
        "shape": "shape columns have the literal surrounding `\"` removed; multi-tensor values stay `;`-separated.",
    }
    return [notes[k] for k in kinds if k in notes]


def render_tables() -> str:
    from advisor_core.loaders import communication as comm
    from advisor_core.loaders import minddata as mdl
    from advisor_core.loaders import steps
    from advisor_core.loaders.csvtable import NULL_VALUES, _pandas_dtype
    from advisor_core.loaders.registry import BUILTIN_LOADERS
    from advisor_core.model.identity import CommGroup, ParallelLayout, ProfilerSettings, RankIdentity

    specs = all_csv_specs()
    specs_by_name = {s.name: s for s in specs}
    inputs = _input_specs()
    placed: set[str] = set()
    L: list[str] = [
        "# Normalised tables",
        "",
        "<!-- Generated by `python -m advisor_core.docs tables` from advisor_core/loaders/ and",
        "     advisor_core/discover/artifacts.py. Do not edit by hand. -->",
        "",
        "Every profiler file the advisor reads is turned into a pandas DataFrame with canonical",
        "snake_case columns, whatever the producer (MindSpore ≥ 2.5, MindSpore ≤ 2.3, torch_npu,",
        "CANN `msprof`) and whatever spelling of the header it used. Rules and notebooks only ever see",
        "these names:",
        "",
        "```python",
        "from advisor_core.api import open_session",
        "s = open_session(\"runs/llama2-8p/\")",
        "s.run.rank(0).table(\"kernels\", [\"name\", \"duration_us\"])  # reads only those two columns",
        "s.run.table(\"step_trace\")                                # every rank stacked, with a `rank` column",
        "```",
        "",
        "A table whose file is absent is `None` (rules needing it are reported as *skipped*); a file",
        "that cannot be used is `None` plus a diagnostic naming the file. Nothing raises on bad input.",
        "",
        "## Units and dtypes",
        "",
        "The suffix of a column says its unit:",
        "",
        "| suffix | unit | dtype |",
        "|---|---|---|",
        "| `_us` | microseconds (durations) | float64 |",
        "| `_ns` | nanoseconds since the epoch, **exact** (`start_ns`, `ts_ns`, `allocation_ns` …) | Int64 |",
        "| `_ms` | milliseconds, as the file writes them (MindData, CPU op files) | float64 |",
        "| `_mb`, `_kb` | sizes as written: MB / KB (MindSpore's memory \"MB\" is KB/1000, kept as written) | float64 |",
        "| `_gbps` | GB/s | float64 |",
        "| `_pct` | percent, 0–100 | float64 |",
        "| `_ratio`, `_rate`, `_freq` | fraction, 0–1 | float64 |",
        "",
        "Timestamps are parsed from their text (`\"1736413971558972.912\\t\"` → 1736413971558972912 ns),",
        "never through float64, whose spacing at 1.7e15 µs is 0.25 µs. Communication JSON times (ms)",
        "become `_us` columns; legacy step traces (syscnt, 10 ns) become µs. Integer columns are the",
        "nullable `Int64`, text columns `string`; missing values are `<NA>` / NaN.",
        "",
        "## Tolerances",
        "",
        "What the loaders accept without complaint (see `ascend-profile-formats.md`, \"tolerant loader",
        "checklist\"):",
        "",
        "* **Header spellings.** Matching ignores case, spaces and underscores; every alias a",
        "  producer has used maps to one column (`Op Name`/`Name`, `Task Type`/`Accelerator Core`,",
        "  `Block Dim`/`Block Num`, `Step Id`/`Step ID`, `Device_id`/`Device id`/`Device ID` …; full list",
        "  in each table below and in the [header index](#header-index)).",
        "* **Optional columns.** Only the *required* columns must be present; an optional column the",
        "  file lacks comes back filled with missing values of its documented dtype. Columns a spec",
        "  does not list (PMU metrics, which depend on `aic_metrics`) are kept under their snake_case",
        "  name as float64 (`aicore_time(us)` → `aicore_time_us`, `cube_utilization( %)` →",
        "  `cube_utilization_pct`); `aic_`/`aiv_` metrics fall back to the bare older header",
        "  (`mac_ratio` ↔ `aic_mac_ratio`, `vec_ratio` ↔ `aiv_vec_ratio`).",
        f"* **Values.** {', '.join(_code(v) for v in NULL_VALUES if v)} and empty cells are missing; a trailing TAB",
        "  (start times, memory timestamps) and the `\"` around shapes are stripped; `4294967295`",
        "  (0xFFFFFFFF) ids are missing; MindData's `-1` (no metric) is missing; list literals (`[1, 2]`)",
        "  in MindData files become Python lists.",
        "* **Broken files.** Rows with the wrong number of fields (a truncated last line) are skipped",
        "  with one warning naming the line; values that are not numbers become missing with one",
        "  warning per column; bad UTF-8 is replaced, with a warning naming the byte offset; a file",
        "  missing a required column is unusable (error) but does not stop the run.",
        "* **JSON.** `trace_view.json` may be an array or `{\"traceEvents\": [...]}`; `ts` may be a string,",
        "  `dur` a number or a string; processes are identified by their `process_name` metadata,",
        "  never by pid. `communication*.json` step keys may be `step` or `step<N>`; `Total Op Info`",
        "  entries are skipped; unknown link types (`SIO`) are kept.",
        "* **Step traces** with 9, 10 or 11 columns, an empty `Step`, MindSpore's single `Step=0` row,",
        "  and the legacy syscnt file all land in one `step_trace` table.",
        "",
        "## Where each table comes from",
        "",
        "Files are looked for in a rank's profile directory; the first artifact kind present wins,",
        "and within a kind the first folder that has a match (`ASCEND_PROFILER_OUTPUT/`, then the",
        "CANN export under `PROF_*/`, then `FRAMEWORK/`, then the directory itself).",
        "",
        "| table | what | read from (preference order) |",
        "|---|---|---|",
    ]
    for ld in BUILTIN_LOADERS:
        L.append(f"| [`{ld.name}`](#{ld.name}) | {_cell(ld.title)} | {', '.join(_code(k) for k in ld.artifacts)} |")
    L.append("| [`cluster_step_trace`](#cluster_step_trace) | cluster step time breakdown | `cluster_analysis_output/cluster_step_trace_time.csv` (`run.cluster_step_trace()`) |")
    L.append("| [`cluster_communication`](#cluster_communication) | cluster communication ops | `cluster_analysis_output/cluster_communication.json` (`run.cluster_communication()`) |")
    L.append("")

    for ld in BUILTIN_LOADERS:
        L += [f"## `{ld.name}`", "", f"*{ld.title}*", ""]
        L += ["Read from (first present wins; a bare file name is in the rank directory itself):", "",
              *_artifact_lines(ld.artifacts), ""]
        spec = specs_by_name.get(ld.name)
        if spec is not None and ld.projectable and ld.available is not None:
            placed.add(spec.name)
            if spec.doc:
                L += [rst_to_md(spec.doc), ""]
            L.append(
                "CSV, read column by column: `rank.table(\""
                + ld.name
                + "\", [...])` reads only the columns asked for."
            )
            if ld.default_columns:
                L.append("Without a column list you get: " + ", ".join(f"`{c}`" for c in ld.default_columns) + ".")
            if spec.required:
                L.append("Required (the file is unusable without them): " + ", ".join(f"`{c}`" for c in spec.required) + ".")
            if spec.extra_kind:
                L.append(f"Columns not listed are kept under their snake_case name as {_pandas_dtype(spec.extra_kind)}.")
            L += [*_csv_kind_note(spec), ""]
            L += _spec_table(spec) + [""]
            continue
        # Derived / JSON tables: canonical columns, dtype from the reader, source.
        dtypes = reader_dtypes(ld)
        sources = dict(_SOURCES.get(ld.name, {}))
        stale = sorted(set(sources) - set(ld.columns))
        if stale:
            raise ValueError(f"docs: _SOURCES[{ld.name!r}] names columns the loader does not have: {stale}")
        for _, spec_in in inputs.get(ld.name, []):
            for c in spec_in.columns:
                if c.name in ld.columns and c.name not in sources:
                    sources[c.name] = ", ".join(_code(h) for h in c.headers) + (f" — {c.doc}" if c.doc else "")
        if ld.name == "minddata_summary":
            for key, col in mdl._SUMMARY_LISTS.items():
                sources.setdefault(col, f"`{key}` (a list, one entry per op)")
        if ld.doc:
            L += [rst_to_md(ld.doc), ""]
        if ld.name == "minddata_summary":
            L += ["The JSON has one list per column; the CSV twin one row per key (`key,value1,value2,…`).",
                  "MindSpore's `-1` (no metric, e.g. for the root op) becomes missing.", ""]
        L += ["| column | dtype | source |", "|---|---|---|"]
        for col in ld.columns:
            L.append(f"| `{col}` | {dtypes.get(col, '?')} | {_cell(sources.get(col, ''))} |")
        L.append("")
        if ld.name == "minddata_summary":
            L += [
                "`rank.record(\"minddata_summary\")` gives the scalar and text fields as a",
                "`MinddataSummary`:",
                "",
                *_model_fields_table(mdl.MinddataSummary, with_source={
                    **{dst: f"`{src}` (ms)" for src, dst in mdl._SUMMARY_SCALARS.items()},
                    **{k: f"`{k}`" for k in mdl._SUMMARY_TEXTS},
                }),
                "",
            ]
        if ld.name == "minddata_cpu":
            L += [
                "`rank.record(\"minddata_cpu\")` gives host facts as a `MinddataCpuInfo`:",
                "",
                *_model_fields_table(mdl.MinddataCpuInfo, with_source={
                    "cpu_processor_num": "`cpu_processor_num`",
                    "host_avg_idle_pct": "mean of `device_info.idle_utilization`",
                    "host_avg_user_pct": "mean of `device_info.user_utilization`",
                    "host_avg_sys_pct": "mean of `device_info.sys_utilization`",
                    "sampling_interval_ms": "`sampling_interval`",
                }),
                "",
            ]
        for kind, spec_in in inputs.get(ld.name, []):
            placed.add(spec_in.name)
            L += [f"### Header spellings of `{kind}` (file spec `{spec_in.name}`)", ""]
            if spec_in.required:
                L += ["Required (the file is unusable without them): " + ", ".join(f"`{c}`" for c in spec_in.required) + ".", ""]
            L += _spec_table(spec_in) + [""]

    # Run-level tables.
    L += ["## Run-level (cluster) tables", ""]
    L += [
        "Read from `cluster_analysis_output/` of the run directory (written by `msprof-analyze cluster`),",
        "through methods of the `Run`, not `rank.table()`.",
        "",
    ]
    cst = steps.CLUSTER_STEP_TRACE_TIME
    placed.add(cst.name)
    L += ["### `cluster_step_trace`", "", f"*{cst.title}*: `run.cluster_step_trace()`, one row per rank (`type` = `rank`) and per pipeline stage (`type` = `stage`).", ""]
    L += ["Required: " + ", ".join(f"`{c}`" for c in cst.required) + ".", ""]
    L += _spec_table(cst) + [""]
    L += [
        "### `cluster_communication`",
        "",
        "*cluster communication ops*: `run.cluster_communication()`, one row per (rank set, step, op, rank) with the",
        "columns of [`communication`](#communication); `rank` is the rank key of the file and",
        "`group_kind` the rank-set key.",
        "",
        "| column | dtype |",
        "|---|---|",
    ]
    comm_frame, _ = comm._frames([], [])
    for col in comm.COMMUNICATION_COLUMNS:
        L.append(f"| `{col}` | {comm_frame.dtypes[col]} |")
    L.append("")

    rest = [s for s in specs if s.name not in placed]
    if rest:
        L += ["## Other CSV specs", ""]
        for s in rest:
            L += [f"### `{s.name}` ({s.title})", ""]
            if s.doc:
                L += [rst_to_md(s.doc), ""]
            L += _spec_table(s) + [""]

    # Metadata records.
    L += [
        "## Rank metadata",
        "",
        "Not tables: small records on each `Rank`, from `profiler_info*.json`, `profiler_metadata.json`",
        "and the directory name. Key sets differ by producer; the first source present wins.",
        "",
        "Read from:",
        "",
        *_artifact_lines(("profiler_info", "profiler_metadata")),
        "",
        "### `rank.identity` — `RankIdentity`",
        "",
        rst_to_md(RankIdentity.__doc__),
        "",
        *_model_fields_table(RankIdentity, with_source={
            "rank_id": "first of: the `profiler_info_{rank}.json` file name; `rank_id` / `rankId` of `profiler_info.json`; "
                       "the `_{id}` of legacy file names; `Device_id` of the kernel table; the `NPU <id>` trace "
                       "process label; the directory name; else the next free id (`assumed`)",
            "rank_source": "which of those gave `rank_id`",
            "device_id": "`device_id` of profiler_info (top level, or under `ms_profiler_info` from MindSpore 2.5); missing when absent",
            "host": "directory name `{host}_{pid}_{timestamp}_ascend_*`",
            "pid": "directory name",
            "collected_at": "directory name",
            "framework": "`torch_npu_version` → torch_npu; `ms_version` → MindSpore; else from the layout",
            "framework_version": "`torch_npu_version` / `ms_version`",
            "cann_version": "`cann_version`",
            "profile_dir": "the rank directory",
            "layout": "directory layout",
        }),
        "",
        "### `rank.settings` — `ProfilerSettings`",
        "",
        rst_to_md(ProfilerSettings.__doc__),
        "",
        *_model_fields_table(ProfilerSettings, with_source={
            "profiler_level": "MindSpore `profiler_parameters.profiler_level`; torch_npu `config.experimental_config._profiler_level`",
            "activities": "`profiler_parameters.activities`; `config.common_config.activities`",
            "aic_metrics": "`profiler_parameters.aic_metrics` (or `aicore_metrics`); `experimental_config._aic_metrics`",
            "profile_memory": "`profiler_parameters.profile_memory`; `common_config.profile_memory`",
            "data_process": "`profiler_parameters.data_process`",
            "with_stack": "`profiler_parameters.with_stack`; `common_config.with_stack`",
            "jit_level": "`jit_level` (top level)",
            "raw": "`profiler_parameters` / `config` as written",
        }),
        "",
        "### `rank.parallel` — `ParallelLayout`",
        "",
        rst_to_md(ParallelLayout.__doc__),
        "",
        *_model_fields_table(ParallelLayout, with_source={
            "source": "which evidence was used",
            "parallel_mode": "`distributed_args.parallel_mode`; `profiler_info` `parallel_mode`",
            "world_size": "`distributed_args.world_size`; size of `default_group`; `rank_size`",
            "data_parallel": "`distributed_args.data_parallel_size`",
            "tensor_parallel": "`distributed_args.tensor_model_parallel_size`",
            "pipeline_stages": "`distributed_args.pipeline_model_parallel_size`; `stage_num` / `pipeline_stage_num`",
            "expert_parallel": "`distributed_args.expert_model_parallel_size`",
            "context_parallel": "`distributed_args.context_parallel_size`",
            "sequence_parallel": "`distributed_args.sequence_parallel`",
            "groups": "`parallel_group_info` (one `CommGroup` per entry)",
        }),
        "",
        "`CommGroup` (one per `parallel_group_info` entry):",
        "",
        *_model_fields_table(CommGroup, with_source={
            "name": "entry key",
            "group_name": "`group_name`",
            "group_rank": "`group_rank`",
            "global_ranks": "`global_ranks`",
        }),
        "",
        "### `rank.env`",
        "",
        "`profiler_metadata.json` `ENV_VARIABLES`, as a sorted `dict[str, str]` (`null` → `\"\"`).",
        "",
    ]

    # Header index.
    L += [
        "## Header index",
        "",
        "Every header spelling the CSV loaders accept, and the column it becomes (matching ignores",
        "case, spaces and underscores). *spec* is the table name, or for the input files of a derived",
        "table (`step_trace`, `legacy_step_trace`, `minddata_pipeline_raw`), the file spec listed under it.",
        "",
        "| header | spec | column | dtype |",
        "|---|---|---|---|",
    ]
    rows = []
    for s in specs:
        for c in s.columns:
            for h in c.headers:
                rows.append((h.lower(), h, s.name, c.name, str(_pandas_dtype(c.kind))))
    for _, h, table, col, dt in sorted(set(rows)):
        L.append(f"| {_cell(_code(h))} | `{table}` | `{col}` | {dt} |")
    L.append("")
    return "\n".join(L)


# ---------------------------------------------------------------------------------------------
# docs/rules.md
# ---------------------------------------------------------------------------------------------


def builtin_rules() -> dict[str, Any]:
    """Code → :class:`RegisteredRule` for the built-in rules only (third-party plugins not loaded)."""
    from advisor_core.engine.plugins import load_plugins

    host = load_plugins(autoload=False)
    rules = host.rules()
    if host.failed:
        problems = "; ".join(f"{r.label()}: {r.error}" for r in host.failed)
        raise RuntimeError(f"built-in plugins failed to load: {problems}")
    return {code: r for code, r in rules.items() if r.plugin.builtin}


def _need_md(need: Any) -> str:
    if need.kind == "table":
        cols = f" (columns {', '.join(f'`{c}`' for c in need.columns)})" if need.columns else ""
        return f"table [`{need.name}`](tables.md#{need.name}){cols}"
    if need.kind == "config":
        return "any training config" if need.name == "*" else f"config key `{need.name}`"
    return need.describe()


def _fence(text: str, lang: str = "text") -> list[str]:
    fence = "```"
    while fence in text:
        fence += "`"
    return [f"{fence}{lang}", text, fence]


_FIX_TEXT = {
    "always": "always — every finding carries a config patch",
    "sometimes": "sometimes — a config patch when the fix is a config change",
    "never": "never — advice only (the change is in model code or needs a human decision)",
}


def _rule_anchor(cls: Any) -> str:
    return f"{cls.code.lower()}-{cls.name}"


def render_rules() -> str:
    rules = builtin_rules()
    L = [
        "# Rules",
        "",
        "<!-- Generated by `python -m advisor_core.docs rules` from the built-in rule classes",
        "     (rules/advisor_rules/). Do not edit by hand: edit the rule's docstring and regenerate. -->",
        "",
        f"The {len(rules)} built-in rules of the advisor. Each section is the rule's metadata and its help",
        "page, which is also what `advisor explain CODE` prints. Rules from installed plugins are not",
        "listed here — `advisor rules` and `advisor explain CODE` show them; see",
        "[plugins.md](plugins.md) to write one.",
        "",
        "Select rules with `--select` / `--ignore` (codes, prefixes, names or tags) or",
        "`select` / `ignore` in `[tool.advisor]`; set a rule's options in `[tool.advisor.rules.CODE]` of",
        "`pyproject.toml` (`[rules.CODE]` in `advisor.toml`). A rule whose evidence is absent is reported as",
        "*skipped* with the reason, never run.",
        "",
        "| code | name | default severity | fix | summary |",
        "|---|---|---|---|---|",
    ]
    for code, r in rules.items():
        cls = r.cls
        L.append(f"| [{code}](#{_rule_anchor(cls)}) | `{cls.name}` | {cls.severity.value} | {cls.fix_availability} | {_cell(cls.summary)} |")
    L.append("")
    for code, r in rules.items():
        cls = r.cls
        L += [f"## {code} {cls.name}", "", f"**{_cell(cls.summary)}**", ""]
        L.append(f"* Default severity: {cls.severity.value}")
        L.append(f"* Fix availability: {_FIX_TEXT.get(cls.fix_availability, cls.fix_availability)}")
        if cls.tags:
            L.append("* Tags: " + ", ".join(f"`{t}`" for t in cls.tags))
        needs = cls.requires.any_of
        if len(needs) == 1:
            L.append(f"* Evidence needed: {_need_md(needs[0])}")
        else:
            L.append("* Evidence needed (any one of):")
            L += [f"  * {_need_md(n)}" for n in needs]
        L.append("")
        fields = cls.Options.model_fields
        if fields:
            L += [f"Options (`[tool.advisor.rules.{code}]` in `pyproject.toml`, `[rules.{code}]` in `advisor.toml`):", ""]
            L += ["| option | type | default | constraint | description |", "|---|---|---|---|---|"]
            for name, fi in fields.items():
                L.append(
                    f"| `{name}` | {_cell(_code(_type_name(fi.annotation)))} | {_default_text(fi)} | "
                    f"{_cell(_constraints(fi))} | {_cell(fi.description or '')} |"
                )
            L += ["", *_fence("\n".join([f"[tool.advisor.rules.{code}]"] + [
                f"{name} = {_toml_value(_field_default(fi))}" for name, fi in fields.items()
            ]), "toml"), ""]
        else:
            L += ["Options: none.", ""]
        L += [f"Help page (`advisor explain {code}`):", ""]
        L += [*_fence(cls.help_text()), ""]
    return "\n".join(L)


# ---------------------------------------------------------------------------------------------
# docs/plugins.md (generated regions)
# ---------------------------------------------------------------------------------------------

BEGIN = "<!-- BEGIN GENERATED: {name} (python -m advisor_core.docs hooks; do not edit inside) -->"
END = "<!-- END GENERATED: {name} -->"
_REGION = re.compile(
    r"<!-- BEGIN GENERATED: (?P<name>[\w-]+)[^>]*-->\n.*?<!-- END GENERATED: (?P=name) -->", re.DOTALL
)


def hookspecs() -> list[tuple[str, Callable[..., Any], dict[str, Any]]]:
    """(name, function, spec options) of every hookspec, in source order."""
    from advisor_core.engine import hookspecs as hs

    marker = f"{hs.PROJECT}_spec"
    out = []
    for name, fn in vars(hs).items():
        if inspect.isfunction(fn) and getattr(fn, marker, None) is not None:
            out.append((name, fn, dict(getattr(fn, marker))))
    return sorted(out, key=lambda t: t[1].__code__.co_firstlineno)


def _signature(fn: Callable[..., Any], name: str | None = None, *, skip_self: bool = False) -> str:
    sig = inspect.signature(fn)
    params = []
    for i, p in enumerate(sig.parameters.values()):
        if skip_self and i == 0:
            continue
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text = "*" + text
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + text
        if p.annotation is not p.empty:
            text += f": {_type_name(p.annotation)}"
        if p.default is not p.empty:
            d = p.default
            text += f" = {type(d).__name__}.{d.name}" if isinstance(d, enum.Enum) else f" = {d!r}"
        params.append(text)
    kw_only = [p for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]
    if kw_only:
        first = list(sig.parameters.values()).index(kw_only[0]) - (1 if skip_self else 0)
        params.insert(first, "*")
    ret = "" if sig.return_annotation is sig.empty else f" -> {_type_name(sig.return_annotation)}"
    return f"{name or fn.__name__}({', '.join(params)}){ret}"


def _gen_hookspecs() -> list[str]:
    from advisor_core.engine import hookspecs as hs

    L = [
        f"Entry-point group: `{hs.ENTRY_POINT_GROUP}`. Markers: `from advisor_core.engine import hookimpl` "
        "(and `hookspec`, for hosts only).",
        "",
        "| hook | kind | returns |",
        "|---|---|---|",
    ]
    specs = hookspecs()
    for name, fn, opts in specs:
        kind = ", ".join(k for k in ("firstresult", "historic") if opts.get(k)) or "all results collected"
        ret = _type_name(inspect.signature(fn).return_annotation)
        L.append(f"| [`{name}`](#{name}) | {kind} | {_cell(_code(ret))} |")
    L.append("")
    for name, fn, opts in specs:
        flags = [f"{k}=True" for k in ("firstresult", "historic", "warn_on_impl") if opts.get(k)]
        deco = f"@hookspec({', '.join(flags)})" if flags else "@hookspec"
        L += [f"### `{name}`", "", *_fence(f"{deco}\ndef {_signature(fn)}: ...", "python"), "", rst_to_md(fn.__doc__), ""]
    return L


# Meanings of the Rule class attributes (the class declares them without docstrings).
RULE_ATTRIBUTE_NOTES = {
    "code": "stable id: 1–3 capital letters + 3 digits (`CODE_PATTERN`); never reused for another meaning",
    "name": "kebab-case name (`NAME_PATTERN`), selectable like the code",
    "summary": "one line, shown by `advisor rules` and as the SARIF short description",
    "severity": "default severity; a finding sets its own (usually from its share of step time)",
    "requires": "evidence the rule can work from — any one `Need` is enough; otherwise the rule is *skipped*",
    "tags": "groups for `--select` (e.g. `compute`, `comm`, `config`)",
    "fix_availability": "whether findings carry config patches: `always`, `sometimes` or `never`",
    "Options": "a `RuleOptions` subclass: the rule's validated settings (`[tool.advisor.rules.CODE]`)",
}


def _class_members(cls: type, *, skip: Iterable[str] = ()) -> list[tuple[str, Any]]:
    skip = set(skip)
    return [(n, v) for n, v in vars(cls).items() if not n.startswith("_") and n not in skip]


def _member_lines(cls: type, notes: dict[str, str] | None = None, *, skip: Iterable[str] = ()) -> list[str]:
    """A table of a class's public properties and methods: signature and first docstring paragraph."""
    notes = notes or {}
    L = ["| member | description |", "|---|---|"]
    for name, value in _class_members(cls, skip=skip):
        if isinstance(value, property):
            ret = inspect.signature(value.fget).return_annotation if value.fget else inspect.Signature.empty
            sig = name + ("" if ret is inspect.Signature.empty else f": {_type_name(ret)}")
            doc = value.fget.__doc__ if value.fget else None
        elif isinstance(value, (classmethod, staticmethod)):
            fn = value.__func__
            sig = _signature(fn, name, skip_self=isinstance(value, classmethod))
            doc = fn.__doc__
        elif inspect.isfunction(value):
            sig = _signature(value, name, skip_self=True)
            doc = value.__doc__
        else:
            continue
        text = _first_paragraph(doc) or notes.get(name, "")
        L.append(f"| {_cell(_code(sig))} | {_cell(text)} |")
    return L


CONTEXT_NOTES = {
    "run": "the profiled `Run` (`None` without profiles): `for rank in ctx.run`, `rank.table(name, columns)`",
    "ir": "the IR dumps (`IRDumpSet`, `None` without them); prefer `ctx.ir_graph(stage)`",
    "config": "typed view of the training YAML (`TrainingConfig`, `None` without one): `get(key)`, `located(key)`, `has(pointer)`",
    "config_doc": "the round-trip YAML document the patches apply to",
    "settings": "the resolved `[tool.advisor]` settings (read-only)",
    "sink": "diagnostics sink (warnings about inputs)",
    "has": "whether the evidence a `Need` describes is present (no table is read)",
    "ir_ranks": "IR dumps per rank, in rank order",
    "config_path": "path of the training config, if any",
}


RULE_METHOD_NOTES = {
    "check": "the rule itself: yield `Finding` objects built from the evidence in `ctx`; call `ctx.skip(reason)` to say why there are none",
    "missing_doc_sections": "the `DOC_SECTIONS` the help page lacks (the test suite requires none for built-ins)",
}
NEED_NOTES = {
    "table": "a canonical table and the columns the rule reads (all must be in the file's header)",
    "ir": "an IR stage: `frontend`, `backend` or `parallel`",
    "config": "a logical config key or JSON pointer; `*` (default) = any training config",
    "describe": "the text `advisor rules` and skip reasons show",
}
RUN_NOTES = {
    "rank": "one rank by id (iterate `for rank in run` for all, in rank order)",
    "rank_ids": "profiled rank ids, sorted",
}
RANK_NOTES = {
    "identity": "`RankIdentity`: rank id and where it came from, framework and CANN versions (see tables.md, Rank metadata)",
    "rank_id": "the rank id",
    "parallel": "`ParallelLayout` from the profiler metadata, when it says",
    "settings": "`ProfilerSettings`: profiler level, `aic_metrics` … (what was collected)",
    "env": "environment variables recorded by the profiler (`profiler_metadata.json`)",
    "path": "the rank's profile directory",
    "loader": "the `TableLoader` of a table name (`KeyError` for an unknown table)",
    "has_table": "whether the rank has the file the table is read from",
}


def _gen_rule_api() -> list[str]:
    from advisor_core.engine import rule as rule_mod
    from advisor_core.engine.rule import Need, Requirements, Rule, RuleOptions

    L = [
        "`from advisor_core.engine import Rule, RuleOptions, Requirements, Need, Severity`",
        "",
        "Class attributes of `Rule`:",
        "",
        "| attribute | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for name, ann in Rule.__annotations__.items():
        default = getattr(Rule, name, inspect.Parameter.empty)
        if default is inspect.Parameter.empty:
            dtext = "*required*"
        elif isinstance(default, type):
            dtext = f"`{default.__name__}`"
        elif isinstance(default, enum.Enum):
            dtext = f"`{type(default).__name__}.{default.name}`"
        else:
            dtext = _code(repr(default))
        ann_text = _type_name(ann)
        ann_text = re.sub(r"^ClassVar\[(.*)\]$", r"\1", ann_text)
        L.append(f"| `{name}` | {_cell(_code(ann_text))} | {_cell(dtext)} | {_cell(RULE_ATTRIBUTE_NOTES.get(name, ''))} |")
    L += [
        "",
        f"Validation (at registration): `CODE_PATTERN` = `{rule_mod.CODE_PATTERN.pattern}`, "
        f"`NAME_PATTERN` = `{rule_mod.NAME_PATTERN.pattern}`, "
        f"help-page sections `DOC_SECTIONS` = {', '.join(f'`{s}`' for s in rule_mod.DOC_SECTIONS)}.",
        "",
        "Methods of `Rule`:",
        "",
        *_member_lines(Rule, RULE_METHOD_NOTES),
        "",
        "### `Need` and `Requirements`",
        "",
        rst_to_md(Need.__doc__),
        "",
        *_member_lines(Need, NEED_NOTES),
        "",
        rst_to_md(Requirements.__doc__),
        "",
        "### `RuleOptions`",
        "",
        rst_to_md(RuleOptions.__doc__) + f" (pydantic `model_config` = `{dict(RuleOptions.model_config)}`)",
        "",
    ]
    return L


def _gen_context_api() -> list[str]:
    from advisor_core.engine.context import RuleContext
    from advisor_core.model.run import Rank, Run

    return [
        rst_to_md(RuleContext.__doc__) + " Attributes: `options` (the validated `Options` instance), `code`.",
        "",
        *_member_lines(RuleContext, CONTEXT_NOTES),
        "",
        "### `Run` and `Rank` (`ctx.run`)",
        "",
        rst_to_md(Run.__doc__),
        "",
        *_member_lines(Run, RUN_NOTES),
        "",
        rst_to_md(Rank.__doc__) + " Tables are listed in [tables.md](tables.md).",
        "",
        *_member_lines(Rank, RANK_NOTES),
        "",
    ]


def _enum_lines(cls: type[enum.Enum]) -> list[str]:
    return [rst_to_md(cls.__doc__), "", "Values: " + ", ".join(f"`{m.name}` = `{m.value!r}`" for m in cls), ""]


MODEL_MEMBER_NOTES = {
    "Finding.primary_config_location": "the first `config` location, if any",
    "Patch.preconditions": "the `test` operations",
    "Patch.changes": "the operations that are not `test`",
}


def _gen_models() -> list[str]:
    from advisor_core.engine import findings as fm

    L = ["`from advisor_core.engine import Finding, Evidence, Location, Patch, PatchOp, Severity, Safety`", ""]
    for model in (fm.Finding, fm.Evidence, fm.Location, fm.Patch, fm.PatchOp):
        L += [f"### `{model.__name__}`", "", rst_to_md(model.__doc__), "", *_model_fields_table(model), ""]
        props = [(n, v) for n, v in _class_members(model) if isinstance(v, property) or inspect.isfunction(v)]
        if props:
            L += ["Also:", ""]
            for n, v in props:
                fn = v.fget if isinstance(v, property) else v
                label = n if isinstance(v, property) else n + "()"
                doc = _first_paragraph(fn.__doc__) or MODEL_MEMBER_NOTES.get(f"{model.__name__}.{n}", "")
                L.append(f"* {_code(label)}" + (f" — {doc}" if doc else ""))
            L.append("")
    for e in (fm.Severity, fm.Safety):
        L += [f"### `{e.__name__}`", "", *_enum_lines(e)]
    L += ["### Ranking", "", f"`sort_findings`: {_first_paragraph(fm.sort_findings.__doc__)}", ""]
    return L


def _gen_testing_kit() -> list[str]:
    from advisor_core import testing as kit

    L = [
        "`from advisor_core.testing import load_rule_cases, evaluate_case`",
        "",
        "| function | description |",
        "|---|---|",
    ]
    for name in ("load_rule_cases", "write_profile", "run_case", "evaluate_case"):
        fn = getattr(kit, name)
        L.append(f"| {_cell(_code(_signature(fn)))} | {_cell(_first_paragraph(fn.__doc__))} |")
    L += ["", "Keys of one case (`cases: {name: {...}}` in the YAML file; `rule:` at the top):", ""]
    L += _model_fields_table(kit.RuleCase)
    L += ["", "Keys of one `expect:` entry (fields left out are not checked):", ""]
    L += _model_fields_table(kit.ExpectedFinding)
    L.append("")
    return L


REGIONS: dict[str, Callable[[], list[str]]] = {
    "hookspecs": _gen_hookspecs,
    "rule-api": _gen_rule_api,
    "context-api": _gen_context_api,
    "models": _gen_models,
    "testing-kit": _gen_testing_kit,
}


def _region_text(name: str) -> str:
    body = "\n".join(REGIONS[name]()).strip("\n")
    return f"{BEGIN.format(name=name)}\n\n{body}\n\n{END.format(name=name)}"


def render_plugins(current: str | None) -> str:
    """``current`` with every generated region refreshed; missing regions are appended."""
    text = current if current is not None else "# Writing advisor plugins\n"
    found: set[str] = set()

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in REGIONS:
            return m.group(0)
        found.add(name)
        return _region_text(name)

    text = _REGION.sub(sub, text)
    for name in REGIONS:
        if name not in found:
            text = text.rstrip("\n") + f"\n\n## {name}\n\n{_region_text(name)}\n"
    return text if text.endswith("\n") else text + "\n"


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def expected(target: str, docs_dir: Path) -> tuple[Path, str, str | None]:
    """(path, generated text, current text or ``None``) for one target."""
    path = docs_dir / TARGETS[target]
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if target == "tables":
        text = render_tables()
    elif target == "rules":
        text = render_rules()
    else:
        text = render_plugins(current)
    if not text.endswith("\n"):
        text += "\n"
    return path, text, current


def check(target: str, docs_dir: Path = DEFAULT_DOCS_DIR) -> str | None:
    """``None`` when the document is current, else a unified diff (current → generated)."""
    path, text, current = expected(target, docs_dir)
    if current == text:
        return None
    diff = difflib.unified_diff(
        (current or "").splitlines(keepends=True),
        text.splitlines(keepends=True),
        fromfile=f"{path} (committed)" if current is not None else f"{path} (missing)",
        tofile=f"{path} (generated)",
    )
    return "".join(diff) or f"{path}: differs only in line endings\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m advisor_core.docs",
        description="Generate docs/tables.md, docs/rules.md and the generated parts of docs/plugins.md.",
    )
    parser.add_argument("target", choices=[*TARGETS, "all"])
    parser.add_argument("--check", action="store_true", help="write nothing; print a diff and exit 1 when out of date")
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR, help=f"default: {DEFAULT_DOCS_DIR}")
    args = parser.parse_args(argv)
    targets = list(TARGETS) if args.target == "all" else [args.target]
    stale = 0
    for t in targets:
        if args.check:
            diff = check(t, args.docs_dir)
            path = args.docs_dir / TARGETS[t]
            if diff is None:
                print(f"{path}: up to date")
            else:
                stale += 1
                sys.stdout.write(diff if diff.endswith("\n") else diff + "\n")
                print(f"{path}: out of date; run `python -m advisor_core.docs {t}`", file=sys.stderr)
        else:
            path, text, current = expected(t, args.docs_dir)
            if current == text:
                print(f"{path}: unchanged")
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            print(f"{path}: written")
    return 1 if stale else 0


if __name__ == "__main__":
    # As in advisor_core.__main__: the current directory must not shadow a rule module.
    import os

    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    sys.exit(main())
