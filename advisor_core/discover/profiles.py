"""Finding profiled ranks under the paths a user gives.

Accepted (``ascend-profile-formats.md`` §2–3):

* a single ``*_ascend_ms`` / ``*_ascend_pt`` directory;
* a cluster parent holding many of them (at any depth up to :data:`MAX_DEPTH`,
  e.g. MindFormers' ``output/profile/rank_0/…``);
* a directory holding ``ASCEND_PROFILER_OUTPUT/`` whatever its name;
* the legacy MindSpore ≤ 2.3 ``profiler/`` directory, whose files of several
  ranks sit side by side with an ``_{id}`` suffix;
* a directory of loose profiler files, or one such file given directly;
* ``cluster_analysis_output/`` (``cluster_step_trace_time.csv``,
  ``cluster_communication.json``).

Rank ids come from ``profiler_info_{rank}.json``; without it, from a lone
``profiler_info.json`` ``rank_id``, the ``_{id}`` of legacy file names,
``Device_id`` in kernel_details.csv, an ``NPU <id>`` trace process label, or the
directory name — each fallback with a warning. Several directories for one rank:
the newest by the directory-name timestamp is kept (logged). PyTorch and
MindSpore profiles are never mixed. Symlink loops are detected and reported.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.discover.artifacts import LOOSE_PROFILE_FILES, ArtifactPattern, FoundArtifact, find_artifacts, legacy_ids
from advisor_core.loaders import metadata as md
from advisor_core.model.identity import ParallelLayout, ProfilerSettings, RankIdentity
from advisor_core.textio import is_dir_safe, list_dir, real_path

MAX_DEPTH = 6
_SKIP_DIRS = re.compile(r"^(FRAMEWORK|PROF_.*|logs|ASCEND_PROFILER_OUTPUT|\.git|__pycache__|node_modules|actor_set|verbose_ir_files)$")
_ASCEND_DIR = re.compile(r"^(?P<stem>.*)_ascend_(?P<kind>ms|pt)$")
_CLUSTER_FILES = ("cluster_step_trace_time.csv", "cluster_communication.json", "cluster_analysis.db")
_TEXT_KINDS = ("kernel_details", "op_summary", "trace_view", "step_trace_time", "op_statistic", "communication")
_DIR_RANK = re.compile(r"(?:^|[_\-.])(?:rank|device)[_\-]?(\d+)(?:$|[_\-.])", re.IGNORECASE)


@dataclass
class RankSource:
    """One directory (or legacy id within a directory) holding one rank's profile."""

    path: Path
    layout: str  # ascend_ms | ascend_pt | legacy | bare | file
    artifacts: dict[str, FoundArtifact]
    legacy_id: str | None = None
    identity: RankIdentity | None = None
    settings: ProfilerSettings | None = None
    parallel: ParallelLayout | None = None
    env: dict[str, str] = field(default_factory=dict)
    timestamp: str | None = None
    host: str | None = None
    pid: int | None = None
    # which export a table is read from when both are present: "auto" (the DB when it holds
    # the table), "text" or "db" (``--source``)
    source_mode: str = "auto"

    def artifact(self, kind: str) -> Path | None:
        a = self.artifacts.get(kind)
        return a.path if a else None


@dataclass
class ProfileSet:
    """Everything found: one source per rank, plus what was set aside."""

    ranks: list[RankSource] = field(default_factory=list)
    superseded: list[RankSource] = field(default_factory=list)
    cluster_files: dict[str, Path] = field(default_factory=dict)
    roots: list[Path] = field(default_factory=list)


def _split_ascend_name(name: str) -> tuple[str | None, int | None, str | None]:
    """``{host}_{pid}_{timestamp}_ascend_ms`` → (host, pid, timestamp); index −3 keeps hosts with ``_``."""
    m = _ASCEND_DIR.match(name)
    if not m:
        return None, None, None
    parts = name.split("_")
    if len(parts) < 4:
        return None, None, None
    ts = parts[-3] if parts[-3].isdigit() else None
    pid = int(parts[-4]) if len(parts) >= 5 and parts[-4].isdigit() else None
    host = "_".join(parts[:-4]) if len(parts) >= 5 else None
    return host or None, pid, ts


class _EnoughSources(Exception):
    """The walk found what its caller wanted to know."""


class _SourceList(list):  # type: ignore[type-arg]
    """The walk's sources; once ``enough`` says so of the list, the walk ends (:class:`_EnoughSources`)."""

    def __init__(self, enough: Callable[[list[RankSource]], bool] | None) -> None:
        super().__init__()
        self.enough = enough

    def append(self, src: RankSource) -> None:
        super().append(src)
        if self.enough is not None and self.enough(self):
            raise _EnoughSources


class _Walker:
    def __init__(self, sink: DiagnosticSink, patterns: tuple[ArtifactPattern, ...] = (),
                 enough: Callable[[list[RankSource]], bool] | None = None) -> None:
        self.sink = sink
        self.patterns = patterns
        self.seen: set[str] = set()
        self.sources: list[RankSource] = _SourceList(enough)
        self.cluster_files: dict[str, Path] = {}

    def add_file(self, path: Path) -> None:
        name = path.name
        if name in _CLUSTER_FILES:
            self.cluster_files[name.split(".")[0]] = path
            return
        if LOOSE_PROFILE_FILES.match(name) or re.match(r"^op_summary_.*\.csv$", name):
            kind = _kind_for_loose_file(name)
            self.sources.append(
                RankSource(path=path.parent, layout="file", artifacts={kind: FoundArtifact(kind, path, None)})
            )
            return
        self.sink.error("unknown-file", "not a profiler file this tool reads", path)

    def walk(self, directory: Path, depth: int) -> None:
        rp = real_path(directory)
        if rp is None:
            self.sink.error("symlink-loop", "symbolic link loop; not followed", directory)
            return
        if rp in self.seen:
            if directory.is_symlink():
                self.sink.warning("symlink-loop", "symbolic link leads back to a directory already visited; skipped", directory)
            return
        self.seen.add(rp)
        name = directory.name
        m = _ASCEND_DIR.match(name)
        if m:
            layout = "ascend_ms" if m.group("kind") == "ms" else "ascend_pt"
            self._add_dir_source(directory, layout)
            return
        entries = list_dir(directory, self.sink)
        names = {e.name for e in entries}
        if "ASCEND_PROFILER_OUTPUT" in names and is_dir_safe(directory / "ASCEND_PROFILER_OUTPUT"):
            self._add_dir_source(directory, "bare")
            return
        for cf in _CLUSTER_FILES:
            if cf in names:
                self.cluster_files.setdefault(cf.split(".")[0], directory / cf)
        ids = legacy_ids(directory)
        for lid in ids:
            arts = find_artifacts(directory, self.sink, only_id=lid, patterns=self.patterns)
            self.sources.append(RankSource(path=directory, layout="legacy", artifacts=arts, legacy_id=lid))
        if not ids and any(LOOSE_PROFILE_FILES.match(n) for n in names):
            self._add_dir_source(directory, "bare")
        if depth >= MAX_DEPTH:
            return
        for entry in entries:
            if _SKIP_DIRS.match(entry.name):
                continue
            if is_dir_safe(entry) or entry.is_symlink():
                if entry.is_symlink() and real_path(entry) is None:
                    self.sink.error("symlink-loop", "symbolic link loop; not followed", entry)
                    continue
                if is_dir_safe(entry):
                    self.walk(entry, depth + 1)

    def _add_dir_source(self, directory: Path, layout: str) -> None:
        arts = find_artifacts(directory, self.sink, patterns=self.patterns)
        host, pid, ts = _split_ascend_name(directory.name)
        self.sources.append(
            RankSource(path=directory, layout=layout, artifacts=arts, timestamp=ts, host=host, pid=pid)
        )


def _kind_for_loose_file(name: str) -> str:
    table = {
        "kernel_details.csv": "kernel_details",
        "trace_view.json": "trace_view",
        "step_trace_time.csv": "step_trace_time",
        "op_statistic.csv": "op_statistic",
        "communication.json": "communication",
    }
    if name in table:
        return table[name]
    if name.startswith("op_summary_"):
        return "op_summary"
    if name.startswith("minddata_pipeline_raw_"):
        return "minddata_pipeline_raw"
    if name.startswith("minddata_pipeline_summary_"):
        return "minddata_pipeline_summary_" + name.rsplit(".", 1)[1]
    if name.startswith("step_trace_raw_"):
        return "legacy_step_trace"
    return "profiler_info"


def _device_id_from_kernels(path: Path) -> int | None:
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            row = next(reader, None)
    except (OSError, csv.Error):
        return None
    if not header or not row:
        return None
    for i, h in enumerate(header):
        if re.sub(r"[\s_]", "", h.lower()) == "deviceid" and i < len(row):
            try:
                return int(row[i])
            except ValueError:
                return None
    return None


def _device_id_from_trace(path: Path) -> int | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(256 * 1024).decode("utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r'"labels"\s*:\s*"NPU (\d+)"', head)
    return int(m.group(1)) if m else None


def _rank_from_dir_name(path: Path) -> int | None:
    for part in (path.name, path.parent.name):
        m = _DIR_RANK.search(part)
        if m:
            return int(m.group(1))
    return None


def _identify(src: RankSource, sink: DiagnosticSink) -> tuple[int | None, str, dict[str, Any] | None]:
    """Rank id, the evidence used, and the parsed profiler_info (if any)."""
    info: dict[str, Any] | None = None
    pinfo = src.artifacts.get("profiler_info")
    if pinfo is not None:
        info = md.read_profiler_info(pinfo.path, sink)
        if pinfo.file_id is not None:
            return int(pinfo.file_id), pinfo.path.name, info
        rid = md.rank_id_of(info)
        if rid is not None:
            sink.warning(
                "rank-from-fallback",
                f"no profiler_info_{{rank}}.json; rank {rid} taken from the rank_id key of {pinfo.path.name}",
                src.path,
            )
            return rid, f"{pinfo.path.name} rank_id", info
    if src.legacy_id is not None:
        return int(src.legacy_id), f"file names (_{src.legacy_id})", info
    kd = src.artifact("kernel_details") or src.artifact("op_summary")
    if kd is not None:
        dev = _device_id_from_kernels(kd)
        if dev is not None:
            sink.warning(
                "rank-from-fallback",
                f"no profiler_info file; rank {dev} assumed from Device_id in {kd.name}",
                src.path,
            )
            return dev, f"{kd.name} Device_id", info
    tv = src.artifact("trace_view")
    if tv is not None:
        dev = _device_id_from_trace(tv)
        if dev is not None:
            sink.warning(
                "rank-from-fallback",
                f"no profiler_info file; rank {dev} assumed from the 'NPU {dev}' process label in {tv.name}",
                src.path,
            )
            return dev, f"{tv.name} process label NPU {dev}", info
    dr = _rank_from_dir_name(src.path)
    if dr is not None:
        sink.warning(
            "rank-from-fallback", f"no profiler_info file; rank {dr} taken from the directory name", src.path
        )
        return dr, "directory name", info
    return None, "assumed", info


def lone_source(paths: Sequence[Path]) -> RankSource | None:
    """The one profiled rank under ``paths``, found without the rest of discovery (identity, metadata,
    diagnostics); ``None`` when there are none or several. The walk stops at the second rank, so asking
    costs little even of a cluster's directory."""
    found, complete = _scout(paths, lambda sources: len(sources) > 1)
    return found[0] if complete and len(found) == 1 else None


def scout_sources(paths: Sequence[Path], max_ranks: int) -> list[RankSource] | None:
    """Every profiled rank under ``paths``, found as :func:`lone_source` finds one (no identity, metadata or
    diagnostics); ``None`` when there are more than ``max_ranks`` (the walk stops there)."""
    found, complete = _scout(paths, lambda sources: len(sources) > max_ranks)
    return found if complete else None


def kernel_table_size(src: RankSource) -> int:
    """Bytes of the rank's kernel table on disk (``kernel_details.csv``, else ``op_summary``); 0 without one."""
    path = src.artifact("kernel_details") or src.artifact("op_summary")
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def _scout(paths: Sequence[Path], enough: Callable[[list[RankSource]], bool]) -> tuple[list[RankSource], bool]:
    """The sources a bare walk of ``paths`` finds, and whether it walked them all (else ``enough`` ended it)."""
    walker = _Walker(DiagnosticSink(), enough=enough)
    try:
        for p in paths:
            p = Path(p)
            if p.is_file():
                walker.add_file(p)
            elif is_dir_safe(p):
                walker.walk(p, 0)
    except _EnoughSources:
        return list(walker.sources), False
    except OSError:
        return [], True
    return list(walker.sources), True


def discover_profiles(
    paths: Sequence[Path],
    sink: DiagnosticSink,
    *,
    report_empty: bool = True,
    patterns: tuple[ArtifactPattern, ...] = (),
    source: str = "auto",
) -> ProfileSet:
    """Find every profiled rank under ``paths`` (see module docstring).

    ``report_empty=False`` leaves the "no profiler output found" verdict to the
    caller (used when the same paths may hold IR dumps or a config instead).
    """
    walker = _Walker(sink, patterns)
    roots: list[Path] = []
    for p in paths:
        p = Path(p)
        roots.append(p)
        if not p.exists() and not p.is_symlink():
            sink.error("missing-path", "path does not exist", p)
            continue
        if real_path(p) is None:
            sink.error("symlink-loop", "symbolic link loop; not followed", p)
            continue
        if p.is_file():
            walker.add_file(p)
        elif is_dir_safe(p):
            walker.walk(p, 0)
        else:
            sink.error("not-a-file", "not a file or directory", p)

    sources = walker.sources
    kinds = {s.layout for s in sources}
    if "ascend_ms" in kinds and "ascend_pt" in kinds:
        pt = [s for s in sources if s.layout == "ascend_pt"]
        sink.error(
            "mixed-frameworks",
            f"PyTorch (*_ascend_pt) and MindSpore (*_ascend_ms) profiles cannot be analysed together; "
            f"the {len(pt)} *_ascend_pt director{'y' if len(pt) == 1 else 'ies'} were set aside",
            roots[0] if roots else None,
        )
        sources = [s for s in sources if s.layout != "ascend_pt"]

    result = ProfileSet(roots=roots, cluster_files=dict(walker.cluster_files))
    unknown: list[RankSource] = []
    for src in sources:
        src.source_mode = source
        _check_export_type(src, sink)
        rid, how, info = _identify(src, sink)
        meta = md.read_profiler_metadata(src.artifacts["profiler_metadata"].path, sink) if "profiler_metadata" in src.artifacts else None
        fw, fw_version, cann = md.framework_of(info, src.layout)
        src.settings = md.profiler_settings(info)
        src.parallel = md.parallel_layout(meta, info)
        src.env = md.env_variables(meta)
        src.identity = RankIdentity(
            rank_id=rid,
            rank_source=how,
            device_id=md.device_id_of(info),
            host=src.host,
            pid=src.pid,
            collected_at=src.timestamp,
            framework=fw,
            framework_version=fw_version,
            cann_version=cann,
            profile_dir=str(src.path),
            layout=src.layout,
        )
        if rid is None:
            unknown.append(src)

    taken = {s.identity.rank_id for s in sources if s.identity and s.identity.rank_id is not None}
    next_id = 0
    for src in unknown:
        while next_id in taken:
            next_id += 1
        sink.warning(
            "rank-assumed",
            "no rank id in the profile (no profiler_info_{rank}.json, Device_id column or 'NPU <id>' trace label; "
            f"the MindSpore CPU profiler writes none of them): treated as rank {next_id}",
            src.path,
        )
        src.identity = src.identity.model_copy(update={"rank_id": next_id, "rank_source": "assumed"})  # type: ignore[union-attr]
        taken.add(next_id)

    by_rank: dict[int, list[RankSource]] = {}
    for src in sources:
        by_rank.setdefault(src.identity.rank_id, []).append(src)  # type: ignore[union-attr,arg-type]
    for rid in sorted(by_rank):
        group = by_rank[rid]
        chosen = _choose(group, rid, sink)
        result.ranks.append(chosen)
        result.superseded.extend(s for s in group if s is not chosen)

    if report_empty and not result.ranks and not result.cluster_files and roots and not sink.has_errors:
        sink.error(
            "no-profile",
            "no profiler output found (looked for *_ascend_ms / *_ascend_pt directories, ASCEND_PROFILER_OUTPUT/, "
            "legacy profiler files and cluster_analysis_output/)",
            roots[0],
        )
    return result


def _choose(group: list[RankSource], rank_id: int, sink: DiagnosticSink) -> RankSource:
    """One source per rank: the newest timestamped directory, with legacy files merged in."""
    if len(group) == 1:
        return group[0]
    ascend = [s for s in group if s.layout in ("ascend_ms", "ascend_pt", "bare")]
    legacy = [s for s in group if s.layout in ("legacy", "file")]
    if ascend:
        ascend.sort(key=lambda s: (s.timestamp or "", str(s.path)))
        chosen = ascend[-1]
        if len(ascend) > 1:
            sink.info(
                "newest-chosen",
                f"rank {rank_id}: {len(ascend)} profiler directories; using the newest, {chosen.path.name} "
                f"(set aside: {', '.join(s.path.name for s in ascend[:-1])})",
                chosen.path,
            )
    else:
        chosen = legacy[0]
    # Files of the same rank found elsewhere (legacy layout, loose files) fill what is missing.
    for other in legacy:
        if other is chosen:
            continue
        for kind, art in other.artifacts.items():
            chosen.artifacts.setdefault(kind, art)
    return chosen


def _check_export_type(src: RankSource, sink: DiagnosticSink) -> None:
    dbs = [src.artifacts[k].path.name for k in ("profiler_db", "analysis_db") if k in src.artifacts]
    if not dbs:
        return
    has_text = any(k in src.artifacts for k in _TEXT_KINDS)
    mode = src.source_mode
    if has_text and mode == "auto":
        sink.info("db-and-text", f"both exports are present; each table is read from the DB export "
                  f"({', '.join(dbs)}) when it holds it in full, else from the text files (--source text|db to force)", src.path)
    elif not has_text and mode == "text":
        sink.error("text-source-absent", f"--source text, but only a DB export is present ({', '.join(dbs)})", src.path)
