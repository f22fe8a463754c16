"""``advisor lint`` on the real MindFormers configs, and ``advisor fix`` / ``lint --fix`` on copies of them."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from advisor_core.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
SARIF_SCHEMA = json.loads((DATA / "sarif/sarif-schema-2.1.0.json").read_text())


def lint_json(capsys, *args):
    code = main(["lint", "--no-plugins", "--format", "json", *map(str, args)])
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else None, out.err


def line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_every_real_config_lints_without_error(capsys, real_data):
    configs = sorted((real_data / "mindformers-configs").glob("*.yaml"))
    code, report, err = lint_json(capsys, *configs)
    assert "Traceback" not in err and report["errors"] == []
    assert not [d for d in report["diagnostics"] if d["severity"] == "error"]
    assert code == 1  # medium findings below (the default --fail-on for lint is medium)
    got = sorted((Path(f["locations"][0]["path"]).name, f["code"], f["locations"][0]["line"]) for f in report["findings"])
    cfgs = real_data / "mindformers-configs"
    expected = []
    for name in ("finetune_glm4_9b.yaml", "finetune_llama3_1_70b.yaml", "pretrain_llama2_70b_bf16_64p.yaml",
                 "finetune_qwen2_5_7b_8k.yaml", "finetune_telechat_115b.yaml", "pretrain_qwen3_32b_4k.yaml"):
        lines = [i + 1 for i, ln in enumerate((cfgs / name).read_text().splitlines()) if ln.strip().startswith("rotary_dtype:")]
        expected.append((name, "CT001", lines[0]))  # rotary in float32 inside a bf16 model
    expected.append(("finetune_telechat_115b.yaml", "LC005", line_of(cfgs / "finetune_telechat_115b.yaml", "  micro_batch_num: 8")))
    expected.append(("pretrain_qwen3_32b_4k.yaml", "LC005",
                     next(i + 1 for i, ln in enumerate((cfgs / "pretrain_qwen3_32b_4k.yaml").read_text().splitlines())
                          if ln.startswith("  micro_batch_num: 4"))))
    assert got == sorted(expected)
    bubble = [f for f in report["findings"] if f["code"] == "LC005"]
    assert {f["title"] for f in bubble} == {
        "1F1B pipeline bubble 43% of the step (micro_batch_num 4, pipeline_stage 4)",
        "1F1B pipeline bubble 47% of the step (micro_batch_num 8, pipeline_stage 8)",
    }


@pytest.mark.parametrize("name", ["pretrain_llama2_7b.yaml", "finetune_llama2_13b.yaml", "pretrain_llama2_13b.yaml",
                                  "pretrain_llama2_70b.yaml", "pretrain_mixtral-8x7b.yaml"])
def test_clean_real_configs_have_no_findings(capsys, real_data, name):
    code, report, _ = lint_json(capsys, real_data / "mindformers-configs" / name)
    assert report["findings"] == [] and code == 0


def test_devices_flag_checks_the_layout(capsys, real_data):
    cfg = real_data / "mindformers-configs/pretrain_llama2_70b.yaml"
    code, report, _ = lint_json(capsys, cfg, "--devices", "8", "--select", "LC004")
    (f,) = report["findings"]
    assert f["title"] == "parallel layout covers 64 devices, the job has 8"
    loc = f["locations"][0]
    assert (loc["line"], loc["column"]) == (line_of(cfg, "  data_parallel: 2"), 3)
    code, report, _ = lint_json(capsys, cfg, "--devices", "64", "--select", "LC004")
    assert report["findings"] == [] and code == 0


def broken_config(tmp_path: Path, real_data: Path) -> Path:
    text = (real_data / "mindformers-configs/pretrain_llama2_7b.yaml").read_text()
    text = text.replace("  select_recompute: False",
                        "  select_recompute: ['feed_forward\\.mul', 'feed_forward\\.w1\\.activaton']  # typo on purpose")
    text = text.replace("  recompute: False", "  recompute: [2, 2]")
    text = text.replace("    hidden_size: 4096", "    hidden_size: 4100")
    text = text.replace("  pipeline_stage: 1", "  pipeline_stage: 1\n")
    cfg = tmp_path / "configs" / "llama2_7b.yaml"
    cfg.parent.mkdir()
    cfg.write_text(text)
    return cfg


def test_lint_finds_seeded_mistakes_with_positions(capsys, tmp_path, real_data):
    cfg = broken_config(tmp_path, real_data)
    code, report, _ = lint_json(capsys, cfg)
    assert code == 1
    by = {f["code"]: f for f in report["findings"]}
    assert by["LC001"]["title"] == "recompute pattern 'feed_forward\\\\.w1\\\\.activaton' matches no cell or operator of a MindFormers Llama decoder layer"
    assert "Attributes available under feed_forward.w1: activation, matmul, reshape" in by["LC001"]["message"]
    sel_line = line_of(cfg, "  select_recompute: ['feed_forward\\.mul', 'feed_forward\\.w1\\.activaton']  # typo on purpose")
    assert by["LC001"]["locations"][0]["line"] == sel_line
    assert by["LC002"]["locations"][0]["line"] == line_of(cfg, "  recompute: [2, 2]")
    assert "lists 2 per-stage counts but pipeline_stage is 1" in by["LC002"]["message"]
    al = by["AL001"]
    assert al["locations"][0]["line"] == line_of(cfg, "    hidden_size: 4100") and al["locations"][0]["column"] == 5


def test_lint_sarif_regions_and_github_annotations(capsys, tmp_path, real_data):
    cfg = broken_config(tmp_path, real_data)
    out = tmp_path / "lint.sarif"
    code = main(["lint", "--no-plugins", "--format", "sarif", "-o", str(out), str(cfg)])
    capsys.readouterr()
    assert code == 1
    doc = json.loads(out.read_text())
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(doc)
    regions = {r["ruleId"]: r["locations"][0]["physicalLocation"]["region"] for r in doc["runs"][0]["results"]}
    assert regions["AL001"] == {"startLine": line_of(cfg, "    hidden_size: 4100"), "startColumn": 5}
    code = main(["lint", "--no-plugins", "--format", "github", str(cfg)])
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("::error file=") and f"line={line_of(cfg, '  recompute: [2, 2]')}" in ln for ln in lines)


def test_non_training_yaml_is_skipped(capsys, tmp_path):
    other = tmp_path / "ci.yaml"
    other.write_text("jobs:\n  build:\n    runs-on: ubuntu\n")
    assert main(["lint", "--no-plugins", str(other)]) == 0


def copy_config(tmp_path: Path, real_data: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copy(real_data / "mindformers-configs" / name, dst)
    return dst


def test_fix_applies_only_when_asked_for_unsafe_and_keeps_every_other_byte(capsys, tmp_path, real_data):
    cfg = copy_config(tmp_path, real_data, "pretrain_llama2_7b.yaml")
    original = cfg.read_text()
    cfg.write_text(original.replace("  select_recompute: False", "  select_recompute: ['feed_forward\\.mul', 'feed_forward\\.w1\\.activation']"))
    os.chmod(cfg, 0o640)
    before = cfg.read_text()
    assert main(["fix", "--no-plugins", "--config", str(cfg)]) == 0
    assert "1 unsafe fix(es) available with --unsafe-fixes" in capsys.readouterr().err
    assert cfg.read_text() == before
    assert main(["fix", "--no-plugins", "--config", str(cfg), "--unsafe-fixes", "--diff"]) == 1
    diff = capsys.readouterr().out
    assert diff.startswith(f"--- a/{cfg.as_posix().lstrip('/')}") or diff.startswith("--- a/")
    assert "+  select_recompute: ['feed_forward\\.mul', 'feed_forward\\.w1\\.activation\\.silu', 'feed_forward\\.w1\\.reshape', 'feed_forward\\.w2\\.reshape']" in diff
    assert cfg.read_text() == before  # --diff writes nothing
    assert main(["fix", "--no-plugins", "--config", str(cfg), "--unsafe-fixes"]) == 0
    after = cfg.read_text()
    old_lines, new_lines = before.splitlines(keepends=True), after.splitlines(keepends=True)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b]
    assert len(old_lines) == len(new_lines) and len(changed) == 1
    assert old_lines[changed[0]].startswith("  select_recompute:")
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary file left behind


def test_fix_refuses_when_the_file_changed_since_the_analysis(capsys, tmp_path, real_data):
    cfg = copy_config(tmp_path, real_data, "pretrain_llama2_7b.yaml")
    cfg.write_text(cfg.read_text().replace("    hidden_size: 4096", "    hidden_size: 4100"))
    report = tmp_path / "report.json"
    main(["analyze", "--no-plugins", "--format", "json", "-o", str(report), "--fail-on", "never", str(cfg)])
    capsys.readouterr()
    assert any(f["code"] == "AL001" for f in json.loads(report.read_text())["findings"])
    cfg.write_text(cfg.read_text().replace("    hidden_size: 4100", "    hidden_size: 4104"))  # edited since
    edited = cfg.read_text()
    assert main(["fix", "--config", str(cfg), "--from-report", str(report), "--unsafe-fixes"]) == 2
    err = capsys.readouterr().err
    assert "refusing to write" in err and "/model/model_config/hidden_size" in err and "expected 4100, found 4104" in err
    assert cfg.read_text() == edited


def test_fix_from_report_applies_when_unchanged(capsys, tmp_path, real_data):
    cfg = copy_config(tmp_path, real_data, "pretrain_llama2_7b.yaml")
    cfg.write_text(cfg.read_text().replace("    hidden_size: 4096", "    hidden_size: 4100"))
    report = tmp_path / "report.json"
    main(["analyze", "--no-plugins", "--format", "json", "-o", str(report), "--fail-on", "never", str(cfg)])
    assert main(["fix", "--config", str(cfg), "--from-report", str(report), "--unsafe-fixes", "--select", "AL001"]) == 0
    assert YAML(typ="safe").load(cfg.read_text())["model"]["model_config"]["hidden_size"] == 4096



def test_fix_from_report_applies_to_a_copy_of_the_config(capsys, tmp_path, real_data):
    """The report was made for one file; fixing a copy applies its patches there, guarded by their preconditions."""
    cfg = copy_config(tmp_path, real_data, "pretrain_llama2_7b.yaml")
    cfg.write_text(cfg.read_text().replace("    hidden_size: 4096", "    hidden_size: 4100"))
    report = tmp_path / "report.json"
    main(["analyze", "--no-plugins", "--format", "json", "-o", str(report), "--fail-on", "never", str(cfg)])
    copy = tmp_path / "copy.yaml"
    copy.write_text(cfg.read_text())
    capsys.readouterr()
    assert main(["fix", "--config", str(copy), "--from-report", str(report), "--unsafe-fixes", "--select", "AL001"]) == 0
    err = capsys.readouterr().err
    assert f"note: the report's patches were made for {cfg}; applying them to {copy}" in err
    assert YAML(typ="safe").load(copy.read_text())["model"]["model_config"]["hidden_size"] == 4096
    assert "hidden_size: 4100" in cfg.read_text()  # the original is left alone
    stale = tmp_path / "stale.yaml"
    stale.write_text(cfg.read_text().replace("    hidden_size: 4100", "    hidden_size: 4104"))
    assert main(["fix", "--config", str(stale), "--from-report", str(report), "--unsafe-fixes", "--select", "AL001"]) == 2
    assert "expected 4100, found 4104" in capsys.readouterr().err

def test_lint_fix_exits_1_when_it_changed_a_file(capsys, tmp_path, real_data):
    cfg = copy_config(tmp_path, real_data, "pretrain_llama2_7b.yaml")
    cfg.write_text(cfg.read_text().replace("  micro_batch_num: 1", "  micro_batch_num: 1").replace("  pipeline_stage: 1", "  pipeline_stage: 2"))
    # micro_batch_num 1 < pipeline_stage 2: LC005's patch is unsafe; with --unsafe-fixes it is applied
    assert main(["lint", "--no-plugins", str(cfg), "--fix", "--unsafe-fixes", "--select", "LC005"]) == 1
    assert YAML(typ="safe").load(cfg.read_text())["parallel_config"]["micro_batch_num"] == 8
    capsys.readouterr()
    assert main(["lint", "--no-plugins", str(cfg), "--fix", "--select", "LC005"]) == 0  # nothing left


def test_pre_commit_hooks_file():
    hooks = YAML(typ="safe").load((Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text())
    by_id = {h["id"]: h for h in hooks}
    assert by_id["advisor-lint"]["entry"] == "advisor lint" and by_id["advisor-lint"]["types"] == ["yaml"]
    assert by_id["advisor-fix"]["entry"] == "advisor lint --fix"
    for h in hooks:
        assert {"id", "name", "entry", "language"} <= set(h)
