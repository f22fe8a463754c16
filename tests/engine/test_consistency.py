"""A config from another run is refused, naming both sides; no patch is computed from it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.simulate import simulate_scenario


def _advisor(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ADVISOR_WIDTH="200", ADVISOR_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run([sys.executable, "-m", "advisor_core", *args], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mismatch") / "run"
    simulate_scenario("kitchen-sink", out, layers=2, steps=2, ground_truth=False)  # dp2 × mp2 × pp2, hidden 4100
    return out


def test_fix_refuses_a_config_of_another_run(run: Path, real_data: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "pretrain_llama2_7b.yaml"
    shutil.copy(real_data / "mindformers-configs" / "pretrain_llama2_7b.yaml", cfg)
    before = cfg.read_bytes()
    proc = _advisor("fix", "--config", cfg.name, "--profile", str(run / "profile"), "--graphs", str(run / "graphs"),
                    cwd=tmp_path)
    assert proc.returncode == 2
    assert cfg.read_bytes() == before
    lines = proc.stderr.splitlines()
    assert (f"pretrain_llama2_7b.yaml: error: the parallel layout disagrees: the config pretrain_llama2_7b.yaml says "
            "data_parallel 8 × model_parallel 1 × pipeline_stage 1, but the profile was taken with dp 2 × tp 2 × pp 2 "
            "(profiler_metadata.json distributed_args); it is not combined with this run (no patch is computed from "
            "it)") in lines
    assert any("the model width disagrees: the config pretrain_llama2_7b.yaml says hidden_size 4096, but the norm "
               "weights in " in line and "are 4100 wide" in line or "is 4100 wide" in line for line in lines)
    assert lines[-1] == "advisor fix: not fixing pretrain_llama2_7b.yaml: it does not belong to the run given (see above)"


def test_analyze_computes_nothing_from_it(run: Path, real_data: Path) -> None:
    session = Session([run / "profile", run / "graphs"],
                      SessionOptions(config=real_data / "mindformers-configs" / "pretrain_llama2_7b.yaml", jobs=1),
                      host=load_plugins(autoload=False))
    result = session.analyze()
    assert [m.what for m in session.mismatches] == ["the parallel layout", "the model width"]
    assert result.has_input_errors
    assert all(p.safety.value == "display_only" for f in result.findings for p in f.patches)
    assert not any(loc.kind == "config" for f in result.findings for loc in f.locations)


def test_its_own_config_passes(run: Path) -> None:
    session = Session([run], SessionOptions(jobs=1), host=load_plugins(autoload=False))
    session.analyze()
    assert session.mismatches == [] and not any(d.code == "inputs-disagree" for d in session.sink)


def test_a_subset_of_ranks_is_not_a_mismatch(run: Path, tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    shutil.copytree(run / "config", sub / "config")
    for d in sorted((run / "profile").iterdir())[:3]:
        shutil.copytree(d, sub / "profile" / d.name)
    session = Session([sub], SessionOptions(jobs=1), host=load_plugins(autoload=False))
    session.analyze()
    assert session.mismatches == []
