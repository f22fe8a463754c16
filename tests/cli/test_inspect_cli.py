"""``advisor inspect`` end to end: real samples, JSON schema, exit codes, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import jsonschema
import pytest

from advisor_core.cli import main

SCHEMA = json.loads(resources.files("advisor_core").joinpath("schemas/inspect.schema.json").read_text())


def run_json(capsys, *args):
    code = main(["inspect", "--format", "json", "--no-ir", *map(str, args)])
    out = capsys.readouterr()
    report = json.loads(out.out)
    jsonschema.validate(report, SCHEMA)
    return code, report, out.err


@pytest.mark.parametrize(
    "sample",
    [
        "msprof-analyze/ut__advisor__compute_advice__data",
        "msprof-analyze/ut__advisor__advisor_backend__compute_advice",
        "msprof-analyze/ut__advisor__advisor_backend__timeline_advice",
        "msprof-analyze/resource__advisor__cluster_analysis_output",
        "mindspore-2.10-cpu/profiler",
        "mindspore-2.10-cpu/minddata_profiler",
    ],
)
def test_every_real_sample_inspects_and_validates(capsys, real_data, sample):
    code, report, err = run_json(capsys, real_data / sample)
    assert code == 0
    assert "Traceback" not in err
    assert report["ranks"] or report["cluster"]


def test_kernel_sample_report_values(capsys, msprof):
    code, report, _ = run_json(capsys, msprof / "ut__advisor__compute_advice__data")
    (rank,) = report["ranks"]
    (kernels,) = [t for t in rank["tables"] if t["table"] == "kernels"]
    assert kernels["rows"] == 29 and kernels["status"] == "ok" and kernels["artifact"] == "kernel_details"
    assert rank["steps"] == {"count": 1, "ids": [19], "source": "kernels step_id"}
    span = rank["time_span"]
    # Independently: min(start) and max(start + duration) over the file, with Decimal.
    assert (span["start_ns"], span["end_ns"], span["source"]) == (1736413971411629128, 1736413974268749533, "kernels")
    assert {m["table"] for m in rank["missing"]} >= {"step_trace", "trace_events", "communication"}
    assert rank["rank_source"] == "assumed"
    assert [d["code"] for d in report["diagnostics"]] == ["rank-assumed"]


def test_trace_sample_breakdown(capsys, msprof):
    _, report, _ = run_json(capsys, msprof / "ut__advisor__advisor_backend__timeline_advice")
    (row,) = report["ranks"][0]["step_breakdown"]
    assert row["step"] == 1
    assert row["computing_us"] == 1788.251 and row["free_us"] == 9481.667
    assert row["total_us"] == pytest.approx(1788.2505 + 9481.667, abs=1e-3)
    assert row["preparing_us"] is not None


def test_cluster_sample(capsys, msprof):
    _, report, _ = run_json(capsys, msprof / "resource__advisor__cluster_analysis_output")
    assert report["ranks"] == []
    cl = report["cluster"]
    assert len(cl["step_trace"]) == 9 and cl["communication_ops"] == 4 and cl["communication_ranks"] == [0, 1]


def test_minddata_sample(capsys, ms_cpu):
    _, report, _ = run_json(capsys, ms_cpu / "minddata_profiler")
    rows = {t["table"]: t["rows"] for t in report["ranks"][0]["tables"]}
    assert rows == {"host_queue": 96, "minddata_cpu": 4, "minddata_pipeline": 4, "minddata_summary": 4}


def test_text_output_and_stderr(capsys, ms_cpu):
    code = main(["inspect", "--no-ir", str(ms_cpu / "profiler")])
    out = capsys.readouterr()
    assert code == 0
    assert "Rank 0" in out.out and "trace_events" in out.out and "host_ops" in out.out
    assert "warning: no rank id in the profile" in out.err
    assert "warning" not in out.out


def test_nothing_found_exits_2(capsys, tmp_path):
    code = main(["inspect", "--no-ir", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 2
    assert f"{tmp_path}: error: no profiler output or IR dumps found" in out.err


def test_missing_path_exits_2(capsys, tmp_path):
    code = main(["inspect", str(tmp_path / "nope")])
    assert code == 2
    assert "path does not exist" in capsys.readouterr().err


def test_broken_file_exits_2_but_reports_the_rest(capsys, tmp_path):
    d = tmp_path / "h_1_20260101000000000_ascend_ms"
    (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (d / "profiler_info_0.json").write_text("{}")
    (d / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").write_text("Name,Duration(us)\na,1\n")
    (d / "ASCEND_PROFILER_OUTPUT/trace_view.json").write_text("[{")
    code, report, err = run_json(capsys, d)
    assert code == 2
    tables = {t["table"]: t for t in report["ranks"][0]["tables"]}
    assert tables["kernels"]["rows"] == 1 and tables["kernels"]["status"] == "ok"
    assert tables["trace_events"]["status"] == "unusable"
    assert "trace_view.json is truncated" in err


def test_json_to_file(tmp_path, ms_cpu):
    out = tmp_path / "r.json"
    assert main(["inspect", "--format", "json", "--no-ir", "-o", str(out), str(ms_cpu / "profiler")]) == 0
    jsonschema.validate(json.loads(out.read_text()), SCHEMA)


def test_usage_error_exits_2(capsys):
    assert main(["inspect", "--format", "yaml", "x"]) == 2
    assert "Invalid value for '--format'" in capsys.readouterr().err


def test_module_entry_point_runs_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "advisor_core", "inspect", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "path does not exist" in proc.stderr


def test_ir_dump_directory(capsys, ms_cpu):
    """An IR dump directory alone is a valid input: stages, selected graphs, zero unparsed lines."""
    code = main(["inspect", "--format", "json", str(ms_cpu / "cast_roundtrip/ir_level2_full")])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    jsonschema.validate(report, SCHEMA)
    rank = report["ir_dumps"]["ranks"]["none"]
    assert rank["selected"]["final_frontend"] == "21_validate_0076.ir"
    assert rank["selected"]["backend_kernel_graph"] == "graph_build_0_0127.ir"
    assert rank["parsed"]["graph_build_0_0127.ir"]["cnodes"] == 11
    assert sum(p["unparsed_lines"] for p in rank["parsed"].values()) == 0
    assert rank["op_histogram"]["final_frontend"]["Cast"] == 4
    text_code = main(["inspect", str(ms_cpu / "cast_roundtrip/ir_level2_full")])
    text = capsys.readouterr().out
    assert text_code == 0 and "IR graph dumps" in text and "final_frontend: 21_validate_0076.ir" in text


def test_table_file_names_are_whole_at_80_columns(tmp_path) -> None:
    """A long folder path is shortened at its folders, never cut inside the file name; all-ok hides the status column."""
    import os

    from advisor_core.simulate import simulate_scenario

    out = tmp_path / "run"
    simulate_scenario("minddata-bottleneck", out, layers=2, steps=2, ground_truth=False)
    env = dict(os.environ, ADVISOR_WIDTH="80", ADVISOR_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run([sys.executable, "-m", "advisor_core", "inspect", str(out / "profile")], capture_output=True,
                          text=True, env=env, check=True)
    rows = {line.split("│")[0].strip(): line.split("│")[-1].strip() for line in proc.stdout.splitlines() if "│" in line}
    assert rows["device_queue"] == "PROF_000001_…/…/aicpu_mi_20250615150640000.csv"
    assert rows["minddata_cpu"] == "FRAMEWORK/minddata_cpu_utilization_0.json"
    assert any(line.split() == ["table", "┃", "rows", "┃", "file"] for line in proc.stdout.splitlines())  # no status
    assert "unless a folder is shown; every table read" in " ".join(proc.stdout.split())
