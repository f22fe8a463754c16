"""Who wrote a Cast: the model code, MindSpore's automatic mixed precision (AMP), or the backend.

The IR says it in each node's ``# In file`` call stack (outermost frame first), as MindSpore 2.10 writes it
(``tests/data/mindspore-runs/amp_o1_mlp`` and ``amp_o2_unaligned``):

* **backend** — ``is_backend_cast: Bool(1)`` (``graph_build`` only): the backend cast for a kernel that lacks
  the dtype;
* **AMP, rewritten network** (``level="O1"``, and ``O2``/``O3`` with ``MS_AMP_BY_REWRITE``): AMP rewrites the
  cells into ``rewritten_network/<Cell>Opt_<id>.py`` and every cast goes through ``amp_cast`` in
  ``mindspore/train/amp.py`` — a frame in either names it;
* **AMP, cast cells** (``level="O2"``/``"O3"``, ``Cell.to_float``): the compiler casts a converted cell's
  inputs and the parameters it reads, so no frame of the stack calls a cast: the innermost frame is the
  statement that *uses* the tensor (``x = self.matmul(x, self.weight)``), or the cell's ``def construct``;
  the network's output is cast back by ``F.mixed_precision_cast`` in ``mindspore/train/amp.py``;
* **model code** — the innermost frame's statement calls a cast (``self.cast(x, …)``; ``ops.cast`` and
  ``.astype(…)`` end in MindSpore's own ``return cast_op(input, dtype)``), outside AMP.

A backward Cast (``Grad_Cast``) is judged by its forward node's stack when it has none of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

_AMP_FILE = "/mindspore/train/amp.py"
_REWRITTEN = "/rewritten_network/"
_CASTING_CODE = re.compile(r"(?:\bcast\b|\bCast\b|cast_op|\.astype\(|\.to\(|mixed_precision_cast|amp_cast)\s*\(?")


@dataclass(frozen=True)
class Origin:
    """Who wrote a Cast: ``kind`` is ``user``, ``amp`` or ``backend`` (``unknown`` without a call stack)."""

    kind: str
    how: str = ""  # AMP only: "rewrite" (amp_cast in a rewritten network) | "cast-cell" (to_float) | "output"
    file: str | None = None  # AMP's rewritten network file, when it was named


def cast_origin(node: Any, forward: Any | None = None) -> Origin:
    """Who wrote ``node`` (an IR Cast); ``forward`` is its forward node, for a backward cast without a stack."""
    if getattr(node, "is_backend_cast", False):
        return Origin("backend")
    frames = list(getattr(node, "sources", None) or [])
    if not frames and forward is not None:
        frames = list(getattr(forward, "sources", None) or [])
    if not frames:
        return Origin("unknown")
    rewritten = next((f.file for f in frames if _REWRITTEN in (f.file or "")), None)
    if rewritten is not None or any("amp_cast" in (f.code or "") for f in frames):
        return Origin("amp", "rewrite", rewritten)
    if any(_AMP_FILE in (f.file or "") and "mixed_precision_cast" in (f.code or "") for f in frames):
        return Origin("amp", "output")
    if _CASTING_CODE.search(frames[-1].code or ""):
        return Origin("user")  # the innermost statement casts (an outer call site may cast something else)
    return Origin("amp", "cast-cell")


def chain_origin(nodes: Iterable[Any], fwd_by_uid: dict[str, Any]) -> Origin:
    """The origin of a chain: its first cast not inserted by the backend (AMP before model code when both)."""
    found: list[Origin] = []
    for n in nodes:
        fwd = fwd_by_uid.get(n.forward_unique_id) if getattr(n, "forward_unique_id", None) else None
        found.append(cast_origin(n, fwd))
    for kind in ("amp", "user", "unknown"):
        hit = next((o for o in found if o.kind == kind), None)
        if hit is not None:
            return hit
    return Origin("backend")
