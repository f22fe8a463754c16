"""What CT002 reports: a :class:`Group` of TransData with one cause, and the format names it compares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor_rules._common import layer_of_scope

TRANS_OPS = ("TransData", "TransDataRNN")
SPECIAL_FORMATS = ("FRACTAL_NZ", "NC1HWC0", "FRACTAL_Z", "FracZ", "NDC1HWC0", "FRACTAL_ZN_RNN")
MATMUL_OPS = {"MatMul", "BatchMatMul", "MatMulV2", "MatMulV3", "BatchMatMulV2", "MatMulExt", "BatchMatMulExt", "Dense"}


def norm_fmt(fmt: Any) -> str:
    """A format name as the rule compares them: ``FORMAT_`` dropped, ND spellings (``DefaultFormat``, ``NCHW``) → ``ND``."""
    import pandas as pd

    f = "" if fmt is None or fmt is pd.NA or (isinstance(fmt, float) and fmt != fmt) else str(fmt)
    f = f.upper().replace("FORMAT_", "")
    return {"DEFAULTFORMAT": "ND", "NCHW": "ND", "FRACZ": "FRACTAL_Z"}.get(f, f)


@dataclass
class Group:
    """TransData conversions with one cause (an ND-forcing op, the weights, a cancelling pair), over layers and stages."""

    kind: str  # sandwich | param | back-to-back
    key: str
    culprit: str  # what the user should look at (op or parameter)
    trans: list[Any] = field(default_factory=list)  # IR TransData nodes
    culprit_nodes: list[Any] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # weights converted (kind param)
    layers: set[int] = field(default_factory=set)
    formats: str = ""
    kernel_names: list[str] = field(default_factory=list)  # profile-only detection
    path: str | None = None
    cost: dict[int, float] = field(default_factory=dict)  # µs per step by pipeline stage
    measured: bool = False
    how: str = ""

    def add(self, node: Any) -> None:
        if all(node is not t for t in self.trans):
            self.trans.append(node)


def add_layer(g: Group, node: Any) -> None:
    """Record the decoder layer of ``node`` (if any) on ``g``."""
    lay = layer_of_scope(node.scope)
    if lay is not None:
        g.layers.add(lay)
