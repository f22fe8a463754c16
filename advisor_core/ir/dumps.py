"""Find IR dumps on disk, classify them by stage, pick the files rules need.

Layouts accepted by :func:`find_ir_dumps` (spec §1.2):

* a dump directory (``MS_DEV_SAVE_GRAPHS_PATH``) with the files directly inside, optionally
  ``verbose_ir_files/`` (level >= 2), ``actor_set/`` (skipped), ``om/analyze_fail.ir``;
* a parent with ``rank_<id>/`` folders (distributed jobs), each laid out as above;
* a data-dump ``rank_<id>/`` (``MINDSPORE_DUMP_CONFIG``) with ``graphs/ms_output_trace_code_graph_<gid>.ir``
  and ``execution_order/ms_execution_order_graph_<gid>.csv``;
* a single IR file.

File names are classified into stage kinds (:data:`STAGE_KINDS`) on the *action or pass name*,
never on the front-end number, and files are ordered by the global counter ``SSSS`` (not by
name). ``actor_set/*.ir`` (another format), ``.dot`` and ``.pb`` files are skipped: counted in
``skipped`` and noted once per folder as an info diagnostic. Parsing is lazy and cached per file
(:meth:`RankDumps.parse`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir.model import IRFile
from advisor_core.ir.parser import parse_ir_file
from advisor_core.textio import is_dir_safe, list_dir, real_path

__all__ = [
    "STAGE_KINDS",
    "IRDumpFile",
    "IRDumpSet",
    "RankDumps",
    "SkippedFile",
    "classify_dump_name",
    "find_ir_dumps",
]

#: Stage kinds, in pipeline order.
STAGE_KINDS = (
    "frontend",              # NN_<action>_SSSS.ir
    "opt_pass",              # opt_pass_K_<name>_SSSS.ir
    "parallel",              # step_parallel_begin/end[_SSSS].ir
    "backend_pass",          # hwopt_*_SSSS.ir
    "subpass",               # verbose_ir_files/*
    "graph_before_reset_id", # graph_before_reset_id_<gid>_SSSS.ir
    "graph_build",           # graph_build_<gid>_SSSS.ir
    "ascend_end_graph",      # hwopt_d_end_graph_<gid>[_SSSS].ir (Ascend)
    "trace_code",            # trace_code_graph_SSSS, ms_output_trace_code_graph_<gid>.ir
    "analyze_fail",          # analyze_fail.ir
    "other",                 # any other *.ir
)

_RANK_DIR = re.compile(r"^rank_(\d{1,9})$")
_COUNTER = re.compile(r"^(.*?)_(\d{4,})$")
_FRONTEND = re.compile(r"^(\d+)_(.+)_(\d{4,})$")
_OPT_PASS = re.compile(r"^opt_pass_(\d+)_(.+)_(\d{4,})$")
_PARALLEL = re.compile(r"^step_parallel_(begin|end)(?:_(\d+))?$")
_GRAPH_BUILD = re.compile(r"^graph_build_(\d+)_(\d{4,})$")
_BEFORE_RESET = re.compile(r"^graph_before_reset_id_(\d+)_(\d{4,})$")
_ASCEND_END = re.compile(r"^hwopt_d_end_graph_(\d+)(?:_(\d{4,}))?$")
_TRACE_CODE = re.compile(r"^trace_code_graph_(\d+)$")
_MS_OUTPUT_TRACE = re.compile(r"^ms_output_trace_code_graph_(\d+)$")
_ANALYZE_FAIL = re.compile(r"^analyze_fail(?:_(\d+))?$")
# The graph id ends the name (after the counter is cut): ``..._graph_0``, ``...kernel_graph0``;
# ``..._graph_16_1___main___CastNet...`` names a function graph, not a kernel graph id.
_GID_IN_NAME = re.compile(r"(?:_graph_|kernel_graph|graph_final_)(\d{1,9})$")
_EXEC_ORDER = re.compile(r"^ms_execution_order_graph_(\d+)\.csv$")
_SUBDIRS_WITH_IR = ("verbose_ir_files", "graphs", "om")


@dataclass(frozen=True)
class IRDumpFile:
    """One IR text file found on disk.

    ``kind`` is one of :data:`STAGE_KINDS`; ``name`` the action or pass name (``validate``,
    ``opt_a``, ``insert_cast_cpu``, ``graph_build``); ``stage`` the file stem without its counter
    (``21_validate``, ``opt_pass_19_add_recomputation``, ``graph_build_0``); ``counter`` the
    global ``SSSS`` (``None`` when the name has none); ``graph_id`` the kernel-graph id when the
    name carries one; ``pass_index`` the ``NN`` of a front-end action or ``K`` of ``opt_pass_K``;
    ``subdir`` the folder below the rank folder (``""``, ``verbose_ir_files``, ``graphs``, ``om``).
    """

    path: Path
    rank: int | None
    kind: str
    name: str
    stage: str
    counter: int | None
    graph_id: int | None = None
    pass_index: int | None = None
    subdir: str = ""

    @property
    def file_name(self) -> str:
        return self.path.name

    def sort_key(self) -> tuple[bool, int, str, str]:
        """Counter order; files without a counter last, then by folder and name."""
        return (self.counter is None, self.counter or 0, self.subdir, self.path.name)


@dataclass(frozen=True)
class SkippedFile:
    """A file next to the dumps that is not IR text (``reason`` says what it is)."""

    path: Path
    reason: str


def classify_dump_name(
    file_name: str, subdir: str = "", rank: int | None = None, path: Path | None = None
) -> IRDumpFile | None:
    """Classify one file name; ``None`` when it is not an IR text dump name.

    IR text files end in ``.ir`` except ``trace_code_graph_SSSS`` (no extension).
    """
    p = path if path is not None else Path(file_name)
    if file_name.endswith(".ir"):
        stem = file_name[:-3]
    elif _TRACE_CODE.match(file_name):
        stem = file_name
    else:
        return None

    def make(kind: str, name: str, stage: str, counter: int | None, gid: int | None = None,
             pass_index: int | None = None) -> IRDumpFile:
        return IRDumpFile(p, rank, kind, name, stage, counter, gid, pass_index, subdir)

    if subdir == "verbose_ir_files":
        m = _COUNTER.match(stem)
        base, counter = (m.group(1), int(m.group(2))) if m else (stem, None)
        g = _GID_IN_NAME.search(base)
        return make("subpass", base, base, counter, int(g.group(1)) if g else None)
    m = _ANALYZE_FAIL.match(stem)
    if m:
        return make("analyze_fail", "analyze_fail", "analyze_fail", int(m.group(1)) if m.group(1) else None)
    m = _MS_OUTPUT_TRACE.match(stem)
    if m:
        return make("trace_code", "trace_code_graph", stem, None, int(m.group(1)))
    m = _TRACE_CODE.match(stem)
    if m:
        return make("trace_code", "trace_code_graph", "trace_code_graph", int(m.group(1)))
    m = _PARALLEL.match(stem)
    if m:
        name = f"step_parallel_{m.group(1)}"
        return make("parallel", name, name, int(m.group(2)) if m.group(2) else None)
    m = _OPT_PASS.match(stem)
    if m:
        k = int(m.group(1))
        return make("opt_pass", m.group(2), f"opt_pass_{k}_{m.group(2)}", int(m.group(3)), pass_index=k)
    m = _GRAPH_BUILD.match(stem)
    if m:
        return make("graph_build", "graph_build", f"graph_build_{m.group(1)}", int(m.group(2)), int(m.group(1)))
    m = _BEFORE_RESET.match(stem)
    if m:
        return make("graph_before_reset_id", "graph_before_reset_id", f"graph_before_reset_id_{m.group(1)}",
                    int(m.group(2)), int(m.group(1)))
    m = _ASCEND_END.match(stem)
    if m:
        return make("ascend_end_graph", "hwopt_d_end_graph", f"hwopt_d_end_graph_{m.group(1)}",
                    int(m.group(2)) if m.group(2) else None, int(m.group(1)))
    if stem.startswith("hwopt_"):
        m = _COUNTER.match(stem)
        base, counter = (m.group(1), int(m.group(2))) if m else (stem, None)
        g = _GID_IN_NAME.search(base)
        return make("backend_pass", base, base, counter, int(g.group(1)) if g else None)
    m = _FRONTEND.match(stem)
    if m:
        k = int(m.group(1))
        return make("frontend", m.group(2), f"{m.group(1)}_{m.group(2)}", int(m.group(3)), pass_index=k)
    m = _COUNTER.match(stem)
    if m:
        return make("other", m.group(1), m.group(1), int(m.group(2)))
    return make("other", stem, stem, None)


@dataclass
class RankDumps:
    """The IR files of one rank, in counter order, with lazy cached parsing."""

    rank: int | None
    root: Path
    sink: DiagnosticSink
    files: list[IRDumpFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    execution_orders: dict[int, Path] = field(default_factory=dict)
    _parsed: dict[Path, IRFile | None] = field(default_factory=dict, repr=False)

    def by_kind(self, kind: str) -> list[IRDumpFile]:
        """Files of one stage kind, in counter order."""
        return [f for f in self.files if f.kind == kind]

    def stages(self, name: str) -> list[IRDumpFile]:
        """Files whose stage (``opt_pass_19_add_recomputation``, ``21_validate``) or action/pass
        name (``type_inference``, ``add_recomputation``) is ``name``, in counter order."""
        return [f for f in self.files if f.stage == name or f.name == name]

    def stage(self, name: str) -> IRDumpFile | None:
        """The last file (highest counter) of :meth:`stages`, else ``None``."""
        found = self.stages(name)
        return found[-1] if found else None

    def final_frontend(self) -> IRDumpFile | None:
        """The final front-end graph: ``validate``, else ``execute``, else the last front-end action."""
        for action in ("validate", "execute"):
            found = [f for f in self.files if f.kind == "frontend" and f.name == action]
            if found:
                return found[-1]
        front = self.by_kind("frontend")
        return front[-1] if front else None

    def backend_kernel_graph(self, graph_id: int | None = None) -> IRDumpFile | None:
        """The backend kernel graph: Ascend ``hwopt_d_end_graph``, else ``graph_build``, else
        ``trace_code_graph`` (highest counter; with ``graph_id``, only files of that graph or
        without a graph id in their name)."""
        for kind in ("ascend_end_graph", "graph_build", "trace_code"):
            found = [f for f in self.by_kind(kind)
                     if graph_id is None or f.graph_id is None or f.graph_id == graph_id]
            if found:
                return found[-1]
        return None

    def parallel_graph(self) -> IRDumpFile | None:
        """``step_parallel_end`` (auto/semi-auto parallel only), else ``None``."""
        found = [f for f in self.files if f.kind == "parallel" and f.name == "step_parallel_end"]
        return found[-1] if found else None

    def execution_order_csv(self, graph_id: int | None = None) -> Path | None:
        """``execution_order/ms_execution_order_graph_<gid>.csv`` (lowest gid when not given)."""
        if graph_id is not None:
            return self.execution_orders.get(graph_id)
        if self.execution_orders:
            return self.execution_orders[min(self.execution_orders)]
        return None

    def parse(self, file: IRDumpFile | Path) -> IRFile | None:
        """Parse one file (cached); ``None`` when it cannot be read (diagnostic in the sink)."""
        path = file.path if isinstance(file, IRDumpFile) else Path(file)
        if path not in self._parsed:
            self._parsed[path] = parse_ir_file(path, self.sink)
        return self._parsed[path]


@dataclass
class IRDumpSet:
    """All ranks found under one path; ``ranks`` keyed by rank id (``None``: no ``rank_<id>`` folder)."""

    root: Path
    sink: DiagnosticSink
    ranks: dict[int | None, RankDumps] = field(default_factory=dict)

    def rank(self, rank: int | None = None) -> RankDumps | None:
        """One rank; with ``None`` and a single rank, that rank."""
        if rank is None and len(self.ranks) == 1:
            return next(iter(self.ranks.values()))
        return self.ranks.get(rank)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.ranks[r] for r in sorted(self.ranks, key=_rank_order))

    @property
    def skipped(self) -> list[SkippedFile]:
        return [s for r in self for s in r.skipped]

    @property
    def files(self) -> list[IRDumpFile]:
        return [f for r in self for f in r.files]


def _rank_order(rank: int | None) -> tuple[bool, int]:
    return (rank is None, rank or 0)


def _rank_of(path: Path) -> int | None:
    for part in (path, *path.parents):
        m = _RANK_DIR.match(part.name)
        if m:
            return int(m.group(1))
    return None


def find_ir_dumps(path: Path, sink: DiagnosticSink) -> IRDumpSet:
    """Discover the IR dumps under ``path`` (see the module docstring for layouts).

    Never raises; a missing or unreadable path gives one error diagnostic and an empty set.
    ``ranks`` only holds folders where IR files (or skipped IR artefacts) were found, so an
    empty ``ranks`` means "no IR here" (with an info diagnostic ``ir-no-dumps``).
    """
    path = Path(path)
    dumps = IRDumpSet(path, sink)
    if path.is_file():
        rank = _rank_of(path.parent)
        rd = RankDumps(rank, path.parent, sink)
        _add_file(rd, path, "")
        dumps.ranks[rank] = rd
        return dumps
    if not is_dir_safe(path):
        if path.exists() or path.is_symlink():
            sink.error("not-a-dir", "IR dump path is neither a directory nor a file", path)
        else:
            sink.error("missing-file", "IR dump path does not exist", path)
        return dumps
    entries = list_dir(path, sink)
    rank_dirs = [e for e in entries if _RANK_DIR.match(e.name) and is_dir_safe(e)]
    scanned: list[RankDumps] = []
    if rank_dirs:
        for d in rank_dirs:
            rank = int(_RANK_DIR.match(d.name).group(1))  # type: ignore[union-attr]
            scanned.append(_scan_rank(d, rank, sink))
    else:
        scanned.append(_scan_rank(path, _rank_of(path), sink))
    for rd in scanned:
        # A folder with nothing IR-related (e.g. a profiler folder given to `advisor inspect`) is no rank.
        if rd.files or rd.skipped:
            dumps.ranks[rd.rank] = rd
    if not dumps.files:
        # Info, not a warning: callers probe folders that may legitimately hold no IR.
        sink.info("ir-no-dumps", "no IR text dump (*.ir, trace_code_graph_*) found", path)
    return dumps


def _scan_rank(root: Path, rank: int | None, sink: DiagnosticSink) -> RankDumps:
    rd = RankDumps(rank, root, sink)
    seen: set[str] = set()
    own = root.name if root.name in _SUBDIRS_WITH_IR + ("actor_set",) else ""
    base = root.parent if own else root
    _scan_dir(rd, root, own, sink, seen)
    if not own:
        for sub in _SUBDIRS_WITH_IR + ("actor_set",):
            d = root / sub
            if is_dir_safe(d):
                _scan_dir(rd, d, sub, sink, seen)
    exec_dir = base / "execution_order"
    if is_dir_safe(exec_dir):
        for f in list_dir(exec_dir, sink):
            m = _EXEC_ORDER.match(f.name)
            if m:
                rd.execution_orders[int(m.group(1))] = f
    rd.files.sort(key=IRDumpFile.sort_key)
    if rd.skipped:
        counts: dict[str, int] = {}
        for s in rd.skipped:
            counts[s.reason] = counts.get(s.reason, 0) + 1
        detail = "; ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
        sink.info("ir-skipped-files", f"skipped {len(rd.skipped)} file(s) that are not IR text: {detail}", root)
    return rd


def _scan_dir(rd: RankDumps, d: Path, subdir: str, sink: DiagnosticSink, seen: set[str]) -> None:
    real = real_path(d)
    if real is None or real in seen:
        return
    seen.add(real)
    for f in list_dir(d, sink):
        if is_dir_safe(f):
            continue
        if subdir == "actor_set":
            rd.skipped.append(SkippedFile(f, "actor_set/*.ir (actor DAG, a different format)"))
        elif f.suffix == ".dot":
            rd.skipped.append(SkippedFile(f, ".dot (Graphviz)"))
        elif f.suffix == ".pb":
            rd.skipped.append(SkippedFile(f, ".pb (protobuf ModelProto)"))
        else:
            _add_file(rd, f, subdir)


def _add_file(rd: RankDumps, f: Path, subdir: str) -> None:
    rec = classify_dump_name(f.name, subdir, rd.rank, f)
    if rec is not None:
        rd.files.append(rec)
