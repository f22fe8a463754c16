"""advisor_core.config.plain.json_plain: ruamel values as JSON for patch preconditions."""

from __future__ import annotations

from advisor_core.config.document import ConfigDocument
from advisor_core.config.plain import json_plain
from advisor_core.engine.findings import Patch, PatchOp, Safety
from advisor_core.patch import apply_patches


def test_plain_values_and_string_keys() -> None:
    doc = ConfigDocument.from_text("a: 1\nb: [1.5, x, null]\n3: {c: false}\n")
    assert json_plain(doc.data) == {"a": 1, "b": [1.5, "x", None], "3": {"c": False}}


def test_anchored_boolean_is_a_boolean_and_its_test_op_holds() -> None:
    doc = ConfigDocument.from_text("flag: &f true\nother: *f\n")
    value = json_plain(doc.data["flag"])
    assert value is True
    patch = Patch(title="flip", safety=Safety.SAFE,
                  ops=[PatchOp(op="test", path="/flag", value=value), PatchOp(op="replace", path="/flag", value=False)])
    result = apply_patches(doc, [patch])
    assert result.ok, [f.message for f in result.failed]
    assert result.new_text == "flag: &f false\nother: *f\n"
