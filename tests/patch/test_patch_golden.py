"""Golden files: realistic patches on real configs give exactly the hand-written expected text.

Each expected file in ``tests/data/patch_golden/`` was made by editing a copy of the input by hand
(only the lines the patch is about) — see ``tests/data/configs/SOURCES.md``. A failure here after a
ruamel.yaml upgrade is the signal conventions §6.3 asks for.
"""

from __future__ import annotations

import difflib

import pytest

from advisor_core.config.document import ConfigDocument
from advisor_core.patch import apply_patches, render_patch_diff, unified_diff

from patchtest_support import CONFIGS, GOLDEN, GOLDEN_CASES, GoldenCase, load


def _changed_old_lines(old: str, new: str) -> set[int]:
    """1-based numbers of the original lines a diff replaces or deletes (insertions touch none)."""
    out: set[int] = set()
    matcher = difflib.SequenceMatcher(None, old.split("\n"), new.split("\n"), autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            out.update(range(i1 + 1, i2 + 1))
    return out


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=lambda c: c.name)
def test_golden(case: GoldenCase):
    doc = load(case.config)
    result = apply_patches(doc, list(case.patches), insert_after=case.insert_after)
    assert result.ok, [f.message for f in result.failed]
    expected = (GOLDEN / f"{case.name}.yaml").read_text(encoding="utf-8")
    if result.new_text != expected:  # pragma: no cover - the diff is the useful part of a failure
        diff = "".join(difflib.unified_diff(expected.splitlines(True), result.new_text.splitlines(True),
                                            "golden", "produced"))
        pytest.fail(f"{case.name} differs from its golden file:\n{diff}")
    for fragment in case.notes:
        assert any(fragment in note for note in result.notes), (fragment, result.notes)
    if not case.notes:
        assert result.notes == []
    assert result.applied == list(case.patches) and result.failed == []
    # The golden text is itself a valid config with the intended values.
    assert ConfigDocument.from_text(expected).data is not None


# Which original lines each case may touch (1-based); every other byte must be identical.
TOUCHED = {
    "llama2_7b_num_parallel_workers": {46},
    "llama2_7b_select_recompute_list": {105},
    "llama2_7b_vocab_size": {138},
    "llama2_7b_floats": {29, 36, 140},
    "llama2_7b_all_reduce_fusion_config": set(),
    "qwen3_data_parallel": {88},
    "qwen3_dataset_strategy_multiline_flow": set(range(103, 110)),
    "qwen2_5_select_recompute_new_key": set(),
    "qwen2_5_bool_case_and_last_line": {189, 229},
    "glm4_remove_full_batch": {154},
    "glm4_recompute_element": {171},
    "glm4_add_before_section_comments": set(),
    "glm4_remove_next_to_comment_blocks": {20, 77, *range(120, 126), 175},
    "glm4_replace_keeps_eol_comments": {3, 11, 14, 62, 137, 151, 154},
    "glm4_insert_after_sibling": set(),
    "telechat_flow_spacing": {107, 131},
}


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=lambda c: c.name)
def test_only_patched_lines_change(case: GoldenCase):
    doc = load(case.config)
    result = apply_patches(doc, list(case.patches), insert_after=case.insert_after)
    assert result.new_text is not None
    assert _changed_old_lines(doc.text, result.new_text) == TOUCHED[case.name]


def test_pretty_diff_of_the_anchored_scalar_patch():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    case = next(c for c in GOLDEN_CASES if c.name == "qwen3_data_parallel")
    assert render_patch_diff(doc, case.patches[0], path="configs/qwen3/pretrain_qwen3_32b_4k.yaml") == (
        "--- a/configs/qwen3/pretrain_qwen3_32b_4k.yaml\n"
        "+++ b/configs/qwen3/pretrain_qwen3_32b_4k.yaml\n"
        "@@ -85,7 +85,7 @@\n"
        " \n"
        " # Parallel configuration\n"
        " parallel_config:\n"
        "-  data_parallel: &dp 1  # Number of data parallel\n"
        "+  data_parallel: &dp 2  # Number of data parallel\n"
        "   model_parallel: 4  # Number of model parallel\n"
        "   pipeline_stage: 4  # Number of pipeline parallel\n"
        "   micro_batch_num: 4  # Pipeline parallel microbatch size\n"
    )


def test_golden_inputs_are_untouched_fixtures():
    for case in GOLDEN_CASES:
        assert load(case.config).text == (CONFIGS / case.config).read_text(encoding="utf-8")


def test_patched_file_round_trips_through_apply_again():
    # Applying to the result again (a second run of --fix) changes nothing more and keeps every byte.
    doc = load("finetune_qwen2_5_7b_8k.yaml")
    case = next(c for c in GOLDEN_CASES if c.name == "qwen2_5_select_recompute_new_key")
    first = apply_patches(doc, list(case.patches)).new_text
    assert first is not None
    again = ConfigDocument.from_text(first, doc.path)
    repeat = apply_patches(again, [case.patches[0].model_copy(update={"ops": case.patches[0].ops[:1]})])
    assert repeat.ok and repeat.new_text == first
    assert unified_diff(first, repeat.new_text, "x.yaml") == ""
