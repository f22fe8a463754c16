"""MindFormers recompute_config semantics and the recompute-effectiveness model (seed 004 cases)."""

from __future__ import annotations

import pytest

from advisor_core.config.model_structure import cell_paths, llama_layer
from advisor_core.config.recompute import effective_recompute, match_pattern, resolve_recompute
from advisor_core.config.training import TrainingConfig


def cfg(select, *, layers=4, pp=2, full=False, **extra):
    data = {
        "model": {"model_config": {"num_layers": layers, **extra}},
        "parallel_config": {"pipeline_stage": pp},
        "recompute_config": {"recompute": full, "select_recompute": select},
    }
    return TrainingConfig(data)


def effect(select, *, fine_grain=False, layer=0, **kw):
    L = llama_layer(fine_grain_interleave=fine_grain)
    plan = resolve_recompute(cfg(select, **kw), L)
    return plan, effective_recompute(L, plan.configured_ops(layer, L))


def test_seed_silu_mul_not_effective_without_fine_grained_multicopy():
    plan, eff = effect(["feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu"])
    assert eff.configured == {"feed_forward.mul", "feed_forward.w1.activation.silu"}
    assert eff.duplicated == frozenset()
    assert eff.not_recomputed["feed_forward.w1.activation.silu"] == (
        "its output reaches the backward pass only through feed_forward.w1.reshape (Reshape), which is not recomputed"
    )
    assert eff.saved_before == eff.saved_after  # no memory saved


def test_seed_fix_adds_the_reshapes():
    _, eff = effect(
        ["feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu", "feed_forward\\.w1\\.reshape", "feed_forward\\.w2\\.reshape"]
    )
    assert {"feed_forward.mul", "feed_forward.w1.activation.silu", "feed_forward.w1.reshape_out"} <= eff.duplicated
    # "saves memory for the first inputs of MatMul and Mul of w2" (seed 004): w2's matmul input and Mul's gate input.
    assert {"w2_2d", "w1_out"} <= eff.saved_before - eff.saved_after


def test_fine_grained_multicopy_makes_silu_mul_effective():
    _, eff = effect(["feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu"], fine_grain=True)
    assert eff.duplicated == {"feed_forward.mul", "feed_forward.w1.activation.silu"}
    assert eff.saved_before - eff.saved_after == {"gated", "w1_out"}


def test_pattern_naming_a_one_op_cell_recomputes_nothing():
    plan, eff = effect(["feed_forward\\.w1\\.activation"])
    (use,) = plan.patterns
    assert use.match.cells == (("feed_forward", "w1", "activation"),) and use.match.prims == ()
    assert eff.configured == frozenset()


def test_cast_before_rmsnorm_halves_the_saved_activation():
    _, eff = effect(["attention_norm\\.cast"])
    assert eff.duplicated == {"attention_norm.cast"}
    assert eff.saved_before - eff.saved_after == {"attention_norm_f32"}
    assert eff.saved_after - eff.saved_before == {"x"}


@pytest.mark.parametrize(
    "select, layers_by_stage",
    [
        ([1, 2], {0: True, 1: False, 2: True, 3: True}),
        (True, {0: True, 1: True, 2: True, 3: True}),
        ({"feed_forward\\.mul": [2, 0]}, {0: True, 1: True, 2: False, 3: False}),
    ],
)
def test_per_stage_forms(select, layers_by_stage):
    L = llama_layer(fine_grain_interleave=True)
    plan = resolve_recompute(cfg(select), L)
    for layer, on in layers_by_stage.items():
        assert bool(plan.configured_ops(layer, L)) is on, layer


def test_full_layer_wins_and_exclude_wins_over_select():
    L = llama_layer()
    c = TrainingConfig(
        {
            "model": {"model_config": {"num_layers": 4}},
            "parallel_config": {"pipeline_stage": 2},
            "recompute_config": {"recompute": [1, 0], "select_recompute": True, "select_recompute_exclude": ["feed_forward\\.mul"]},
        }
    )
    plan = resolve_recompute(c, L)
    assert plan.full_layers == {0}  # [1, 0]: first layer of stage 0, none of stage 1
    assert plan.configured_ops(0, L) == set()
    assert plan.configured_ops(1, L) == {"feed_forward.w1.activation.silu"}


def test_issues_point_at_keys():
    plan, _ = effect({"bogus\\.x": True, "feed_forward\\.mul": [1, 1, 1]})
    by_code = {i.code: i for i in plan.issues}
    assert by_code["pattern-matches-nothing"].pointer == "/recompute_config/select_recompute/bogus\\.x"
    assert by_code["stage-list-length"].pointer == "/recompute_config/select_recompute/feed_forward\\.mul"
    bad = resolve_recompute(cfg(["feed_forward\\.(mul"]), llama_layer())
    assert bad.issues[0].code == "bad-pattern"


def test_real_qwen_dict_form(real_data):
    from ruamel.yaml import YAML

    data = YAML(typ="safe").load((real_data / "mindformers-configs/finetune_qwen2_5_7b_8k.yaml").read_text())
    c = TrainingConfig(data)
    plan = resolve_recompute(c, llama_layer())
    assert plan.form == "dict"
    assert plan.full_layers == set(range(0, 7)) | set(range(14, 21))
    assert plan.issues == []
    assert {u.pattern for u in plan.patterns} == {
        "feed_forward\\.mul",
        "feed_forward\\.w1\\.activation\\.silu",
        "feed_forward\\.w1\\.reshape",
        "feed_forward\\.w2\\.reshape",
    }


def test_cell_paths_include_seed_names():
    names = {".".join(p) for p in cell_paths(llama_layer().tree)}
    for n in ("feed_forward.mul", "feed_forward.w1.activation.silu", "feed_forward.w1.reshape", "attention.wo.matmul",
              "ffn_norm.norm", "ffn_norm.rcast", "attention.merger_head_transpose", "add", "attention.flash_attention"):
        assert n in names, n
    assert match_pattern(".*\\.norm", llama_layer().tree).prims == (("attention_norm", "norm"), ("ffn_norm", "norm"))
