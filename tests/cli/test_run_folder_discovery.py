"""A run folder as msrun and MindFormers lay it out is found from its root, in inspect and analyze."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.discover import inputs
from advisor_core.discover.inputs import classify_inputs
from advisor_core.simulate import simulate_scenario


def _advisor(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, ADVISOR_WIDTH="100", ADVISOR_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run([sys.executable, "-m", "advisor_core", *args], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "ar"
    simulate_scenario("allreduce-rearrangement", out, layers=2, steps=2, ground_truth=False)
    return out


@pytest.fixture
def msrun_folder(sim: Path, tmp_path: Path) -> Path:
    """msrun: <run>/ir/rank_<id>/*.ir (MS_DEV_SAVE_GRAPHS_PATH=ir), msrun_log/, the scripts, a checkpoint folder."""
    run = tmp_path / "llama_run"
    for rank_dir in sorted((sim / "graphs").iterdir()):
        shutil.copytree(rank_dir, run / "ir" / rank_dir.name)
    (run / "msrun_log").mkdir()
    (run / "msrun_log" / "worker_0.log").write_text("INFO step 1\n")
    (run / "train.py").write_text("print('train')\n")
    (run / "checkpoint" / "rank_0").mkdir(parents=True)
    (run / "checkpoint" / "rank_0" / "llama_rank_0-1_1.ckpt").write_bytes(b"\0" * 64)
    return run


def test_msrun_ir_found_from_the_run_root(msrun_folder: Path) -> None:
    proc = _advisor("inspect", str(msrun_folder), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert sorted(report["ir_dumps"]["ranks"]) == ["0", "1", "2", "3"]
    out = msrun_folder.parent / "r.json"
    proc = _advisor("analyze", str(msrun_folder), "--format", "json", "-o", str(out))
    data = json.loads(out.read_text())
    assert data["inputs"]["graphs"] == [str(msrun_folder / "ir")]
    assert data["inputs"]["classified"] == {str(msrun_folder): "ir"}
    assert "CM001" in {f["code"] for f in data["findings"]}


def test_mindformers_output_tree(sim: Path, tmp_path: Path) -> None:
    """output/{log,strategy,checkpoint,profile/rank_N/*_ascend_ms,graph/rank_N} and the YAML beside it."""
    out = tmp_path / "mf" / "output"
    for d in ("log/rank_0", "strategy", "checkpoint/rank_0"):
        (out / d).mkdir(parents=True)
    for i, prof in enumerate(sorted((sim / "profile").iterdir())):
        shutil.copytree(prof, out / "profile" / f"rank_{i}" / prof.name)
    shutil.copytree(sim / "graphs", out / "graph")
    cfg = next((sim / "config").glob("*.yaml"))
    shutil.copy(cfg, tmp_path / "mf" / cfg.name)
    sink = DiagnosticSink()
    found = classify_inputs([tmp_path / "mf"], sink)
    assert [p.relative_to(tmp_path) for p in found.profiles] == [Path(f"mf/output/profile/rank_{i}/{p.name}")
                                                                 for i, p in enumerate(sorted((sim / "profile").iterdir()))]
    assert found.graphs == [out / "graph"] and found.configs == [tmp_path / "mf" / cfg.name]
    (info,) = [d for d in sink if d.code == "scan-skipped"]
    assert info.message == f"not looked into: {out / 'checkpoint'} (checkpoints)"


def test_bounded_and_loop_free(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "home"
    (root / "a").mkdir(parents=True)
    (root / "a" / "back").symlink_to(root, target_is_directory=True)  # a loop
    deep = root
    for i in range(10):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    sink = DiagnosticSink()
    found = classify_inputs([root], sink)
    assert found.profiles == found.graphs == found.configs == []
    codes = {d.code: d for d in sink}
    assert "symlink-loop" in codes and str(root / "a" / "back") in codes["symlink-loop"].message
    assert codes["scan-depth"].message.startswith(f"not looked deeper than {inputs.MAX_DEPTH} levels: ")
    monkeypatch.setattr(inputs, "MAX_DIRS", 3)
    sink = DiagnosticSink()
    classify_inputs([root], sink)
    assert any(d.code == "scan-stopped" and "stopped looking after 3 directories" in d.message for d in sink)
