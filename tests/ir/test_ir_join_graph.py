"""Joins to profiling names, and the networkx view of IR files."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir.graph import node_key, producers, to_networkx
from advisor_core.ir.join import JOIN_COLUMNS, join_kernels, read_execution_order
from advisor_core.ir.parser import parse_ir_file, parse_ir_text

from irtest_support import REAL, codes, parsed, real_ir_files

E2E = REAL / "e2e_dump_execution_order" / "dump_out" / "rank_0"
EXEC_ORDER = E2E / "execution_order" / "ms_execution_order_graph_0.csv"
LAUNCH_ORDER = ["Default/Cast-op4", "Default/Cast-op5", "Expand/_MatMulExt/MatMul-op0", "Default/Cast-op6",
                "Default/ReLU-op0", "Default/Cast-op7"]


def test_read_execution_order() -> None:
    sink = DiagnosticSink()
    assert read_execution_order(EXEC_ORDER, sink) == LAUNCH_ORDER
    assert list(sink) == []
    glob = E2E / "execution_order" / "ms_global_execution_order_graph_0.csv"
    assert read_execution_order(glob, sink) == []
    assert codes(sink) == [("error", "exec-order-header", 1)]
    assert read_execution_order(E2E / "missing.csv", sink) == []
    assert codes(sink)[-1] == ("error", "missing-file", None)


def test_execution_order_joins_exactly_to_the_same_runs_ir() -> None:
    ir, _ = parsed("e2e_dump_execution_order/dump_out/rank_0/graphs/ms_output_trace_code_graph_0.ir")
    df = join_kernels(ir, LAUNCH_ORDER)
    assert list(df.columns) == JOIN_COLUMNS
    assert df["match_kind"].tolist() == ["exact"] * 6
    assert df["index"].tolist() == [0, 1, 3, 4, 5, 6]
    assert df["op"].tolist() == ["Cast", "Cast", "MatMul", "Cast", "ReLU", "Cast"]
    assert df["scope"].tolist() == LAUNCH_ORDER
    assert set(df["graph"]) == {"kernel_graph0"}
    # Launch order follows the node order of the kernel graph.
    assert df["index"].is_monotonic_increasing


def test_execution_order_vs_save_graphs_run_does_not_join_casts() -> None:
    # Same net, other configuration (save_graphs): Cast-op0..3 instead of Cast-op4..7.
    ir, _ = parsed("cast_roundtrip/ir_level2_full/trace_code_graph_0128")
    df = join_kernels(ir, LAUNCH_ORDER)
    assert dict(zip(df["kernel_name"], df["match_kind"])) == {
        "Default/Cast-op4": "none", "Default/Cast-op5": "none", "Expand/_MatMulExt/MatMul-op0": "exact",
        "Default/Cast-op6": "none", "Default/ReLU-op0": "exact", "Default/Cast-op7": "none"}
    # Nor does the front end: MatMulExt is lowered to Expand/_MatMulExt/MatMul-op0 by the backend.
    front, _ = parsed("cast_roundtrip/ir_level2_full/21_validate_0076.ir")
    assert front.nodes_by_op("MatMulExt")[0].scope == "Default/MatMulExt-op0"
    assert join_kernels(front, ["Expand/_MatMulExt/MatMul-op0"])["match_kind"].tolist() == ["none"]


def _cpu_profiler_names() -> list[str]:
    path = next(REAL.glob("profiler/prof_out_no_schedule/*/FRAMEWORK/cpu_op_detail_info_0.csv"))
    with open(path, newline="", encoding="utf-8") as fh:
        return [row["full_op_name"] for row in csv.DictReader(fh)]


def test_cpu_profiler_names_join_only_by_coincidence() -> None:
    names = _cpu_profiler_names()
    assert len(names) == 14
    matched: dict[str, set[str]] = {}
    for path in real_ir_files():
        ir = parse_ir_file(path, DiagnosticSink())
        df = join_kernels(ir, names)
        hits = set(df.loc[df["match_kind"] != "none", "kernel_name"])
        if hits:
            matched[str(path.relative_to(REAL))] = hits
    # The profiler ran another script (nn.Dense(32, 1) in WithLossCell + MSELoss + SGD). Its own
    # backbone kernels (_backbone-Dense/...) are in no dump here; only the generic loss/optimizer
    # names that the recompute case shares (same WithLossCell/MSELoss/SGD cells) coincide.
    assert set(matched) == {
        "recompute/ir/01_type_inference_0001.ir", "recompute/ir/13_optimize_0068.ir",
        "recompute/ir/21_validate_0076.ir", "recompute/ir/graph_build_0_0128.ir", "recompute/ir/trace_code_graph_0129",
    }
    backbone = {n for n in names if "_backbone-Dense" in n}
    assert len(backbone) == 4 and all(not (hits & backbone) for hits in matched.values())
    kernel_graph_hits = matched["recompute/ir/graph_build_0_0128.ir"]
    assert kernel_graph_hits == set(names) - backbone
    assert matched["recompute/ir/trace_code_graph_0129"] == kernel_graph_hits
    assert "Expand/_PowTensorScalar/Pow-op0" not in matched["recompute/ir/21_validate_0076.ir"]


def test_prefix_matches_launch_op_and_with_stack_forms() -> None:
    text = "\n".join([
        "subgraph @kernel_graph0() {",
        "  %0(a) = MatMul(%para1_x, %para2_w)",
        "      # Fullname with scope: (Default/net-Net/MatMul-op1)",
        "  %1(b) = MatMul(%0, %para2_w)",
        "      # Fullname with scope: (Default/net-Net/MatMul-op10)",
        "  %2(c) = Cast(%1)",
        "      # Scope: (Default)",
        "  Return(%2)",
        "      # Fullname with scope: (Default/Return-op0)",
        "}",
    ])
    ir = parse_ir_text(text, "k.ir", DiagnosticSink())
    df = join_kernels(ir, [
        "Default/net-Net/MatMul-op1/aclnnMatmul_MatMulCommon_MatMulV2",  # launch op / device kernel
        "Default/net-Net/MatMul-op10",
        "Default/net-Net/MatMul-op1 model.py(12): forward",              # with_stack suffix
        "Default/net-Net/MatMul-op100",                                  # not a prefix match of op10/op1
        "trans_TransData_13",                                            # GE kernel
        "Default/Cast-op0",                                              # bare 'Default' scope matches nothing
        "Default/Return-op0",
    ])
    assert df[["match_kind"]].to_dict("list")["match_kind"] == ["prefix", "exact", "prefix", "none", "none", "none", "exact"]
    assert df["index"].tolist()[:3] == [0, 1, 0]
    assert df["index"].isna().tolist() == [False, False, False, True, True, True, True]  # Return has no index
    assert str(df["index"].dtype) == "Int64"


def test_networkx_data_edges_keep_operand_order() -> None:
    ir, _ = parsed("recompute/ir/21_validate_0076.ir")
    g = to_networkx(ir)
    key = "271_128_1_mindspore_nn_wrap_cell_wrapper_TrainOneStepCell_construct_749"
    assert g.number_of_nodes() == 94 + 35  # every cnode and every parameter is used
    grad = (key, 45)
    assert g.nodes[grad]["op"] == "GeLUGrad" and g.nodes[grad]["node"] is ir.node(key, 45)
    ins = sorted((d["operand_index"], u) for u, _, d in g.in_edges(grad, data=True))
    assert ins == [(0, (key, 39)), (1, (key, 43)), (2, (key, 44))]
    # %58 = SGD(%para10_..., %57, %para15_learning_rate, ...): parameters are ("param", token) nodes.
    sgd_ins = {d["operand_index"]: u for u, _, d in g.in_edges((key, 58), data=True)}
    assert sgd_ins[0] == ("param", "para10_block1.dense2.bias") and sgd_ins[2] == ("param", "para15_learning_rate")
    assert g.nodes[("param", "para15_learning_rate")]["param"].is_weight
    # Depend(%6, %6)-style repeated operands give parallel edges; Mul(%8, %8) has two.
    assert g.number_of_edges((key, 8), (key, 9)) == 2
    assert (key, "return") in g and g.nodes[(key, "return")]["op"] == "Return"
    assert node_key(ir.entry_graph.return_node) == (key, "return")
    only = to_networkx(ir, key)
    assert only.number_of_edges() == g.number_of_edges()


def test_networkx_call_crossref_and_funcunion_edges() -> None:
    ir, _ = parsed("doc_excerpts/doc_2_3_execute.ir")
    g = to_networkx(ir)
    main = "19_1___main___Net_construct_304"
    t, f = "20_4_✓__main___Net_construct_311", "21_14_✗__main___Net_construct_314"
    calls = sorted((u, v, d["operand_index"]) for u, v, d in g.edges(data=True) if d["kind"] == "call")
    assert calls == sorted([
        ((main, 3), ("graph", t), 0), ((main, 4), ("graph", f), 0),
        ((main, 6), ("graph", t), -1), ((main, 6), ("graph", f), -1),
    ])
    assert g.nodes[("graph", t)]["subgraph"] is ir.graphs[t]
    callee = [(u, v) for u, v, d in g.edges(data=True) if d["kind"] == "callee"]
    assert callee == [((main, 5), (main, 6))]

    ti, _ = parsed("recompute/ir/01_type_inference_0001.ir")
    tg = to_networkx(ti, "16_✓get_loss_34")
    cross = [(u, v, d["operand_index"]) for u, v, d in tg.edges(data=True) if d["kind"] == "crossref"]
    assert cross == [(("15_get_loss_33", 1), ("16_✓get_loss_34", 0), 0)]  # the last node named x in the parent
    assert (("16_✓get_loss_34", 1), ("graph", "17_↓get_loss_40")) in tg.edges()
    assert tg.nodes[("15_get_loss_33", 1)]["op"] == "Mul"


def test_missing_operand_targets_get_placeholders() -> None:
    ir, _ = parsed("doc_excerpts/doc_sapp_validate_2023.ir")
    g = to_networkx(ir)
    key = "1_train_step.1797"
    assert g.nodes[(key, 12)]["kind"] == "missing" and g.nodes[(key, 12)]["node"] is None
    assert producers(ir, ir.node(key, 14)) == [None, None]
    assert producers(ir, ir.node(key, 15)) == [ir.node(key, 14)]


def test_networkx_unknown_graph_name() -> None:
    ir = parse_ir_text("subgraph @g() {\n  Return(%para1_x)\n}\n", Path("x.ir"), DiagnosticSink())
    with pytest.raises(KeyError):
        to_networkx(ir, "nope")
    assert to_networkx(ir).number_of_nodes() == 1  # unknown parameter: no edge, no crash
