"""Issue 7's closed loop: ``advisor analyze`` → ``advisor fix --from-report`` → simulate the fixed
config → ``advisor analyze`` again: every finding whose patch was applied is gone; findings
whose fix is in model code (no config patch) stay."""

from __future__ import annotations

import json
from pathlib import Path

from advisor_core.cli import main
from advisor_core.simulate import simulate_scenario


def _analyze(run: Path, report: Path) -> list[dict]:
    code = main(["analyze", str(run), "--no-plugins", "--format", "json", "-o", str(report), "--fail-on", "never"])
    assert code == 0
    return json.loads(report.read_text())["findings"]


def _key(f: dict) -> tuple[str, str]:
    ptr = next((loc["key_path"] for loc in f["locations"] if loc.get("key_path")), None)
    return f["code"], ptr or f["title"].split(":")[0]


def test_fix_then_analyze_kitchen_sink(tmp_path: Path, capsys) -> None:
    run = tmp_path / "before"
    simulate_scenario("kitchen-sink", run, steps=2)
    config = run / "config" / "kitchen-sink.yaml"
    before = _analyze(run, tmp_path / "before.json")
    patched = {_key(f) for f in before if any(p["safety"] != "display_only" for p in f["patches"])}
    unpatched = {_key(f) for f in before if not any(p["safety"] != "display_only" for p in f["patches"])}
    # what the kitchen sink holds: config problems with patches, model-code problems without
    assert {c for c, _ in patched} == {"AL001", "CM001", "CT001", "RC001"}
    assert {c for c, _ in unpatched} >= {"CT001", "CT002", "CM001"}

    original = config.read_text()
    code = main(["fix", "--config", str(config), "--from-report", str(tmp_path / "before.json"), "--unsafe-fixes"])
    assert code == 0, capsys.readouterr().err
    fixed = config.read_text()
    assert fixed != original
    # only the patched keys changed: every comment line of the original survives
    assert [ln for ln in original.splitlines() if ln.lstrip().startswith("#")] == \
           [ln for ln in fixed.splitlines() if ln.lstrip().startswith("#")]

    after_run = tmp_path / "after"
    simulate_scenario("kitchen-sink", after_run, config=str(config), steps=2)
    after = _analyze(after_run, tmp_path / "after.json")
    after_keys = {_key(f) for f in after}
    assert patched & after_keys == set()            # every fixed finding is gone
    assert unpatched <= after_keys                  # model-code problems remain, still reported
    before_step = json.loads((run / "expected.json").read_text())["step_time_us"]["mean"]
    after_step = json.loads((after_run / "expected.json").read_text())["step_time_us"]["mean"]
    assert after_step < before_step


def test_fix_then_analyze_allreduce_fusion(tmp_path: Path, capsys) -> None:
    run = tmp_path / "before"
    simulate_scenario("allreduce-rearrangement", run, layers=2, steps=2)
    config = run / "config" / "allreduce-rearrangement.yaml"
    before = _analyze(run, tmp_path / "before.json")
    assert ("CM001", "/parallel/all_reduce_fusion_config") in {_key(f) for f in before}
    assert main(["fix", "--config", str(config), "--from-report", str(tmp_path / "before.json")]) == 0
    assert "all_reduce_fusion_config: [" in config.read_text()
    after_run = tmp_path / "after"
    simulate_scenario("allreduce-rearrangement", after_run, config=str(config), steps=2)
    after = {_key(f) for f in _analyze(after_run, tmp_path / "after.json")}
    assert ("CM001", "/parallel/all_reduce_fusion_config") not in after
    assert any(c == "CM001" for c, _ in after)  # the strategy mismatch (model code) is still there
