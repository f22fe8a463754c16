"""Every built-in rule degrades on partial evidence: a column missing, a table empty — a skip, never an error."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.loaders.kernels import KERNELS
from advisor_core.loaders.steps import STEP_COLUMNS  # noqa: F401 - the canonical names the step loader knows
from advisor_core.simulate import simulate_scenario

HOST = load_plugins(autoload=False)  # the built-in rules only
BUILTIN = [code for code, reg in HOST.rules().items() if reg.plugin.builtin]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """kitchen-sink, small, with one profiled rank per pipeline stage (rank 0 and rank 4) and every other input."""
    full = tmp_path_factory.mktemp("partial") / "full"
    simulate_scenario("kitchen-sink", full, layers=2, steps=2, ground_truth=False)
    out = full.parent / "base"
    out.mkdir()
    shutil.copytree(full / "graphs", out / "graphs")
    shutil.copytree(full / "config", out / "config")
    for d in sorted((full / "profile").iterdir()):
        info = next(d.glob("profiler_info_*.json"))
        if info.stem.rsplit("_", 1)[1] in ("0", "4"):
            shutil.copytree(d, out / "profile" / d.name)
    return out


def _copy(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest)
    return dest


def _csv_files(run: Path, name: str) -> list[Path]:
    return sorted((run / "profile").rglob(name))


def _rewrite_csv(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = edit(rows[0], rows[1:])
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(body)


def _drop(columns: set[str]):  # type: ignore[no-untyped-def]
    def edit(header, body):  # type: ignore[no-untyped-def]
        keep = [i for i, h in enumerate(header) if h not in columns]
        return [header[i] for i in keep], [[r[i] for i in keep] for r in body]
    return edit


def _analyze(run: Path) -> list[str]:
    result = Session([run], SessionOptions(jobs=1), host=HOST).analyze(select=BUILTIN)
    return [e.message for e in result.errors]


KERNEL_HEADERS = ["Step ID", "Stream ID", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                  "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                  "Output Formats"]
STEP_HEADERS = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
                "Bubble", "Preparing"]


@pytest.mark.parametrize("column", KERNEL_HEADERS)
def test_kernel_column_removed(base: Path, tmp_path: Path, column: str) -> None:
    run = _copy(base, tmp_path / "run")
    for p in _csv_files(run, "kernel_details.csv"):
        _rewrite_csv(p, _drop({column}))
    assert _analyze(run) == []


@pytest.mark.parametrize("column", STEP_HEADERS)
def test_step_trace_column_removed(base: Path, tmp_path: Path, column: str) -> None:
    run = _copy(base, tmp_path / "run")
    for p in _csv_files(run, "step_trace_time.csv"):
        _rewrite_csv(p, _drop({column}))
    assert _analyze(run) == []


@pytest.mark.parametrize("name", ["kernel_details.csv", "step_trace_time.csv", "op_statistic.csv",
                                  "minddata_pipeline_raw_*.csv", "operator_memory.csv", "memory_record.csv"])
def test_table_with_a_header_and_no_rows(base: Path, tmp_path: Path, name: str) -> None:
    run = _copy(base, tmp_path / "run")
    files = _csv_files(run, name)
    assert files
    for p in files:
        _rewrite_csv(p, lambda header, body: (header, []))
    assert _analyze(run) == []


@pytest.mark.parametrize("key", ["Communication Time Info", "Communication Bandwidth Info", "Elapse Time(ms)",
                                 "Wait Time(ms)", "Start Timestamp(us)", "Transit Time(ms)"])
def test_communication_key_removed(base: Path, tmp_path: Path, key: str) -> None:
    run = _copy(base, tmp_path / "run")
    files = sorted((run / "profile").rglob("communication.json"))
    assert files

    def strip(node):  # type: ignore[no-untyped-def]
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != key}
        return node

    for p in files:
        p.write_text(json.dumps(strip(json.loads(p.read_text()))))
    assert _analyze(run) == []


def test_empty_trace_and_communication(base: Path, tmp_path: Path) -> None:
    run = _copy(base, tmp_path / "run")
    for p in (run / "profile").rglob("trace_view.json"):
        p.write_text("[]")
    for p in (run / "profile").rglob("communication.json"):
        p.write_text("{}")
    assert _analyze(run) == []


# Header spellings a real file may use instead (torch_npu, older CANN).
VARIANTS = {"Step ID": "Step Id", "Name": "Op Name", "Type": "OP Type", "Accelerator Core": "Task Type",
            "Start Time(us)": "Task Start Time(us)", "Duration(us)": "Task Duration(us)", "Block Dim": "Block Num"}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dropped=st.sets(st.sampled_from(KERNEL_HEADERS), max_size=5),
       renamed=st.sets(st.sampled_from(sorted(VARIANTS)), max_size=4))
def test_kernel_columns_dropped_and_renamed(base: Path, tmp_path_factory, dropped: set[str], renamed: set[str]) -> None:
    run = _copy(base, tmp_path_factory.mktemp("h") / "run")

    def edit(header, body):  # type: ignore[no-untyped-def]
        header, body = _drop(dropped)(header, body)
        return [VARIANTS[h] if h in renamed else h for h in header], body

    for p in _csv_files(run, "kernel_details.csv"):
        _rewrite_csv(p, edit)
    assert _analyze(run) == []


def test_every_kernel_header_is_known_to_the_loader() -> None:
    known = {h for c in KERNELS.columns for h in c.headers}
    assert set(KERNEL_HEADERS) <= known and set(VARIANTS.values()) <= known | {"Block Num"}
