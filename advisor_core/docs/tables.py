"""``docs/tables.md``: every normalised table, the files it is read from, its columns and their header spellings."""

from __future__ import annotations

from typing import Any

from advisor_core.docs.markdown import code_span, rst_to_md, table_cell
from advisor_core.docs.tables_derived import derived_table_lines
from advisor_core.docs.tables_intro import TABLES_INTRO
from advisor_core.docs.tables_metadata import rank_metadata_lines
from advisor_core.docs.tables_specs import all_csv_specs, artifact_lines, csv_kind_note, input_specs, spec_table


def render_tables() -> str:
    """The text of ``docs/tables.md``, built from the loader specs and the loader catalogue."""
    from advisor_core.loaders.csvtable import NULL_VALUES
    from advisor_core.loaders.registry import BUILTIN_LOADERS

    specs = all_csv_specs()
    specs_by_name = {s.name: s for s in specs}
    inputs = input_specs()
    placed: set[str] = set()
    nulls = ", ".join(code_span(v) for v in NULL_VALUES if v)
    L: list[str] = [line.replace("{null_values}", nulls) for line in TABLES_INTRO]
    for ld in BUILTIN_LOADERS:
        L.append(f"| [`{ld.name}`](#{ld.name}) | {table_cell(ld.title)} | {', '.join(code_span(k) for k in ld.artifacts)} |")
    L.append("| [`cluster_step_trace`](#cluster_step_trace) | cluster step time breakdown | `cluster_analysis_output/cluster_step_trace_time.csv` (`run.cluster_step_trace()`) |")
    L.append("| [`cluster_communication`](#cluster_communication) | cluster communication ops | `cluster_analysis_output/cluster_communication.json` (`run.cluster_communication()`) |")
    L.append("")

    for ld in BUILTIN_LOADERS:
        L += [f"## `{ld.name}`", "", f"*{ld.title}*", ""]
        L += ["Read from (first present wins; a bare file name is in the rank directory itself):", "",
              *artifact_lines(ld.artifacts), ""]
        spec = specs_by_name.get(ld.name)
        if spec is not None and ld.projectable and ld.available is not None:
            placed.add(spec.name)
            L += _csv_table_lines(ld, spec)
        else:
            L += derived_table_lines(ld, inputs, placed)
        L += _db_lines(ld)
    L += _cluster_lines(placed)
    L += _other_spec_lines(specs, placed)
    L += rank_metadata_lines()
    L += _header_index_lines(specs)
    return "\n".join(L)


def _db_lines(ld: Any) -> list[str]:
    """The table's origin in the SQLite export, column by column (or that it has none)."""
    if ld.db is None:
        return ["*Not in the SQLite export: read from the file above even in a DB-mode run.*", ""]
    L = [f"### From the SQLite export (`{ld.name}`)", "",
         "Read instead of the file above when the database holds " + ", ".join(code_span(t) for t in ld.db_tables)
         + " in full (`--source auto`, the default: an empty table, or fewer rows than the file, and the file is read, "
         "with an info line naming both; `--source text` never reads it, `--source db` reads nothing else). "
         "Same columns, units and dtypes. The database:", "", *artifact_lines(ld.db.artifacts), ""]
    if "_note" in ld.db_origin:
        L += [ld.db_origin["_note"], ""]
    L += ["| column | DB origin |", "|---|---|"]
    for col in ld.columns:
        L.append(f"| `{col}` | {table_cell(ld.db_origin.get(col, 'not in the DB export (missing)'))} |")
    return L + [""]


def _csv_table_lines(ld: Any, spec: Any) -> list[str]:
    """The section body of a table read column by column from one CSV spec."""
    from advisor_core.loaders.csvtable import _pandas_dtype

    L: list[str] = []
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
    L += [*csv_kind_note(spec), ""]
    L += spec_table(spec) + [""]
    return L


def _cluster_lines(placed: set[str]) -> list[str]:
    """The run-level tables (``cluster_analysis_output/``); adds the spec it documents to ``placed``."""
    from advisor_core.loaders import communication as comm
    from advisor_core.loaders import steps

    L: list[str] = []
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
    L += spec_table(cst) + [""]
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
    comm_frame, _ = comm.comm_frames([], [])
    for col in comm.COMMUNICATION_COLUMNS:
        L.append(f"| `{col}` | {comm_frame.dtypes[col]} |")
    L.append("")
    return L


def _other_spec_lines(specs: list[Any], placed: set[str]) -> list[str]:
    """CSV specs no table section documented."""
    L: list[str] = []
    rest = [s for s in specs if s.name not in placed]
    if rest:
        L += ["## Other CSV specs", ""]
        for s in rest:
            L += [f"### `{s.name}` ({s.title})", ""]
            if s.doc:
                L += [rst_to_md(s.doc), ""]
            L += spec_table(s) + [""]
    return L


def _header_index_lines(specs: list[Any]) -> list[str]:
    """Every header spelling the CSV loaders accept and the column it becomes, sorted."""
    from advisor_core.loaders.csvtable import _pandas_dtype

    L: list[str] = []
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
        L.append(f"| {table_cell(code_span(h))} | `{table}` | `{col}` | {dt} |")
    L.append("")
    return L
