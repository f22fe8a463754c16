"""Cross-file consistency of the simulated profile: the files agree with each other as MindSpore's would."""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from decimal import Decimal

import pytest

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir import find_ir_dumps, join_kernels
from advisor_core.simulate import SCENARIOS

from .conftest import rank_dirs

NAMES = ["clean", "allreduce-rearrangement", "kitchen-sink", "minddata-bottleneck", "unaligned"]


def _kernels(rdir):
    with open(rdir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _trace(rdir):
    return json.loads((rdir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NAMES)
def test_op_statistic_totals_equal_kernel_details_exactly(scenario_runs, name):
    _, out = scenario_runs[name]
    for rdir in rank_dirs(out):
        totals: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for row in _kernels(rdir):
            key = (row["Type"], row["Accelerator Core"])
            totals[key] += Decimal(row["Duration(us)"])
            counts[key] += 1
        with open(rdir / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv", newline="", encoding="utf-8") as fh:
            stat = {(r["OP Type"], r["Core Type"]): r for r in csv.DictReader(fh)}
        assert set(stat) == set(totals)
        for key, row in stat.items():
            assert Decimal(row["Total Time(us)"]) == totals[key], key
            assert int(row["Count"]) == counts[key]


@pytest.mark.parametrize("name", NAMES)
def test_overlap_analysis_sums_equal_step_trace_time(scenario_runs, name):
    _, out = scenario_runs[name]
    for rdir in rank_dirs(out):
        events = _trace(rdir)
        pid = next(e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
                   and e["args"]["name"] == "Overlap Analysis")
        sums: dict[str, Decimal] = defaultdict(Decimal)
        for e in events:
            if e.get("ph") == "X" and e["pid"] == pid:
                sums[e["name"]] += Decimal(e["dur"])
        with open(rdir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="", encoding="utf-8") as fh:
            (row,) = list(csv.DictReader(fh))
        assert row["Step"] == "0" and row["Preparing"] == "0"
        for col in ("Computing", "Communication", "Communication(Not Overlapped)", "Free"):
            assert Decimal(row[col]) == sums.get(col, Decimal(0)), (rdir.name, col)
        assert Decimal(row["Overlapped"]) == Decimal(row["Communication"]) - Decimal(row["Communication(Not Overlapped)"])
        exclude = Decimal(row["Communication(Not Overlapped and Exclude Receive)"])
        assert exclude == Decimal(row["Communication(Not Overlapped)"]) - Decimal(row["Bubble"])
        # the four overlap sets tile the profiled window
        steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        window = Decimal(steps[-1]["ts"]) + Decimal(steps[-1]["dur"]) - Decimal(steps[0]["ts"])
        assert sums["Computing"] + sums["Communication(Not Overlapped)"] + sums["Free"] == window


@pytest.mark.parametrize("name", ["clean", "kitchen-sink", "allreduce-rearrangement"])
def test_communication_json_elapse_equals_hccl_kernel_durations(scenario_runs, name):
    _, out = scenario_runs[name]
    for rdir in rank_dirs(out):
        hccl = {}
        for row in _kernels(rdir):
            if row["Accelerator Core"] == "HCCL":
                hccl[row["Name"].rsplit("/", 1)[1]] = Decimal(row["Duration(us)"])
        comm = json.loads((rdir / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text(encoding="utf-8"))
        seen = 0
        for step, groups in comm.items():
            assert re.fullmatch(r"step\d+", step)
            for kind, ops in groups.items():
                for key, op in ops.items():
                    if key == "Total Op Info":
                        continue
                    name = key.split("@")[0]
                    info = op["Communication Time Info"]
                    assert Decimal(str(info["Elapse Time(ms)"])) * 1000 == hccl[name], key
                    assert info["Transit Time(ms)"] <= info["Elapse Time(ms)"]
                    assert kind == ("p2p" if ("send" in name or "receive" in name) else "collective")
                    seen += 1
        assert seen == len(hccl)


@pytest.mark.parametrize("name", NAMES)
def test_every_device_kernel_joins_to_a_kernel_graph_node(scenario_runs, name):
    _, out = scenario_runs[name]
    sink = DiagnosticSink()
    dumps = find_ir_dumps(out / "graphs", sink)
    for rdir in rank_dirs(out):
        rank = int(next(rdir.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        names = sorted({r["Name"] for r in _kernels(rdir)})
        rd = dumps.rank(rank)
        ir = rd.parse(rd.backend_kernel_graph())
        joined = join_kernels(ir, names)
        assert (joined["match_kind"] != "none").all(), joined[joined["match_kind"] == "none"]["kernel_name"].tolist()[:5]
        # the joined node has the operator the kernel implements
        for _, row in joined.iterrows():
            assert row["kernel_name"].startswith(row["scope"] + "/")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_trace_steps_equal_steps_requested(scenario_runs, name):
    result, out = scenario_runs[name]
    for rdir in rank_dirs(out):
        events = _trace(rdir)
        steps = sorted(int(e["name"].split("#")[1]) for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))
        if not SCENARIOS[name].profiler_steps:  # written as MindSpore does: no step marks at all
            assert steps == [] and "Step ID" not in _kernels(rdir)[0]
            continue
        assert steps == list(range(1, result.model.steps + 1))
        kernel_steps = {int(r["Step ID"]) for r in _kernels(rdir)}
        assert kernel_steps == set(steps)


def test_memory_record_peak_matches_ground_truth(clean_run):
    result, out = clean_run
    expected = json.loads((out / "expected.json").read_text())
    for rdir in rank_dirs(out):
        rank = int(next(rdir.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        with open(rdir / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv", newline="", encoding="utf-8") as fh:
            peak_mb = max(float(r["Total Allocated(MB)"]) for r in csv.DictReader(fh) if r["Component"] == "MindSpore")
        # MindSpore's unit quirk: bytes / 1024 / 1000
        assert peak_mb * 1024 * 1000 == pytest.approx(expected["peak_memory_bytes"]["per_rank"][str(rank)], rel=1e-9)
