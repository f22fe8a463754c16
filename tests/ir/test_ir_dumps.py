"""Dump discovery (stage classification, counter order, file picks) and the inspect summary."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir.dumps import classify_dump_name, find_ir_dumps
from advisor_core.ir.summary import summarize_dumps

from irtest_support import REAL, codes

LEVEL2 = REAL / "cast_roundtrip" / "ir_level2_full"


@pytest.mark.parametrize("name, subdir, kind, action, stage, counter, gid", [
    ("21_validate_0076.ir", "", "frontend", "validate", "21_validate", 76, None),
    ("18_execute_0161.ir", "", "frontend", "execute", "18_execute", 161, None),
    ("07_parallel-infer-symbol_0008.ir", "", "frontend", "parallel-infer-symbol", "07_parallel-infer-symbol", 8, None),
    ("opt_pass_19_add_recomputation_0033.ir", "", "opt_pass", "add_recomputation", "opt_pass_19_add_recomputation", 33, None),
    ("step_parallel_end_0070.ir", "", "parallel", "step_parallel_end", "step_parallel_end", 70, None),
    ("step_parallel_begin.ir", "", "parallel", "step_parallel_begin", "step_parallel_begin", None, None),
    ("graph_build_0_0127.ir", "", "graph_build", "graph_build", "graph_build_0", 127, 0),
    ("graph_before_reset_id_0_0126.ir", "", "graph_before_reset_id", "graph_before_reset_id", "graph_before_reset_id_0", 126, 0),
    ("trace_code_graph_0128", "", "trace_code", "trace_code_graph", "trace_code_graph", 128, None),
    ("ms_output_trace_code_graph_3.ir", "graphs", "trace_code", "trace_code_graph", "ms_output_trace_code_graph_3", None, 3),
    ("hwopt_d_end_graph_2_0301.ir", "", "ascend_end_graph", "hwopt_d_end_graph", "hwopt_d_end_graph_2", 301, 2),
    ("hwopt_d_end_graph_2.ir", "", "ascend_end_graph", "hwopt_d_end_graph", "hwopt_d_end_graph_2", None, 2),
    ("hwopt_common_after_graph_0_0103.ir", "", "backend_pass", "hwopt_common_after_graph_0", "hwopt_common_after_graph_0", 103, 0),
    ("hwopt_comm_after_kernel_select_kernel_graph0_0112.ir", "", "backend_pass",
     "hwopt_comm_after_kernel_select_kernel_graph0", "hwopt_comm_after_kernel_select_kernel_graph0", 112, 0),
    ("hwopt_before_mindrt_unify_mindir_graph_16_1___main___CastNet_construct_67_0078.ir", "", "backend_pass",
     "hwopt_before_mindrt_unify_mindir_graph_16_1___main___CastNet_construct_67",
     "hwopt_before_mindrt_unify_mindir_graph_16_1___main___CastNet_construct_67", 78, None),
    ("hwopt_pm_3_insert_cast_cpu_0116.ir", "verbose_ir_files", "subpass", "hwopt_pm_3_insert_cast_cpu",
     "hwopt_pm_3_insert_cast_cpu", 116, None),
    ("expand_MatMulExt_0111.ir", "verbose_ir_files", "subpass", "expand_MatMulExt", "expand_MatMulExt", 111, None),
    ("analyze_fail.ir", "om", "analyze_fail", "analyze_fail", "analyze_fail", None, None),
    ("after_recompute_root.ir", "", "other", "after_recompute_root", "after_recompute_root", None, None),
])
def test_classify_dump_name(name: str, subdir: str, kind: str, action: str, stage: str, counter, gid) -> None:  # type: ignore[no-untyped-def]
    rec = classify_dump_name(name, subdir)
    assert rec is not None
    assert (rec.kind, rec.name, rec.stage, rec.counter, rec.graph_id) == (kind, action, stage, counter, gid)


@pytest.mark.parametrize("name", ["ms_output_optimize.pb", "x.dot", "ms_execution_order_graph_0.csv", "trace_code_graph"])
def test_not_ir_names(name: str) -> None:
    assert classify_dump_name(name) is None


def test_level2_dump_directory() -> None:
    sink = DiagnosticSink()
    dumps = find_ir_dumps(LEVEL2, sink)
    rd = dumps.rank()
    assert rd is not None and rd.rank is None and list(dumps.ranks) == [None]
    assert len(rd.files) == 131 and len(rd.skipped) == 9
    assert Counter(f.kind for f in rd.files) == {
        "opt_pass": 55, "subpass": 33, "frontend": 25, "backend_pass": 15,
        "graph_before_reset_id": 1, "graph_build": 1, "trace_code": 1,
    }
    assert Counter(s.reason for s in rd.skipped) == {
        "actor_set/*.ir (actor DAG, a different format)": 5, ".pb (protobuf ModelProto)": 4}
    assert codes(sink) == [("info", "ir-skipped-files", None)]
    assert sink.items[0].message == ("skipped 9 file(s) that are not IR text: 4 .pb (protobuf ModelProto); "
                                     "5 actor_set/*.ir (actor DAG, a different format)")
    # Counter order, not name order: opt_pass_0 (0006) sits between 05_inline and 06_add_attr,
    # 13_optimize (0068) comes after every opt_pass, and sub-pass files interleave with hwopt files.
    names = [f.file_name for f in rd.files]
    assert names[:8] == ["00_bootstrap_0000.ir", "01_type_inference_0001.ir", "02_event_method_0002.ir",
                         "03_auto_monad_0003.ir", "04_graph_reusing_0004.ir", "05_inline_0005.ir",
                         "opt_pass_0_add_attr_with_inline_0006.ir", "06_add_attr_0007.ir"]
    assert names.index("13_optimize_0068.ir") == names.index("opt_pass_53_symbol_engine_optimizer_0067.ir") + 1
    assert names[-5:] == ["graph_before_reset_id_0_0126.ir", "graph_build_0_0127.ir", "trace_code_graph_0128",
                          "23_task_emit_0129.ir", "24_execute_0130.ir"]
    assert [f.counter for f in rd.files] == list(range(131))
    assert rd.final_frontend().file_name == "21_validate_0076.ir"
    assert rd.backend_kernel_graph().file_name == "graph_build_0_0127.ir"
    assert rd.backend_kernel_graph(graph_id=0).file_name == "graph_build_0_0127.ir"
    assert rd.backend_kernel_graph(graph_id=7) is not None  # trace_code_graph has no graph id: still a candidate
    assert rd.parallel_graph() is None
    assert rd.stage("opt_pass_19_add_recomputation").file_name == "opt_pass_19_add_recomputation_0033.ir"
    assert rd.stage("type_inference").file_name == "01_type_inference_0001.ir"
    assert rd.stage("hwopt_pm_3_insert_cast_cpu").subdir == "verbose_ir_files"
    assert rd.stage("no_such_pass") is None
    assert rd.execution_order_csv() is None


def test_parse_is_lazy_and_cached() -> None:
    rd = find_ir_dumps(LEVEL2, DiagnosticSink()).rank()
    assert rd._parsed == {}
    first = rd.parse(rd.final_frontend())
    assert rd.parse(rd.final_frontend()) is first
    assert list(rd._parsed) == [LEVEL2 / "21_validate_0076.ir"]
    assert first.cnode_count == 10


def test_data_dump_layout() -> None:
    root = REAL / "e2e_dump_execution_order" / "dump_out"
    sink = DiagnosticSink()
    dumps = find_ir_dumps(root, sink)
    assert list(dumps.ranks) == [0]
    rd = dumps.rank(0)
    assert [(f.file_name, f.subdir, f.graph_id) for f in rd.files] == [("ms_output_trace_code_graph_0.ir", "graphs", 0)]
    assert rd.backend_kernel_graph().file_name == "ms_output_trace_code_graph_0.ir"
    assert rd.execution_order_csv() == root / "rank_0" / "execution_order" / "ms_execution_order_graph_0.csv"
    assert [s.path.name for s in rd.skipped] == ["ms_output_trace_code_graph_0.pb"]
    # Pointing at rank_0/graphs directly finds the same, with the rank from the folder name.
    direct = find_ir_dumps(root / "rank_0" / "graphs", DiagnosticSink()).rank()
    assert direct.rank == 0 and direct.execution_order_csv() == rd.execution_order_csv()


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def test_synthetic_two_rank_layout(tmp_path: Path) -> None:
    for rank in (0, 1):
        d = tmp_path / f"rank_{rank}"
        _copy(LEVEL2 / "01_type_inference_0001.ir", d / "01_type_inference_0001.ir")
        _copy(LEVEL2 / "21_validate_0076.ir", d / "21_validate_0076.ir")
        _copy(LEVEL2 / "opt_pass_2_opt_a_0016.ir", d / "opt_pass_2_opt_a_0016.ir")
        _copy(LEVEL2 / "graph_build_0_0127.ir", d / "graph_build_0_0127.ir")
        _copy(LEVEL2 / "verbose_ir_files" / "hwopt_pm_3_insert_cast_cpu_0116.ir",
              d / "verbose_ir_files" / "hwopt_pm_3_insert_cast_cpu_0116.ir")
        _copy(LEVEL2 / "actor_set" / "final_actor_set_kernel_graph_0.ir", d / "actor_set" / "final_actor_set_kernel_graph_0.ir")
        (d / "24_execute_0130.dot").write_text("digraph {}\n")
        (d / "ms_output_optimize.pb").write_bytes(b"\x08\x01")
    # rank_1 also ran auto parallel and an Ascend backend (same content, Ascend-style names).
    r1 = tmp_path / "rank_1"
    _copy(LEVEL2 / "21_validate_0076.ir", r1 / "step_parallel_begin_0030.ir")
    _copy(LEVEL2 / "21_validate_0076.ir", r1 / "step_parallel_end_0031.ir")
    _copy(LEVEL2 / "graph_build_0_0127.ir", r1 / "hwopt_d_end_graph_0_0120.ir")
    _copy(REAL / "doc_excerpts" / "doc_analyze_fail.ir", r1 / "om" / "analyze_fail.ir")
    (tmp_path / "notes.txt").write_text("not a rank\n")

    sink = DiagnosticSink()
    dumps = find_ir_dumps(tmp_path, sink)
    assert list(dumps.ranks) == [0, 1]
    r0, r1d = dumps.rank(0), dumps.rank(1)
    assert dumps.rank() is None  # two ranks: ask for one
    assert [f.file_name for f in r0.files] == ["01_type_inference_0001.ir", "opt_pass_2_opt_a_0016.ir",
                                               "21_validate_0076.ir", "hwopt_pm_3_insert_cast_cpu_0116.ir",
                                               "graph_build_0_0127.ir"]
    assert all(f.rank == 0 for f in r0.files) and all(f.rank == 1 for f in r1d.files)
    assert r0.backend_kernel_graph().file_name == "graph_build_0_0127.ir"
    assert r1d.backend_kernel_graph().file_name == "hwopt_d_end_graph_0_0120.ir"  # Ascend end graph preferred
    assert r0.parallel_graph() is None and r1d.parallel_graph().file_name == "step_parallel_end_0031.ir"
    assert r1d.by_kind("analyze_fail")[0].subdir == "om"
    assert r1d.files[-1].file_name == "analyze_fail.ir"  # no counter: last
    assert sorted(s.reason for s in r0.skipped) == [
        ".dot (Graphviz)", ".pb (protobuf ModelProto)", "actor_set/*.ir (actor DAG, a different format)"]
    assert [c for c in codes(sink)] == [("info", "ir-skipped-files", None)] * 2
    assert len(dumps.files) == 5 + 9 and len(dumps.skipped) == 6

    summary = summarize_dumps(dumps)
    again = summarize_dumps(find_ir_dumps(tmp_path, DiagnosticSink()))
    assert json.dumps(summary, sort_keys=True) == json.dumps(again, sort_keys=True)
    assert list(summary["ranks"]) == ["0", "1"]
    s1 = summary["ranks"]["1"]
    assert s1["selected"] == {"final_frontend": "rank_1/21_validate_0076.ir",
                              "backend_kernel_graph": "rank_1/hwopt_d_end_graph_0_0120.ir",
                              "parallel_graph": "rank_1/step_parallel_end_0031.ir",
                              "execution_order_csv": None}
    assert list(s1["stages"]) == ["frontend", "opt_pass", "parallel", "subpass", "graph_build",
                                  "ascend_end_graph", "analyze_fail"]
    assert s1["parsed"]["rank_1/om/analyze_fail.ir"]["cnodes"] == 15
    assert summary["skipped_counts"] == {".dot (Graphviz)": 2, ".pb (protobuf ModelProto)": 2,
                                         "actor_set/*.ir (actor DAG, a different format)": 2}


def test_summary_of_level2_dump() -> None:
    dumps = find_ir_dumps(LEVEL2, DiagnosticSink())
    summary = summarize_dumps(dumps)
    json.dumps(summary)  # JSON-able
    rank = summary["ranks"]["none"]
    assert rank["selected"]["final_frontend"] == "21_validate_0076.ir"
    assert rank["selected"]["backend_kernel_graph"] == "graph_build_0_0127.ir"
    assert [e["file"] for e in rank["stages"]["graph_build"]] == ["graph_build_0_0127.ir"]
    assert rank["stages"]["frontend"][0] == {"file": "00_bootstrap_0000.ir", "stage": "00_bootstrap",
                                             "name": "bootstrap", "counter": 0, "graph_id": None}
    assert len(rank["parsed"]) == 131
    assert all(v["unparsed_lines"] == 0 for v in rank["parsed"].values())
    assert rank["parsed"]["graph_build_0_0127.ir"] == {"cnodes": 11, "nodes": 10, "subgraphs": 1, "declared_cnodes": 11,
                                                       "unparsed_lines": 0, "format_version": "2.3+"}
    assert rank["op_histogram"] == {
        "final_frontend": {"Cast": 4, "Depend": 1, "Load": 1, "MatMulExt": 1, "ReLU": 1, "Return": 1, "UpdateState": 1},
        "backend_kernel_graph": {"Cast": 4, "Depend": 1, "Load": 1, "MakeTuple": 1, "MatMul": 1, "ReLU": 1,
                                 "Return": 1, "UpdateState": 1},
    }
    assert len(rank["skipped"]) == 9 and rank["skipped"][0] == {
        "file": "actor_set/0_actor_set_pipeline_kernel_graph_0.ir", "reason": "actor_set/*.ir (actor DAG, a different format)"}
    quick = summarize_dumps(dumps, parse=False)
    assert quick["ranks"]["none"]["parsed"] == {} and quick["ranks"]["none"]["op_histogram"] == {}


def test_missing_and_empty_paths(tmp_path: Path) -> None:
    sink = DiagnosticSink()
    dumps = find_ir_dumps(tmp_path / "nope", sink)
    assert dumps.ranks == {} and codes(sink) == [("error", "missing-file", None)]
    sink = DiagnosticSink()
    (tmp_path / "kernel_details.csv").write_text("Name\n")  # e.g. a profiler folder: no IR here
    dumps = find_ir_dumps(tmp_path, sink)
    assert dumps.ranks == {} and dumps.files == [] and codes(sink) == [("info", "ir-no-dumps", None)]
    assert summarize_dumps(dumps) == {"root": tmp_path.as_posix(), "ranks": {}, "skipped_counts": {}}


def test_single_file_path() -> None:
    dumps = find_ir_dumps(LEVEL2 / "graph_build_0_0127.ir", DiagnosticSink())
    rd = dumps.rank()
    assert [f.file_name for f in rd.files] == ["graph_build_0_0127.ir"]
    assert rd.backend_kernel_graph().file_name == "graph_build_0_0127.ir"
