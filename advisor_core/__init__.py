"""advisor: a performance advisor for MindSpore training on Huawei Ascend.

The package reads what a training run left behind (profiler output, IR graph
dumps, the training YAML), normalises it into one model, runs rules over it and
reports ranked findings with config patches.

Public entry points for notebooks are re-exported lazily from here so that
``import advisor_core`` stays cheap for the CLI.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "load_run"]


def load_run(*paths, **kwargs):  # type: ignore[no-untyped-def]
    """Discover and open a profiled run; see :func:`advisor_core.model.run.load_run`."""
    from advisor_core.model.run import load_run as _load_run

    return _load_run(*paths, **kwargs)
