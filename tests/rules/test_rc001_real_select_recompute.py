"""RC001 on a real MindSpore 2.10 run (``tests/data/mindspore-runs/select_recompute_merge``).

With both the IR and the config, the IR shows what the current patterns did and the config's
layer structure also judges the primitive a cell pattern should have named: the patch must carry
both causes. ``ir_after`` is MindSpore compiling the patched config: the SiLU is duplicated.
"""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.engine.settings import Settings
from advisor_core.ir import parse_ir_file

CASE = Path(__file__).resolve().parents[1] / "data" / "mindspore-runs" / "select_recompute_merge"
F32 = 4
B, S, H, F = 2, 16, 64, 176  # config.yaml


def rc001(ir: str, config: str | None):
    s = Session([CASE / ir], SessionOptions(config=CASE / config if config else None, autoload_plugins=False,
                                            settings=Settings()))
    return s.analyze(select=["RC001"])


def select_of(config: str) -> list[str]:
    return YAML(typ="safe").load((CASE / config).read_text(encoding="utf-8"))["recompute_config"]["select_recompute"]


def duplicated(ir: str) -> dict[str, int]:
    (path,) = (CASE / ir).glob("21_validate_*.ir")
    out: dict[str, int] = {}
    for n in parse_ir_file(path, DiagnosticSink()).iter_nodes():
        if n.is_duplicated:
            out[n.op] = out.get(n.op, 0) + 1
    return out


def test_ir_and_config_causes_are_merged_into_one_patch():
    (f,) = rc001("ir_before", "config.yaml").findings
    (p,) = f.patches
    (new,) = [o.value for o in p.ops if o.op == "replace"]
    # the IR's causes (Mul blocked by w2's reshape; the cell pattern) and the config's (SiLU, once
    # named, blocked by w1's reshape) in one value: exactly what config_fixed.yaml holds
    assert new == select_of("config_fixed.yaml") == [
        "feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu", "feed_forward\\.w1\\.reshape",
        "feed_forward\\.w2\\.reshape"]
    assert ("the pattern names the cell feed_forward.w1.activation, whose only node (SiLU) is its output; a recomputed "
            "cell keeps its output; naming feed_forward.w1.activation.silu instead is not enough either: its output "
            "reaches the backward pass only through feed_forward.w1.reshape (Reshape)") in " ".join(f.message.split())
    assert f.confidence == 0.9  # the IR's verdict
    # per layer the fix stops keeping w1's 2-D input and its reshaped SiLU output and w2's 2-D input
    # (the Mul output), and keeps the SiLU's input instead: 2 layers
    per_layer = (B * S * H + B * S * F + B * S * F) * F32 - B * S * H * F32
    assert f.memory_delta_bytes == -2 * per_layer == -90112


def test_ir_alone_cannot_see_the_silu_blocked_once_named():
    (f,) = rc001("ir_before", None).findings
    assert f.patches == []  # no config to patch
    assert "Add to select_recompute: 'feed_forward\\\\.w2\\\\.reshape'." in f.message
    assert "w1\\\\.reshape" not in f.message


def test_mindspore_recomputes_the_silu_with_the_merged_patch():
    assert duplicated("ir_before") == {}
    assert duplicated("ir_after") == {"Mul": 2, "SiLU": 2, "Reshape": 6}
    res = rc001("ir_after", "config_fixed.yaml")
    assert res.findings == []
    assert {s.code: s.reason for s in res.skipped}["RC001"] == "every configured op is recomputed (IR)"
