"""The op view's one-pass name parser agrees with the single-purpose parsers, on real and generated names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor_core.opview.names import (
    cell_path_in_layer,
    describe_name,
    forward_cell,
    kernel_cell,
    kernel_scope,
    layer_of_scope,
    op_primitive,
)


def _separately(name: str) -> tuple:
    scope = kernel_scope(name)
    cell, bwd, grad = kernel_cell(name)
    where = scope or name
    return (scope, op_primitive(scope), cell, forward_cell(name), bwd, grad, layer_of_scope(where), "recompute_" in where)


REAL = [
    "Default/network-MFPipelineWithLossScaleCell/network-_VirtualDatasetCell/_backbone-GradAccumulationCell/"
    "network-LlamaForCausalLM/model-LlamaModel/layers-CellList/3-LLamaDecodeLayer/attention-LLamaAttention/"
    "wq-Linear/MatMul-op3/aclnnMatmul_MatMulV3Common_MatMulV3",
    "Gradients/Default/network-LlamaForCausalLM/model-LlamaModel/layers-CellList/0-LLamaDecodeLayer/"
    "feed_forward-LlamaFeedForward/w1-Linear/Grad_MatMul/TransData-op1/trans_TransData_7",
    "recompute_Default/network-LlamaForCausalLM/model-LlamaModel/layers-CellList/1-LLamaDecodeLayer/"
    "feed_forward-LlamaFeedForward/Mul-op12",
    "trans_TransData_13",
    "hcom_allReduce__123_0_1",
    "Default/Cast-op0",
    "Gradients/MatMul-op3/aclnnMatmul_MatMulV3Common_MatMulV3",  # the backward wrapper alone above the op
    "",
]

_SEG = st.one_of(
    st.sampled_from(["Default", "Gradients", "recompute_Default", "layers-CellList", "Grad_MatMul", "grad_x",
                     "3-LLamaDecodeLayer", "12-Block", "wq-Linear", "MatMul-op3", "Cast-op0", "9x-op1", "-op2",
                     "aclnnCast_CastAiCore_Cast", "recompute_wq-Linear", "_backbone-Cell", "",
                     # an op segment that is itself recomputed; a layer item first; a lower-case gradient cell
                     "recompute_Cast-op2", "0-LLamaDecodeLayer", "gradients-Grad", "Grad_Cast"]),
    st.text(alphabet="ab1-_op", max_size=6),
)


def test_real_names_parse_the_same() -> None:
    for name in REAL:
        assert tuple(describe_name(name)) == _separately(name), name


def test_a_decoder_layer_kernel() -> None:
    parts = describe_name(REAL[0])
    assert parts.primitive == "MatMul" and parts.layer == 3 and not parts.backward
    assert parts.scope.endswith("/wq-Linear/MatMul-op3")
    assert cell_path_in_layer(parts.scope) == ("attention", "wq")
    back = describe_name(REAL[1])
    assert back.backward and back.grad == "Grad_MatMul" and back.layer == 0
    assert back.forward_cell.endswith("/feed_forward-LlamaFeedForward/w1-Linear")


@settings(max_examples=600, deadline=None)
@given(st.lists(_SEG, min_size=1, max_size=9))
def test_generated_names_parse_the_same(segs: list[str]) -> None:
    name = "/".join(segs)
    assert tuple(describe_name(name)) == _separately(name)


def test_ops_of_one_cell_share_its_parse() -> None:
    """The path above the op segment is parsed once per cell; each op still gets its own scope, primitive and
    recompute flag."""
    from advisor_core.opview.names import _cell_parts

    cell = "Gradients/Default/network-M/layers-CellList/2-LLamaDecodeLayer/ffn_norm-LlamaRMSNorm/Grad_Cast"
    names = [f"{cell}/Cast-op2/aclnnCast_CastAiCore_Cast", f"{cell}/recompute_Mul-op7/aclnnMul_MulAiCore_Mul"]
    describe_name.cache_clear()
    _cell_parts.cache_clear()
    parts = [describe_name(n) for n in names]
    assert _cell_parts.cache_info().currsize == 1
    assert [p.scope for p in parts] == [f"{cell}/Cast-op2", f"{cell}/recompute_Mul-op7"]
    assert [p.primitive for p in parts] == ["Cast", "recompute_Mul"]
    assert [p.recompute for p in parts] == [False, True]
    assert {(p.cell, p.backward, p.grad, p.layer) for p in parts} == {
        ("Default/network-M/layers-CellList/2-LLamaDecodeLayer/ffn_norm-LlamaRMSNorm", True, "Grad_Cast", 2)}
    assert [tuple(p) for p in parts] == [_separately(n) for n in names]


def test_fold_layer_index_names_one_cell_of_every_layer() -> None:
    from advisor_core.opview.names import fold_layer_index

    a = "Default/network-M/layers-CellList/3-LLamaDecodeLayer/attention-LLamaAttention/wq-Linear"
    b = "Default/network-M/layers-CellList/17-LLamaDecodeLayer/attention-LLamaAttention/wq-Linear"
    assert fold_layer_index(a) == fold_layer_index(b) == \
        "Default/network-M/layers-CellList/N-LLamaDecodeLayer/attention-LLamaAttention/wq-Linear"
    assert fold_layer_index("Default/3-x") == "Default/N-x"  # the last segment too
    assert fold_layer_index("Default/op3-x/a3-b") == "Default/op3-x/a3-b"  # not a list item
