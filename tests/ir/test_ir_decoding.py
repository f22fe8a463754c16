"""Decoders: attribute values, node heads, type lines, source lines (unit + property tests)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor_core.ir.attrs import (
    Bare,
    Monad,
    Raw,
    TensorValue,
    TypeName,
    decode_block,
    decode_value,
    find_close,
    render_value,
    split_top,
)
from advisor_core.ir.comments import decode_comments, parse_in_file
from advisor_core.ir.nodehead import classify_operand, normalise_op, split_head
from advisor_core.ir.typelines import classify_type_line, decode_type_lines, parse_device_type, parse_tensor_type
from advisor_core.ir.values import OperandRef, SourceLoc

# -- attribute values --------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ("Bool(1)", True), ("Bool(0)", False), ("I64(42)", 42), ("U64(0)", 0), ("I32(-3)", -3),
    ("F32(0)", 0.0), ("F32(0.5)", 0.5), ('"sum"', "sum"), ('"a, (b"', "a, (b"), ("None", None),
    ("true", True), ("false", False), ("0", 0), ("-1", -1), ("1e-08", 1e-08),
    ("[output]", [Bare("output")]), ("[x, dst_type]", [Bare("x"), Bare("dst_type")]), ("[]", []),
    ("(0)", (0,)), ("(0, 1)", (0, 1)), ("((4, 2), (1, 2))", ((4, 2), (1, 2))), ("()", ()),
    ("(I64(0), I64(1))", (0, 1)), ("[parameters, gradient]", [Bare("parameters"), Bare("gradient")]),
])
def test_decode_value(text: str, value: Any) -> None:
    got = decode_value(text)
    assert _same(got, value), (got, value)


def test_decode_value_kinds() -> None:
    assert isinstance(decode_value("F16"), TypeName) and decode_value("F16") == "F16"
    assert isinstance(decode_value("Float32"), TypeName)
    assert isinstance(decode_value("sum"), Bare)
    assert decode_value("4-6301172352641561019") == Bare("4-6301172352641561019")
    assert isinstance(decode_value("4-6301172352641561019"), Bare)
    assert decode_value("UMonad[U]") == Monad("UMonad[U]") and isinstance(decode_value("UMonad[U]"), Monad)
    t = decode_value("Tensor(shape=[2, 3], dtype=Float16, value=[[1, 2, 3], [4, 5, 6]])")
    assert t == TensorValue((2, 3), "Float16", "[[1, 2, 3], [4, 5, 6]]", "")
    assert isinstance(decode_value("(1, 2"), Raw) and isinstance(decode_value('"abc'), Raw)
    assert isinstance(decode_value("NameSpace[Entry: 'x']"), Raw)
    assert isinstance(decode_value(""), Raw)


def test_decode_block_with_and_without_spaces_and_strings() -> None:
    assert decode_block("checkpoint: Bool(1), is_dynamic_len: Bool(0)") == {"checkpoint": True, "is_dynamic_len": False}
    assert decode_block('group: "a, b: c", op: "sum"') == {"group": "a, b: c", "op": "sum"}
    assert decode_block("fusion: 0, op: sum, group_ranks: 0-1-2-3") == {"fusion": 0, "op": "sum", "group_ranks": "0-1-2-3"}
    assert decode_block("") == {}
    assert decode_block("orphan") == {"orphan": Raw("")}


def test_decode_block_returns_independent_copies() -> None:
    first = decode_block("output_names: [output], input_names: [x, y]")
    first["output_names"].append("mutated")
    second = decode_block("output_names: [output], input_names: [x, y]")
    assert second == {"output_names": ["output"], "input_names": ["x", "y"]}


def test_find_close_and_split_top_skip_strings() -> None:
    s = '(a, "x)y", [b, (c)]) tail'
    assert find_close(s, 0) == s.index(" tail") - 1
    assert split_top('a, "b, c", (d, e), [f, g], {h: i, j: k}') == ['a', '"b, c"', "(d, e)", "[f, g]", "{h: i, j: k}"]
    assert split_top("") == [] and split_top("   ") == []
    assert find_close("((", 0) == -1


# Property: values generated from the attribute grammar survive render -> decode.

_BARE_WORDS = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda w: w not in ("true", "false", "inf", "nan", "infinity") and not w.startswith("0"))
_STRINGS = st.text(st.characters(blacklist_characters='"\n\r', blacklist_categories=("Cs",)), max_size=12)
_SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.none(),
    _STRINGS,
    _BARE_WORDS.map(Bare),
    st.sampled_from(["F16", "F32", "BF16", "I64", "Float32", "Bool"]).map(TypeName),
    st.sampled_from(["UMonad[U]", "IOMonad[IO]"]).map(Monad),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.lists(children, max_size=4).map(tuple)),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equality that also compares types (True != 1, Bare != str, list != tuple)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(_VALUES)
def test_attribute_values_round_trip(value: Any) -> None:
    text = render_value(value)
    assert _same(decode_value(text), value), text


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True), _VALUES, max_size=6))
def test_attribute_blocks_round_trip(block: dict[str, Any]) -> None:
    rendered = render_value(block)
    assert rendered.startswith("{") and rendered.endswith("}")
    assert _same(decode_block(rendered[1:-1]), block), rendered


@settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_decoders_never_raise(text: str) -> None:
    decode_value(text)
    decode_block(text)
    split_head(text)
    parse_tensor_type(text)
    parse_device_type(text)
    decode_type_lines([text, text])
    decode_comments([text, "# In file " + text])
    classify_operand(text, "g")


# -- node heads --------------------------------------------------------------------------------


def test_split_head_e5_llama_line() -> None:
    body = ('PrimFunc_MatMul(%12, %13, Bool(0), Bool(1)) {instance name: matmul} primitive_attrs: '
            '{in_strategy: ((1, 1), (8, 1))} cnode_attrs: {checkpoint: Bool(1)} cnode_primal_attrs: '
            '{unique_id: "782146", origin_output_shape: (4096, 4096), micro: I64(0)} {in_strategy: ((1, 1), (8, 1))}')
    head = split_head(body)
    assert head.raw_op == "PrimFunc_MatMul"
    assert head.operands == ["%12", "%13", "Bool(0)", "Bool(1)"]
    assert head.instance_name == "matmul"
    assert set(head.blocks) == {"primitive_attrs", "cnode_attrs", "cnode_primal_attrs"}
    assert head.strategy == "in_strategy: ((1, 1), (8, 1))"
    assert decode_block(head.blocks["cnode_primal_attrs"])["origin_output_shape"] == (4096, 4096)
    assert head.problems == []


def test_split_head_odd_operators() -> None:
    assert split_head("$(@g:CNode_308)(%1, %2)").raw_op == "$(@g:CNode_308)"
    assert split_head("$(@g:CNode_308)(%1, %2)").operands == ["%1", "%2"]
    union = split_head("%5[@FuncUnion(@a, @b)]()")
    assert (union.raw_op, union.operands) == ("%5[@FuncUnion(@a, @b)]", [])
    assert split_head("call @16_✓get_loss_34()").raw_op == "call @16_✓get_loss_34"
    assert split_head('getattr(%0, "mul")').operands == ["%0", '"mul"']
    assert split_head("Return(%1)cnode_primal_attrs:{unique_id: \"1\"}").blocks == {"cnode_primal_attrs": 'unique_id: "1"'}
    assert split_head("PrimFunc_Cast(%0, I64(43)) junk").problems[0].startswith("text after the operands")
    assert "not closed" in split_head("PrimFunc_Cast(%0, I64(43)").problems[0]
    assert "not closed" in split_head("Cast(%0) cnode_attrs: {a: Bool(1)").problems[0]
    assert split_head("Cast").problems == ["no operand list '(...)' after the operator"]


@pytest.mark.parametrize("raw, op, callee", [
    ("PrimFunc_Cast", "Cast", None), ("S_Prim_MakeTuple", "MakeTuple", None), ("S-Prim-hyper_map", "hyper_map", None),
    ("AllReduce", "AllReduce", None), ("call @g_1", "call", "g_1"), ("@g_1", "call", "g_1"),
    ("%5[@FuncUnion(@a, @b)]", "call", None), ("$(@g:n)", "call", None), ("return", "Return", None),
])
def test_normalise_op(raw: str, op: str, callee: str | None) -> None:
    assert normalise_op(raw) == (op, callee)


def test_classify_operand() -> None:
    assert classify_operand("%12", "g") == OperandRef("node", "%12", "g", 12)
    assert classify_operand("%para3_block0.dense1.weight", "g") == OperandRef("param", "%para3_block0.dense1.weight", None, None, "para3_block0.dense1.weight")
    assert classify_operand("%para1_", "g").name == "para1_"
    assert classify_operand("$(@1_train_step.1797:para3_layer1.weight)", "g") == OperandRef(
        "crossref", "$(@1_train_step.1797:para3_layer1.weight)", "1_train_step.1797", None, "para3_layer1.weight")
    assert classify_operand("@20_4_✓__main___Net_construct_311", "g").kind == "graph"
    assert classify_operand("I64(42)", "g") == OperandRef("value", "I64(42)")
    assert classify_operand("%5[x]", "g").kind == "value"


# -- types -------------------------------------------------------------------------------------


def test_tensor_types() -> None:
    t = parse_tensor_type("Ref[Tensor[Float32]], (1001, 1000), ref_key=fc1.weight, is_parameter, is_inplace")
    assert (t.kind, t.dtype, t.shape, t.is_ref, t.ref_key, t.is_constant) == ("tensor", "Float32", (1001, 1000), True, "fc1.weight", False)
    assert parse_tensor_type("Tensor[Float32], (), value=...").is_constant
    assert parse_tensor_type("Tensor[Float32], ()").shape == ()
    assert parse_tensor_type("Tensor[Float32], (-2)").shape == (-2,)
    assert parse_tensor_type("Ref[Tensor(F16)], (16)").dtype == "Float16"
    assert parse_tensor_type("Tensor[BFloat16]x[const vector][2, 3]").shape == (2, 3)
    assert [(p.kind, p.dtype) for p in map(parse_tensor_type, ["Int64, NoShape", "Bool, NoShape", "String, NoShape"])] == [
        ("scalar", "Int64"), ("scalar", "Bool"), ("scalar", "String")]
    assert [parse_tensor_type(x).kind for x in ["UMonad, NoShape", "IOMonad, NoShape", "Func, NoShape", "null",
                                                "External, NoShape", "TypeType, NoShape", "Object:EnvType, NoShape"]] == [
        "monad", "monad", "func", "other", "other", "other", "other"]
    tup = parse_tensor_type("Tuple[Tensor[Float32]*5], TupleShape((128, 64), (128), (64), (), (-1, 3))")
    assert [e.shape for e in tup.elements] == [(128, 64), (128,), (64,), (), (-1, 3)]
    mixed = parse_tensor_type("Tuple[Tensor[Float32],Func], TupleShape((), NoShape)")
    assert [e.kind for e in mixed.elements] == ["tensor", "func"]
    nested = parse_tensor_type("Tuple[Tuple[Tensor[Float32]*2]], TupleShape(TupleShape((), (-2)))")
    assert [e.shape for e in nested.elements[0].elements] == [(), (-2,)]
    flags = parse_tensor_type("Tuple[Int64*4], TupleShape(NoShape, NoShape, NoShape, NoShape), elements_use_flags={[const vector]{1, 1, 1, 1}}")
    assert [e.dtype for e in flags.elements] == ["Int64"] * 4
    assert parse_tensor_type("Tuple[], TupleShape()").elements == ()


def test_device_types() -> None:
    assert parse_device_type("Float16xFRACTAL_NZ[const vector]{256, 128, 16, 16}").format == "FRACTAL_NZ"
    assert parse_device_type("BoolxDefaultFormat[const vector]{}").shape == ()
    old = parse_device_type("Float16xNC1HWC0[const vector][32, 1, 32, 32, 16]")
    assert (old.dtype, old.format, old.shape) == ("Float16", "NC1HWC0", (32, 1, 32, 32, 16))
    assert parse_device_type("garbage").dtype is None


def test_type_line_classification() -> None:
    host = "(<Tensor[Float32], (8, 32)>) -> (<Tensor[Float16], (8, 32)>)"
    assert classify_type_line(host, first=True) == "host"
    assert classify_type_line("(<Float32xDefaultFormat[const vector]{8, 32}>) -> (<Float16xDefaultFormat[const vector]{8, 32}>)", first=False) == "device"
    assert classify_type_line("(S:[s1<[1,inf]>, 30], V:false) -> (S:[s1<[1,inf]>, 17])", first=False) == "symbolic"
    assert classify_type_line("(<null>, <null>) -> (S:[17, 30])", first=False) == "symbolic"
    assert classify_type_line("(S:[[], [DynLen-s3]])", first=False) == "symbolic"
    assert classify_type_line("(Tensor, Tensor, Scalar, Scalar) -> (Tensor)", first=False) == "kernel_object"
    assert classify_type_line("(Default/network-WithLossCell/Conv2D-op89)", first=False) == "scope"
    assert classify_type_line("full_name_with_scope: (Default/Conv2D-op12)", first=False) == "scope"
    decoded = decode_type_lines([host, "(Default/a-Net/Cast-op1)"])
    assert decoded.scope == "Default/a-Net/Cast-op1" and decoded.out_types[0].dtype == "Float16"
    assert decode_type_lines(["() -> (<Tensor[Float32], ()>)"]).out_types[0].shape == ()


# -- source lines ------------------------------------------------------------------------------


def test_in_file_forms() -> None:
    full = parse_in_file("# In file /a/b.py:8682~8724, 4~16/def matmul(input, other):/")
    assert full == SourceLoc("/a/b.py", 8682, 8724, 4, 16, "def matmul(input, other):", False)
    shared = parse_in_file("# In file t6.py:16, 12~19/        a = ops.sub(x, 1)/<~~This line of code can be shared by "
                           "multiple nodes, and may be duplicated./")
    assert shared == SourceLoc("t6.py", 16, None, 12, 19, "        a = ops.sub(x, 1)", True)
    assert parse_in_file("# In file /x/gen_ops_def.py:7463~7467/def matmul_ext(input, other):/").col is None
    old = parse_in_file("# In file demo.py(14)/        x = x + y/")
    assert old == SourceLoc("demo.py", 14, None, None, None, "        x = x + y", False)
    slashes = parse_in_file("# In file C:/w/a.py:3, 1~2/    return a / b/")
    assert (slashes.file, slashes.code) == ("C:/w/a.py", "    return a / b")
    assert parse_in_file("# In file nowhere") is None


def test_decode_comments() -> None:
    lines = ["      # Fullname with scope: (Default/Cast-op0)", "      # Corresponding code candidate:",
             "      # In file a.py:1, 2~3/x/", "      # In file broken", "      #scope: (Other)"]
    scope, sources, comments = decode_comments(lines)
    assert scope == "Default/Cast-op0"
    assert sources == [SourceLoc("a.py", 1, None, 2, 3, "x", False)]
    assert comments == ["# Corresponding code candidate:", "# In file broken", "#scope: (Other)"]
