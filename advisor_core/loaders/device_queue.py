"""The device's side of the data queue in sink mode: one record per dequeue (``GetNext``) on the device.

In sink mode the host pushes batches into a queue on the device and the graph's ``GetNext``
takes one per step. When that queue is empty the device idles until the next batch arrives.
Three files record it (``ascend-profile-formats.md`` §4.13), all read into the
``device_queue`` table:

* ``minddata_aicpu_{id}.txt`` (MindSpore ≤ 2.3, Ascend; ``MinddataParser``): a header line
  ``node_name start_time end_time queue_size`` then one line per dequeue,
  ``GetNext_dequeue_wait <start µs> <end µs> <queue size>``;
* ``aicpu_mi_*.csv`` (CANN's msprof export, ``PROF_*/mindstudio_profiler_output/``, the
  file MindSpore converts into the one above): ``Device_id,Node Name,Start Time(us),End
  Time(us),Queue Size``;
* ``minddata_getnext_profiling_{id}.txt`` (GPU): ``GetNext <start ns> <end ns> <queue size>``.

As MindInsight's ``MinddataAnalyser.analyse_get_next_info`` does, only records whose node name
starts with ``GetNext`` are kept (all records when none does). Columns: ``step`` (1-based, in
time order), ``node_name``, ``start_us``, ``end_us``, ``wait_us`` (end − start: how long the
dequeue waited), ``queue_size`` (batches in the device queue at the dequeue; 0 = empty).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.textio import read_text

DEVICE_QUEUE_COLUMNS = ("step", "node_name", "start_us", "end_us", "wait_us", "queue_size")

_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")  # msprof appends "\t" (and MindSpore strips two chars): lenient


def _num(text: str) -> int | float | None:
    """An int when the text is one (GPU ns stamps exceed float64's exact integers), else a float."""
    m = _NUMBER.match(text or "")
    if not m:
        return None
    return float(m.group(1)) if "." in m.group(1) else int(m.group(1))


def read_device_queue(path: Path, kind: str, sink: DiagnosticSink) -> pd.DataFrame | None:
    """One of the three files above → ``device_queue`` rows; ``None`` when the file cannot be read."""
    text = read_text(path, sink, what=path.name)
    if text is None:
        return None
    if kind == "aicpu_mi":
        rows, bad, first_bad = _csv_rows(text)
    else:
        rows, bad, first_bad = _text_rows(text)
    if bad:
        sink.warning("malformed-rows", f"{bad} line(s) are not 'name start end queue_size' records; skipped", path,
                     line=first_bad)
    scale = 1e-3 if kind == "minddata_getnext_profiling" else 1.0  # GPU stamps are ns
    if any(r[0].startswith("GetNext") for r in rows):
        rows = [r for r in rows if r[0].startswith("GetNext")]
    rows.sort(key=lambda r: r[1])  # one record per step: a loop over steps
    out = pd.DataFrame({
        "step": np.arange(1, len(rows) + 1),
        "node_name": pd.array([r[0] for r in rows], dtype="string"),
        "start_us": np.array([r[1] * scale for r in rows], dtype=float),
        "end_us": np.array([r[2] * scale for r in rows], dtype=float),
        "wait_us": np.array([(r[2] - r[1]) * scale for r in rows], dtype=float),  # exact before the scaling
        "queue_size": np.array([r[3] for r in rows], dtype=float),
    })
    return out.astype({"step": "Int64"})


def _text_rows(text: str) -> tuple[list[tuple[str, Any, Any, Any]], int, int | None]:
    rows, bad, first_bad = [], 0, None
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        vals = [_num(p) for p in parts[1:4]]
        if len(parts) < 4 or any(v is None for v in vals):
            if lineno > 1 or not parts[0].lower().startswith("node"):  # the header line is expected
                bad += 1
                first_bad = first_bad or lineno
            continue
        rows.append((parts[0], vals[0], vals[1], vals[2]))
    return rows, bad, first_bad


def _csv_rows(text: str) -> tuple[list[tuple[str, Any, Any, Any]], int, int | None]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None) or []
    names = [h.strip().lower() for h in header]

    def col(*keys: str) -> int | None:
        return next((i for i, n in enumerate(names) if any(n.startswith(k) for k in keys)), None)

    i_name, i_start, i_end, i_size = col("node name"), col("start time"), col("end time"), col("queue size")
    if None in (i_name, i_start, i_end, i_size):  # headerless: MindSpore's positions 1..4
        i_name, i_start, i_end, i_size = 1, 2, 3, 4
        reader = csv.reader(io.StringIO(text))
    rows, bad, first_bad = [], 0, None
    for lineno, rec in enumerate(reader, 2):
        if not rec:
            continue
        try:
            vals = [_num(rec[i]) for i in (i_start, i_end, i_size)]
            name = rec[i_name].strip()
        except IndexError:
            vals, name = [None], ""
        if any(v is None for v in vals):
            bad += 1
            first_bad = first_bad or lineno
            continue
        rows.append((name, vals[0], vals[1], vals[2]))
    return rows, bad, first_bad
