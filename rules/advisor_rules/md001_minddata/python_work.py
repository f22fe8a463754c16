"""Whether the bottleneck map's work is Python held by the GIL: the config's word, else CPU the listed transforms cannot explain."""

from __future__ import annotations

from typing import Any

from advisor_rules.md001_minddata.config_only import PY_US, TRANSFORM_US, UNKNOWN_US, is_python, transform_names

# The map burns this many times the CPU its listed transforms should: most of its work is code the config does not list.
UNLISTED_FACTOR = 10.0
_TEXT_PIPELINE = ["TypeCast"]  # MindFormers' text datasets map a TypeCast when no transforms are listed


def python_work(cfg: Any, op_cpu_pct: float | None, period_us: float | None, heavy_sample_us: float) -> str | None:
    """Why the map's workers are likely serialised by the GIL, or ``None``.

    Python transforms in thread workers (``python_multiprocessing`` off, MindSpore's default)
    run one at a time, so more workers alone do not shorten the map. Evidence, in order: the
    config lists a Python transform; or the map's measured CPU per batch (its CPU share × the
    batch period) is at least :data:`UNLISTED_FACTOR` times — and ``heavy_sample_us`` per
    sample more than — what the listed transforms cost at typical rates: the time goes to
    code the config does not show, which in a MindFormers dataset is Python (a ``PyFunc``,
    a tokenizer in the dataset class). MindSpore's own costs are C++ and listed.
    """
    if cfg is None or cfg.get("dataset.python_multiprocessing") is True:
        return None
    names = transform_names(cfg.get("dataset.transforms"))
    py = [n for n in names if is_python(n)]
    if py:
        return f"the config lists Python transform(s) {', '.join(py)}"
    if op_cpu_pct is None or not period_us:
        return None
    batch = cfg.int_of("dataset.batch_size") or cfg.micro_batch_size or 1
    listed = sum(TRANSFORM_US.get(n, PY_US if is_python(n) else UNKNOWN_US) for n in (names or _TEXT_PIPELINE)) * batch
    measured = op_cpu_pct / 100.0 * period_us
    if measured >= UNLISTED_FACTOR * listed and measured - listed >= heavy_sample_us * batch:
        return (f"it burns {measured / 1000:.1f} ms of CPU per batch, {measured / max(listed, 1e-9):.0f}× what its listed "
                f"transforms ({', '.join(names or _TEXT_PIPELINE)}) cost for {batch} samples at typical rates: the work is "
                "code the config does not list — in a MindFormers dataset, Python (a PyFunc, a tokenizer)")
    return None
