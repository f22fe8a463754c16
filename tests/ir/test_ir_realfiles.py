"""The parser on real MindSpore 2.10 dumps and the doc excerpts: coverage and exact facts.

Numbers below were read from the files themselves (node lines counted with grep
``^ +%N(`` / ``^ +[Rr]eturn(``, headers, the lines quoted in the spec).
"""

from __future__ import annotations

from collections import Counter

import pytest

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir.attrs import Bare, TensorValue, TypeName
from advisor_core.ir.graph import producers
from advisor_core.ir.parser import parse_ir_file
from advisor_core.ir.values import DeviceType, OperandRef, SourceLoc

from irtest_support import REAL, parsed, problems, real_ir_files

FILES = real_ir_files()


def test_real_data_inventory() -> None:
    # 140 files in ir_level2_full minus 5 actor_set/*.ir and 4 .pb = 131; + 1 format0, 1 dtype-id,
    # 9 recompute, 2 dynamic shape, 1 e2e, 6 doc excerpts.
    assert len(FILES) == 151
    assert sum(1 for p in FILES if "doc_excerpts" in p.parts) == 6


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(REAL)) for p in FILES])
def test_every_real_file_parses_completely(path) -> None:  # type: ignore[no-untyped-def]
    sink = DiagnosticSink()
    ir = parse_ir_file(path, sink)
    assert ir is not None
    assert ir.unparsed == []
    assert problems(sink) == []
    assert ir.graphs, "at least one subgraph"
    # The file's own header, where it has one, agrees with what was parsed.
    if ir.declared_cnode_count is not None:
        assert ir.cnode_count == ir.declared_cnode_count
    if ir.total_subgraphs_declared:
        assert len(ir.graphs) == ir.total_subgraphs_declared
    # Every node decodes without problems (operands, attribute blocks).
    for node in ir.iter_nodes():
        assert node.problems == [], (node, node.problems)


COUNTS = {
    # file: (cnodes incl. Return, numbered nodes, declared nodes, subgraphs, params, format)
    "cast_roundtrip/ir_level2_full/01_type_inference_0001.ir": (41, 26, 111, 15, 2, "2.3+"),
    "cast_roundtrip/ir_level2_full/opt_pass_2_opt_a_0016.ir": (10, 9, 27, 1, 2, "2.3+"),
    "cast_roundtrip/ir_level2_full/21_validate_0076.ir": (10, 9, 23, 1, 2, "2.3+"),
    "cast_roundtrip/ir_level2_full/graph_build_0_0127.ir": (11, 10, 27, 1, 2, "2.3+"),
    "cast_roundtrip/ir_level2_full/trace_code_graph_0128": (11, 10, 27, 1, 2, "2.3+"),
    "cast_roundtrip/ir_level2_full/verbose_ir_files/expand_MatMulExt_0111.ir": (2, 1, 8, 1, 2, "2.3+"),
    "cast_roundtrip/ir_dump_format0/24_execute_0297.ir": (10, 9, 23, 1, 2, "2.3+"),
    "cast_roundtrip/ir_dtype_ids/21_validate_0276.ir": (11, 10, 24, 1, 1, "2.3+"),
    "recompute/ir/01_type_inference_0001.ir": (414, 287, 1234, 127, 35, "2.3+"),
    "recompute/ir/21_validate_0076.ir": (94, 93, 175, 1, 35, "2.3+"),
    "recompute/ir/graph_build_0_0128.ir": (94, 93, 233, 1, 35, "2.3+"),
    "dynamic_shape/ir/21_validate_0276.ir": (12, 11, 30, 1, 4, "2.3+"),
    "dynamic_shape/ir/graph_build_0_0294.ir": (12, 11, 34, 1, 4, "2.3+"),
    "e2e_dump_execution_order/dump_out/rank_0/graphs/ms_output_trace_code_graph_0.ir": (11, 10, 27, 1, 2, "2.3+"),
    "doc_excerpts/doc_1x_2021_read_ir.ir": (5, 4, None, 1, 2, "1.x"),
    "doc_excerpts/doc_2_3_execute.ir": (12, 9, 29, 3, 2, "2.3+"),
    "doc_excerpts/doc_analyze_fail.ir": (15, 13, None, 2, 2, "2.3+"),
    "doc_excerpts/doc_analyze_fail2.ir": (24, 21, None, 3, 3, "2.3+"),
    "doc_excerpts/doc_recompute_tutorial_validate.ir": (5, 5, None, 1, 0, "2.3+"),
    "doc_excerpts/doc_sapp_validate_2023.ir": (8, 7, None, 1, 0, "2.0-2.2"),
}


@pytest.mark.parametrize("rel", sorted(COUNTS))
def test_counts_per_file(rel: str) -> None:
    ir, _ = parsed(rel)
    cnodes, nodes, declared_nodes, subgraphs, params, version = COUNTS[rel]
    assert ir.cnode_count == cnodes
    assert ir.node_count == nodes
    assert sum(1 for _ in ir.iter_nodes()) == cnodes
    assert ir.declared_node_count == declared_nodes
    assert len(ir.graphs) == subgraphs
    assert len(ir.params) == params
    assert ir.format_version == version


# -- cast round trip (spec §4.2) ----------------------------------------------------------------

def _cast_dtypes(node) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    return node.in_types[0].dtype, node.out_types[0].dtype


def test_cast_counts_before_and_after_opt_a() -> None:
    before, _ = parsed("cast_roundtrip/ir_level2_full/01_type_inference_0001.ir")
    after, _ = parsed("cast_roundtrip/ir_level2_full/opt_pass_2_opt_a_0016.ir")
    casts_before = before.nodes_by_op("Cast")
    casts_after = after.nodes_by_op("Cast")
    assert len(casts_before) == 7
    assert len(casts_after) == 4
    assert all(n.raw_op == "PrimFunc_Cast" for n in casts_before + casts_after)
    assert Counter(_cast_dtypes(n) for n in casts_before) == {
        ("Float16", "Float32"): 3, ("Float32", "Float16"): 3, ("Float32", "Float32"): 1,
    }
    # The no-op fp32 -> fp32 cast is gone, and so is the lossless fp16 -> fp32 -> fp16 pair.
    assert Counter(_cast_dtypes(n) for n in casts_after) == {("Float32", "Float16"): 2, ("Float16", "Float32"): 2}
    # dst_type written as an I64 dtype id operand: 42 = Float16, 43 = Float32.
    assert sorted(n.operand_value(1) for n in casts_before) == [42, 42, 42, 43, 43, 43, 43]


def test_lossy_round_trip_survives_opt_a() -> None:
    ir, _ = parsed("cast_roundtrip/ir_level2_full/opt_pass_2_opt_a_0016.ir")
    graph = ir.entry_graph
    assert graph is not None and graph.key == "16_1___main___CastNet_construct_67"
    first, second = graph.node(0), graph.node(1)
    assert first.op == second.op == "Cast"
    assert first.operands == ["%para1_x", "I64(42)"] and second.operands == ["%0", "I64(43)"]
    assert _cast_dtypes(first) == ("Float32", "Float16") and _cast_dtypes(second) == ("Float16", "Float32")
    assert producers(ir, second)[0] is first
    assert producers(ir, first)[0] is ir.param("para1_x")
    # The only Cast fed by a Cast is that lossy A->B->A pair (B of lower precision).
    chained = [(p.index, n.index) for n in ir.nodes_by_op("Cast") for p in producers(ir, n)[:1]
               if p is not None and getattr(p, "op", None) == "Cast"]
    assert chained == [(0, 1)]
    # Early passes print the bare scope line of 2.1-2.2 style.
    assert first.scope == "Default" and first.kernel_full_name is None


def test_type_inference_has_the_lossless_pair_across_calls() -> None:
    ir, _ = parsed("cast_roundtrip/ir_level2_full/01_type_inference_0001.ir")
    net = ir.graphs["2___main___CastNet_construct_42"]
    ops = [(n.index, n.op) for n in net.nodes if n.op in ("Cast", "call")]
    assert ops == [(0, "Cast"), (1, "Cast"), (2, "call"), (3, "Cast"), (4, "call"), (5, "Cast"), (6, "Cast"),
                   (7, "call"), (8, "call")]
    # ReLU output fp16 -> %5 fp32 -> %6 fp32 (no-op) -> astype(fp16): lossless, removed by opt_a.
    assert [net.node(i).callee for i in (7, 8)] == ["7_astype_22", "3_astype_13"]
    assert [net.node(i).operands[1] for i in (7, 8)] == ["F16", "F32"]
    assert _cast_dtypes(net.node(5)) == ("Float16", "Float32")
    assert _cast_dtypes(net.node(6)) == ("Float32", "Float32")  # the no-op cast
    assert [n.sources[-1].code.strip() for n in (net.node(5), net.node(6))] == [
        "h = self.cast(h, ms.float32)          # fp16 -> fp32",
        "h = self.cast(h, ms.float32)          # fp32 -> fp32 (no-op cast)",
    ]


def test_backend_graph_build_types_and_attrs() -> None:
    ir, _ = parsed("cast_roundtrip/ir_level2_full/graph_build_0_0127.ir")
    assert ir.entry == "kernel_graph0" and ir.attrs == {"enable_zero_copy_in_graph": "1"}
    g = ir.graphs["kernel_graph0"]
    assert g.instance == "kernel_graph0" and g.attrs == {"enable_zero_copy_in_graph": "1"}
    cast0 = g.node(0)
    assert cast0.line == 21
    assert cast0.device_in == [DeviceType("Float32", "DefaultFormat", (8, 32), "Float32xDefaultFormat[const vector]{8, 32}")]
    assert cast0.device_out == [DeviceType("Float16", "DefaultFormat", (8, 32), "Float16xDefaultFormat[const vector]{8, 32}")]
    assert cast0.kernel_object_types == "(Tensor) -> (Tensor)"
    assert cast0.primitive_attrs["is_backend_cast"] is False
    assert cast0.primitive_attrs["dst_type"] == TypeName("F16") and isinstance(cast0.primitive_attrs["dst_type"], TypeName)
    assert cast0.primitive_attrs["output_names"] == (Bare("output"),)
    assert cast0.primitive_attrs["IsFeatureMapInputList"] == (0,)
    assert cast0.is_backend_cast is False
    assert cast0.comments == ["# Corresponding code candidate:"]
    assert [s.line for s in cast0.sources] == [19, 20]
    assert cast0.sources[0] == SourceLoc("/home/ma-user/work/case_cast.py", 19, 28, 4, 16, "    def construct(self, x):", False)
    assert g.node(1).primitive_attrs["dst_type"] == "F32"
    matmul = g.node(3)
    assert (matmul.raw_op, matmul.op, matmul.scope) == ("PrimFunc_MatMul", "MatMul", "Expand/_MatMulExt/MatMul-op0")
    assert [d.dtype for d in matmul.device_in] == ["Float32", "Float32", "Bool", "Bool"]
    assert matmul.device_in[2].shape == ()
    assert matmul.kernel_object_types == "(Tensor, Tensor, Scalar, Scalar) -> (Tensor)"
    assert matmul.layer_scope == "Expand/_MatMulExt" and matmul.kernel_op_name == "MatMul-op0"
    assert g.node(9).device_in is None and g.node(9).kernel_object_types == "(Tensor) -> (TupleUnfold)"
    assert g.node(9).out_types[0].kind == "tuple"
    assert [e.shape for e in g.node(9).out_types[0].elements] == [(8, 32)]
    assert g.return_node is not None and g.return_node.in_types[0].kind == "tuple"
    assert g.order == ["#   1: @kernel_graph0:CNode_74{[0]: ValueNode<Primitive> Return, [1]: CNode_73}"]
    w, x = ir.params
    assert (w.name, w.is_weight, w.has_default, w.device.dtype, w.type.ref_key) == ("w", True, True, "Unknown", "w")
    assert (x.name, x.is_weight, x.symbolic_shape, x.device.shape) == ("x", False, "[8, 32]", (8, 32))


def test_format0_has_no_types_except_return() -> None:
    ir, _ = parsed("cast_roundtrip/ir_dump_format0/24_execute_0297.ir")
    g = ir.entry_graph
    assert all(n.in_types == [] and n.scope is None for n in g.nodes if n.index is not None)
    assert [t.shape for t in g.return_node.in_types] == [(8, 32)]
    assert g.node(2).operand_refs[1] == OperandRef("value", "UMonad[U]")
    assert g.source is not None and g.source.code == "    def construct(self, x):"


# -- recompute (spec §7.2) -----------------------------------------------------------------------

def test_recompute_configured_vs_recomputed() -> None:
    ir, _ = parsed("recompute/ir/21_validate_0076.ir")
    configured = {n.index: n for n in ir.iter_nodes() if n.is_recompute_configured and not n.is_duplicated}
    duplicates = {n.index: n for n in ir.iter_nodes() if n.is_duplicated}
    assert sorted(configured) == [1, 3, 4, 6, 9]
    assert sorted(duplicates) == [42, 43, 44]
    assert [(i, n.op) for i, n in sorted(configured.items())] == [
        (1, "MatMul"), (3, "BiasAdd"), (4, "GeLU"), (6, "MatMul"), (9, "Mul")]
    dup_keys = {n.recompute_key: n.index for n in duplicates.values()}
    assert dup_keys == {(0, 1): 42, (0, 2): 43, (0, 3): 44}
    recomputed = sorted(i for i, n in configured.items() if n.recompute_key in dup_keys)
    configured_only = sorted(i for i, n in configured.items() if n.recompute_key not in dup_keys)
    assert recomputed == [1, 3, 4]        # dense1 MatMul, BiasAdd, GeLU
    assert configured_only == [6, 9]      # dense2 MatMul (no recompute_id), the Mul primitive
    assert configured[6].recompute_key is None and "dense2-Dense" in configured[6].scope
    mul = configured[9]
    assert mul.primitive_attrs == {"recompute": True} and mul.cnode_attrs == {"recompute": True}
    g = ir.entry_graph
    # recompute: Bool(0): the cell output BiasAdd (cnode attr) and Sigmoid (.recompute(False)).
    assert g.node(8).op == "BiasAdd" and g.node(8).cnode_attrs["recompute"] is False
    assert g.node(10).op == "Sigmoid" and g.node(10).primitive_attrs["recompute"] is False
    assert not g.node(8).is_recompute_configured and not g.node(10).is_recompute_configured
    # The duplicates are copies of the originals' ops, placed among the backward nodes.
    assert [duplicates[i].op for i in (42, 43, 44)] == ["MatMul", "BiasAdd", "GeLU"]
    assert duplicates[44].scope == "recompute_Default/network-WithLossCell/_backbone-Net/block0-Block/GeLU-op1"


def test_gelu_grad_pairs_with_forward_gelu() -> None:
    ir, _ = parsed("recompute/ir/21_validate_0076.ir")
    g = ir.entry_graph
    gelu, grad = g.node(4), g.node(45)
    assert (gelu.op, grad.op) == ("GeLU", "GeLUGrad")
    assert gelu.unique_id == "10476" == grad.forward_unique_id
    assert grad.cnode_primal_attrs["forward_node_name"] == "GeLU_10476"
    assert grad.cnode_attrs == {"recompute_sub_graph": 0, "target_grad": True, "checkpoint": True}
    # It consumes the recomputed copies, not the originals.
    assert [getattr(p, "index", None) for p in producers(ir, grad)] == [39, 43, 44]
    # Its scope names the other block (reused cell class; spec §2.9): use forward_unique_id.
    assert "block1-Block/Grad_GeLU" in grad.scope
    assert len(gelu.sources) == 12 and gelu.line == 139


def test_multiline_constant_is_one_node() -> None:
    ir, _ = parsed("recompute/ir/21_validate_0076.ir")
    g = ir.entry_graph
    node = g.node(27)
    assert (node.line, node.end_line) == (500, 504)
    assert node.op == "RealDiv" and len(node.operands) == 2
    const = node.operand_value(0)
    assert isinstance(const, TensorValue)
    assert const.shape == (4, 1) and const.dtype == "Float32"
    assert const.value.splitlines() == ["[[ 1.00000000e+00]", " [ 1.00000000e+00]", " [ 1.00000000e+00]", " [ 1.00000000e+00]]"]
    assert node.operand_value(1) == TensorValue((), "Float32", "4", "")
    assert node.in_types[0].is_constant and node.in_types[0].shape == (4, 1)
    assert node.cnode_primal_attrs == {"forward_node_name": "ReduceMean_9981", "forward_unique_id": "9981"}
    assert node.comments == ["# Corresponding forward node candidate:"]
    assert g.node(28).line == 521  # next node, after the constant's type, scope and comment lines


def test_recompute_type_inference_unicode_and_crossrefs() -> None:
    ir, _ = parsed("recompute/ir/01_type_inference_0001.ir")
    g = ir.graphs["19_2↓get_loss_36"]
    assert g.parent == "16_✓get_loss_34"
    assert ir.graphs["16_✓get_loss_34"].parent == "15_get_loss_33"
    ref = g.node(0).operand_refs[0]
    assert ref == OperandRef("crossref", "$(@16_✓get_loss_34:x)", "16_✓get_loss_34", None, "x")
    assert ir.resolve(g.node(0), ref) is ir.graphs["16_✓get_loss_34"].node(0)
    call = ir.graphs["15_get_loss_33"].node(2)
    assert (call.raw_op, call.op, call.callee) == ("call @16_✓get_loss_34", "call", "16_✓get_loss_34")
    # A parameter name in Cyrillic.
    fx = ir.graphs["29_4↓mindspore_nn_layer_basic_Dense_construct_56"]
    assert fx.params == ["%para42_фx"] and fx.param_decls[0].name == "фx"
    assert ir.resolve(fx.return_node, fx.return_node.operand_refs[0]) is fx.param_decls[0]
    assert ir.graphs["15_get_loss_33"].param_decls[0].type.shape == (4, 1)


# -- dynamic shape -----------------------------------------------------------------------------

def test_dynamic_shape_front_end() -> None:
    ir, _ = parsed("dynamic_shape/ir/21_validate_0276.ir")
    x, y, w, b = ir.params
    assert (x.type.shape, x.symbolic_shape, x.type.is_dynamic) == ((-1, 30), "[s1<[1,inf]>, 30]", True)
    assert (y.type.shape, y.symbolic_shape, y.type.rank) == ((-2,), "[DynLen-s2]", None)
    assert (w.type.shape, w.is_weight, w.type.ref_key) == ((17, 30), True, "fc.weight")
    g = ir.entry_graph
    assert g.symbol_engine == "SymbolEngine_21_1___main___N_construct_11"
    matmul = g.node(1)
    assert [t.shape for t in matmul.in_types] == [(-1, 30), (17, 30), None, None]
    assert [t.kind for t in matmul.in_types] == ["tensor", "tensor", "scalar", "scalar"]
    assert matmul.out_types[0].shape == (-1, 17)
    assert matmul.symbolic == "(S:[s1<[1,inf]>, 30], S:[17, 30], V:false, V:true) -> (S:[s1<[1,inf]>, 17])"
    assert g.node(0).symbolic == "(<null>, <null>) -> (S:[17, 30])"
    assert g.return_node.symbolic == "(S:[[], [DynLen-s3]])"
    tup = g.node(5).out_types[0]
    assert tup.kind == "tuple" and [e.shape for e in tup.elements] == [(-2,), (-2,)]
    assert ir.symbol_engine == [
        "symbol engine details:",
        "SymbolEngine_21_1___main___N_construct_11 {",
        "  [DynLen-s3] = Concat([[DynLen-s2], [DynLen-s2]], 0)",
        "}",
    ]


def test_dynamic_shape_backend_devices() -> None:
    ir, _ = parsed("dynamic_shape/ir/graph_build_0_0294.ir")
    params = {p.name: p for p in ir.params}
    assert params["y"].device == DeviceType("Float32", "DefaultFormat", (-2,), "Float32xDefaultFormat[const vector]{-2}")
    assert params["x"].device.shape == (-1, 30)
    g = ir.entry_graph
    assert g.node(1).device_out[0].shape == (-1, 17)
    assert g.return_node.primitive_attrs == {"output_is_dynamic_shape": True, "input_is_dynamic_shape": True}
    assert g.node(5).primitive_attrs["dyn_input_sizes"] == (2, -1)


# -- doc excerpts ------------------------------------------------------------------------------

def test_1x_excerpt() -> None:
    ir, _ = parsed("doc_excerpts/doc_1x_2021_read_ir.ir")
    assert ir.format_version == "1.x"
    assert ir.entry == "6_5_1_construct_wrapper.15" and ir.total_subgraphs_declared == 1
    assert ir.attrs == {"check_set_strategy_valid_once_only": "1"}
    assert ir.params[0].type.raw == "Tensor[Float32]x[const vector][]"
    assert (ir.params[0].type.kind, ir.params[0].type.dtype, ir.params[0].type.shape) == ("tensor", "Float32", ())
    g = ir.entry_graph
    add = g.node(0)
    assert (add.op, add.debug_name) == ("Add", "[CNode]8")
    assert add.sources[-1] == SourceLoc("demo.py", 14, None, None, None, "        x = x + y", False)
    assert add.primitive_attrs == {"output_names": [Bare("output")], "input_names": [Bare("x"), Bare("y")]}
    conv = g.node(24)
    assert conv.scope == "Default/network-TrainOneStepWithLossScaleCell/network-WithLossCell/_backbone-LeNet5/conv1-Conv2d/Conv2D-op89"
    assert conv.in_types[0].shape == (32, 1, 32, 32)
    assert [(d.format, d.shape) for d in conv.device_in] == [("NC1HWC0", (32, 1, 32, 32, 16)), ("FracZ", (25, 1, 16, 16))]
    attrs = conv.primitive_attrs
    assert (attrs["visited"], attrs["pad_mode"], attrs["kernel_size"], attrs["out_channel"]) == (True, "valid", (5, 5), 6)
    assert isinstance(attrs["pad_mode"], Bare)
    conv3 = g.node(20)  # 7-space type lines and the dump.md 'full_name_with_scope' form
    assert conv3.scope == "Default/network-WithLossCell/_backbone-AlexNet/conv3-Conv2d/Conv2D-op12"
    assert conv3.in_types[1].shape == (384, 256, 3, 3)
    assert conv3.device_out == [DeviceType("Float32", "NC1HWC0", (32, 24, 13, 13, 16), "Float32xNC1HWC0[const vector][32, 24, 13, 13, 16]")]
    assert conv3.primitive_attrs["precision_flag"] == "reduce"
    assert (g.return_node.raw_op, g.return_node.op) == ("return", "Return")


def test_sapp_2023_excerpt() -> None:
    ir, _ = parsed("doc_excerpts/doc_sapp_validate_2023.ir")
    assert ir.format_version == "2.0-2.2" and ir.entry is None
    g = ir.graphs["1_train_step.1797"]
    matmul = g.node(14)
    assert matmul.strategy == {"in_strategy": ((4, 2), (1, 2))}
    assert matmul.cnode_attrs == {"related_comm_node_id": "37501"}
    assert matmul.cnode_primal_attrs["related_fusion_key"] == "all_reduce_4-5226697808808137312_1"
    assert matmul.scope == "Default" and matmul.sources[0].line == 625 and matmul.sources[0].col is None
    typed = g.node(15)
    assert typed.instance_name == "forward_op_15773666391001111732"
    assert typed.primitive_attrs["group"] == "2-5004544844489628105" and not isinstance(typed.primitive_attrs["group"], Bare)
    assert (typed.primitive_attrs["fusion"], typed.primitive_attrs["op"], typed.primitive_attrs["rank_list"]) == (0, "sum", (0, 1))
    bare = g.node(8)  # <= 2.2 bare values
    assert bare.instance_name == "forward_op_4025687080669949636"
    assert bare.primitive_attrs == {"group": Bare("4-6301172352641561019"), "fusion": 0, "op": Bare("sum"),
                                    "group_ranks": Bare("0-1-2-3"), "index": 0}
    slice_ = g.node(9)
    assert slice_.instance_name == "redistribution_op_145462406996255498StridedSlice"
    assert slice_.primitive_attrs["keep_value_node_input"] is True
    assert slice_.primitive_attrs["input_names"] == ["x", "begin", "end", "strides"]
    assert slice_.operands == ["%8", "(0, 0)", "(32, 16)", "(1, 1)"] and slice_.operand_value(2) == (32, 16)
    assert [(t.kind, len(t.elements)) for t in slice_.in_types[1:]] == [("tuple", 2)] * 3
    assert g.node(16).in_types[0].ref_key == "layer1.bias"
    load = g.node(3)
    assert load.operand_refs[0] == OperandRef("crossref", "$(@1_train_step.1797:para3_layer1.weight)",
                                              "1_train_step.1797", None, "para3_layer1.weight")
    old_ref = g.node(10).in_types[0]
    assert (old_ref.kind, old_ref.dtype, old_ref.shape, old_ref.is_ref) == ("tensor", "Float32", (16,), True)
    assert g.return_node.in_types == []


def test_recompute_tutorial_excerpt() -> None:
    ir, diags = parsed("doc_excerpts/doc_recompute_tutorial_validate.ir")
    assert problems(diags) == []
    g = ir.graphs["1_construct"]
    # The excerpt repeats %38 (two different graphs quoted in one block): both are kept.
    assert [n.index for n in g.nodes] == [38, 41, 416, 429, 38]
    assert g.node(38) is g.nodes[0]
    no_space = g.nodes[4]  # '{instance name: real_div2}cnode_attrs: {...}'
    assert no_space.instance_name == "real_div2" and no_space.cnode_attrs == {"checkpoint": True}
    assert g.nodes[0].recompute_key == g.node(416).recompute_key == (0, 5)
    assert g.nodes[0].is_recompute_configured and g.node(416).is_duplicated
    assert g.node(429).forward_unique_id == g.node(41).unique_id == "12169"


def test_2_3_execute_excerpt() -> None:
    ir, _ = parsed("doc_excerpts/doc_2_3_execute.ir")
    assert list(ir.graphs) == ["19_1___main___Net_construct_304", "20_4_✓__main___Net_construct_311",
                               "21_14_✗__main___Net_construct_314"]
    main = ir.graphs["19_1___main___Net_construct_304"]
    assert main.node(0).operand_value(1) == TensorValue((), "Float32", "1", "")
    partial = main.node(3)
    assert partial.op == "Partial"
    assert partial.operand_refs[0] == OperandRef("graph", "@20_4_✓__main___Net_construct_311", "20_4_✓__main___Net_construct_311")
    union = main.node(6)
    assert (union.raw_op, union.op, union.callee, union.operands) == (
        "%5[@FuncUnion(@20_4_✓__main___Net_construct_311, @21_14_✗__main___Net_construct_314)]", "call", None, [])
    assert union.scope == "5" and union.kernel_full_name is None
    branch = ir.graphs["20_4_✓__main___Net_construct_311"]
    assert branch.indirect == 1 and branch.attrs == {"defer_inline": "0", "undeterminate": "0"}
    assert [p.type.shape for p in branch.param_decls] == [(), ()]
    assert main.node(0).sources[2].shared is True
    assert main.node(0).sources[2].code == "        a = ops.sub(x, 1)"


@pytest.mark.parametrize("rel, graphs, markers", [
    ("doc_excerpts/doc_analyze_fail.ir", ["__main___Net_construct_11", "__main___Net_construct_11#2"], [0, 1]),
    ("doc_excerpts/doc_analyze_fail2.ir",
     ["__main___Net_construct_6", "__main___Net_construct_6#2", "bias_add_14"], [0, 1, 2]),
])
def test_analyze_fail_excerpts(rel: str, graphs: list[str], markers: list[int]) -> None:
    ir, diags = parsed(rel)
    assert ir.is_analyze_fail and ir.total_subgraphs_declared == 0
    assert list(ir.graphs) == graphs
    assert [g.name for g in ir.graphs.values()][:2] == [graphs[0], graphs[0]]
    dup = [d for d in diags if d.code == "ir-duplicate-subgraph"]
    assert len(dup) == 1 and dup[0].severity.value == "info"
    assert [n.eval_marker for n in ir.iter_nodes() if n.eval_marker is not None] == markers
    assert ir.banner[-1] == "No more function graphs."
    first = ir.graphs[graphs[0]]
    assert first.node(0).op == "resolve" and first.node(0).scope == "Default"
    assert (first.node(1).raw_op, first.node(1).op) == ("%0", "call")
    assert first.order and all(line.startswith("#") for line in first.order)
    assert ir.params[0].type.kind == "other" and ir.params[0].type.raw == "null"
    assert all(n.scope == "Default" for n in ir.iter_nodes())
