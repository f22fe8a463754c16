"""The notebook / scripting API.

    >>> from advisor_core.api import open_session
    >>> s = open_session("runs/llama2-8p/")        # profile dirs, IR dumps, a YAML — any mix
    >>> s.run.rank(0).table("kernels", ["name", "duration_us"]).nlargest(5, "duration_us")
    >>> result = s.analyze()                       # all rules; or select=["MD001", "CM"]
    >>> s.findings_frame(result)
    >>> result.findings[0].patches[0].diff

Tables are pandas DataFrames with canonical snake_case columns (``docs/tables.md``);
findings are pydantic models (``advisor_core.engine.findings``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from advisor_core.engine.findings import Finding, Location, Patch, PatchOp, Safety, Severity
from advisor_core.engine.runner import AnalysisResult
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.engine.settings import Settings, load_settings
from advisor_core.model.run import Rank, Run, load_run

__all__ = [
    "AnalysisResult",
    "InputError",
    "Finding",
    "Location",
    "Patch",
    "PatchOp",
    "Rank",
    "Run",
    "Safety",
    "Session",
    "Severity",
    "load_run",
    "open_session",
]


class InputError(ValueError):
    """Nothing usable was found at the paths given to :func:`open_session` (the message says why, per path)."""


def open_session(
    *paths: str | Path,
    profile: Sequence[str | Path] = (),
    graphs: Sequence[str | Path] = (),
    config: str | Path | None = None,
    plugins: bool = True,
    settings: Settings | None = None,
) -> Session:
    """Open what ``paths`` hold (classified automatically; the keyword arguments override).

    Raises :class:`InputError` when none of them holds profiler output, IR dumps or a
    training config (a mistyped path), rather than returning a session of empty tables.
    """
    opts = SessionOptions(
        profiles=[Path(p) for p in profile],
        graphs=[Path(p) for p in graphs],
        config=Path(config) if config is not None else None,
        autoload_plugins=plugins,
        settings=settings if settings is not None else load_settings(),
    )
    session = Session(list(paths), opts)
    if not session.profile_paths and not session.graph_paths and session.config_path is None:
        why = "; ".join(d.render() for d in session.sink if d.severity.value == "error")
        raise InputError(why or "no paths given")
    return session
