"""(B) Pipeline stages: which stage's gradient tail the next step waits for, and how much the step gains.

Under 1F1B a stage s > 0 finishes its last backward before stage s − 1 runs its own (that one
needs s's input gradient), so s's gradient buckets drain while s − 1 finishes its backward,
reduces its own gradients, steps its optimizer and runs its next warm-up forward: s's first
forward of the next step waits for that Receive anyway. The first stage's tail, though,
delays its next forward, which every later stage waits for. So the next step starts when the
slowest of these paths ends: the first stage's, and each later stage's, which currently has
slack R_s — the wait of its first forward Receive of a step (``Wait Time`` in
communication.json; else the Receive kernel's time beyond the stage's shortest Receive). A
tail shorter by Δ₀ on the first stage and Δₛ on stage s moves the next step's start by
``min(Δ₀, minₛ (Rₛ + Δₛ))``.
"""

from __future__ import annotations

from typing import Any


_RECEIVE = r"Receive|hcom_receive"


def receive_slack(view: Any, windows: list[tuple[int, int, int, int]],
                  waits: dict[str, list[tuple[int, float]]]) -> float | None:
    """Mean wait (µs) of the first Receive per step, steps after the first; ``None`` without Receives.

    The first profiled step starts every stage together, so its first Receive waits only for
    the previous stage's first forward, not for its tail: it is used alone only when it is
    all there is. Reads the op view's timeline.
    """
    import numpy as np

    ops, tl = view.ops, view.timeline
    recv_op = ops["name"].astype(str).str.contains(_RECEIVE, case=False, regex=True).to_numpy()
    recv = recv_op[tl.op]
    if not recv.any():
        return None
    start, dur = tl.start_ns, tl.duration_us
    floor = float(dur[recv].min())  # a Receive that did not wait: the transfer alone
    per_step = []
    for w_start, w_end, _, _ in windows:
        lo, hi = np.searchsorted(start, [w_start, w_end], side="left")
        idx = lo + np.flatnonzero(recv[lo:hi])
        if not len(idx):
            continue
        i = int(idx[0])  # kernels are in start order: the first is the earliest
        name = str(ops["name"].iat[int(tl.op[i])]).rpartition("/")[2]
        hit = [w for st, w in waits.get(name, ()) if abs(st - int(start[i])) < 1000]  # JSON starts are µs
        per_step.append(hit[0] if hit else max(float(dur[i]) - floor, 0.0))
    if not per_step:
        return None
    return float(np.mean(per_step[1:] if len(per_step) > 1 else per_step))


def step_gain(stages: list[dict[str, Any]], deltas: list[float]) -> tuple[float, str | None]:
    """How much earlier the next step starts when each stage's tail shrinks by ``deltas`` (see the module doc).

    Returns the gain and how it was combined; the mean over the stages when the first stage
    was not profiled or a later stage's slack is unknown (no pipeline evidence to order them).
    """
    import numpy as np

    by_stage = {s["stage"]: (s, d) for s, d in zip(stages, deltas)}
    if len(stages) < 2 or 0 not in by_stage or any(s.get("slack_us") is None for s in stages if s["stage"] != 0):
        return float(np.mean(deltas)), None
    first = by_stage[0][1]
    paths = [(s["slack_us"] + d, s["stage"], s["slack_us"], d) for s, d in zip(stages, deltas) if s["stage"] != 0]
    bound, which, slack, own = min(paths)
    if bound >= first:
        how = (f"the first stage's tail delays the next step's first forward, which every stage waits for; the later "
               f"stages' tails drain while their first Receive waits anyway (≥ {min(p[2] for p in paths) / 1000:.2f} ms "
               "per step)")
        return first, how
    return bound, (f"stage {which}'s tail is on the critical path too: its first Receive waits only {slack / 1000:.2f} ms, "
                   f"so the step gains that plus its own {own / 1000:.2f} ms")
