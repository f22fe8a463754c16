"""Helpers for engine tests: synthetic profiles, fake plugin distributions on sys.path, a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from textwrap import dedent
from typing import Any


KD_HEADER = "Step ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Input Data Types\n"


def write_profile(root: Path, rank: int = 0, *, aicpu_us: float = 400.0, steps: int = 2) -> Path:
    """A small *_ascend_ms rank with AI_CPU Casts taking ``aicpu_us`` per step of a ~2 ms step."""
    d = root / f"host_{100 + rank}_20260101120000{rank:03d}_ascend_ms"
    out = d / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (d / f"profiler_info_{rank}.json").write_text(json.dumps({"ms_version": "2.5.0", "cann_version": "8.0.0"}))
    rows = []
    t = 1736413971000000.0
    for step in range(1, steps + 1):
        for i in range(8):
            rows.append(f'{step},Default/MatMul-op{i}/aclnnMatmul,MatMulV2,AI_CORE,"{t:.3f}\t",200.0,1.0,DT_BF16;DT_BF16\n')
            t += 201.0
        rows.append(f'{step},Default/Cast-op1/trans_Cast_5,Cast,AI_CPU,"{t:.3f}\t",{aicpu_us:.3f},1.0,DT_DOUBLE\n')
        t += aicpu_us + 1 + 200
    (out / "kernel_details.csv").write_text(KD_HEADER + "".join(rows))
    return d


def make_dist(site: Path, dist: str, version: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """Install a fake distribution: modules + ``<dist>-<version>.dist-info`` with entry points."""
    for rel, code in modules.items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(dedent(code))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    eps = "[advisor]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(eps)
    (info / "RECORD").write_text("")


def run_cli(*args: str, site: Path | None = None, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``advisor ARGS`` in a fresh interpreter (so entry points are rediscovered)."""
    e = dict(os.environ)
    e.pop("ADVISOR_DISABLE_PLUGIN_AUTOLOAD", None)
    e["ADVISOR_WIDTH"] = "200"
    if site is not None:
        e["PYTHONPATH"] = str(site) + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    # The installed console script, as a user runs it (it does not put the cwd on sys.path).
    script = Path(sys.executable).with_name("advisor")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "advisor_core"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=e, cwd=cwd)


SINGLE_DEVICE_SETS = ("parallel_config.model_parallel=1", "parallel_config.pipeline_stage=1",
                      "parallel_config.micro_batch_num=1")


def kitchen_sink_profile(out: Path, *, ranks: int, steps: int, export: str | None = None) -> Path:
    """A simulated one-layer kitchen-sink profile, one device per rank (no model or pipeline parallelism), at
    ``out``; its ``profile`` directory. ``export="both"`` writes the SQLite export beside the text files."""
    from advisor_core.simulate import simulate_scenario

    extra = {"export": export} if export else {}
    simulate_scenario("kitchen-sink", out, ranks=ranks, layers=1, steps=steps, sets=SINGLE_DEVICE_SETS,
                      ground_truth=False, **extra)
    return out / "profile"


# The help page a rule made in a test carries (``Rule.validate_class`` asks for these sections).
TEST_RULE_HELP = """A rule made in a test.

What
    x
Why
    x
Example
    x
Fix
    x
"""


def count_unit_runs(monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    """A list that grows by one each time the per-rank units run (``rankwork.run_rank_units`` is called)."""
    from advisor_core.engine import rankwork

    calls: list[int] = []
    real = rankwork.run_rank_units
    monkeypatch.setattr(rankwork, "run_rank_units", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def host_with(*rules: type) -> Any:
    """The built-in rules' plugin host (no autoload) with ``rules`` registered beside them, as from a test plugin."""
    from advisor_core.engine.plugins import RegisteredRule, load_plugins

    host = load_plugins(autoload=False)
    for cls in rules:
        host.rules()[cls.code] = RegisteredRule(cls, host.record_of("test"))
    return host
