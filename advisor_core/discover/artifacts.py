"""Where each artifact of one profiled rank lives, by file name pattern.

An *artifact* is one file kind (``kernel_details``, ``trace_view`` …). Patterns
are tried in order: first ``ASCEND_PROFILER_OUTPUT/``, then the CANN export under
``PROF_*/mindstudio_profiler_output/`` (and the CANN 6.3/7.0
``PROF_*/device_*/summary``), then the framework raw folder (``FRAMEWORK/``, or
``raw/`` as the MindData sample has it), then the directory itself (legacy
MindSpore ≤ 2.3 layout and loose files). Nothing is read here: this module only
looks at names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.textio import is_dir_safe, list_dir

# Folders, relative to a rank directory, that may hold artifacts, in lookup order.
_APO = "ASCEND_PROFILER_OUTPUT"


@dataclass(frozen=True)
class ArtifactPattern:
    """One way an artifact may be named: a folder family and a file-name regex.

    ``{id}`` in ``regex`` matches a rank/device id; it is captured so a legacy
    directory holding several ranks' files can be split by id.
    """

    kind: str
    folder: str  # "apo", "cann", "framework", "root"
    regex: str
    description: str = ""

    def compiled(self) -> re.Pattern[str]:
        return re.compile("^" + self.regex.replace("{id}", r"(?P<id>\d+)") + "$")


# Order matters: the first pattern (and folder) that matches wins.
ARTIFACT_PATTERNS: tuple[ArtifactPattern, ...] = (
    ArtifactPattern("kernel_details", "apo", r"kernel_details\.csv", "per-task device kernels"),
    ArtifactPattern("kernel_details", "root", r"kernel_details\.csv"),
    ArtifactPattern("op_summary", "cann", r"op_summary_\d{14}\.csv", "CANN op summary (kernel fallback)"),
    ArtifactPattern("op_summary", "cann_device", r"op_summary_.*\.csv"),
    ArtifactPattern("op_statistic", "apo", r"op_statistic\.csv", "per op-type totals"),
    ArtifactPattern("op_statistic", "root", r"op_statistic\.csv"),
    ArtifactPattern("op_statistic", "cann", r"op_statistic_\d{14}\.csv"),
    ArtifactPattern("step_trace_time", "apo", r"step_trace_time\.csv", "per-step time breakdown"),
    ArtifactPattern("step_trace_time", "root", r"step_trace_time\.csv"),
    ArtifactPattern("legacy_step_trace", "root", r"step_trace_raw_{id}_detail_time\.csv", "MindSpore ≤ 2.3 step trace (syscnt)"),
    ArtifactPattern("trace_view", "apo", r"trace_view\.json", "Chrome trace timeline"),
    ArtifactPattern("trace_view", "root", r"trace_view\.json"),
    ArtifactPattern("trace_view", "cann", r"msprof_\d{14}\.json"),
    ArtifactPattern("communication", "apo", r"communication\.json", "per-op communication time and bandwidth"),
    ArtifactPattern("communication", "root", r"communication\.json"),
    ArtifactPattern("communication_matrix", "apo", r"communication_matrix\.json", "per-link communication matrix"),
    ArtifactPattern("communication_matrix", "root", r"communication_matrix\.json"),
    ArtifactPattern("dataset", "apo", r"dataset\.csv", "MindSpore dataset operation timings"),
    ArtifactPattern("minddata_pipeline_raw", "apo", r"minddata_pipeline_raw_{id}\.csv", "MindData queue samples"),
    ArtifactPattern("minddata_pipeline_raw", "root", r"minddata_pipeline_raw_{id}\.csv"),
    ArtifactPattern("minddata_pipeline_summary_json", "apo", r"minddata_pipeline_summary_{id}\.json", "MindData analysis"),
    ArtifactPattern("minddata_pipeline_summary_json", "root", r"minddata_pipeline_summary_{id}\.json"),
    ArtifactPattern("minddata_pipeline_summary_csv", "apo", r"minddata_pipeline_summary_{id}\.csv"),
    ArtifactPattern("minddata_pipeline_summary_csv", "root", r"minddata_pipeline_summary_{id}\.csv"),
    ArtifactPattern("pipeline_profiling", "framework", r"pipeline_profiling_{id}\.json", "MindData raw op tree"),
    ArtifactPattern("pipeline_profiling", "root", r"pipeline_profiling_{id}\.json"),
    ArtifactPattern("minddata_cpu_utilization", "framework", r"minddata_cpu_utilization_{id}\.json", "MindData CPU use"),
    ArtifactPattern("minddata_cpu_utilization", "root", r"minddata_cpu_utilization_{id}\.json"),
    ArtifactPattern("device_queue_profiling", "framework", r"device_queue_profiling_{id}\.txt", "host queue (sink mode)"),
    ArtifactPattern("device_queue_profiling", "root", r"device_queue_profiling_{id}\.txt"),
    ArtifactPattern("dataset_iterator_profiling", "framework", r"dataset_iterator_profiling_{id}\.txt", "host queue (non-sink)"),
    ArtifactPattern("dataset_iterator_profiling", "root", r"dataset_iterator_profiling_{id}\.txt"),
    ArtifactPattern("minddata_aicpu", "root", r"minddata_aicpu_{id}\.txt", "device data queue (sink mode, MindSpore ≤ 2.3)"),
    ArtifactPattern("minddata_aicpu", "framework", r"minddata_aicpu_{id}\.txt"),
    ArtifactPattern("aicpu_mi", "cann", r"aicpu_mi_.*\.csv", "device data queue (sink mode, CANN export)"),
    ArtifactPattern("minddata_getnext_profiling", "root", r"minddata_getnext_profiling_{id}\.txt", "device data queue (GPU)"),
    ArtifactPattern("operator_memory", "apo", r"operator_memory\.csv", "per-tensor allocations"),
    ArtifactPattern("operator_memory", "root", r"operator_memory(?:_{id})?\.csv"),
    ArtifactPattern("memory_record", "apo", r"memory_record\.csv", "memory over time"),
    ArtifactPattern("npu_module_mem", "apo", r"npu_module_mem\.csv", "per-module reserved memory"),
    ArtifactPattern("cpu_op_detail", "framework", r"cpu_op_detail_info_{id}\.csv", "MindSpore CPU op timings"),
    ArtifactPattern("profiler_info", "root", r"profiler_info_{id}\.json", "profiler metadata with the rank id"),
    ArtifactPattern("profiler_info", "root", r"profiler_info\.json"),
    ArtifactPattern("profiler_metadata", "root", r"profiler_metadata\.json", "env vars and parallel groups"),
    ArtifactPattern("profiler_db", "apo", r"ascend_(?:pytorch|mindspore)_profiler(?:_\d+)?\.db",
                    "SQLite export: kernels, steps, memory"),
    ArtifactPattern("analysis_db", "apo", r"analysis\.db", "SQLite export: communication and step breakdown"),
    ArtifactPattern("analysis_db", "apo", r"communication_analyzer\.db"),
)

ARTIFACT_KINDS: tuple[str, ...] = tuple(dict.fromkeys(p.kind for p in ARTIFACT_PATTERNS))

# File names that, found loose in a directory, make it a (bare) rank directory.
LOOSE_PROFILE_FILES = re.compile(
    r"^(kernel_details\.csv|trace_view\.json|step_trace_time\.csv|op_statistic\.csv|communication\.json|"
    r"minddata_pipeline_raw_\d+\.csv|minddata_pipeline_summary_\d+\.(json|csv)|step_trace_raw_\d+_detail_time\.csv|"
    r"profiler_info_\d+\.json|ascend_mindspore_profiler_\d+\.db)$"
)


@dataclass
class FoundArtifact:
    kind: str
    path: Path
    file_id: str | None  # the {id} captured from the name, if any


def _folders(rank_dir: Path, family: str) -> list[Path]:
    if family == "apo":
        return [rank_dir / _APO]
    if family == "root":
        return [rank_dir]
    if family == "framework":
        return [rank_dir / "FRAMEWORK", rank_dir / "raw"]
    out: list[Path] = []
    for prof in sorted(p for p in list_dir(rank_dir) if p.name.startswith("PROF_") and is_dir_safe(p)):
        if family == "cann":
            out.append(prof / "mindstudio_profiler_output")
        elif family == "cann_device":
            out.extend(sorted(d / "summary" for d in list_dir(prof) if d.name.startswith("device_")))
    return out


def find_artifacts(
    rank_dir: Path,
    sink: DiagnosticSink,
    *,
    only_id: str | None = None,
    patterns: tuple[ArtifactPattern, ...] = (),
) -> dict[str, FoundArtifact]:
    """Map artifact kind → file for one rank directory.

    ``only_id`` restricts ``{id}``-patterned files to one id (legacy directories
    hold files of several ranks side by side). When a folder holds several files
    of the same kind (two ``op_summary_*.csv``), the last by name wins, with a
    warning, as msprof-analyze does.
    """
    listings: dict[Path, list[Path]] = {}

    def listing(folder: Path) -> list[Path]:
        if folder not in listings:
            listings[folder] = list_dir(folder) if is_dir_safe(folder) else []
        return listings[folder]

    found: dict[str, FoundArtifact] = {}
    for pat in ARTIFACT_PATTERNS + tuple(patterns):
        if pat.kind in found:
            continue
        rx = pat.compiled()
        for folder in _folders(rank_dir, pat.folder):
            matches: list[tuple[Path, str | None]] = []
            for entry in listing(folder):
                m = rx.match(entry.name)
                if not m:
                    continue
                fid = m.groupdict().get("id")
                if only_id is not None and fid is not None and fid != only_id:
                    continue
                matches.append((entry, fid))
            if not matches:
                continue
            if len(matches) > 1 and not (pat.kind == "profiler_info"):
                sink.warning(
                    "several-files",
                    f"{len(matches)} files match {pat.kind} ({', '.join(m[0].name for m in matches)}); "
                    f"using the last one, {matches[-1][0].name}",
                    folder,
                )
            path, fid = matches[-1]
            found[pat.kind] = FoundArtifact(pat.kind, path, fid)
            break
    return found


def legacy_ids(directory: Path) -> list[str]:
    """Rank/device ids found in the names of legacy (≤ 2.3) per-rank files of a directory."""
    ids: set[str] = set()
    rx = re.compile(
        r"^(?:step_trace_raw_(\d+)_detail_time\.csv|minddata_pipeline_raw_(\d+)\.csv|"
        r"minddata_pipeline_summary_(\d+)\.(?:json|csv)|profiler_info_(\d+)\.json|"
        r"pipeline_profiling_(\d+)\.json|device_queue_profiling_(\d+)\.txt|dataset_iterator_profiling_(\d+)\.txt)$"
    )
    for entry in list_dir(directory):
        m = rx.match(entry.name)
        if m:
            ids.update(g for g in m.groups() if g is not None)
    return sorted(ids, key=int)
