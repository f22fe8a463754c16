"""ConfigDocument: loading (one diagnostic per problem), JSON pointers, positions, anchors and aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.config.document import (
    ConfigDocument,
    ConfigLoadError,
    PointerError,
    YamlLayout,
    pointer_join,
    pointer_split,
    resolve,
    to_plain,
)
from advisor_core.diagnostics import DiagnosticSink

from patchtest_support import CONFIGS, load


def _load_text(tmp_path: Path, text: str | bytes) -> tuple[ConfigDocument | None, DiagnosticSink]:
    path = tmp_path / "train.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    sink = DiagnosticSink()
    return ConfigDocument.load(path, sink), sink


# --------------------------------------------------------------------------- loading


@pytest.mark.parametrize(
    ("text", "code", "line", "column"),
    [
        ("a: [1, 2\nb: 3\n", "yaml-syntax", 2, 2),
        ("a: 1\nb:\n  c: 2\n c2: 3\n", "yaml-syntax", 4, 2),
        ("a:\n\tb: 1\n", "yaml-syntax", 2, 1),
        ("seed: 1\nrun_mode: x\nseed: 2\n", "yaml-duplicate-key", 3, 1),
        ("# nothing but a comment\n\n", "yaml-empty", 1, 1),
        ("---\n", "yaml-empty", 1, 1),
        ("a: 1\n---\nb: 2\n", "yaml-multiple-documents", 2, 1),
        ("# header\n- a\n- b\n", "yaml-root-not-mapping", 2, 1),
        ("42\n", "yaml-root-not-mapping", 1, 1),
        ("a: *nowhere\n", "yaml-syntax", 1, 4),
        ("a: \x07bell\n", "yaml-syntax", 1, 4),
    ],
)
def test_bad_yaml_gives_one_diagnostic_with_position(tmp_path: Path, text: str, code: str, line: int, column: int):
    doc, sink = _load_text(tmp_path, text)
    assert doc is None
    errors = sink.items
    assert len(errors) == 1, [d.render() for d in errors]
    diag = errors[0]
    assert (diag.code, diag.line, diag.column) == (code, line, column), diag.render()
    assert diag.path == str(tmp_path / "train.yaml")
    assert diag.render().startswith(f"{tmp_path / 'train.yaml'}:{line}:{column}: error: ")


def test_unreadable_inputs_are_diagnostics_from_textio(tmp_path: Path):
    sink = DiagnosticSink()
    assert ConfigDocument.load(tmp_path / "missing.yaml", sink) is None
    assert [d.code for d in sink] == ["missing-file"]
    doc, sink = _load_text(tmp_path, b"")
    assert doc is None and [d.code for d in sink] == ["empty-file"]


def test_from_text_without_sink_raises_with_the_diagnostic():
    with pytest.raises(ConfigLoadError) as info:
        ConfigDocument.from_text("a: 1\na: 2\n", "x.yaml")
    assert info.value.diagnostic.code == "yaml-duplicate-key"
    assert "x.yaml:2:1" in str(info.value)


def test_all_real_configs_load_cleanly(real_data: Path):
    for path in sorted((real_data / "mindformers-configs").glob("*.yaml")):
        sink = DiagnosticSink()
        doc = ConfigDocument.load(path, sink)
        assert doc is not None and not sink.items, path
        assert doc.text == path.read_text(encoding="utf-8")
        assert doc.layout == YamlLayout(final_newline=doc.text.endswith("\n"))  # 2/4/2, True/False, '"'


def test_layout_is_detected_not_assumed():
    text = "a:\n    b: true\n    c:\n    - x\n    - 'y'\n    d: 'z'\n"
    layout = ConfigDocument.from_text(text).layout
    assert (layout.mapping, layout.sequence, layout.offset) == (4, 2, 0)
    assert layout.bools == ("false", "true")
    assert layout.quote == "'"
    crlf = ConfigDocument.from_text("a: 1\r\nb: [1]\r\n").layout
    assert crlf.crlf and crlf.final_newline


# --------------------------------------------------------------------------- pointers


@pytest.mark.parametrize(
    ("pointer", "tokens"),
    [("", []), ("/", [""]), ("/a/b", ["a", "b"]), ("/a~1b", ["a/b"]), ("/m~0n", ["m~n"]), ("/~01", ["~1"]),
     ("/feed_forward\\.mul/0", ["feed_forward\\.mul", "0"])],
)
def test_pointer_split_and_join_round_trip(pointer: str, tokens: list[str]):
    assert pointer_split(pointer) == tokens
    assert pointer_join(*tokens) == pointer


@pytest.mark.parametrize("bad", ["a/b", "/a~2", "/~"])
def test_malformed_pointers_are_rejected(bad: str):
    with pytest.raises(ValueError):
        pointer_split(bad)


def test_get_and_exists_walk_maps_sequences_and_escapes():
    doc = ConfigDocument.from_text("a/b:\n  m~n: [10, 20]\n'1': x\n2: y\nn: null\n")
    assert doc.get("/a~1b/m~0n/1") == 20
    assert doc.exists("/a~1b/m~0n/0") and not doc.exists("/a~1b/m~0n/2")
    assert not doc.exists("/a~1b/m~0n/01")  # RFC 6901: no leading zeros
    assert not doc.exists("/a~1b/m~0n/-")
    assert doc.get("/1") == "x" and doc.get("/2") == "y"  # an int key is matched by its text
    assert doc.exists("/n") and doc.get("/n", "default") is None
    assert doc.get("/missing/deeper", "default") == "default"
    assert doc.plain("/a~1b") == {"m~n": [10, 20]} and type(doc.plain("/a~1b")) is dict
    with pytest.raises(PointerError) as info:
        resolve(doc.data, "/a~1b/nope/x")
    assert info.value.pointer == "/a~1b/nope"


def test_merge_keys_are_visible_when_reading():
    doc = ConfigDocument.from_text("base: &b\n  x: 1\n  y: 2\nderived:\n  <<: *b\n  y: 3\n")
    assert doc.get("/derived/x") == 1 and doc.get("/derived/y") == 3
    assert doc.position("/derived/x") == (2, 3)  # written in the merged-in mapping
    assert doc.position("/derived/y") == (6, 3)
    assert doc.alias_sites("/derived/x") == ["/base/x"]


def test_to_plain_types_and_shared_nodes():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    plain = to_plain(doc.data)
    assert type(plain["recompute_config"]["recompute"]) is bool
    assert type(plain["optimizer"]["eps"]) is float and plain["optimizer"]["eps"] == 1e-8
    assert type(plain["parallel_config"]["data_parallel"]) is int
    assert plain["train_dataset_task"]["dataset_config"] is plain["train_dataset"]  # an alias stays one object


# --------------------------------------------------------------------------- positions


def test_positions_are_one_based_key_and_item_positions():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    assert doc.position("") == (1, 1)
    assert doc.position("/seed") == (1, 1)
    assert doc.position("/train_dataset/num_parallel_workers") == (64, 3)
    assert doc.value_position("/train_dataset/num_parallel_workers") == (64, 25)
    assert doc.position("/callbacks/1") == (171, 5)  # the item, after "- "
    assert doc.position("/callbacks/1/prefix") == (172, 5)
    assert doc.position("/parallel/dataset_strategy/4/3") == (108, 19)  # inside a multi-line flow list
    assert doc.position("/train_dataset/data_loader/sizes/2") == (46, 9)
    assert doc.position("/nope") is None and doc.position("bad") is None
    # Through an alias: the text is where the anchored node is written.
    assert doc.position("/train_dataset_task/dataset_config") == (72, 3)
    assert doc.position("/train_dataset_task/dataset_config/num_parallel_workers") == (64, 3)


def test_position_of_quoted_regex_key_and_chinese_comment_lines():
    doc = load("finetune_qwen2_5_7b_8k.yaml")
    assert doc.position("/recompute_config/select_recompute/feed_forward\\.mul") == (119, 5)
    glm = load("finetune_glm4_9b.yaml")
    assert glm.position("/parallel/full_batch") == (154, 3)
    assert glm.position("/context/jit_config/jit_level") == (19, 4)  # the 3-space indented block


def test_literal_spelling_of_bools_and_numbers():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    assert doc.literal("/recompute_config/select_recompute") == "False"
    assert doc.literal("/optimizer/eps") == "1.e-8"
    assert doc.literal("/model/model_config/rope_theta") == "1000000."
    assert doc.literal("/parallel_config/data_parallel") == "1"  # behind "&dp "
    assert doc.literal("/context/max_device_memory") is None  # a string
    assert load("finetune_qwen2_5_7b_8k.yaml").literal("/model/model_config/qkv_concat") == "false"


# --------------------------------------------------------------------------- anchors and aliases


def test_alias_sites_of_an_anchored_mapping():
    doc = load("pretrain_llama2_7b.yaml")
    assert doc.anchor_of("/train_dataset/num_parallel_workers") == "train_dataset"
    assert doc.alias_sites("/train_dataset/num_parallel_workers") == [
        "/train_dataset_task/dataset_config/num_parallel_workers"
    ]
    assert doc.alias_sites("/train_dataset_task/dataset_config/num_parallel_workers") == [
        "/train_dataset/num_parallel_workers"
    ]
    assert doc.anchor_of("/train_dataset_task/dataset_config/num_parallel_workers") == "train_dataset"
    assert doc.alias_sites("/train_dataset") == ["/train_dataset_task/dataset_config"]
    assert doc.alias_sites("/parallel_config/data_parallel") == []
    assert doc.anchor_of("/parallel_config/data_parallel") is None


def test_alias_sites_of_an_anchored_scalar_in_flow_lists():
    doc = load("pretrain_qwen3_32b_4k.yaml")
    sites = [f"/parallel/dataset_strategy/{i}/0" for i in range(5)]
    assert doc.anchor_of("/parallel_config/data_parallel") == "dp"
    assert doc.alias_sites("/parallel_config/data_parallel") == sites
    assert doc.value_sites("/parallel_config/data_parallel") == sites
    assert doc.slot_sites("/parallel_config/data_parallel") == []
    assert doc.alias_sites("/parallel/dataset_strategy/2/0") == ["/parallel_config/data_parallel"] + [
        s for s in sites if s != "/parallel/dataset_strategy/2/0"
    ]
    assert doc.alias_sites("/parallel/dataset_strategy/2/1") == []


def test_iter_pointers_expands_aliases_in_document_order():
    doc = ConfigDocument.from_text("a: &x {k: 1}\nb: *x\n")
    assert list(doc.iter_pointers()) == ["/a", "/a/k", "/b", "/b/k"]


def test_fixture_copies_are_the_shared_real_configs(real_data: Path):
    for path in sorted(CONFIGS.glob("*.yaml")):
        assert path.read_bytes() == (real_data / "mindformers-configs" / path.name).read_bytes(), path.name
