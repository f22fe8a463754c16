"""Trust at the edges: flags and paths checked before any work, one line per error, nothing passes unchecked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from advisor_core.api import InputError, open_session
from advisor_core.simulate import SCENARIOS, simulate_scenario

ROOT = Path(__file__).resolve().parents[2]
SARIF_SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif" / "sarif-schema-2.1.0.json").read_text())


def _advisor(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, ADVISOR_WIDTH="100", ADVISOR_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run([sys.executable, "-m", "advisor_core", *args], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("edges") / "clean"
    simulate_scenario("clean", out, layers=2, steps=2, ground_truth=False)
    return out


def test_fix_with_a_missing_config() -> None:
    proc = _advisor("fix", "--config", "/nonexistent.yaml")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("advisor fix: error: --config /nonexistent.yaml: file does not exist "
                           "(see 'advisor fix --help')\n")


def test_analyze_a_missing_path() -> None:
    proc = _advisor("analyze", "/nonexistent")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["/nonexistent: error: path does not exist"]  # one line per problem


def test_inspect_a_missing_path() -> None:
    proc = _advisor("inspect", "/nonexistent")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["/nonexistent: error: path does not exist"]


class _WorkStarted(Exception):
    """Raised by the stand-ins for the simulation and the analysis: work began."""


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The simulation and the analysis replaced by stand-ins that count their calls (and stop there)."""
    import advisor_core.simulate
    from advisor_core.engine.session import Session

    calls: list[str] = []

    def started(name: str):  # type: ignore[no-untyped-def]
        def stand_in(*args, **kwargs):  # type: ignore[no-untyped-def]
            calls.append(name)
            raise _WorkStarted(name)
        return stand_in

    monkeypatch.setattr(Session, "analyze", started("analyze"))
    monkeypatch.setattr(advisor_core.simulate, "simulate_scenario", started("simulate"))
    monkeypatch.setenv("ADVISOR_WIDTH", "200")
    monkeypatch.setenv("ADVISOR_DISABLE_PLUGIN_AUTOLOAD", "1")
    return calls


def test_output_and_format_refused_before_any_work(clean: Path, work: list[str], capsys, tmp_path: Path) -> None:
    from advisor_core.cli import main

    assert main(["analyze", str(clean), "--format", "json", "-o", "/nonexistent/dir/r.json"]) == 2
    assert main(["analyze", str(clean), "--format", "htm"]) == 2
    assert main(["demo", "--format", "htm"]) == 2
    assert main(["analyze", str(clean), "--format", "sarif", "-o", "/proc/x.sarif"]) == 2  # exists, refuses files
    assert main(["inspect", str(clean), "-o", "/proc/x.txt"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[:3] == [
        "advisor analyze: error: --output /nonexistent/dir/r.json: directory /nonexistent/dir does not exist "
        "(see 'advisor analyze --help')",
        "advisor analyze: error: unknown --format 'htm'; available: github, html, json, markdown, sarif, text "
        "(see 'advisor analyze --help')",
        "advisor demo: error: unknown --format 'htm'; available: github, html, json, markdown, sarif, text "
        "(see 'advisor demo --help')",
    ]
    # the reason is the system's: ENOENT as root, EACCES otherwise
    assert err[3].startswith("advisor analyze: error: --output /proc/x.sarif: cannot write in /proc: ")
    assert err[4].startswith("advisor inspect: error: --output /proc/x.txt: cannot write in /proc: ")
    assert len(err) == 5 and work == []  # nothing was simulated or analysed
    # the stand-ins do count: the same commands with good flags start the work
    assert main(["demo", "--format", "json"]) == 2
    assert main(["analyze", str(clean), "--format", "json", "-o", str(tmp_path / "r.json")]) == 2
    assert work == ["simulate", "analyze"]


def test_a_write_that_fails_after_the_analysis_is_one_line(tmp_path: Path, capsys) -> None:
    from advisor_core.cli.common import write_output

    gone = tmp_path / "gone" / "r.json"  # the directory went away while the analysis ran
    with pytest.raises(SystemExit) as exc:
        write_output("{}", gone)
    assert exc.value.code == 2
    assert capsys.readouterr().err == f"advisor: cannot write {gone}: No such file or directory\n"
    assert list(tmp_path.iterdir()) == []


def test_open_session_on_a_wrong_path_raises() -> None:
    with pytest.raises(InputError, match="wrong/path: error: path does not exist"):
        open_session("wrong/path")


def test_lint_a_directory_lints_every_config_in_it(real_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "lint.json"
    proc = _advisor("lint", str(real_data / "mindformers-configs"), "--format", "json", "-o", str(out))
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    assert len(data["inputs"]["configs"]) == 13
    assert {f["code"] for f in data["findings"]} >= {"CT001", "LC005"}


def test_lint_broken_yaml_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("model:\n  a: [1, 2\nparallel_config: {}\n")
    proc = _advisor("lint", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (f"{bad}:3:16: error: training config is not valid YAML: expected ',' or ']', but got "
                                   "':' (while parsing a flow sequence)")


_NOT_A_CONFIG = ": skipped: not a MindFormers training config (no model/parallel_config/runner_config … sections)"
_BROKEN_LINE = (":3:16: error: training config is not valid YAML: expected ',' or ']', but got ':' (while parsing a "
                "flow sequence)")


@pytest.mark.parametrize("layout", ["folder", "arguments"])
def test_lint_broken_yaml_beside_a_valid_config(real_data: Path, tmp_path: Path, layout: str) -> None:
    """A config that does not parse is an input error whatever else was linted: exit 2, SARIF says the run failed."""
    folder = tmp_path / "configs"
    folder.mkdir()
    good = folder / "pretrain_llama2_7b.yaml"
    good.write_bytes((real_data / "mindformers-configs" / "pretrain_llama2_7b.yaml").read_bytes())
    bad = folder / "broken.yaml"
    bad.write_text("model:\n  a: [1, 2\nparallel_config: {}\n")
    targets = [str(folder)] if layout == "folder" else [str(good), str(bad)]
    out = tmp_path / "lint.sarif"
    proc = _advisor("lint", *targets, "--fail-on", "never", "--format", "sarif", "-o", str(out))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"{bad}{_BROKEN_LINE}"]
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SARIF_SCHEMA)
    (inv,) = doc["runs"][0]["invocations"]
    assert inv["executionSuccessful"] is False
    assert inv["toolExecutionNotifications"] == [{
        "level": "error",
        "message": {"text": "training config is not valid YAML: expected ',' or ']', but got ':' (while parsing a "
                            "flow sequence)"},
        "descriptor": {"id": "yaml-syntax"},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": str(bad)},
                                             "region": {"startLine": 3, "startColumn": 16}}}],
    }]
    bad.unlink()  # the same lint without it: the valid config alone passes
    proc = _advisor("lint", str(folder), "--fail-on", "never")
    assert proc.returncode == 0 and proc.stderr == ""


def test_lint_of_a_folder_names_every_yaml_it_skips(real_data: Path, tmp_path: Path) -> None:
    """Without -v: a YAML in the folder that is not a training config gets one line, so nothing passes silently."""
    (tmp_path / "pretrain_llama2_7b.yaml").write_bytes(
        (real_data / "mindformers-configs" / "pretrain_llama2_7b.yaml").read_bytes())
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "workflow.yml").write_text("on: push\njobs: {}\n")
    proc = _advisor("lint", str(tmp_path), "--fail-on", "never")
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [f"{tmp_path / 'ci' / 'workflow.yml'}{_NOT_A_CONFIG}"]


def test_lint_of_no_config_still_writes_the_sarif(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("foo: 1\n")
    out = tmp_path / "x.sarif"
    proc = _advisor("lint", str(other), "--format", "sarif", "-o", str(out))
    assert proc.returncode == 0
    assert f"{other}: skipped: not a MindFormers training config" in proc.stderr
    assert "nothing linted: none of the 1 YAML file(s) given is a MindFormers training config" in proc.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SARIF_SCHEMA)
    assert doc["runs"][0]["results"] == []


def test_compact_ir_dump_is_read_not_passed(ms_cpu: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    _advisor("analyze", str(ms_cpu / "cast_roundtrip" / "ir_dump_format0"), "--format", "json", "-o", str(out))
    data = json.loads(out.read_text())
    (f,) = [f for f in data["findings"] if f["code"] == "CT001"]
    assert f["title"] == "lossy Cast round trip Float32→Float16→Float32" and f["saving_us"] is None
    assert "Time: unknown, the dump has no tensor shapes (compact IR format)" in f["message"]
    (al,) = [s for s in data["skipped"] if s["code"] == "AL001"]
    assert al["reason"].startswith("no MatMul shape could be read from the IR") and "nothing was checked" in al["reason"]


def test_sarif_of_a_mistyped_path_says_it_failed(tmp_path: Path) -> None:
    out = tmp_path / "r.sarif"
    proc = _advisor("lint", str(tmp_path / "nope.yaml"), "--format", "sarif", "-o", str(out))
    assert proc.returncode == 2  # a usage error: no SARIF claims success
    assert not out.exists()
    bad = tmp_path / "broken.yaml"
    bad.write_text("model: [\n")
    _advisor("lint", str(bad), "--format", "sarif", "-o", str(out))
    inv = json.loads(out.read_text())["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    assert inv["toolExecutionNotifications"][0]["descriptor"]["id"] == "yaml-syntax"


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_sarif_of_every_scenario_validates(scenario: str, tmp_path: Path) -> None:
    run = tmp_path / scenario
    simulate_scenario(scenario, run, layers=2, steps=2, ground_truth=False)
    for target in (run, run / "profile"):
        out = tmp_path / "r.sarif"
        proc = _advisor("analyze", str(target), "--format", "sarif", "-o", str(out))
        assert proc.returncode in (0, 1), proc.stderr
        doc = json.loads(out.read_text())
        jsonschema.validate(doc, SARIF_SCHEMA)
        assert doc["runs"][0]["invocations"][0]["executionSuccessful"] is True


def test_simulate_explain_and_demo_lay_out_for_80_columns(tmp_path: Path, work: list[str], monkeypatch, capsys) -> None:
    """Lines wrap at spaces to ADVISOR_WIDTH, continuation lines indented; no word is cut."""
    from types import SimpleNamespace

    import advisor_core.simulate
    from advisor_core.cli import main

    monkeypatch.setenv("ADVISOR_WIDTH", "80")
    assert main(["simulate", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[:2] == ["clean                      Llama2-7B dp2 x mp2: aligned dims, enough data",
                          "                           workers, split gradient AllReduce, no recompute"]
    assert main(["explain", "RC001"]) == 0
    explained = capsys.readouterr().out.splitlines()
    assert explained[2:6] == ["plugin: builtin-rules (ascend-advisor 0.1.0)   default severity: medium   fix:",
                              "  sometimes",
                              "evidence (any of): IR dump (final front-end graph, e.g. NN_validate_*.ir) or",
                              "  config key recompute.select_recompute"]
    fake = SimpleNamespace(workload=SimpleNamespace(world=8, dp=2, mp=2, pp=2, layers=4), model=SimpleNamespace(steps=3))
    monkeypatch.setattr(advisor_core.simulate, "simulate_scenario", lambda *a, **k: fake)
    keep = tmp_path / "a-directory-with-a-long-name-to-keep-the-simulated-run-in"
    assert main(["demo", "--keep", str(keep)]) == 2  # the analysis stand-in stops it
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == ["simulated kitchen-sink: 8 rank(s) (dp 2 x mp 2 x pp 2), 3 steps, 4 layers ->",
                       f"  {keep}"]
    for line in listed + explained[:10]:
        assert len(line) <= 80, line
    monkeypatch.setattr(advisor_core.simulate, "simulate_scenario", simulate_scenario)  # the real one, for its lines
    assert main(["simulate", "cast-excess", "-o", str(tmp_path / "cast"), "--layers", "2", "--steps", "1",
                 "--ranks", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in out), out
    i = next(i for i, line in enumerate(out) if line.startswith("  CT001 CT001-rotary-fp32: "))
    assert [line[:6] for line in out[i + 1:i + 3]] == ["      ", "      "]  # continuation lines are indented
    assert " ".join(" ".join(out[i:i + 3]).split()).endswith(
        "rotary_dtype float32 with compute_dtype float16 adds Cast pairs around the rotary embedding in every layer")


def test_rules_show_the_tags_select_accepts(monkeypatch, capsys) -> None:
    from advisor_core.cli import main
    from advisor_core.engine.plugins import load_plugins

    monkeypatch.setenv("ADVISOR_DISABLE_PLUGIN_AUTOLOAD", "1")
    rules = load_plugins(autoload=False).rules()
    ct001 = rules["CT001"].cls
    assert ct001.tags  # the rule has tags to show
    monkeypatch.setenv("ADVISOR_WIDTH", "80")  # one entry per rule
    assert main(["rules"]) == 0
    narrow = capsys.readouterr().out.splitlines()
    assert f"CT001  {ct001.name}  [{', '.join(ct001.tags)}]" in narrow
    assert not any(line.rstrip().endswith("-") for line in narrow)  # no word cut at a hyphen
    monkeypatch.setenv("ADVISOR_WIDTH", "200")  # the table
    assert main(["rules"]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert "tags" in next(line for line in wide if "┃ code" in line)
    row = next(line for line in wide if "│ CT001 " in line)
    assert [c.strip() for c in row.split("│")[1:4]] == ["CT001", ct001.name, ", ".join(ct001.tags)]


def test_fix_profile_and_graphs_have_help(capsys) -> None:
    from advisor_core.cli import main

    assert main(["fix", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--profile PATH Profile directory of the run the config belongs to (analysed to find the patches)." in text
    assert "--graphs PATH IR dump directory of that run (analysed to find the patches)." in text


def test_demo_verbose_lists_the_rules_that_found_nothing(monkeypatch, capsys) -> None:
    import advisor_core.simulate
    from advisor_core.cli import main

    small = lambda name, out, seed=0: simulate_scenario(name, out, seed=seed, layers=2, steps=1)  # noqa: E731
    monkeypatch.setattr(advisor_core.simulate, "simulate_scenario", small)
    monkeypatch.setenv("ADVISOR_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("ADVISOR_WIDTH", "100")
    assert main(["demo", "clean", "-v", "--no-fixes"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(out) if line.endswith("rule(s) reported nothing:"))
    skipped = [line for line in out[header + 1:] if re.match(r"  [A-Z]{2,3}\d{3} ", line)]
    assert len(skipped) == int(out[header].split()[0]) and any(line.startswith("  CL001 slow-rank: ") for line in skipped)
    assert not any("-v lists them" in line for line in out)
