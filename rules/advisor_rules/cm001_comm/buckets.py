"""(B) Estimate: the tail a bucket split leaves exposed, and the balanced split the step gains most from."""

from __future__ import annotations

from typing import Any, Callable

MAX_BUCKETS = 8  # HCCL gradient segmentation supports at most 8 segments


def exposed(stage: dict[str, Any], points: list[int], bucket_latency_us: float) -> float:
    """Tail left after the backward with buckets split at ``points`` (see Time at stake)."""
    params, ready = stage["params"], stage["ready"]
    total = sum(e for _, e in params)
    bounds = [0] + [p for p in points if 0 < p < len(params)] + [len(params)]
    bounds = sorted(set(bounds))
    per_elem = stage["ar_us"] / total if total else 0.0
    buckets = []
    for a, b in zip(bounds, bounds[1:]):
        elems = sum(e for _, e in params[a:b])
        buckets.append((max(ready[a:b]), per_elem * elems + (bucket_latency_us if len(bounds) > 2 else 0.0)))
    t = -float("inf")
    for r, d in sorted(buckets):
        t = max(t, r) + d
    return max(t, 0.0)


def best_split(stages: list[dict[str, Any]], bucket_latency_us: float,
               gain: Callable[[list[dict[str, Any]], list[float]], float],
               current: list[int] | None = None) -> tuple[list[int], list[float], float] | None:
    """Balanced split points the step gains most from: (points, tail left per usable stage, step gain).

    ``gain(stages, deltas)`` turns each stage's shorter tail into the step's gain
    (``stages.step_gain``). A stage's tail shrinks from what is measured when today's gradients
    go as one bucket; when they are already split at ``current``, from what the same model gives
    for ``current`` (so the model's own error cancels), never by more than is measured.
    ``None`` when no split gains 2 % of what removing every tail would, or the best is ``current``.
    """
    usable = [s for s in stages if s.get("params") and s.get("ready") and len(s["params"]) > 1]
    if not usable:
        return None
    base = [exposed(s, current, bucket_latency_us) if current else s["exposed_us"] for s in usable]
    cands: set[tuple[int, ...]] = set()
    for s in usable:
        sizes = [e for _, e in s["params"]]
        for n in range(2, MAX_BUCKETS + 1):
            eq = equal_bytes(sizes, n)
            cands.add(tuple(eq))
            cands.add(tuple(sorted({1, *eq})) if len(eq) < MAX_BUCKETS - 1 else tuple(eq))
    limit = min(len(s["params"]) for s in usable)
    best: tuple[list[int], list[float], float] | None = None
    for c in sorted(cands):
        if not c or c[-1] >= limit:
            continue  # an index past a stage's parameter count would give it an empty bucket
        lefts = [exposed(s, list(c), bucket_latency_us) for s in usable]
        g = gain(usable, [min(max(b - x, 0.0), s["exposed_us"]) for s, b, x in zip(usable, base, lefts)])
        if best is None or g > best[2] + 1e-6 or (abs(g - best[2]) <= 1e-6 and len(c) < len(best[0])):
            best = (list(c), lefts, g)
    ceiling = gain(usable, [s["exposed_us"] for s in usable])
    if best is None or best[2] <= ceiling * 0.02 or (current is not None and best[0] == list(current)):
        return None
    return best


def current_points(params: list[tuple[str, float]], bucket_us: list[float]) -> list[int]:
    """Split points that give measured buckets their share of the elements (bucket transfer ∝ elements).

    Buckets go in readiness order, so the first one to run holds the last parameters.
    """
    total = sum(bucket_us)
    if len(bucket_us) < 2 or not total or len(params) < len(bucket_us):
        return []
    elems = sum(e for _, e in params)
    points: list[int] = []
    acc, want, k = 0.0, elems * bucket_us[0] / total, 1
    for i in range(len(params) - 1, 0, -1):  # from the last parameter back
        acc += params[i][1]
        if acc >= want and k < len(bucket_us):
            points.append(i)
            want += elems * bucket_us[k] / total
            k += 1
    return sorted(set(points))


def equal_bytes(sizes: list[float], buckets: int) -> list[int]:
    """Split points cutting ``sizes`` (in order) into ``buckets`` runs of about equal total."""
    total = sum(sizes)
    points, acc, k = [], 0.0, 1
    for i, s in enumerate(sizes):
        acc += s
        while k < buckets and acc >= total * k / buckets and i + 1 < len(sizes):
            if not points or points[-1] != i + 1:
                points.append(i + 1)
            k += 1
    return points
