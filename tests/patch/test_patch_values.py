"""New values are written the way the file writes them, and read back as exactly the patch's value."""

from __future__ import annotations

import math

import pytest

from advisor_core.config.document import ConfigDocument
from advisor_core.patch import apply_patches
from advisor_core.patch.values import format_float, plain_ok

from patchtest_support import load, patch


def _line_after(doc: ConfigDocument, ops: list[tuple], key_line_start: str) -> str:
    result = apply_patches(doc, [patch("v", *ops)])
    assert result.ok, [f.message for f in result.failed]
    new = ConfigDocument.from_text(result.new_text)
    for op in ops:
        if op[0] != "remove":
            got = new.plain(op[1])
            assert got == op[2] and type(got) is type(op[2]), (op, got)
    return next(line for line in result.new_text.split("\n") if line.startswith(key_line_start))


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("yes", '"yes"'), ("no", '"no"'), ("on", '"on"'), ("y", '"y"'),  # YAML 1.1 booleans (PyYAML)
        ("1e5", '"1e5"'), ("1.5", '"1.5"'), ("0x1F", '"0x1F"'), ("012", '"012"'), ("1_000", '"1_000"'),
        ("null", '"null"'), ("~", '"~"'), ("", '""'), ("True", '"True"'), (".inf", '".inf"'),
        (": x", '": x"'), ("x: y", '"x: y"'), ("#", '"#"'), ("a #b", '"a #b"'), ("- x", '"- x"'),
        ("*x", '"*x"'), ("&a", '"&a"'), ("!t", '"!t"'), ("@x", '"@x"'), ("%x", '"%x"'), ("[1]", '"[1]"'),
        (" lead", '" lead"'), ("trail ", '"trail "'), ("2001-01-01", '"2001-01-01"'), ("<<", '"<<"'),
        ("a,b", '"a,b"'), ("tab\there", '"tab\\there"'), ("line\nbreak", '"line\\nbreak"'),
        ("feed_forward\\.mul", "'feed_forward\\.mul'"),  # regexes: single quotes, backslash literal
        ("it's", "it's"), ("'q", "\"'q\""), ("默认为False", "默认为False"), ("float16", "float16"), ("./out/dir", "./out/dir"),
    ],
)
def test_new_strings_are_quoted_exactly_when_needed(value: str, written: str):
    doc = ConfigDocument.from_text("a: 1\nb: plain\n")
    assert _line_after(doc, [("add", "/new", value)], "new:") == f"new: {written}"


@pytest.mark.parametrize("text", ["yes", "1e5", ": x", "#", "", "null", "x: y", " a"])
def test_plain_ok_refuses_ambiguous_text(text: str):
    assert not plain_ok(text)


def test_replaced_strings_keep_their_quote_style():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    assert _line_after(doc, [("replace", "/output_dir", "./o")], "output_dir:") == "output_dir: './o'"
    assert _line_after(doc, [("replace", "/run_mode", "it's")], "run_mode:") == "run_mode: 'it''s'"
    assert _line_after(doc, [("replace", "/context/max_device_memory", "60GB")], "  max_device_memory:") == (
        '  max_device_memory: "60GB"  # Maximum memory available for the device')
    assert _line_after(doc, [("replace", "/trainer/type", "yes")], "  type: ") == '  type: "yes"'
    assert _line_after(doc, [("replace", "/trainer/type", "Other")], "  type: ") == "  type: Other"
    assert _line_after(doc, [("replace", "/context/device_target", "a\nb")], "  device_target:") == (
        '  device_target: "a\\nb"  # Target device to run (only supports "Ascend")')


@pytest.mark.parametrize(
    ("pointer", "value", "written"),
    [
        ("/optimizer/eps", 1e-9, "eps: 1.e-9"),
        ("/optimizer/eps", 2.5e-7, "eps: 2.5e-7"),
        ("/optimizer/eps", 0.5, "eps: 5.e-1"),  # the exponent shape is kept
        ("/optimizer/weight_decay", 0.01, "weight_decay: 0.01"),
        ("/optimizer/weight_decay", 1e-5, "weight_decay: 1.0e-05"),  # PyYAML needs "." and a signed exponent
        ("/optimizer/weight_decay", 1e16, "weight_decay: 1.0e+16"),
        ("/optimizer/weight_decay", 3.0, "weight_decay: 3.0"),
        ("/model/model_config/rope_theta", 500000.0, "rope_theta: 500000."),
        ("/model/model_config/rms_norm_eps", 1e-5, "rms_norm_eps: 1.e-5"),
        ("/optimizer/weight_decay", math.inf, "weight_decay: .inf"),
        ("/optimizer/weight_decay", -math.inf, "weight_decay: -.inf"),
        ("/optimizer/weight_decay", 5, "weight_decay: 5"),
    ],
)
def test_float_spelling(pointer: str, value: float, written: str):
    doc = load("pretrain_qwen3_32b_4k.yaml")
    line = _line_after(doc, [("replace", pointer, value)], " " * (pointer.count("/") - 1) * 2 + written.split(":")[0] + ":")
    assert line.strip() == written


@pytest.mark.parametrize("value", [1e-5, 1e16, 1.5e-7, 0.1, 123456789.0, 1e300, 5e-324, -2e-3])
def test_format_float_reads_back_in_yaml_1_1_and_1_2(value: float):
    import re

    text = format_float(value)
    assert float(text) == value
    # PyYAML's (YAML 1.1) float pattern: a dot, and a sign on the exponent.
    assert re.fullmatch(r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?", text), text


def test_bools_keep_the_spelling_of_the_scalar_and_the_file():
    qwen25 = load("finetune_qwen2_5_7b_8k.yaml")
    assert _line_after(qwen25, [("replace", "/model/model_config/qkv_concat", True)], "    qkv_concat:") == "    qkv_concat: true"
    assert _line_after(qwen25, [("replace", "/model/model_config/use_past", True)], "    use_past:") == "    use_past: True"
    assert _line_after(qwen25, [("add", "/model/model_config/new_flag", False)], "    new_flag:") == "    new_flag: False"
    lower = ConfigDocument.from_text("a: true\nb: false\nc: 1\n")
    assert _line_after(lower, [("replace", "/c", True)], "c:") == "c: true"
    # A string replacing a bool is a string, quoted so that it stays one.
    assert _line_after(qwen25, [("replace", "/model/model_config/use_past", "True")], "    use_past:") == '    use_past: "True"'


def test_none_ints_and_containers():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    assert _line_after(doc, [("replace", "/seed", None)], "seed:") == "seed: null"
    assert _line_after(doc, [("replace", "/seed", -3)], "seed:") == "seed: -3"
    assert _line_after(doc, [("replace", "/seed", 10**20)], "seed:") == "seed: 100000000000000000000"
    assert _line_after(doc, [("replace", "/seed", [])], "seed:") == "seed: []"
    assert _line_after(doc, [("replace", "/seed", {})], "seed:") == "seed: {}"
    assert _line_after(doc, [("replace", "/seed", [[1, 2], [3]])], "seed:") == "seed: [[1, 2], [3]]"


def test_list_style_follows_the_file_and_the_replaced_value():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    # A flow list replaced by a list stays flow, strings quoted like the old items.
    assert _line_after(doc, [("replace", "/train_dataset/input_columns", ["input_ids", "labels"])],
                       "  input_columns:") == '  input_columns: ["input_ids", "labels"]'
    # A list of mappings is a block sequence, indented like the file's.
    result = apply_patches(doc, [patch("cb", ("replace", "/callbacks", [{"type": "MFLossMonitor"}, {"type": "X", "n": 1}]))])
    # ("n" is a YAML 1.1 boolean, so even as a key it is quoted.)
    assert 'callbacks:\n  - type: MFLossMonitor\n  - type: X\n    "n": 1\n\n# Wrapper cell configuration\n' in result.new_text
    # A block sequence replaced by scalars stays block.
    result = apply_patches(doc, [patch("s", ("replace", "/train_dataset/data_loader/sizes", [1, 2]))])
    assert "    sizes:\n      - 1\n      - 2\n    config:\n" in result.new_text


def test_new_mapping_is_block_and_quotes_like_its_neighbours():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    result = apply_patches(doc, [patch("m", ("add", "/context/ascend_config/new_block", {"a": "x y", "b": [1, 2], "c": {"d": True}}))])
    assert ('    new_block:\n      a: "x y"\n      b: [1, 2]\n      c:\n        d: True\n'
            "\n# Parallel configuration\n") in result.new_text


def test_anchor_moves_to_the_new_value_of_every_kind():
    for value, written in ((5, "&x 5"), ("s", "&x s"), (True, "&x True"), (2.5, "&x 2.5"), ([1], "&x [1]"), ({"k": 1}, "&x {k: 1}")):
        doc = ConfigDocument.from_text("a: &x 1\nb: *x\nc: [*x]\n") if not isinstance(value, dict) else (
            ConfigDocument.from_text("a: &x {k: 0}\nb: *x\nc: [*x]\n"))
        result = apply_patches(doc, [patch("a", ("replace", "/a", value))])
        assert result.ok, value
        assert result.new_text.split("\n")[0] == f"a: {written}", (value, result.new_text)
        new = ConfigDocument.from_text(result.new_text)
        assert new.plain("/b") == value and new.plain("/c/0") == value
