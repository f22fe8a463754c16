"""Output formats validated against their schemas; settings; exit codes; the notebook API."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from advisor_core.api import open_session
from advisor_core.engine.findings import Evidence, Finding, Location, Patch, PatchOp, Safety, Severity
from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.runner import AnalysisResult, select_rules
from advisor_core.engine.settings import Settings, SettingsError, load_settings, parse_settings
from advisor_core.report.base import RenderContext
from advisor_core.report.formats import GithubFormat, JsonFormat, MarkdownFormat, SarifFormat, TextFormat
from engine_support import run_cli, write_profile

DATA = Path(__file__).resolve().parents[1] / "data"
SARIF_SCHEMA = json.loads((DATA / "sarif/sarif-schema-2.1.0.json").read_text())
ANALYSIS_SCHEMA = json.loads(resources.files("advisor_core").joinpath("schemas/analysis.schema.json").read_text())


def sample_result(tmp_path: Path) -> tuple[AnalysisResult, RenderContext]:
    """A result with a config-located finding (with patch) and a profile-located one."""
    cfg = tmp_path / "configs" / "train.yaml"
    cfg.parent.mkdir()
    cfg.write_text("train_dataset:\n  num_parallel_workers: 1\n")
    host = load_plugins(autoload=True)
    f1 = Finding(
        code="AIC001",
        rule="aicpu-share",
        title="MindData map op is the bottleneck",
        message="Map(id=2) is slow: 50% of the step waits for data, 100% empty queue, a\nnewline, a % and a comma",
        severity=Severity.HIGH,
        saving_us=5000.0,
        step_time_us=10000.0,
        confidence=0.9,
        evidence=[Evidence(name="gap", value=5000.0, unit="µs", threshold=3.0)],
        locations=[
            Location(kind="config", path=str(cfg), line=2, column=3, key_path="/train_dataset/num_parallel_workers"),
            Location(kind="profile", table="minddata_pipeline", op="MapOp(id=2)", rank=0),
        ],
        patches=[
            Patch(
                title="raise num_parallel_workers to 8",
                safety=Safety.SAFE,
                ops=[PatchOp(op="test", path="/train_dataset/num_parallel_workers", value=1),
                     PatchOp(op="replace", path="/train_dataset/num_parallel_workers", value=8)],
                diff="--- a/train.yaml\n+++ b/train.yaml\n@@ -1,2 +1,2 @@\n train_dataset:\n-  num_parallel_workers: 1\n+  num_parallel_workers: 8\n",
            )
        ],
        rank=0,
    )
    f2 = Finding(code="AIC001", rule="aicpu-share", title="AI_CPU share", message="x", severity=Severity.LOW,
                 saving_us=10.0, step_time_us=10000.0, confidence=0.5,
                 locations=[Location(kind="ir", path=str(tmp_path / "g.ir"), line=12, node="@g:%3")])
    result = AnalysisResult(findings=[f1, f2], skipped=[], errors=[], diagnostics=[], rules=host.rules(), runs=[])
    return result, RenderContext(inputs={"profiles": [], "graphs": [], "config": str(cfg)}, root=tmp_path)


def test_sarif_validates_and_points_at_the_config_line(tmp_path):
    result, ctx = sample_result(tmp_path)
    doc = json.loads(SarifFormat().render(result, ctx))
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(doc)
    run = doc["runs"][0]
    assert doc["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "advisor"
    first = run["results"][0]
    loc = first["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "configs/train.yaml", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 2, "startColumn": 3}
    assert first["level"] == "error" and first["ruleId"] == "AIC001"
    assert first["partialFingerprints"]["advisorFingerprint/v1"] == result.findings[0].fingerprint()
    assert first["properties"]["impact_pct"] == 50.0
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert first["ruleIndex"] == ids.index("AIC001")
    second = run["results"][1]
    assert second["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "g.ir"


def test_sarif_logical_locations_are_unique(tmp_path):
    """Two profile places on one op (its forward and backward kernels) are one logical location (uniqueItems)."""
    result, ctx = sample_result(tmp_path)
    cfg_loc = result.findings[0].locations[0]
    matmul = [Location(kind="profile", table="kernels", op="MatMulV3", rank=0, note=n) for n in ("forward", "backward")]
    other = Location(kind="profile", table="kernels", op="TransData", rank=0)
    with_config = result.findings[0].model_copy(update={"locations": [cfg_loc, *matmul, other]})
    profile_only = result.findings[1].model_copy(update={"locations": [*matmul, other, matmul[0]]})
    result.findings = [with_config, profile_only]
    doc = json.loads(SarifFormat().render(result, ctx))
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(doc)
    first, second = doc["runs"][0]["results"]
    assert first["locations"][0]["logicalLocations"] == [
        {"fullyQualifiedName": "/train_dataset/num_parallel_workers", "kind": "member"},
        {"fullyQualifiedName": "rank0/kernels/MatMulV3", "kind": "object"},
        {"fullyQualifiedName": "rank0/kernels/TransData", "kind": "object"},
    ]
    assert second["locations"] == [{"logicalLocations": [
        {"fullyQualifiedName": "rank0/kernels/MatMulV3", "kind": "object"},
        {"fullyQualifiedName": "rank0/kernels/TransData", "kind": "object"},
    ]}]


def test_json_validates_against_the_documented_schema(tmp_path):
    result, ctx = sample_result(tmp_path)
    doc = json.loads(JsonFormat().render(result, ctx))
    jsonschema.Draft202012Validator(ANALYSIS_SCHEMA).validate(doc)
    assert doc["summary"]["by_severity"] == {"high": 1, "medium": 0, "low": 1}
    assert doc["findings"][0]["saving_pct"] == 50.0 and doc["findings"][0]["rank_in_report"] == 1


def test_github_annotations_escape_and_summary(tmp_path):
    result, ctx = sample_result(tmp_path)
    summary = tmp_path / "summary.md"
    ctx.env = {"GITHUB_STEP_SUMMARY": str(summary)}
    out = GithubFormat().render(result, ctx).splitlines()
    assert out[0].startswith(
        "::error file=configs/train.yaml,line=2,endLine=2,col=3,title=AIC001 MindData map op is the bottleneck::"
    )
    assert "a%0Anewline, a %25 and a comma" in out[0]
    assert out[1].startswith("::notice file=g.ir,line=12")
    text = summary.read_text()
    assert text.startswith("# advisor report") and "| 1 | AIC001 | high |" in text and "```diff" in text


def test_text_and_markdown(tmp_path):
    result, ctx = sample_result(tmp_path)
    txt = TextFormat().render(result, ctx)
    assert "2 finding(s), ranked by estimated saving × confidence" in txt
    assert "+  num_parallel_workers: 8" in txt and "fix (safe): raise num_parallel_workers to 8" in txt
    md = MarkdownFormat().render(result, ctx)
    assert "| 1 | AIC001 | high | 5.00 ms (50.0%) | 0.90 | configs/train.yaml:2 /train_dataset/num_parallel_workers |" in md


def test_cli_sarif_and_json_outputs_validate(tmp_path):
    prof = write_profile(tmp_path)
    out = tmp_path / "r.sarif"
    proc = run_cli("analyze", str(prof), "--format", "sarif", "-o", str(out))
    assert proc.returncode == 1, proc.stderr
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(json.loads(out.read_text()))
    proc = run_cli("analyze", str(prof), "--format", "json")
    jsonschema.Draft202012Validator(ANALYSIS_SCHEMA).validate(json.loads(proc.stdout))


@pytest.mark.parametrize("fail_on, code", [("high", 1), ("medium", 1), ("low", 1), ("never", 0)])
def test_fail_on(tmp_path, fail_on, code):
    prof = write_profile(tmp_path, aicpu_us=400.0)  # one high finding
    assert run_cli("analyze", str(prof), "--fail-on", fail_on, "--format", "json").returncode == code


def test_fail_on_above_the_findings_exits_0(tmp_path):
    prof = write_profile(tmp_path, aicpu_us=70.0)  # ~3.6 % of the step: medium
    proc = run_cli("analyze", str(prof), "--fail-on", "high", "--format", "json")
    assert [f["severity"] for f in json.loads(proc.stdout)["findings"]] == ["medium"]
    assert proc.returncode == 0


def test_pyproject_settings_and_rule_options(tmp_path):
    prof = write_profile(tmp_path, aicpu_us=70.0)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.advisor]\nfail-on = "never"\nformat = "json"\n[tool.advisor.rules.AIC001]\nmin_share_pct = 50.0\n'
    )
    proc = run_cli("analyze", str(prof), cwd=tmp_path)
    assert proc.returncode == 0
    report = json.loads(proc.stdout)
    assert report["findings"] == []
    (skip,) = [s for s in report["skipped"] if s["code"] == "AIC001"]
    assert "below 50.0%" in skip["reason"]
    # flags override the file
    proc = run_cli("analyze", str(prof), "--fail-on", "low", "--format", "text", cwd=tmp_path)
    assert proc.returncode == 0 and "AI_CPU kernels take" in proc.stdout


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[tool.advisor]\nselct = ['MD']\n", "unknown key(s) selct in [tool.advisor]"),
        ("[tool.advisor]\nfail-on = 'sometimes'\n", "fail-on must be one of high, medium, low, never"),
        ("[tool.advisor.rules.AIC001]\nmin_share_pct = 'lots'\n", "options of AIC001 (aicpu-share): min_share_pct: Input should be a valid number"),
        ("[tool.advisor.rules.AIC001]\nnot_an_option = 1\n", "options of AIC001 (aicpu-share): not_an_option: Extra inputs are not permitted"),
        ("[tool.advisor]\nselect = ['ZZ9']\n", "'ZZ9' matches no registered rule"),
        ("[tool.advisor\n", "not valid TOML"),
    ],
)
def test_bad_settings_are_usage_errors(tmp_path, toml, message):
    prof = write_profile(tmp_path)
    (tmp_path / "advisor.toml").write_text(toml)
    proc = run_cli("analyze", str(prof), cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_advisor_toml_top_level_keys(tmp_path):
    (tmp_path / "advisor.toml").write_text("select = ['AIC']\nignore = []\n[plugins]\nautoload = false\n")
    s = load_settings(cwd=tmp_path)
    assert s.select == ["AIC"] and s.plugins_autoload is False and s.source == str(tmp_path / "advisor.toml")
    with pytest.raises(SettingsError):
        parse_settings({"plugins": {"autoload": "yes"}}, "x")


def test_selection_by_code_prefix_name_tag():
    host = load_plugins(autoload=True)
    rules = host.rules()
    assert select_rules(rules, ["AIC"], None) == ["AIC001"]
    assert select_rules(rules, ["aicpu-share"], None) == ["AIC001"]
    assert select_rules(rules, ["aicpu"], None) == ["AIC001"]  # tag
    assert "AIC001" not in select_rules(rules, ["ALL"], ["AIC001"])


def test_notebook_api(tmp_path):
    prof = write_profile(tmp_path, aicpu_us=400.0)
    s = open_session(prof, settings=Settings())
    k = s.table("kernels", ["name", "duration_us"])
    assert list(k.columns) == ["rank", "name", "duration_us"] and len(k) == 18
    result = s.analyze(select=["AIC001"])
    df = s.findings_frame(result)
    assert df[["code", "severity"]].values.tolist() == [["AIC001", "high"]]
    # No step trace: step time = kernel span / steps = (2·8·201 + 601 + 400) / 2 µs; saving = 0.9 × 400 µs.
    assert df["saving_pct"][0] == pytest.approx(100 * 360 / ((2 * 8 * 201 + 601 + 400) / 2), rel=1e-6)
