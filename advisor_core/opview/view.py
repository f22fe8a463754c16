"""The op view of one rank: its distinct ops with their time, and (rank-side only) the kernel timeline.

``OpView.ops`` is a DataFrame with one row per distinct op signature (index ``op``,
numbered in order of first appearance in the kernel table):

* signature: ``name``, ``type``, ``accelerator_core``, ``stream_id`` and the raw
  ``input/output_shapes|dtypes|formats`` text (whichever the profile has);
* parsed once: ``scope`` (the IR full name the kernel was launched for), ``primitive``
  (``MatMul`` of ``…/MatMul-op3``), ``cell`` (the cell scope, forward and backward
  kernels of a cell sharing it), ``forward_cell`` (the cell with ``Grad_*`` segments
  dropped), ``backward``, ``grad`` (the ``Grad_*`` segment), ``layer`` (decoder layer
  index), ``recompute``, ``is_comm`` (a communication core); ``in_shapes``/
  ``out_shapes`` (tuples of int tuples, one per operand, ``()`` for a scalar),
  ``in_dtypes``/``out_dtypes``, ``in_formats``/``out_formats`` (normalised per operand)
  and ``in_format``/``out_format`` (the whole text normalised);
* time: ``count`` (kernel launches), ``total_us``, ``mean_us``, ``min_us``, ``max_us``,
  ``per_step_us`` (total ÷ steps), ``steps_seen``, ``first_step``, ``last_step``.

``steps`` is the number of profiled steps the kernels cover (≥ 1). The
:class:`Timeline` holds one entry per kernel sorted by start; it stays where the view
was built (it is dropped when the view is pickled to another process), so analyses
that need kernel order run there, as a rule's ``rank_evidence``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

import numpy as np
import pandas as pd

from advisor_core.opview.names import COMM_CORE_NAMES

__all__ = ["COMM_CORE_NAMES", "OpView", "Timeline"]



@dataclass
class Timeline:
    """Per kernel, sorted by start (kernels without a start are left out): numpy arrays of equal length.

    ``op`` indexes ``OpView.ops``; ``start_ns``/``end_ns`` are exact ns; ``step`` indexes
    ``OpView.step_ids`` (−1 outside any step); ``stream`` is −1 when unknown.
    """

    op: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    duration_us: np.ndarray
    step: np.ndarray
    stream: np.ndarray

    @classmethod
    def build(cls, op: np.ndarray, start: np.ndarray, dur: np.ndarray, step: np.ndarray,
              stream: np.ndarray | None) -> "Timeline":
        no_start = np.iinfo(np.int64).min
        idx: np.ndarray | None = None  # None: every kernel, in table order (the usual case: no copies)
        if bool(np.any(start == no_start)):
            idx = np.flatnonzero(start != no_start)
        s = start if idx is None else start[idx]
        if len(s) > 1 and bool(np.any(s[1:] < s[:-1])):
            order = np.argsort(s, kind="stable")
            idx = order if idx is None else idx[order]

        def pick(a: np.ndarray) -> np.ndarray:
            return a if idx is None else a[idx]

        d = pick(dur)
        if bool(np.isnan(d).any()):
            d = np.nan_to_num(d, nan=0.0)
        st = pick(start)
        strm = pick(stream) if stream is not None else np.full(len(st), -1, np.int64)
        if bool(np.any(strm == no_start)):
            strm = np.where(strm == no_start, -1, strm)
        end = np.round(d * 1000)  # in place from here: each new million-row array costs its page faults
        end_ns = end.astype(np.int64)
        end_ns += st
        return cls(op=pick(op).astype(np.int32), start_ns=st, end_ns=end_ns, duration_us=d,
                   step=pick(step).astype(np.int32), stream=strm.astype(np.int64, copy=False))

    def __len__(self) -> int:
        return len(self.op)


@dataclass
class OpView:
    """Distinct ops of one rank's kernel table (see module docstring)."""

    ops: pd.DataFrame
    steps: int
    step_ids: tuple[int, ...]
    rows: int
    source: str
    timeline: Timeline | None = field(default=None, repr=False)
    has: tuple[str, ...] = ()  # canonical kernel columns the profile had

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["timeline"] = None  # kernel order stays where the view was built
        return state

    def without_timeline(self) -> "OpView":
        return replace(self, timeline=None)

    # -- selections ---------------------------------------------------------------------------------
    def of_type(self, types: Iterable[str]) -> pd.DataFrame:
        """Ops whose ``type`` is one of ``types``."""
        return self.ops[self.ops["type"].isin(list(types))]

    @property
    def compute(self) -> pd.DataFrame:
        """Ops that are not communication."""
        return self.ops[~self.ops["is_comm"]]

    def has_columns(self, *columns: str) -> bool:
        """Did the profile's kernel table have all of ``columns``?"""
        return all(c in self.has for c in columns)

    # -- common sums --------------------------------------------------------------------------------
    def time_by_scope(self) -> dict[str, float]:
        """Total kernel µs per IR full name over the profile (kernels without a scope left out)."""
        o = self.ops[self.ops["scope"].notna()]
        sums = o.groupby("scope", sort=True)["total_us"].sum()
        return {str(s): float(v) for s, v in sums.items()}

    def launches_by_scope(self) -> dict[str, int]:
        """Kernel launches per IR full name over the profile."""
        o = self.ops[self.ops["scope"].notna()]
        counts = o.groupby("scope", sort=True)["count"].sum()
        return {str(s): int(v) for s, v in counts.items()}

    def fixed_cost_us(self) -> float:
        """Per-launch fixed cost of a device kernel: the shortest compute kernel's duration (0 without one).

        A memory-bound kernel lasts fixed cost + bytes / bandwidth; the shortest kernel of a
        training step (a cast or update of a tiny tensor) moves next to nothing.
        """
        mins = self.compute["min_us"]
        mins = mins[mins > 0]
        return float(mins.min()) if not mins.empty else 0.0

    def busy_us_per_step(self) -> float:
        """Compute (non-communication) kernel µs per step."""
        return float(self.compute["total_us"].sum()) / self.steps

    def launches_per_step_by_name(self) -> pd.Series:
        """Launches per step of each kernel name."""
        return self.ops.groupby("name", sort=False)["count"].sum() / self.steps
