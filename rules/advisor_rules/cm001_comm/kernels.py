"""The per-step kernel table of one profiled rank, which both CM001 checks read."""

from __future__ import annotations

from typing import Any

import pandas as pd

from advisor_core.analyses.step_time import step_windows


def kernel_table(rank: Any) -> pd.DataFrame:
    """The rank's kernels (the columns CM001 reads) with ``per_step`` µs; ``attrs["steps"]`` is the step count."""
    cols = rank.columns("kernels") or []
    want = [c for c in ("name", "type", "accelerator_core", "start_ns", "duration_us", "step_id", "input_shapes",
                        "output_shapes") if c in cols]
    k = rank.table("kernels", want)
    steps = max(int(k["step_id"].dropna().nunique()), 1) if "step_id" in k else 1
    if "step_id" not in k:
        w = step_windows(rank)
        steps = len(w) if w is not None else 1
    k = k.assign(per_step=k["duration_us"].astype(float) / steps)
    k.attrs["steps"] = steps
    return k
