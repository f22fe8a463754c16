"""Classifying the paths a user gives: profile, cluster, IR dump directory, training YAML, or a run directory.

``advisor analyze out/`` should just work whether ``out/`` is one
``*_ascend_ms`` directory, a parent of many, a ``graphs/`` dump directory, a
YAML file, or a run directory holding several of these (the simulator's output,
or MindFormers' ``output/`` with ``profile/`` and ``graphs/``). Only names and
directory listings are looked at, plus the top-level keys of small YAML files.
Explicit ``--profile/--graphs/--config`` flags override the classification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.textio import is_dir_safe, list_dir, real_path

_ASCEND = re.compile(r".*_ascend_(ms|pt)$")
_IR_NAME = re.compile(r"(^\d{2}_\w.*_\d{4}\.ir$|^opt_pass_.*\.ir$|^graph_build_.*\.ir$|^hwopt_.*\.ir$|^trace_code_graph_\d+$"
                      r"|^step_parallel_(begin|end)_.*\.ir$|^ms_output_trace_code_graph_\d+\.ir$|^analyze_fail\.ir$|.*\.ir$)")
_PROFILE_FILES = re.compile(r"^(kernel_details\.csv|trace_view\.json|step_trace_time\.csv|op_statistic\.csv|"
                            r"communication\.json|minddata_pipeline_raw_\d+\.csv|cluster_step_trace_time\.csv|"
                            r"step_trace_raw_\d+_detail_time\.csv|profiler_info_\d+\.json)$")
_CONFIG_KEYS = {"model", "parallel_config", "runner_config", "train_dataset", "recompute_config", "context", "parallel"}
_SKIP = {"ASCEND_PROFILER_OUTPUT", "FRAMEWORK", "logs", ".git", "__pycache__", "actor_set", "verbose_ir_files"}
# Folders of a run directory that hold no profiler output, IR or config, only bulk: not walked into (said with -v).
_BULK = {"checkpoint": "checkpoints", "checkpoint_network": "checkpoints", "ckpt": "checkpoints",
         "checkpoints": "checkpoints", "node_modules": "packages", "site-packages": "packages", ".venv": "a virtualenv",
         "venv": "a virtualenv", ".cache": "a cache", "kernel_meta": "compiled kernels", "rank_0_kernel_meta": "compiled kernels"}
MAX_DEPTH = 6  # msrun: <run>/<save_path>/rank_<id>/…; MindFormers: output/{log,strategy,profile,graph}/rank_<id>/…
MAX_DIRS = 4000  # directories listed under one given path before looking stops (a home directory, a dataset)


@dataclass
class ClassifiedInputs:
    """Paths sorted by what they hold."""

    profiles: list[Path] = field(default_factory=list)
    graphs: list[Path] = field(default_factory=list)
    configs: list[Path] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)  # given path → kind

    def describe(self) -> dict[str, list[str]]:
        return {
            "profiles": [str(p) for p in self.profiles],
            "graphs": [str(p) for p in self.graphs],
            "configs": [str(p) for p in self.configs],
        }


def looks_like_training_config(path: Path) -> bool:
    """A YAML file whose top level has MindFormers training sections."""
    try:
        if path.stat().st_size > 2_000_000:
            return False
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    top = {m.group(1) for m in re.finditer(r"^([A-Za-z_][\w]*)\s*:", text, re.MULTILINE)}
    return len(top & _CONFIG_KEYS) >= 2


def _has_ir(directory: Path) -> bool:
    for e in list_dir(directory):
        if e.is_file() and _IR_NAME.match(e.name) and not e.name.endswith((".dot", ".pb")):
            return True
    return False


@dataclass
class _Walk:
    """What one given path's scan has visited and left out."""

    dirs: int = 0
    bulk: list[str] = field(default_factory=list)
    too_deep: list[str] = field(default_factory=list)
    loops: list[str] = field(default_factory=list)
    stopped: bool = False


def _scan(directory: Path, depth: int, out: ClassifiedInputs, seen: set[str], sink: DiagnosticSink,
          walk: _Walk | None = None) -> None:
    walk = walk if walk is not None else _Walk()
    if walk.stopped:
        return
    rp = real_path(directory)
    if rp is None or rp in seen:
        if rp is not None and directory.is_symlink():
            walk.loops.append(str(directory))
        return
    seen.add(rp)
    walk.dirs += 1
    if walk.dirs > MAX_DIRS:
        walk.stopped = True
        return
    if _ASCEND.match(directory.name) or is_dir_safe(directory / "ASCEND_PROFILER_OUTPUT"):
        if directory not in out.profiles:
            out.profiles.append(directory)
        return
    entries = list_dir(directory, sink)
    files = [e for e in entries if e.is_file()]
    dirs = [e for e in entries if is_dir_safe(e)]
    if any(_PROFILE_FILES.match(f.name) for f in files):
        out.profiles.append(directory)
    if _has_ir(directory) or any(re.fullmatch(r"rank_\d+", d.name) and _has_ir(d) for d in dirs):
        out.graphs.append(directory)
        dirs = [d for d in dirs if not re.fullmatch(r"rank_\d+", d.name)]
    for f in files:
        if f.suffix in (".yaml", ".yml") and looks_like_training_config(f):
            out.configs.append(f)
    if depth >= MAX_DEPTH:
        walk.too_deep.extend(str(d) for d in dirs if d.name not in _SKIP)
        return
    for d in dirs:
        if d.name in _SKIP or d.name.startswith("PROF_"):
            continue
        if d.name in _BULK:
            walk.bulk.append(f"{d} ({_BULK[d.name]})")
            continue
        _scan(d, depth + 1, out, seen, sink, walk)


def _report_walk(root: Path, walk: _Walk, sink: DiagnosticSink) -> None:
    """Say what the scan of ``root`` did not look into (info: -v shows it), or that it stopped (a warning)."""
    if walk.stopped:
        sink.warning("scan-stopped", f"stopped looking after {MAX_DIRS} directories; give the profile, IR dump or "
                     "config folders themselves (or --profile/--graphs/--config)", root)
    if walk.bulk:
        sink.info("scan-skipped", "not looked into: " + ", ".join(walk.bulk[:8])
                  + (f" and {len(walk.bulk) - 8} more" if len(walk.bulk) > 8 else ""), root)
    if walk.too_deep:
        sink.info("scan-depth", f"not looked deeper than {MAX_DEPTH} levels: " + ", ".join(walk.too_deep[:5])
                  + (f" and {len(walk.too_deep) - 5} more" if len(walk.too_deep) > 5 else ""), root)
    if walk.loops:
        sink.warning("symlink-loop", "symbolic link(s) back into a folder already looked at, not followed: "
                     + ", ".join(walk.loops[:5]), root)


def classify_inputs(
    paths: list[Path],
    sink: DiagnosticSink,
    *,
    plugin_classifier: Callable[[Path], str | None] | None = None,
) -> ClassifiedInputs:
    """Sort ``paths`` into profile roots, IR dump roots and config files (see module docstring)."""
    out = ClassifiedInputs()
    for p in paths:
        p = Path(p)
        if not p.exists():
            sink.error("missing-path", "path does not exist", p)
            continue
        kind = plugin_classifier(p) if plugin_classifier else None
        if kind == "profile" or kind == "cluster":
            out.profiles.append(p)
        elif kind == "ir":
            out.graphs.append(p)
        elif kind == "config":
            out.configs.append(p)
        elif p.is_file():
            if p.suffix in (".yaml", ".yml"):
                out.configs.append(p)
                kind = "config"
            elif _PROFILE_FILES.match(p.name) or p.suffix in (".csv", ".json"):
                out.profiles.append(p)
                kind = "profile"
            elif _IR_NAME.match(p.name):
                out.graphs.append(p.parent)
                kind = "ir"
            else:
                sink.error("unknown-input", "not a profile, IR dump or YAML config this tool reads", p)
                kind = "unknown"
        else:
            before = (len(out.profiles), len(out.graphs), len(out.configs))
            walk = _Walk()
            _scan(p, 0, out, set(), sink, walk)
            _report_walk(p, walk, sink)
            added = (len(out.profiles) - before[0], len(out.graphs) - before[1], len(out.configs) - before[2])
            n_kinds = sum(1 for a in added if a)
            kind = "run" if n_kinds > 1 else "profile" if added[0] else "ir" if added[1] else "config" if added[2] else "empty"
            if kind == "profile" and added[0] > 1:
                kind = "cluster"
            if kind == "empty":
                sink.error(
                    "no-input",
                    "no profiler output, IR dumps or training config found here",
                    p,
                )
        out.kinds[str(p)] = kind
    out.profiles = _dedupe(out.profiles)
    out.graphs = _dedupe(out.graphs)
    out.configs = _dedupe(out.configs)
    return out


def _dedupe(paths: list[Path]) -> list[Path]:
    seen: set[str] = set()
    res = []
    for p in paths:
        k = str(p)
        if k not in seen:
            seen.add(k)
            res.append(p)
    return res
