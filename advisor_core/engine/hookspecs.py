"""Hook specifications: the contract between the advisor and its plugins.

Built-in rules, loaders and output formats are registered through exactly these
hooks, the same way a third-party distribution registers its own: declare an
entry point in the ``advisor`` group pointing at a module (or object) that
implements one or more of the hooks below, decorated with :data:`hookimpl`::

    # pyproject.toml of a plugin distribution
    [project.entry-points.advisor]
    my-rules = "my_package.plugin"

    # my_package/plugin.py
    from advisor_core.engine import hookimpl

    @hookimpl
    def advisor_register_rules():
        from my_package.rules import MyRule
        return [MyRule]

Hook names are checked at registration (``check_pending``): a misspelt hook in a
plugin makes that plugin fail to load, loudly, instead of being ignored.
All hooks are called with keyword arguments; an implementation may accept a
subset of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.engine.rule import Rule
    from advisor_core.loaders.registry import TableLoader
    from advisor_core.report.base import OutputFormat

PROJECT = "advisor"
ENTRY_POINT_GROUP = "advisor"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def advisor_register_rules() -> "list[type[Rule]]":
    """Contribute rule classes.

    Return a list of :class:`advisor_core.engine.rule.Rule` subclasses. Each must
    have a unique ``code`` (one to three capital letters then three digits, e.g.
    ``MD001``, ``AIC001``) — a code already registered by another plugin makes the
    second registration an error reported for that plugin. Import heavy modules
    inside the hook, not at plugin import time, so ``advisor plugins`` stays fast.
    """


@hookspec
def advisor_register_loaders() -> "list[TableLoader]":
    """Contribute table loaders: teach the core a new file kind.

    Return a list of :class:`advisor_core.loaders.registry.TableLoader`. A loader
    names the canonical table it produces (``name``; must not clash with a
    built-in table), the artifact kinds it reads (``artifacts``) and, for a new
    file kind, the :class:`~advisor_core.discover.artifacts.ArtifactPattern`
    objects that find it (``patterns``). Rules then ask for the table with
    ``rank.table(name)`` like any built-in one. Loaders must not raise on bad
    input: report through the ``sink`` they are given and return ``None``.
    """


@hookspec
def advisor_register_formats() -> "list[OutputFormat]":
    """Contribute output formats for ``--format``.

    Return a list of :class:`advisor_core.report.base.OutputFormat` objects, each
    with a unique ``name`` and a ``render(result, ctx) -> str`` method, where
    ``result`` is the :class:`~advisor_core.engine.runner.AnalysisResult` and
    ``ctx`` the :class:`~advisor_core.report.base.RenderContext` (inputs,
    ``fail_on``, whether to show fixes). The string is written to stdout or
    ``--output``; it must contain nothing but the format (progress and
    diagnostics go to stderr).
    """


@hookspec(firstresult=True)
def advisor_classify_path(path: Path) -> "str | None":
    """Say what kind of input ``path`` is, or ``None`` to let others decide.

    Known kinds: ``profile`` (one rank), ``cluster`` (parent of ranks),
    ``ir`` (IR dump directory), ``config`` (training YAML), ``run`` (a directory
    holding several of these). The first non-``None`` answer wins; the built-in
    classifier runs last.
    """


@hookspec
def advisor_configure(settings: "dict[str, Any]") -> None:
    """Called once per analysis, before any rule runs, with the resolved settings.

    ``settings`` is ``[tool.advisor]`` (or ``advisor.toml``) merged with the command
    line flags, as a plain dict (a copy: changing it changes nothing). Plugins may read
    their own table (``settings["plugins"].get("<name>")``). An exception raised here
    is reported against the plugin (exit code 2) and the rules still run.
    """
