"""A config from another run is refused, naming both sides; no patch is computed from it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import TEST_RULE_HELP, count_unit_runs, host_with

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
    assert ("pretrain_llama2_7b.yaml: error: the model width disagrees: the config pretrain_llama2_7b.yaml says "
            "hidden_size 4096, but the norm weights in rank_0/21_validate_0076.ir are 4100 wide; it is not combined "
            "with this run (no patch is computed from it)") in lines
    assert lines[-1] == "advisor fix: not fixing pretrain_llama2_7b.yaml: it does not belong to the run given (see above)"


def test_analyze_computes_nothing_from_it(run: Path, real_data: Path) -> None:
    session = Session([run / "profile", run / "graphs"],
                      SessionOptions(config=real_data / "mindformers-configs" / "pretrain_llama2_7b.yaml", jobs=1),
                      host=load_plugins(autoload=False))
    result = session.analyze()
    assert [m.what for m in session.mismatches] == ["the parallel layout", "the layer count", "the model width",
                                                    "the FFN width", "the vocabulary size"]
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


def _edited(run: Path, tmp_path: Path, name: str, **changes: str) -> Path:
    """The run's own config with ``key: old`` lines replaced (``changes``: old line -> new line)."""
    text = (run / "config" / "kitchen-sink.yaml").read_text(encoding="utf-8")
    for old, new in changes.items():
        assert old.replace("__", ": ") in text
        text = text.replace(old.replace("__", ": "), new)
    cfg = tmp_path / name
    cfg.write_text(text, encoding="utf-8")
    return cfg


_TAIL = "; it is not combined with this run (no patch is computed from it)"


@pytest.mark.parametrize("evidence", ["graphs", "profile"])
def test_other_model_dims_are_refused(run: Path, tmp_path: Path, evidence: str) -> None:
    """A 32-layer config with another FFN width and vocabulary against a 2-layer run: no patch, exit 2."""
    cfg = _edited(run, tmp_path, "other.yaml", **{"num_layers__2\n": "num_layers: 32\n",
                                                  "intermediate_size__11000": "intermediate_size: 13000",
                                                  "vocab_size__32002": "vocab_size: 64000"})
    proc = _advisor("fix", "--config", cfg.name, f"--{evidence}", str(run / evidence), "--diff", "--unsafe-fixes",
                    cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""  # no diff: nothing was computed from the config
    lines = [line for line in proc.stderr.splitlines() if "disagrees" in line or line.startswith("advisor fix")]
    said = "other.yaml: error: {} disagrees: the config other.yaml says {}, but {}" + _TAIL
    if evidence == "graphs":
        assert lines == [
            said.format("the layer count", "num_layers 32", "the IR dumps hold 2 decoder layers (rank 0: layer 0, "
                        "rank 5: layer 1; the output head follows layer 1 in rank_5/21_validate_0076.ir)"),
            said.format("the FFN width", "intermediate_size 13000", "the feed_forward.w2 weights in "
                        "rank_0/21_validate_0076.ir are 5500 wide per rank, with model parallel 2"),
            said.format("the vocabulary size", "vocab_size 64000", "the embedding/lm_head weights in "
                        "rank_5/21_validate_0076.ir have 16001 rows; the embedding/lm_head weights in "
                        "rank_0/21_validate_0076.ir have 32002 rows"),
            "advisor fix: not fixing other.yaml: it does not belong to the run given (see above)",
        ]
    else:  # the kernels' scopes and shapes
        assert lines == [
            said.format("the layer count", "num_layers 32", "the kernels hold 2 decoder layers (rank 0: layer 0, "
                        "rank 7: layer 1; the output head follows layer 1 in the kernels of rank 7)"),
            said.format("the FFN width", "intermediate_size 13000", "the feed_forward.w2 MatMul kernels of rank 0 "
                        "are 5500 wide per rank, with model parallel 2"),
            said.format("the vocabulary size", "vocab_size 64000", "the lm_head MatMul kernels of rank 7 output "
                        "16001 logits per token"),
            "advisor fix: not fixing other.yaml: it does not belong to the run given (see above)",
        ]


def _mismatches(paths: list[Path], cfg: Path) -> list[str]:
    session = Session(paths, SessionOptions(config=cfg, jobs=1), host=load_plugins(autoload=False))
    session.analyze(select=["MD001"])
    return [m.message(cfg.name) for m in session.mismatches]


def test_head_count_where_the_ir_shows_it(run: Path, tmp_path: Path) -> None:
    cfg = _edited(run, tmp_path, "heads.yaml", num_heads__32="num_heads: 48")
    assert _mismatches([run / "graphs"], cfg) == [
        "the attention head count disagrees: the config heads.yaml says num_heads 48, but FlashAttentionScore's "
        "head_num in rank_0/21_validate_0076.ir is 16 per rank, with model parallel 2" + _TAIL,
        "the attention width disagrees: the config heads.yaml says num_heads 48 × head_dim 128 = 6144, but the "
        "attention.wo weights in rank_0/21_validate_0076.ir are 2048 wide per rank, with model parallel 2" + _TAIL,
    ]
    # kernels show no head count, but the width the heads make
    assert _mismatches([run / "profile"], cfg) == [
        "the attention width disagrees: the config heads.yaml says num_heads 48 × head_dim 128 = 6144, but the "
        "attention.wo MatMul kernels of rank 0 are 2048 wide per rank, with model parallel 2" + _TAIL,
    ]


def test_layout_is_checked_against_the_ir_alone(run: Path, tmp_path: Path) -> None:
    """With --graphs only (no profiler_metadata.json), the pipeline stages and the slicing the IR shows."""
    pp1 = _edited(run, tmp_path, "pp1.yaml", data_parallel__2="data_parallel: 4", pipeline_stage__2="pipeline_stage: 1")
    proc = _advisor("fix", "--config", pp1.name, "--graphs", str(run / "graphs"), "--diff", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert ("pp1.yaml: error: the parallel layout disagrees: the config pp1.yaml says pipeline_stage 1, but the IR "
            "dumps hold at least 2 pipeline stages (rank 0: layer 0, rank 5: layer 1)" + _TAIL) in proc.stderr.splitlines()
    mp1 = _edited(run, tmp_path, "mp1.yaml", data_parallel__2="data_parallel: 4", model_parallel__2="model_parallel: 1")
    assert _mismatches([run / "graphs"], mp1) == [
        "the parallel layout disagrees: the config mp1.yaml says model_parallel 1, but the feed_forward.w2 weights in "
        "rank_0/21_validate_0076.ir are 5500 wide, 1/2 of intermediate_size 11000 (model parallel 2)" + _TAIL]
    few = _edited(run, tmp_path, "four.yaml", data_parallel__2="data_parallel: 1")
    assert _mismatches([run / "graphs"], few) == [
        "the device count disagrees: the config four.yaml says 4 devices (dp × mp × pp), but the IR dumps have a "
        "rank_7 folder" + _TAIL]


def test_a_pipelined_config_against_a_one_stage_ir(tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    simulate_scenario("clean", clean, layers=2, steps=1, ranks=2, ground_truth=False)  # dp1 × mp2 × pp1
    text = (clean / "config" / "clean.yaml").read_text(encoding="utf-8")
    cfg = tmp_path / "pp2.yaml"
    cfg.write_text(text.replace("pipeline_stage: 1", "pipeline_stage: 2"))  # 1 × 2 × 2: 4 devices, ranks 0-1 seen
    assert _mismatches([clean / "graphs"], cfg) == [
        "the parallel layout disagrees: the config pp2.yaml says pipeline_stage 2, but rank_0/21_validate_0076.ir "
        "holds every decoder layer (layers 0–1) and the output head in one graph, with no Send/Receive (one pipeline "
        "stage)" + _TAIL]


def test_lint_against_a_baseline_of_another_shape_checks_the_config_alone(run: Path, tmp_path: Path) -> None:
    """A pull request that changes the model is what lint reviews: the stale baseline is said and left out, not an error."""
    cfg = tmp_path / "grown.yaml"
    cfg.write_text((run / "config" / "kitchen-sink.yaml").read_text().replace("num_layers: 2", "num_layers: 4"))
    proc = _advisor("lint", cfg.name, "--graphs", str(run / "graphs"), "--fail-on", "never", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("grown.yaml: warning: the layer count disagrees: the config grown.yaml says num_layers 4, but the IR dumps "
            "hold 2 decoder layers") in proc.stderr
    assert "the baseline is left out and only the checks of the config alone run" in proc.stderr
    assert "error" not in proc.stderr
    assert "AL001" in proc.stdout  # hidden_size 4100 is still judged from the config


def test_lint_reads_the_baseline_once_for_every_config(run: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """A pre-commit run lints every changed config against the same last run: it is loaded once, and what is wrong
    with it said once; each config is still checked against it on its own."""
    import json

    from advisor_core.cli import main
    from advisor_core.engine import rankwork
    from advisor_core.ir import dumps as ir_dumps
    from advisor_core.model import run as model_run

    own = (run / "config" / "kitchen-sink.yaml").read_text()
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "a.yaml").write_text(own)
    (configs / "b.yaml").write_text(own)
    (configs / "grown.yaml").write_text(own.replace("num_layers: 2", "num_layers: 4"))
    profile = tmp_path / "profile"
    shutil.copytree(run / "profile", profile)
    (rank0,) = [d for d in sorted(profile.iterdir()) if d.is_dir()][:1]
    (damaged,) = rank0.rglob("step_trace_time.csv")
    damaged.write_bytes(b"\xff\xfe not a table\n")
    (kernels,) = rank0.rglob("kernel_details.csv")
    with open(kernels, "a") as fh:
        fh.write("1,2,3\n")  # said by the per-rank work, in a worker or here: once for every config
    loads = {"ir": 0, "run": 0}
    real_dumps, real_run = ir_dumps.find_ir_dumps, model_run.load_run

    def counted_dumps(*a, **kw):  # type: ignore[no-untyped-def]
        loads["ir"] += 1
        return real_dumps(*a, **kw)

    def counted_run(*a, **kw):  # type: ignore[no-untyped-def]
        loads["run"] += 1
        return real_run(*a, **kw)

    monkeypatch.setattr(ir_dumps, "find_ir_dumps", counted_dumps)
    monkeypatch.setattr(model_run, "load_run", counted_run)
    units = count_unit_runs(monkeypatch)
    # as for a baseline of real size: each config's per-rank work goes to worker processes, which read the ranks
    monkeypatch.setattr(rankwork, "AUTO_PARALLEL_MIN_BYTES", 1)
    out = tmp_path / "lint.json"
    code = main(["lint", str(configs), "--graphs", str(run / "graphs"), "--profile", str(profile), "--no-plugins",
                 "--fail-on", "never", "--format", "json", "-o", str(out)])
    assert code == 2  # the baseline's unreadable table is an input error, as for analyze
    assert loads == {"ir": 1, "run": 1}
    assert len(units) == 1  # a.yaml's; b.yaml's analysis found them on the run (grown.yaml's left the baseline out)
    err = capsys.readouterr().err
    assert err.count("step_trace_time.csv lacks required column(s) 'Computing', 'Free'") == 1, err  # said once
    assert err.count("kernel_details.csv: 1 row(s) with the wrong number of fields were skipped") == 1, err
    assert err.count("the baseline is left out") == 1 and "grown.yaml: warning: the layer count disagrees" in err
    report = json.loads(out.read_text())
    assert [d["code"] for d in report["diagnostics"] if "step_trace_time.csv" in d["message"]] == ["not-utf8",
                                                                                                 "missing-column"]
    assert [d["message"] for d in report["diagnostics"] if "kernel_details.csv" in d["message"]] == [
        "kernel_details.csv: 1 row(s) with the wrong number of fields were skipped (line 1140: expected 46 fields, "
        "got 3)"]
    assert report["inputs"]["configs"] == [str(configs / n) for n in ("a.yaml", "b.yaml", "grown.yaml")]
    per_config = {}
    for f in report["findings"]:
        for loc in f["locations"]:
            if loc["kind"] == "config":
                per_config.setdefault(Path(loc["path"]).name, set()).add(f["code"])
    # the same config against the same baseline; the grown one on its own (no profile evidence: no MD001)
    assert per_config["a.yaml"] == per_config["b.yaml"] == {"AL001", "CM001", "CT001", "MD001", "RC001"}
    assert "MD001" not in per_config["grown.yaml"]


def test_a_check_of_the_kernels_waits_for_the_units_and_says_the_same(run: Path, tmp_path: Path, monkeypatch) -> None:
    """With a profile and no IR dumps the config is held against the op views of the first and the last rank. They
    are built by the per-rank units (worker processes, a cluster) and the check runs after them, rather than two
    op views being built here one after the other before the units begin. The report is the same as when the check
    runs first: the same findings, and what the check says in the same place among the diagnostics (before a
    rank's own)."""
    from advisor_core.cli import main
    from advisor_core.engine import consistency, rankwork
    from advisor_core.opview import build as opview_build

    profile = tmp_path / "profile"
    shutil.copytree(run / "profile", profile)
    kernels = sorted(profile.rglob("kernel_details.csv"))[1]
    with kernels.open("a", encoding="utf-8") as f:
        f.write("a truncated row,\n")  # a diagnostic of rank 1's unit
    cfg = _edited(run, tmp_path, "other.yaml", intermediate_size__11000="intermediate_size: 13000")
    events: list[str] = []
    real_check, real_units, real_build = consistency.check_inputs, rankwork.run_rank_units, opview_build.build_op_view
    monkeypatch.setattr(consistency, "check_inputs", lambda *a: events.append("check") or real_check(*a))
    monkeypatch.setattr(rankwork, "run_rank_units", lambda *a, **k: (real_units(*a, **k), events.append("units"))[0])
    monkeypatch.setattr(opview_build, "build_op_view",
                        lambda rank: events.append(f"op view {rank.rank_id}") or real_build(rank))
    reports = {}
    for how in ("after the units", "first"):
        if how == "first":
            monkeypatch.setattr(consistency, "reads_kernels", lambda run, ir: False)
        out = tmp_path / f"{how}.json"
        events.clear()
        assert main(["analyze", "--profile", str(profile), "--config", str(cfg), "--no-plugins", "--jobs", "2",
                     "--format", "json", "-o", str(out), "--quiet"]) == 2
        reports[how] = out.read_bytes()
        if how == "first":
            assert events[:3] == ["check", "op view 0", "op view 7"]  # built here, before the units
        else:
            # every op view built by the units (in this lane or a worker's), none by the check
            assert events[events.index("units"):] == ["units", "check"]
    assert reports["after the units"] == reports["first"]
    said = [d["code"] for d in json.loads(reports["first"])["diagnostics"]]
    assert said == ["inputs-disagree", "malformed-rows"]  # the check's word, then rank 1's from its unit


def test_a_rule_left_without_evidence_by_the_late_check_is_skipped(run: Path, tmp_path: Path) -> None:
    """The units run before the config is held against the run: a rule that had only the config to go on, and so
    ran its per-rank units, is skipped once the config is left out, and what its units said is not reported."""
    from advisor_core.engine import Need, Requirements, Rule

    class ConfigOnly(Rule):
        __doc__ = TEST_RULE_HELP

        code = "RX009"
        name = "config-only"
        summary = "config only"
        requires = Requirements(any_of=(Need.config("model.hidden_size"),))

        def rank_evidence(self, rank):  # type: ignore[no-untyped-def]
            raise ValueError("boom")

        def check(self, ctx):  # type: ignore[no-untyped-def]
            return []

    def analysed(cfg: Path):  # type: ignore[no-untyped-def]
        session = Session([run / "profile"], SessionOptions(config=cfg, jobs=1), host=host_with(ConfigOnly))
        return session.analyze(select=["RX009"])

    agrees = analysed(run / "config" / "kitchen-sink.yaml")
    assert [e.message for e in agrees.errors] == [f"rule RX009 raised ValueError on rank {r}: boom" for r in range(8)]
    assert [r.status for r in agrees.runs] == ["ran"]
    other = analysed(_edited(run, tmp_path, "other.yaml", intermediate_size__11000="intermediate_size: 13000"))
    assert other.errors == []
    assert [(s.code, s.reason) for s in other.skipped] == [("RX009", "needs config key model.hidden_size; none was found")]
