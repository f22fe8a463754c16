"""What ``docs/tables.md`` is generated from: the CSV loader specs and the artifact file patterns."""

from __future__ import annotations

from typing import Any, Iterable

from advisor_core.docs.markdown import code_span, table_cell

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


def artifact_lines(kinds: Iterable[str]) -> list[str]:
    """A numbered list of the files each artifact kind is read from."""
    from advisor_core.discover.artifacts import ARTIFACT_PATTERNS

    out = []
    for n, kind in enumerate(kinds, 1):
        pats = [p for p in ARTIFACT_PATTERNS if p.kind == kind]
        desc = next((p.description for p in pats if p.description), "")
        where = ", ".join(_pattern_text(p) for p in pats) or "(no built-in file pattern)"
        out.append(f"{n}. `{kind}`{' — ' + desc if desc else ''}: {where}")
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


def input_specs() -> dict[str, list[tuple[str, Any]]]:
    """Derived tables → (artifact kind, CSV spec) of the files they are built from."""
    from advisor_core.loaders import minddata as mdl
    from advisor_core.loaders import steps

    return {
        "step_trace": [("step_trace_time", steps.STEP_TRACE_TIME), ("legacy_step_trace", steps.LEGACY_STEP_TRACE)],
        "minddata_pipeline": [("minddata_pipeline_raw", mdl.PIPELINE_RAW)],
    }


def spec_table(spec: Any, *, with_required: bool = True) -> list[str]:
    """A CSV spec's columns as a Markdown table: dtype, header spellings, meaning."""
    from advisor_core.loaders.csvtable import _pandas_dtype

    lines = ["| column | dtype | header spellings accepted | meaning |", "|---|---|---|---|"]
    for c in spec.columns:
        req = " **(required)**" if with_required and c.name in spec.required else ""
        lines.append(
            f"| `{c.name}`{req} | {_pandas_dtype(c.kind)} | "
            + ", ".join(code_span(h) for h in c.headers)
            + f" | {table_cell(c.doc)} |"
        )
    return lines


def csv_kind_note(spec: Any) -> list[str]:
    """Notes on how the spec's special column kinds (timestamps, ids, shapes) are read."""
    kinds = sorted({c.kind for c in spec.columns})
    notes = {
        "ts_us": "`*_ns` timestamp columns are read from the µs text exactly (no float64 rounding).",
        "id": "id columns map the `4294967295` sentinel to missing.",
        "shape": "shape columns have the literal surrounding `\"` removed; multi-tensor values stay `;`-separated.",
    }
    return [notes[k] for k in kinds if k in notes]
