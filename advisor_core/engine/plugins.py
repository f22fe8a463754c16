"""Plugin loading with per-plugin isolation: one door for built-in and third-party rules.

Order of set-up (pytest/sqlfluff style): create the ``PluginManager("advisor")``,
add the hookspecs, register the core's own built-in plugins (output formats,
table loaders), then load every entry point of the ``advisor`` group — the
built-in rule bundle (distribution ``ascend-advisor``) is one of them, declared
exactly as a third party declares its own. Each entry point is imported and
registered inside ``try``: a plugin that fails to import, registers a misspelt
hook (``check_pending``) or raises inside a hook is recorded with its name,
version and error, unregistered, and the others run on.

Autoloading of third-party plugins is switched off by ``--no-plugins`` or
``ADVISOR_DISABLE_PLUGIN_AUTOLOAD=1``; built-ins still load, and ``-p NAME``
loads a named third-party plugin anyway. ``-p no:NAME`` blocks one. Rules are
never imported from the directory being analysed.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable, Iterable

import pluggy

from advisor_core.engine import hookspecs
from advisor_core.engine.hookspecs import ENTRY_POINT_GROUP, PROJECT
from advisor_core.engine.rule import Rule

BUILTIN_DISTRIBUTION = "ascend-advisor"
AUTOLOAD_ENV = "ADVISOR_DISABLE_PLUGIN_AUTOLOAD"
TRACE_ENV = "ADVISOR_TRACE_PLUGINS"
CORE_PLUGINS = ("advisor_core.report.builtin", "advisor_core.loaders.plugin")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


@dataclass
class PluginRecord:
    """One plugin as the host saw it."""

    name: str
    distribution: str | None
    version: str | None
    module: str
    builtin: bool
    status: str  # loaded | failed | blocked | not-autoloaded
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    detail: str | None = None

    def label(self) -> str:
        v = f" {self.version}" if self.version else ""
        return f"{self.name} ({self.distribution or 'core'}{v})"


@dataclass
class RegisteredRule:
    cls: type[Rule]
    plugin: PluginRecord


@dataclass
class HookError:
    """A plugin that raised while answering a hook."""

    plugin: PluginRecord
    hook: str
    message: str
    traceback: str


class PluginHost:
    """The loaded plugins and what they contribute."""

    def __init__(self, pm: pluggy.PluginManager, records: list[PluginRecord]) -> None:
        self.pm = pm
        self.records = records
        self.hook_errors: list[HookError] = []
        self._rules: dict[str, RegisteredRule] | None = None
        self._by_plugin = {r.name: r for r in records}
        # How the host was built (load_plugins' options), so a worker process can build the same; None when
        # the entry points were supplied by hand and cannot be rebuilt elsewhere.
        self.spec: Any = None

    def record_of(self, plugin_name: str) -> PluginRecord:
        rec = self._by_plugin.get(plugin_name)
        if rec is None:
            rec = PluginRecord(plugin_name, None, None, plugin_name, False, "loaded")
        return rec

    def call_each(self, hook: str, **kwargs: Any) -> list[tuple[PluginRecord, Any]]:
        """Call ``hook`` on every plugin separately, so one plugin's exception stays its own."""
        caller = getattr(self.pm.hook, hook)
        out: list[tuple[PluginRecord, Any]] = []
        # get_hookimpls() is in registration order (built-ins first); pluggy itself calls LIFO.
        for impl in caller.get_hookimpls():
            rec = self.record_of(impl.plugin_name)
            try:
                result = impl.function(**{k: kwargs[k] for k in impl.argnames if k in kwargs})
            except Exception as exc:  # noqa: BLE001 - isolation is the point
                self._fail(rec, hook, f"{hook} raised {type(exc).__name__}: {exc}", traceback.format_exc())
                continue
            if result is not None:
                out.append((rec, result))
        return out

    def rules(self) -> dict[str, RegisteredRule]:
        """Rule code → rule class and the plugin that contributed it."""
        if self._rules is not None:
            return self._rules
        rules: dict[str, RegisteredRule] = {}
        for rec, result in self.call_each("advisor_register_rules"):
            for cls in result or []:
                problems = cls.validate_class() if isinstance(cls, type) and issubclass(cls, Rule) else ["is not a Rule subclass"]
                ident = getattr(cls, "code", None) or getattr(cls, "__name__", repr(cls))
                if problems:
                    self._fail(rec, "advisor_register_rules", f"rule {ident} " + "; ".join(problems))
                    continue
                if cls.code in rules:
                    other = rules[cls.code].plugin
                    self._fail(rec, "advisor_register_rules", f"rule code {cls.code} is already registered by {other.label()}")
                    continue
                rules[cls.code] = RegisteredRule(cls, rec)
        self._rules = dict(sorted(rules.items()))
        return self._rules

    def loaders(self) -> list[tuple[PluginRecord, Any]]:
        out = []
        for rec, result in self.call_each("advisor_register_loaders"):
            for ld in result or []:
                out.append((rec, ld))
        return out

    def formats(self) -> dict[str, tuple[PluginRecord, Any]]:
        out: dict[str, tuple[PluginRecord, Any]] = {}
        for rec, result in self.call_each("advisor_register_formats"):
            for fmt in result or []:
                name = getattr(fmt, "name", None)
                if not name:
                    self._fail(rec, "advisor_register_formats", f"output format {fmt!r} has no name")
                    continue
                if name in out:
                    self._fail(rec, "advisor_register_formats", f"output format {name!r} is already registered by {out[name][0].label()}")
                    continue
                out[name] = (rec, fmt)
        return out

    def classify(self, path: Any) -> str | None:
        for rec, result in self.call_each("advisor_classify_path", path=path):
            if result:
                return str(result)
        return None

    def _fail(self, rec: PluginRecord, hook: str, message: str, tb: str = "") -> None:
        self.hook_errors.append(HookError(rec, hook, message, tb))
        rec.error = rec.error or message
        rec.status = "failed"

    @property
    def failed(self) -> list[PluginRecord]:
        return [r for r in self.records if r.status == "failed"]


def _hooks_of(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    return sorted(impl.name for impl in (pm.get_hookcallers(plugin) or []))


def load_plugins(
    *,
    autoload: bool | None = None,
    load: Iterable[str] = (),
    block: Iterable[str] = (),
    entry_points: Callable[[], Iterable[metadata.EntryPoint]] | None = None,
) -> PluginHost:
    """Build the plugin host (see module docstring).

    ``autoload=None`` reads ``ADVISOR_DISABLE_PLUGIN_AUTOLOAD``. ``load`` names
    third-party entry points to load even when autoloading is off; ``block``
    names entry points (or distributions) never to load. ``entry_points`` lets
    tests supply the entry-point list.
    """
    spec = plugin_spec(autoload=autoload, load=load, block=block)
    autoload = spec.autoload
    load_set = set(spec.load)
    block_set = set(spec.block)
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    if os.environ.get(TRACE_ENV):
        pm.trace.root.setwriter(lambda msg: os.write(2, msg.encode()))
        pm.enable_tracing()
    records: list[PluginRecord] = []

    import importlib

    for modname in CORE_PLUGINS:
        mod = importlib.import_module(modname)
        pm.register(mod, name=modname)
        records.append(PluginRecord(modname, None, None, modname, True, "loaded", hooks=_hooks_of(pm, mod)))

    eps = list(entry_points() if entry_points is not None else metadata.entry_points(group=ENTRY_POINT_GROUP))
    eps.sort(key=lambda ep: (_dist_name(ep) != BUILTIN_DISTRIBUTION, ep.name))
    seen_builtin_rules = False
    for ep in eps:
        dist = _dist_name(ep)
        version = _dist_version(ep)
        builtin = dist == BUILTIN_DISTRIBUTION
        rec = PluginRecord(ep.name, dist, version, ep.value, builtin, "loaded")
        records.append(rec)
        if _norm(ep.name) in block_set or (dist and _norm(dist) in block_set):
            rec.status = "blocked"
            pm.set_blocked(ep.name)
            continue
        if not builtin and not autoload and _norm(ep.name) not in load_set and not (dist and _norm(dist) in load_set):
            rec.status = "not-autoloaded"
            rec.detail = f"autoloading is off ({AUTOLOAD_ENV} or --no-plugins); load it with -p {ep.name}"
            continue
        _register(pm, rec, ep.load, ep.name)
        if builtin and ep.value.split(":")[0] == "advisor_rules":
            seen_builtin_rules = True

    if not seen_builtin_rules and "builtin-rules" not in block_set:
        # Running from a source tree without installed metadata: register the bundle directly.
        rec = PluginRecord("builtin-rules", BUILTIN_DISTRIBUTION, None, "advisor_rules", True, "loaded",
                           detail="registered directly (package metadata not installed)")
        records.append(rec)
        _register(pm, rec, lambda: importlib.import_module("advisor_rules"), "builtin-rules")
    host = PluginHost(pm, records)
    if entry_points is None:
        host.spec = spec
    return host


def plugin_spec(*, autoload: bool | None = None, load: Iterable[str] = (), block: Iterable[str] = ()) -> Any:
    """The :class:`~advisor_core.engine.rankwork.PluginSpec` :func:`load_plugins` records for these arguments
    (autoload resolved, names normalised): what a worker process loads the same plugins from."""
    from advisor_core.engine.rankwork import PluginSpec

    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "").strip().lower() not in ("1", "true", "yes", "on")
    return PluginSpec(autoload, tuple(sorted({_norm(x) for x in load})), tuple(sorted({_norm(x) for x in block})))


def _register(pm: pluggy.PluginManager, rec: PluginRecord, loader: Callable[[], Any], name: str) -> None:
    try:
        plugin = loader()
    except Exception as exc:  # noqa: BLE001
        rec.status = "failed"
        rec.error = f"failed to import: {type(exc).__name__}: {exc}"
        return
    try:
        pm.register(plugin, name=name)
        pm.check_pending()
    except Exception as exc:  # noqa: BLE001 - PluginValidationError and anything a plugin does at register time
        try:
            pm.unregister(plugin)
        except Exception:  # noqa: BLE001
            pass
        rec.status = "failed"
        rec.error = f"invalid plugin: {exc}"
        return
    rec.hooks = _hooks_of(pm, plugin)


def _dist_name(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return _norm(dist.metadata["Name"]) if dist is not None and dist.metadata["Name"] else None


def _dist_version(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.version if dist is not None else None
