"""The round-trip pitfalls of conventions §6.3, one group of tests each (plus the goldens)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import ruamel.yaml

from advisor_core.config.document import ConfigDocument
from advisor_core.patch import apply_patches, unified_diff

from patchtest_support import load, patch


def _apply(text: str, *ops: tuple, insert_after: dict[str, str] | None = None) -> str:
    result = apply_patches(ConfigDocument.from_text(text), [patch("p", *ops)], insert_after=insert_after)
    assert result.ok, [f.message for f in result.failed]
    assert result.new_text is not None
    return result.new_text


# --------------------------------------------------------------------------- 1. deleting a key and its neighbours' comments
# ruamel stores the lines between two entries on the entry before them (wwkimball/yamlpath#170).


def test_remove_keeps_comment_block_of_next_key():
    text = "trainer:\n  type: X\n  model_name: 'm'\n# about do_eval\n# second line\ndo_eval: False\n"
    assert _apply(text, ("remove", "/trainer/model_name")) == (
        "trainer:\n  type: X\n# about do_eval\n# second line\ndo_eval: False\n")


def test_remove_drops_only_its_own_eol_comment():
    text = "p:\n  a: 1  # 默认为 a\n  b: 2  # about b\n  c: 3  # about c\n"
    assert _apply(text, ("remove", "/p/b")) == "p:\n  a: 1  # 默认为 a\n  c: 3  # about c\n"


def test_remove_last_key_keeps_the_next_sections_header():
    text = "r:\n  a: 1\n  b: 2\n\n# callbacks\ncallbacks: []\n"
    assert _apply(text, ("remove", "/r/b")) == "r:\n  a: 1\n\n# callbacks\ncallbacks: []\n"


def test_remove_a_block_keeps_comments_after_it():
    text = "a: 1\nm:\n  x:\n    y: 1  # y\n  # inside m\n  z: 2\n\n# next section\nn: 3\n"
    assert _apply(text, ("remove", "/m")) == "a: 1\n\n# next section\nn: 3\n"


def test_remove_first_child_keeps_the_comment_under_the_parent_key():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    result = apply_patches(doc, [patch("p", ("remove", "/model/model_config/vocab_size"))])
    assert "model:\n  model_config:\n    # Configurations from Hugging Face\n    hidden_size: 5120\n" in result.new_text


def test_remove_the_only_key_leaves_an_empty_mapping_and_the_comments():
    text = "metric:\n  type: PerplexityMetric\n\n# wrapper cell config\nrunner: 1\n"
    assert _apply(text, ("remove", "/metric/type")) == "metric: {}\n\n# wrapper cell config\nrunner: 1\n"


def test_remove_after_an_alias_keeps_the_section_header():
    # After "dataset_config: *train_dataset" ruamel stores the next lines as pre-comments of the next key.
    doc = load("finetune_glm4_9b.yaml")
    result = apply_patches(doc, [patch("p", ("remove", "/runner_config"))])
    assert "  dataset_config: *train_dataset\n\n# ==== runner config ====\n\nrunner_wrapper:\n" in result.new_text


def test_remove_sequence_items_keeps_neighbour_comments():
    text = "s:\n  - 1  # one\n  - 2  # two\n  - 3  # three\n# after\nt: 1\n"
    assert _apply(text, ("remove", "/s/1")) == "s:\n  - 1  # one\n  - 3  # three\n# after\nt: 1\n"
    assert _apply(text, ("remove", "/s/2")) == "s:\n  - 1  # one\n  - 2  # two\n# after\nt: 1\n"


# --------------------------------------------------------------------------- 2. end-of-line comments on replaced scalars
# (ansible/ansible-lint#3395)


@pytest.mark.parametrize(
    ("line", "value", "expected"),
    [
        ("k: 1  # c", 22, "k: 22  # c"),
        ("k: -1 # c", 1000, "k: 1000 # c"),
        ("k: 1.e-8  # c", 2e-8, "k: 2.e-8  # c"),
        ("k: False  # 默认为False, 数据并行模式下为True", True, "k: True  # 默认为False, 数据并行模式下为True"),
        ("k: plain  # c", "other", "k: other  # c"),
        ("k: 'q'  # c", "quoted", "k: 'quoted'  # c"),
        ('k: "58GB"  # c', "60GB", 'k: "60GB"  # c'),
        ("k: [6, 3, 2, 3]  # c", [1, 2], "k: [1, 2]  # c"),
        ("k: {a: 1}  # c", {"a": 2}, "k: {a: 2}  # c"),
        ("k: null  # c", 5, "k: 5  # c"),
        ("k: 5  # c", None, "k: null  # c"),
        ("k: &anc 5  # c", 6, "k: &anc 6  # c"),
        ("k: x #tight", "longer value", "k: longer value #tight"),
    ],
)
def test_replace_keeps_eol_comment_on_every_scalar_kind(line: str, value, expected: str):
    text = f"before: 0\n{line}\nafter: 0\n"
    assert _apply(text, ("replace", "/k", value)) == f"before: 0\n{expected}\nafter: 0\n"


def test_aligned_comments_stay_aligned():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    result = apply_patches(doc, [patch("p", ("replace", "/train_dataset/data_loader/sizes/1", 100))])
    assert "      - 100   # Number of samples in the test set (currently unsupported)\n" in result.new_text
    added = [line for line in unified_diff(doc.text, result.new_text, "x").split("\n")[2:] if line.startswith("+")]
    assert len(added) == 1


def test_eol_comment_in_a_block_sequence_item_and_a_nested_mapping():
    text = "cb:\n  - type: A  # first\n  - type: B  # second\n    prefix: \"p\"  # the prefix\n"
    assert _apply(text, ("replace", "/cb/1/prefix", "q"), ("replace", "/cb/0/type", "Z")) == (
        "cb:\n  - type: Z  # first\n  - type: B  # second\n    prefix: \"q\"  # the prefix\n")


def test_replacing_a_block_value_keeps_the_key_line_comment():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    result = apply_patches(doc, [patch("p", ("replace", "/train_dataset/data_loader/config/data_path", ["x"]))])
    assert ('      data_path:  # Sampling proportion and path for the Megatron dataset\n        - "x"\n  input_columns:'
            in result.new_text)  # a block list stays block; its key line is untouched
    result = apply_patches(doc, [patch("p", ("replace", "/train_dataset/data_loader/config/data_path", "x"))])
    assert '      data_path: "x" # Sampling proportion and path for the Megatron dataset\n  input_columns:' in result.new_text


# --------------------------------------------------------------------------- 3. comments surrounded by blank lines
# (pycontribs/ruyaml#115)

BLANK_WRAPPED = "context:\n  mode: 0\n  level: \"O0\"\n\n# aicc\n\nremote_save_url: \"u\"\n\n\n# tail\n\nlast: 1\n"


@pytest.mark.parametrize(
    "ops",
    [
        [("replace", "/context/level", "O1")],
        [("remove", "/context/level")],
        [("add", "/context/new", 1)],
        [("replace", "/remote_save_url", "v")],
        [("remove", "/remote_save_url")],
        [("add", "/zz", 1)],
        [("remove", "/last")],
    ],
)
def test_blank_line_wrapped_comments_survive(ops):
    new = _apply(BLANK_WRAPPED, *ops)
    assert "\n\n# aicc\n\n" in new
    assert "\n\n\n# tail\n\n" in new or ops == [("remove", "/last")] and "\n\n\n# tail\n\n" in new + "\n"


def test_blank_line_wrapped_comments_survive_in_a_real_file():
    doc = load("finetune_glm4_9b.yaml")
    for ops in ([("remove", "/context/memory_optimize_level")], [("replace", "/context/memory_optimize_level", "O1")],
                [("add", "/context/x", 1)]):
        result = apply_patches(doc, [patch("p", *ops)])
        assert "\n\n# aicc\nremote_save_url:" in result.new_text, ops


# --------------------------------------------------------------------------- 4. a new key after a trailing comment block
# (kwoodson/ansible-role-yedit#76)


@pytest.mark.parametrize(
    ("text", "pointer", "expected"),
    [
        ("a:\n  x: 1\n# about b\nb: 2\n", "/a/new", "a:\n  x: 1\n  new: 9\n# about b\nb: 2\n"),
        ("a:\n  x: 1  # eol\n\n# about b\nb: 2\n", "/a/new", "a:\n  x: 1  # eol\n  new: 9\n\n# about b\nb: 2\n"),
        ("a:\n  x:\n    deep: 1\n# about b\nb: 2\n", "/a/new", "a:\n  x:\n    deep: 1\n  new: 9\n# about b\nb: 2\n"),
        ("a:\n  x:\n    - 1\n# about b\nb: 2\n", "/a/new", "a:\n  x:\n    - 1\n  new: 9\n# about b\nb: 2\n"),
        ("a:\n  - 1\n# about b\nb: 2\n", "/a/-", "a:\n  - 1\n  - 9\n# about b\nb: 2\n"),
        ("a: 1\n# trailing\n", "/b", "a: 1\nb: 9\n# trailing\n"),
    ],
)
def test_new_key_goes_before_next_sections_comments(text: str, pointer: str, expected: str):
    assert _apply(text, ("add", pointer, 9)) == expected


def test_new_key_after_a_sibling_goes_above_the_comment_of_the_following_key():
    text = "a:\n  x: 1\n  # about z\n  z: 3\n"
    assert _apply(text, ("add", "/a/w", 2), insert_after={"/a/w": "x"}) == "a:\n  x: 1\n  w: 2\n  # about z\n  z: 3\n"


def test_new_key_in_real_configs_lands_in_its_section():
    doc = load("pretrain_llama2_7b.yaml")
    result = apply_patches(doc, [patch("p", ("add", "/train_dataset_task/extra", 1), ("add", "/parallel_config/extra", 2))])
    assert ("  dataset_config: *train_dataset\n  extra: 1\n# if True, do evaluate during the training process."
            in result.new_text)
    assert ("  gradient_aggregation_group: 4\n  extra: 2\n# when model parallel is greater than 1" in result.new_text)


# --------------------------------------------------------------------------- 5. ruamel behaviour is pinned and golden-tested


def test_ruamel_version_is_the_tested_one():
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'"ruamel\.yaml>=0\.18\.6,<0\.20"', pyproject), "the pin moved: re-check the goldens"
    major, minor, *_ = (int(p) for p in ruamel.yaml.__version__.split(".")[:2])
    assert (major, minor) in ((0, 18), (0, 19))


def test_ruamel_block_sequence_bug_is_avoided_for_new_values():
    # ruamel 0.19 writes "- {}\n  - a   -" (invalid) for this shape when the key line has a comment;
    # new lists of that shape are written in flow style instead.
    assert _apply("a: 1  # c\nb: 2\n", ("replace", "/a", [{}, "x", {"k": 1}])) == "a: [{}, x, {k: 1}]  # c\nb: 2\n"
    # ... and an existing block sequence whose first item becomes empty is switched to flow style.
    doc = load("pretrain_qwen3_32b_4k.yaml")
    result = apply_patches(doc, [patch("p", ("add", "/train_dataset/data_loader/config/data_path/0", {}))])
    assert ("      data_path: [{}, '1', \"/path/to/wiki103-megatron_text_document\"] # Sampling proportion and path"
            in result.new_text)
