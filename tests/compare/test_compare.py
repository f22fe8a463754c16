"""advisor compare: every simulated fix is measured beside its estimate; what changed, regressed or cannot be
compared is said; every output format says it; a report of another run is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor_core.compare import compare_runs, render
from advisor_core.compare.compare import NOISE_FRACTION, ReportMismatch
from advisor_core.config.document import ConfigDocument
from advisor_core.diagnostics import DiagnosticSink
from advisor_core.engine.findings import Finding, Safety
from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.patch import apply_patches
from advisor_core.simulate import SCENARIOS, simulate_scenario
from advisor_core.simulate.groundtruth import find_problems
from advisor_core.verify import BAND

HOST = load_plugins(autoload=False)
CLI_TIMEOUT_S = 300


def _session(path: Path, **kw: object) -> Session:
    return Session([path], SessionOptions(jobs=1, **kw), host=HOST)  # type: ignore[arg-type]


def _advisor(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ADVISOR_WIDTH="80", ADVISOR_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run([sys.executable, "-m", "advisor_core", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=CLI_TIMEOUT_S)


def _fixable(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if any(p.safety != Safety.DISPLAY_ONLY for p in f.patches)]


def _patched(f: Finding) -> set[str]:
    return {op.path for p in f.patches if p.safety != Safety.DISPLAY_ONLY for op in p.changes}


# -- every scenario: fix → re-simulate → compare -----------------------------------------------------------

@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_each_fix_is_gone_and_measured_within_the_band(scenario: str, tmp_path: Path) -> None:
    """simulate → analyze → fix one finding → simulate the fixed config → compare (one problem at a time).

    Which findings have a config fix is the analysis's say, held against the simulator's
    ground truth: every problem a config change fixes has a finding whose patch changes that key.
    """
    before = tmp_path / "before"
    sim = simulate_scenario(scenario, before, ground_truth=False)
    config = next((before / "config").glob("*.yaml"))
    session_b = _session(before)
    result_b = session_b.analyze()
    fixable = _fixable(result_b.findings)
    for problem in (p for p in find_problems(sim.model) if p.config_fix):
        keys = {op["path"] for op in problem.config_fix or [] if op["op"] != "test"}
        assert any(f.code == problem.code and keys & _patched(f) for f in fixable), (problem.id, keys)
    for i, f in enumerate(fixable):
        doc = ConfigDocument.from_text(config.read_text(), config, DiagnosticSink())
        applied = apply_patches(doc, [p for p in f.patches if p.safety != Safety.DISPLAY_ONLY])
        assert applied.ok
        after = tmp_path / f"after{i}"
        simulate_scenario(scenario, after, config=applied.new_text, ground_truth=False)
        c = compare_runs(session_b, _session(after), before_label="before", after_label=str(i), before_result=result_b)
        (o,) = [o for o in c.findings if o.fingerprint == f.fingerprint()]
        assert o.status == "gone", (f.title, o)
        assert o.metric != "steady step time", o  # the rule's own measure, not the step
        assert o.measured_us is not None and o.estimate_us is not None
        if o.within_noise:  # too small to measure: both inside the stated band, which is 0.5 % of its own time
            assert o.ratio is None and o.noise_us == NOISE_FRACTION * max(abs(o.before_us), abs(o.after_us))
            assert abs(o.estimate_us) <= o.noise_us and abs(o.measured_us) <= o.noise_us
        else:
            assert o.ratio is not None and BAND[0] <= o.ratio <= BAND[1], (f.title, o)
        assert c.regressions == [], (f.title, c.regressions)
        assert c.config_changes and c.not_comparable == []


# -- one fix, both ways: what was gained, what regressed, what changed --------------------------------------

@pytest.fixture(scope="module")
def unaligned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The unaligned scenario, and the same run with AL001's hidden_size fix applied (4100 → 4112).

    Paths: each comparison opens its own sessions (a session is analysed once).
    """
    base = tmp_path_factory.mktemp("unaligned")
    simulate_scenario("unaligned", base / "unaligned", ground_truth=False)
    (hidden,) = [f for f in _session(base / "unaligned").analyze().findings if f.title.startswith("hidden_size")]
    config = next((base / "unaligned" / "config").glob("*.yaml"))
    fixed = apply_patches(ConfigDocument.from_text(config.read_text(), config, DiagnosticSink()), hidden.patches)
    simulate_scenario("unaligned", base / "fixed", config=fixed.new_text, ground_truth=False)
    return base / "unaligned", base / "fixed"


def test_the_kernels_that_a_fix_made_faster(unaligned: tuple[Path, Path]) -> None:
    c = compare_runs(*map(_session, unaligned), before_label="unaligned", after_label="fixed")
    statuses = {o.title: o.status for o in c.findings}
    assert statuses == {"hidden_size gives unaligned MatMul dim 4100": "gone",
                        "vocab_size gives unaligned MatMul dim 32001": "changed",
                        "intermediate_size gives unaligned MatMul dim 11000": "changed"}
    hidden = c.findings[0]
    assert round(hidden.ratio, 3) == 1.000 and hidden.metric.startswith("MatMuls with a dim from hidden_size")
    changed = [o for o in c.findings if o.status == "changed"]
    assert all(o.ratio is None and o.after_estimate_us is not None for o in changed)
    assert [(d.kind, d.what, round(d.before_us), round(d.after_us)) for d in c.kernels] == [
        ("type", "MatMulV3", 477868, 450631), ("type", "TransData", 46035, 29536)]
    assert all(d.delta < 0 for d in c.kernels) and c.regressions == []
    assert [(r.rank, round(r.delta)) for r in c.ranks] == [(0, 43631), (1, 43631)]
    assert c.notes == ["model dims differ (hidden_size 4100 → 4112): kernels are compared by cell and type, their "
                       "shapes changed"]
    assert c.not_comparable == []


@pytest.fixture(scope="module")
def worse(unaligned: tuple[Path, Path]):  # type: ignore[no-untyped-def]
    """The fixed run as BEFORE and the unaligned one as AFTER: a change that made things worse on purpose."""
    bad, fixed = unaligned
    return compare_runs(_session(fixed), _session(bad), before_label="fixed", after_label="unaligned")


def test_a_change_that_made_things_worse(worse) -> None:  # type: ignore[no-untyped-def]
    c = worse
    assert c.step_change_significant and round(c.step_change_us) == -43631
    assert [(d.kind, d.what, round(d.delta)) for d in c.regressions] == [
        ("type", "MatMulV3", 27237),
        ("type", "TransData", 16498),
        ("cell", "layers.N.attention.wq · MatMulV3", 6809),
        ("cell", "layers.N.attention.wk · MatMulV3", 6809),
        ("cell", "layers.N.attention.wv · MatMulV3", 6809),
        ("cell", "layers.N.attention.wo · MatMulV3", 6809),
    ]
    assert [f["title"] for f in c.new_findings] == ["hidden_size gives unaligned MatMul dim 4100"]
    assert {o.title: o.status for o in c.findings} == {
        "intermediate_size gives unaligned MatMul dim 11000": "changed",
        "vocab_size gives unaligned MatMul dim 32001": "changed",
        "gradient AllReduce exposed in the step tail: 2.96 ms per step": "gone"}  # the longer step hides it again
    assert round(c.peak_memory_before) > round(c.peak_memory_after)  # the padded weights are gone again


def test_every_format_says_the_same_things(worse) -> None:  # type: ignore[no-untyped-def]
    c = worse
    text, md, page = render(c, "text"), render(c, "markdown"), render(c, "html")
    said = {
        "significance": "a significant change (noise 3.19 ms: 0.5 % of the step or 2 SE of the means)",
        "breakdown": "computing",
        "memory": "peak memory (highest rank): ",
        "finding": "intermediate_size gives unaligned MatMul dim 11000",
        "changed": "AFTER still reports it, now estimated -0.01 ms",
        "not fixed": "not fixed: its own time did not move (±1.50 ms), so no ratio",
        "own time": "its own time (MatMuls with a dim from intermediate_size (and their TransData), per step)",
        "new": "hidden_size gives unaligned MatMul dim 4100",
        "regression": "layers.N.attention.wq · MatMulV3",
        "config": "/model/model_config/hidden_size",
        "rank": "rank",
        "note": "model dims differ (hidden_size 4112 → 4100)",
    }
    for fmt, out in (("text", " ".join(text.split())), ("markdown", md), ("html", page)):
        missing = [k for k, s in said.items() if s.lower() not in out.lower()]
        assert not missing, (fmt, missing)
    assert "| 0 | 638.71 ms | 682.34 ms | +43.63 ms |" in md  # a rank row: before, after, change
    assert ("| AL001 intermediate_size gives unaligned MatMul dim 11000 | changed | 78.86 ms | 0.02 ms | – (not fixed) "
            "| MatMuls with a dim from intermediate_size (and their TransData), per step |") in md
    assert ("<tr><td>AL001</td><td>intermediate_size gives unaligned MatMul dim 11000</td><td class=changed>changed"
            "</td><td class=n>78.86 ms</td><td class=n>0.02 ms</td><td class=n>– (not fixed)</td>") in page
    assert "<h2>Kernel regressions: 6</h2>" in page and "<h2>New in AFTER</h2>" in page
    assert "| regression | before | after | change |" in md and "Kernel regressions: 6." in md
    assert max(len(line) for line in render(c, "text", ).splitlines()) <= 200


# -- the same run, another export or seed ------------------------------------------------------------------

def test_a_db_export_against_the_text_one_is_no_change(tmp_path: Path) -> None:
    for export in ("text", "db"):
        simulate_scenario("kitchen-sink", tmp_path / export, ranks=4, layers=2, steps=2, export=export,
                          ground_truth=False)
    assert not list((tmp_path / "db").rglob("kernel_details.csv"))  # the DB side has no text export
    c = compare_runs(_session(tmp_path / "text"), _session(tmp_path / "db"), before_label="text", after_label="db")
    assert c.step_change_us == 0.0 and not c.step_change_significant
    assert c.kernels == [] and c.regressions == [] and c.new_findings == [] and c.not_comparable == []
    assert len(c.findings) >= 5 and {o.status for o in c.findings} == {"still there"}
    assert all(o.measured_us == 0.0 for o in c.findings)
    measured_by_step = {o.code for o in c.findings if o.metric == "steady step time"}
    assert not measured_by_step & {"MD001", "CT001", "CT002", "AL001", "CM001", "RC001"}  # each has its own measure
    assert [r.delta for r in c.ranks] == [0.0, 0.0, 0.0, 0.0]


def test_the_same_run_with_another_seed_shows_no_change(tmp_path: Path) -> None:
    simulate_scenario("clean", tmp_path / "a", ground_truth=False)
    simulate_scenario("clean", tmp_path / "b", seed=1, ground_truth=False)
    c = compare_runs(_session(tmp_path / "a"), _session(tmp_path / "b"), before_label="a", after_label="b")
    assert not c.step_change_significant and abs(c.step_change_us) < c.noise_us
    assert c.regressions == [] and c.config_changes == [] and c.not_comparable == [] and c.findings == []
    assert "no significant change (noise " in render(c, "text")
    assert json.loads(render(c, "json"))["step_change_significant"] is False


# -- what is not comparable --------------------------------------------------------------------------------

def test_what_is_not_comparable_is_said(tmp_path: Path) -> None:
    simulate_scenario("clean", tmp_path / "a", ground_truth=False)
    simulate_scenario("clean", tmp_path / "mp1", sets=["parallel_config.model_parallel=1"], ground_truth=False)
    simulate_scenario("clean", tmp_path / "smaller", layers=2, ground_truth=False)
    other = compare_runs(_session(tmp_path / "a"), _session(tmp_path / "mp1"), before_label="a", after_label="mp1")
    assert other.not_comparable == ["parallel layout differs (before world4 × dp2 × mp2 × pp1, after world2 × dp2 × "
                                    "mp1 × pp1): per-rank step and kernel times are not compared (each rank holds "
                                    "another part of the model), only the cluster's step"]
    assert other.ranks == [] and other.kernels == [] and other.regressions == [] and other.step_change_us is not None
    assert not other.kernels_compared and "kernel regressions: not compared" in render(other, "text")
    smaller = compare_runs(_session(tmp_path / "a"), _session(tmp_path / "smaller"), before_label="a", after_label="s")
    assert smaller.not_comparable == ["another network (num_layers 4 → 2): kernels are not compared op by op"]
    assert smaller.kernels == [] and smaller.step_change_significant


# -- the command line ----------------------------------------------------------------------------------------

def test_the_user_flow_on_the_data_pipeline_case(tmp_path: Path) -> None:
    """simulate → analyze -o report.json → fix → simulate the fixed config → compare --report, all by the CLI."""
    assert _advisor("simulate", "minddata-bottleneck", "-o", "before", cwd=tmp_path).returncode == 0
    assert _advisor("analyze", "before", "--format", "json", "-o", "report.json", cwd=tmp_path).returncode == 1
    cfg = next((tmp_path / "before/config").glob("*.yaml"))
    original = cfg.read_text()
    fix = _advisor("fix", "--config", str(cfg), "--from-report", "report.json", cwd=tmp_path)
    assert fix.returncode == 0 and "fixed MD001: set train_dataset.num_parallel_workers to 6 (safe)" in fix.stderr
    (tmp_path / "fixed.yaml").write_text(cfg.read_text())
    cfg.write_text(original)  # BEFORE keeps the config it ran with
    assert _advisor("simulate", "minddata-bottleneck", "-o", "after", "--config", "fixed.yaml", cwd=tmp_path).returncode == 0
    proc = _advisor("compare", "before", "after", "--report", "report.json", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)
    (o,) = c["findings"]
    assert (o["code"], o["status"], o["metric"]) == ("MD001", "gone", "data wait per step")
    assert round(o["estimate_us"]) == 69115 and round(o["measured_us"]) == 69115 and round(o["ratio"], 2) == 1.0
    assert round(c["step_change_us"]) == 68865 and c["step_change_significant"] is True
    assert c["config_changes"] == [{"key": "/train_dataset/num_parallel_workers", "before": "1", "after": "6"},
                                   {"key": "/train_dataset_task/dataset_config/num_parallel_workers", "before": "1",
                                    "after": "6"}]
    assert c["regressions"] == [] and c["estimates_from"] == "the saved report"
    text = _advisor("compare", "before", "after", "--report", "report.json", cwd=tmp_path).stdout
    assert "  MD001 gone: data pipeline bottleneck at Map(id=3): 69.11 ms per step waiting\n    for data" in text
    assert "    estimated 69.11 ms, measured 69.11 ms = 1.00 of the estimate\n" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_the_user_flow_on_the_gradient_tail_case(tmp_path: Path) -> None:
    """The same by the CLI on allreduce-rearrangement: the tail fixed (its own measure), the redistribution still
    there (its chain's time measured on both, no ratio); a report of another run is refused."""
    assert _advisor("simulate", "allreduce-rearrangement", "-o", "before", cwd=tmp_path).returncode == 0
    assert _advisor("analyze", "before", "--format", "json", "-o", "report.json", cwd=tmp_path).returncode == 1
    cfg = next((tmp_path / "before/config").glob("*.yaml"))
    original = cfg.read_text()
    fix = _advisor("fix", "--config", str(cfg), "--from-report", "report.json", cwd=tmp_path)
    assert fix.returncode == 0, fix.stderr
    (tmp_path / "fixed.yaml").write_text(cfg.read_text())
    cfg.write_text(original)
    assert _advisor("simulate", "allreduce-rearrangement", "-o", "after", "--config", "fixed.yaml",
                    cwd=tmp_path).returncode == 0
    proc = _advisor("compare", "before", "after", "--report", "report.json", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)
    out = {o["status"]: o for o in c["findings"]}
    tail, chain = out["gone"], out["still there"]
    assert tail["metric"] == "gradient AllReduce exposed per step" and 0.7 <= tail["ratio"] <= 1.3
    assert chain["metric"] == "redistribution kernels of the finding's chain, per step" and chain["ratio"] is None
    assert abs(chain["measured_us"]) <= chain["noise_us"]  # its own time did not move
    assert round(chain["before_us"]) == round(chain["estimate_us"])  # what it measures is what was estimated
    text = " ".join(_advisor("compare", "before", "after", "--report", "report.json", cwd=tmp_path).stdout.split())
    assert f"CM001 still there: {chain['title']}" in text and "not fixed: its own time did not move" in text
    # a report of another run (MindData) against these runs: refused, one line naming both
    assert _advisor("simulate", "minddata-bottleneck", "-o", "md", cwd=tmp_path).returncode == 0
    assert _advisor("analyze", "md", "--format", "json", "-o", "md.json", cwd=tmp_path).returncode == 1
    proc = _advisor("compare", "before", "after", "--report", "md.json", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("advisor: --report md.json is not a report of BEFORE before: its ranks are 0, BEFORE's "
                           "0–3; none of its findings (MD001) is one BEFORE has (CM001) (run `advisor analyze before "
                           "--format json -o report.json` to make one)\n")


def test_config_and_graphs_given_per_side(tmp_path: Path) -> None:
    """Profiles alone as BEFORE and AFTER, their config and IR dumps given by --before/after-config/-graphs."""
    simulate_scenario("cast-excess", tmp_path / "before", ground_truth=False)
    simulate_scenario("cast-excess", tmp_path / "after", sets=["model.model_config.rotary_dtype=float16"],
                      ground_truth=False)
    args = ["compare", "before/profile", "after/profile", "--format", "json"]
    for side in ("before", "after"):
        args += [f"--{side}-config", next((tmp_path / side / "config").glob("*.yaml")).relative_to(tmp_path).as_posix(),
                 f"--{side}-graphs", f"{side}/graphs"]
    proc = _advisor(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)
    assert c["config_changes"] == [{"key": "/model/model_config/rotary_dtype", "before": '"float32"',
                                    "after": '"float16"'}]
    rotary = [o for o in c["findings"] if "rotary_dtype" in o["title"]]
    assert [(o["status"], o["metric"]) for o in rotary] == [("gone", "kernels of the cells the casts are in, per step")]
    assert 0.7 <= rotary[0]["ratio"] <= 1.3


def test_a_report_of_another_run_is_refused(unaligned: tuple[Path, Path], tmp_path: Path) -> None:
    simulate_scenario("minddata-bottleneck", tmp_path / "md", ground_truth=False)
    md = _session(tmp_path / "md")
    report = md.analyze().findings
    with pytest.raises(ReportMismatch) as exc:
        compare_runs(*map(_session, unaligned), before_label="unaligned", after_label="fixed", before_findings=report,
                     report_inputs=md.describe_inputs(), report_label="--report r.json")
    assert str(exc.value) == ("--report r.json is not a report of BEFORE unaligned: its ranks are 0, BEFORE's 0, 1; "
                              "none of its findings (MD001) is one BEFORE has (AL001) (run `advisor analyze unaligned "
                              "--format json -o report.json` to make one)")
    mine = _session(unaligned[0])  # BEFORE's own report is accepted
    own = mine.analyze().findings
    c = compare_runs(_session(unaligned[0]), _session(unaligned[1]), before_label="unaligned", after_label="fixed",
                     before_findings=own, report_inputs=mine.describe_inputs())
    assert c.estimates_from == "the saved report" and len(c.findings) == 3


def test_bad_input(tmp_path: Path) -> None:
    proc = _advisor("compare", str(tmp_path / "nope"), str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "BEFORE" in proc.stderr and "does not exist" in proc.stderr
    (tmp_path / "r.json").write_text("{}")
    proc = _advisor("compare", str(tmp_path), str(tmp_path), "--report", str(tmp_path / "r.json"), cwd=tmp_path)
    assert proc.returncode == 2 and "not an advisor JSON report" in proc.stderr
