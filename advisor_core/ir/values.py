"""Immutable value types of the IR model: types, device types, source locations, operand refs.

They live apart from :mod:`advisor_core.ir.model` so that the decoders can build them without
importing the node classes (which call the decoders lazily). :mod:`advisor_core.ir.model`
re-exports them; import them from there.

All four are frozen: decoders cache and share instances between nodes (the same
``<Tensor[Float32], (8, 32)>`` appears thousands of times in a large dump).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["DeviceType", "OperandRef", "SourceLoc", "TensorType"]


@dataclass(frozen=True, slots=True)
class TensorType:
    """One abstract (host) type from a type line, e.g. ``<Tensor[Float16], (24, 1001)>``.

    ``kind`` is one of ``"tensor"``, ``"scalar"``, ``"tuple"``, ``"monad"``, ``"func"``,
    ``"other"``. ``dtype`` is the element type name as written (``Float16``; old short names
    such as ``F32`` in ``Ref[Tensor(F32)]`` are expanded to ``Float32``). ``shape`` is the
    tensor shape with dynamic dims kept (``-1`` unknown dim; unknown rank is ``(-2,)``), ``()``
    for a 0-d tensor, ``None`` when there is no shape (scalars, ``NoShape``) or it could not be
    read. ``is_ref`` marks parameters (``Ref[...]``); ``ref_key`` is the parameter key without the
    ``:`` some versions put in front; ``is_constant`` marks ``value=...`` constants. For tuples,
    ``elements`` holds the element types when the tuple spells them out, else ``None``.
    ``raw`` is the text between ``<`` and ``>``.
    """

    kind: str
    dtype: str | None
    shape: tuple[int, ...] | None
    is_ref: bool
    ref_key: str | None
    is_constant: bool
    raw: str
    elements: tuple["TensorType", ...] | None = None

    @property
    def rank(self) -> int | None:
        """Number of dims, ``None`` when unknown (no shape, or unknown rank ``(-2)``)."""
        if self.shape is None or self.shape == (-2,):
            return None
        return len(self.shape)

    @property
    def is_dynamic(self) -> bool:
        """True when a dim is unknown (``-1``) or the rank is unknown (``-2``)."""
        return self.shape is not None and any(d < 0 for d in self.shape)


@dataclass(frozen=True, slots=True)
class DeviceType:
    """One device type from a backend type line: ``<Float16xDefaultFormat[const vector]{8, 32}>``.

    ``dtype`` (``Float16``, ``Unknown`` for some weights), ``format`` (``DefaultFormat``,
    ``FRACTAL_NZ``, ``NC1HWC0`` ...), ``shape`` (device shape, padded for fractal formats;
    ``()`` for ``{}``; ``None`` if unreadable). ``raw`` is the text between ``<`` and ``>``.
    """

    dtype: str | None
    format: str | None
    shape: tuple[int, ...] | None
    raw: str


@dataclass(frozen=True, slots=True)
class SourceLoc:
    """One ``# In file`` line.

    2.x: ``# In file <file>:<line>[~<line_end>][, <col>~<col_end>]/<code>/`` ;
    1.x: ``# In file <file>(<line>)/<code>/``. ``shared`` is True when MindSpore appended
    ``<~~This line of code can be shared by multiple nodes, and may be duplicated./``.
    ``code`` is the source text without the surrounding ``/``.
    """

    file: str
    line: int
    line_end: int | None
    col: int | None
    col_end: int | None
    code: str
    shared: bool


class OperandRef(NamedTuple):
    """What one operand refers to (a named tuple: cheap to build, immutable).

    ``kind``:

    * ``"node"``: ``%k``, node ``index`` k in ``graph`` (the consumer's own subgraph);
    * ``"param"``: ``%paraK_name``; ``name`` is the token without ``%`` (``para3_x``);
    * ``"crossref"``: ``$(@g:n)``; ``graph`` = g, ``name`` = n (a debug name or ``paraK_x``);
    * ``"graph"``: ``@g`` (a graph used as a value: ``Partial(@g, ..)``, ``Switch``);
    * ``"value"``: anything else (constants, ``UMonad[U]``, ``Tensor(...)``, ``None``).

    ``text`` is the operand as written.
    """

    kind: str
    text: str
    graph: str | None = None
    index: int | None = None
    name: str | None = None
