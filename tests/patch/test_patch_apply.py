"""apply_patches: preconditions first and all-or-nothing, RFC 6902 semantics, notes, loud verification."""

from __future__ import annotations

import pytest

from advisor_core.config.document import ConfigDocument
from advisor_core.engine.findings import Safety
from advisor_core.patch import (
    PatchVerificationError,
    PreconditionFailure,
    apply_patches,
    check_preconditions,
    preview_patches,
    render_patch_diff,
    unified_diff,
)
from advisor_core.patch import apply as apply_module

from patchtest_support import load, patch


# --------------------------------------------------------------------------- preconditions


def test_failed_test_writes_nothing_and_names_pointer_expected_actual():
    doc = load("pretrain_llama2_7b.yaml")
    before = doc.text
    result = apply_patches(doc, [patch("More workers", ("test", "/train_dataset/num_parallel_workers", 4),
                                       ("replace", "/train_dataset/num_parallel_workers", 16))])
    assert not result.ok and result.new_text is None and result.applied == []
    [failure] = result.failed
    assert (failure.patch_title, failure.pointer, failure.expected, failure.actual) == (
        "More workers", "/train_dataset/num_parallel_workers", 4, 8)
    assert failure.message == (
        "patch 'More workers': /train_dataset/num_parallel_workers: test failed: the value differs "
        "(was the file edited after the patch was computed?) (expected 4, found 8)"
    )
    assert doc.text == before and doc.get("/train_dataset/num_parallel_workers") == 8


def test_second_patch_failing_means_neither_applies():
    doc = load("pretrain_llama2_7b.yaml")
    good = patch("Workers", ("test", "/train_dataset/num_parallel_workers", 8), ("replace", "/train_dataset/num_parallel_workers", 16))
    bad = patch("Recompute", ("test", "/recompute_config/recompute", True), ("replace", "/recompute_config/recompute", False))
    result = apply_patches(doc, [good, bad])
    assert not result.ok and result.new_text is None and result.applied == []
    assert [(f.patch_title, f.pointer, f.expected, f.actual) for f in result.failed] == [
        ("Recompute", "/recompute_config/recompute", True, False)
    ]
    assert render_patch_diff(doc, bad) is None
    assert render_patch_diff(doc, good) is not None


def test_every_failing_test_of_every_patch_is_reported():
    doc = load("pretrain_llama2_7b.yaml")
    result = apply_patches(doc, [
        patch("a", ("test", "/seed", 1), ("test", "/run_mode", "train")),
        patch("b", ("test", "/nope/deeper", 1)),
        patch("c", ("test", "/runner_config/epochs", 3)),
    ])
    assert [(f.patch_title, f.pointer) for f in result.failed] == [("a", "/seed"), ("b", "/nope/deeper"), ("c", "/runner_config/epochs")]
    assert "test failed: the path does not exist" in result.failed[1].message
    assert "expected" not in result.failed[1].message  # nothing to compare with


@pytest.mark.parametrize(
    ("pointer", "value", "passes"),
    [
        ("/seed", 0, True),
        ("/seed", 0.0, False),  # 1 and 1.0 differ (RFC 6902 §4.6 on the loaded values)
        ("/seed", False, False),  # a bool is not a number
        ("/seed", "0", False),
        ("/optimizer/eps", 1e-8, True),  # "1.e-8" in the file
        ("/optimizer/learning_rate", 5e-5, True),  # "5.e-5"
        ("/model/model_config/rms_norm_eps", 1e-5, True),  # "1.0e-5"
        ("/context/max_device_memory", "58GB", True),
        ("/recompute_config/select_recompute", False, True),  # "False"
        ("/recompute_config/select_recompute", 0, False),
        ("/train_dataset/input_columns", ["input_ids"], True),
        ("/train_dataset/input_columns", ("input_ids",), True),
        ("/train_dataset/data_loader", {"shuffle": True, "dataset_dir": "", "type": "MindDataset"}, True),  # order-free
        ("/train_dataset/data_loader", {"shuffle": True, "type": "MindDataset"}, False),
        ("/model/model_config/extend_method", "None", True),  # a string in YAML, not null
        ("/model/model_config/extend_method", None, False),
    ],
)
def test_test_equality_is_type_strict(pointer, value, passes):
    doc = load("pretrain_llama2_7b.yaml")
    failures = check_preconditions(doc, [patch("t", ("test", pointer, value))])
    assert (failures == []) is passes, [f.message for f in failures]


def test_type_mismatch_reason_names_both_types():
    doc = load("pretrain_llama2_7b.yaml")
    [failure] = check_preconditions(doc, [patch("t", ("test", "/seed", 0.0))])
    assert failure.reason == "test failed: the value is a integer, the patch expects a float"


def test_test_of_whole_document():
    doc = ConfigDocument.from_text("a: 1\nb: [x]\n")
    assert check_preconditions(doc, [patch("t", ("test", "", {"b": ["x"], "a": 1}))]) == []


# --------------------------------------------------------------------------- structural errors


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        (("replace", "/nope", 1), "cannot replace: path does not exist"),
        (("remove", "/runner_config/nope"), "cannot remove: path does not exist"),
        (("add", "/nope/x", 1), "cannot add: path does not exist"),
        (("add", "/seed/x", 1), "cannot add to a integer"),
        (("add", "/train_dataset/input_columns/5", "x"), "not a valid position"),
        (("add", "/train_dataset/input_columns/01", "x"), "not a valid position"),
        (("replace", "", {}), "whole document"),
        (("remove", ""), "whole document"),
        (("replace", "/seed", {1, 2}), "cannot be written"),
    ],
)
def test_structural_errors_fail_the_whole_call(op, reason):
    doc = load("pretrain_llama2_7b.yaml")
    good = patch("good", ("replace", "/seed", 7))
    result = apply_patches(doc, [good, patch("bad", op)])
    assert not result.ok and result.new_text is None and result.applied == []
    [failure] = result.failed
    assert failure.patch_title == "bad" and reason in failure.message, failure.message


def test_display_only_patches_are_refused_but_can_be_previewed():
    doc = load("pretrain_llama2_7b.yaml")
    shown = patch("Model code change", ("replace", "/seed", 1), safety=Safety.DISPLAY_ONLY)
    result = apply_patches(doc, [shown])
    assert not result.ok and "display-only patches are shown, never applied" in result.failed[0].message
    assert preview_patches(doc, [shown]).ok
    assert "+seed: 1" in (render_patch_diff(doc, shown) or "")


def test_merge_keys_are_read_but_not_edited():
    doc = ConfigDocument.from_text("base: &b\n  x: 1\nderived:\n  <<: *b\n  y: 3\n")
    for op in (("replace", "/derived/y", 4), ("replace", "/base/x", 2), ("add", "/derived/z", 1)):
        result = apply_patches(doc, [patch("m", op)])
        assert not result.ok and "merge key" in result.failed[0].reason, op
    assert apply_patches(doc, [patch("t", ("test", "/derived/x", 1))]).ok


def test_insert_after_unknown_sibling_fails():
    doc = load("pretrain_llama2_7b.yaml")
    result = apply_patches(doc, [patch("a", ("add", "/parallel/x", 1))], insert_after={"/parallel/x": "nope"})
    assert not result.ok and "insert_after names 'nope'" in result.failed[0].message


# --------------------------------------------------------------------------- semantics


def test_add_on_existing_key_replaces_in_place():
    doc = load("pretrain_llama2_7b.yaml")
    result = apply_patches(doc, [patch("a", ("add", "/runner_config/epochs", 3))])
    assert unified_diff(doc.text, result.new_text, "x").count("\n-") == 1
    assert "+  epochs: 3\n" in unified_diff(doc.text, result.new_text, "x")


def test_sequence_add_index_and_dash_and_remove():
    doc = ConfigDocument.from_text("l:\n  - a  # first\n  - b  # second\nf: [1, 2]\n")
    result = apply_patches(doc, [patch("s", ("add", "/l/1", "x"), ("add", "/l/-", "z"), ("add", "/f/0", 0),
                                       ("remove", "/f/2"))])
    assert result.new_text == "l:\n  - a  # first\n  - x\n  - b  # second\n  - z\nf: [0, 1]\n"


def test_later_patch_overrides_earlier_with_a_note():
    doc = load("pretrain_llama2_7b.yaml")
    result = apply_patches(doc, [patch("first", ("replace", "/seed", 1)), patch("second", ("replace", "/seed", 2))])
    assert result.ok and ConfigDocument.from_text(result.new_text).get("/seed") == 2
    assert "'first' and 'second' both change /seed; the later one wins" in result.notes


def test_pointer_through_alias_changes_the_anchored_node_and_says_so():
    doc = load("pretrain_llama2_7b.yaml")
    result = apply_patches(doc, [patch("w", ("replace", "/train_dataset_task/dataset_config/num_parallel_workers", 4))])
    new = ConfigDocument.from_text(result.new_text)
    assert new.get("/train_dataset/num_parallel_workers") == 4
    assert new.get("/train_dataset_task/dataset_config/num_parallel_workers") == 4
    assert "  dataset_config: *train_dataset\n" in result.new_text  # the alias stays an alias
    assert result.changed == ["/train_dataset_task/dataset_config/num_parallel_workers", "/train_dataset/num_parallel_workers"]
    [note] = result.notes
    assert "&train_dataset" in note and "/train_dataset/num_parallel_workers" in note


def test_replacing_at_an_alias_site_of_an_anchored_scalar_changes_all_sites():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    result = apply_patches(doc, [patch("dp", ("replace", "/parallel/dataset_strategy/3/0", 4))])
    new = ConfigDocument.from_text(result.new_text)
    assert new.get("/parallel_config/data_parallel") == 4
    assert [new.get(f"/parallel/dataset_strategy/{i}/0") for i in range(5)] == [4] * 5
    assert "  data_parallel: &dp 4  # Number of data parallel\n" in result.new_text
    assert new.alias_sites("/parallel_config/data_parallel") == [f"/parallel/dataset_strategy/{i}/0" for i in range(5)]


def test_replacing_a_mapping_at_its_alias_site_replaces_the_anchored_mapping():
    doc = load("pretrain_llama2_7b.yaml")
    value = {"batch_size": 1, "data_loader": {"type": "MindDataset"}}
    result = apply_patches(doc, [patch("ds", ("replace", "/train_dataset_task/dataset_config", value))])
    new = ConfigDocument.from_text(result.new_text)
    assert new.plain("/train_dataset") == value and new.plain("/train_dataset_task/dataset_config") == value
    assert "train_dataset: &train_dataset\n  batch_size: 1\n  data_loader:\n    type: MindDataset\n" in result.new_text
    assert "  dataset_config: *train_dataset\n" in result.new_text
    [note] = result.notes
    assert "names &train_dataset, which is also used at /train_dataset;" in note


def test_removing_an_anchor_definition_keeps_the_aliases_valid():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    result = apply_patches(doc, [patch("dp", ("remove", "/parallel_config/data_parallel"))])
    assert result.ok
    new = ConfigDocument.from_text(result.new_text)
    assert [new.get(f"/parallel/dataset_strategy/{i}/0") for i in range(5)] == [1] * 5
    assert "dataset_strategy: [[&dp 1, 1], [*dp, 1]" in result.new_text
    assert "# Number of data parallel" not in result.new_text  # the removed line's comment went with it
    assert any("defines the anchor &dp" in n for n in result.notes)


def test_the_document_object_is_never_modified():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    before = (doc.text, doc.plain())
    apply_patches(doc, [patch("x", ("replace", "/parallel_config/data_parallel", 8), ("remove", "/model"),
                              ("add", "/callbacks/-", {"type": "X"}))])
    assert (doc.text, doc.plain()) == before


def test_crlf_file_keeps_crlf_and_untouched_lines():
    text = "a: 1  # one\r\nb:\r\n  c: [ 1, 2 ]\r\n  d: x\r\n"
    doc = ConfigDocument.from_text(text)
    result = apply_patches(doc, [patch("p", ("replace", "/b/d", "z"), ("add", "/b/e", True))])
    # No booleans in the file: new ones are spelt the mindformers way.
    assert result.new_text == "a: 1  # one\r\nb:\r\n  c: [ 1, 2 ]\r\n  d: z\r\n  e: True\r\n"


def test_replacing_with_the_same_value_changes_nothing():
    text = "a: ~\nb: 1.0e-5  # c\nc: [ 1, 2 ]\nd: 'x'\n"
    doc = ConfigDocument.from_text(text)
    result = apply_patches(doc, [patch("same", ("replace", "/a", None), ("replace", "/b", 1e-5), ("replace", "/c", [1, 2]),
                                       ("replace", "/d", "x"))])
    assert result.ok and result.new_text == text and result.changed == []


def test_lines_ruamel_rewrites_stay_as_written_next_to_an_edit():
    # ruamel would write "b:", "c:", "flag: False" and "[1, 2]"; only the edited line may change.
    text = "a: 1\nb: ~\nc: null\nflag: false\nflag2: False\nl: [ 1, 2 ]\nz: 0\n"
    doc = ConfigDocument.from_text(text)
    assert apply_patches(doc, [patch("p", ("replace", "/c", 3))]).new_text == text.replace("c: null", "c: 3")
    assert apply_patches(doc, [patch("p", ("replace", "/flag", True))]).new_text == text.replace("flag: false", "flag: true")
    assert apply_patches(doc, [patch("p", ("add", "/b2", 1))], insert_after={"/b2": "b"}).new_text == (
        text.replace("b: ~\n", "b: ~\nb2: 1\n"))


def test_document_markers_and_directives_stay_in_place():
    text = "%YAML 1.2\n---\n# top\na: 1\nb:\n  c: 2\n...\n"
    doc = ConfigDocument.from_text(text)
    result = apply_patches(doc, [patch("p", ("add", "/b/d", 3), ("add", "/zz", 1))])
    assert result.new_text == "%YAML 1.2\n---\n# top\na: 1\nb:\n  c: 2\n  d: 3\nzz: 1\n...\n"


def test_a_null_written_as_tilde_gets_a_block_value():
    doc = ConfigDocument.from_text("a:\nb: ~\nc: null\n")
    result = apply_patches(doc, [patch("p", ("replace", "/b", {"k": "v"}))])
    assert result.new_text == "a:\nb:\n  k: v\nc: null\n"


def test_mixed_line_endings_keep_each_untouched_line_as_it_was():
    doc = ConfigDocument.from_text("a: 1\r\nb: 2\nc: 3\r\nd: 4\n")  # half CRLF: new lines get "\n"
    result = apply_patches(doc, [patch("p", ("replace", "/c", 5), ("add", "/e", 6))])
    assert result.new_text == "a: 1\r\nb: 2\nc: 5\nd: 4\ne: 6\n"


def test_result_is_verified_and_a_wrong_round_trip_fails_loudly(monkeypatch: pytest.MonkeyPatch):
    doc = load("pretrain_llama2_7b.yaml")
    real_merge = apply_module.merge_lines

    def sloppy_merge(original, baseline, edited, layout):  # a merge bug that also changes another value
        return real_merge(original, baseline, edited, layout).replace("seed: 0\n", "seed: 1\n")

    monkeypatch.setattr(apply_module, "merge_lines", sloppy_merge)
    with pytest.raises(PatchVerificationError, match=r"/seed: expected 0, the new text has 1"):
        apply_patches(doc, [patch("w", ("replace", "/train_dataset/num_parallel_workers", 16))])

    def comment_eater(original, baseline, edited, layout):
        return real_merge(original, baseline, edited, layout).replace("# recompute config\n", "")

    monkeypatch.setattr(apply_module, "merge_lines", comment_eater)
    with pytest.raises(PatchVerificationError, match="would lose comment lines: '# recompute config'"):
        apply_patches(doc, [patch("w", ("replace", "/train_dataset/num_parallel_workers", 16))])

    monkeypatch.setattr(apply_module, "merge_lines", lambda *a: "a: [\n")
    with pytest.raises(PatchVerificationError, match="does not load as YAML"):
        apply_patches(doc, [patch("w", ("replace", "/seed", 3))])


def test_precondition_failure_is_a_plain_dataclass():
    failure = PreconditionFailure("t", "/a", 1, 2, "test failed: the value differs")
    assert str(failure) == failure.message == "patch 't': /a: test failed: the value differs (expected 1, found 2)"
