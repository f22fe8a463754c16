"""The rule engine: pluggy hookspecs, plugin manager, rule registry, evidence checks, ranking.

What a plugin author imports::

    from advisor_core.engine import (
        hookimpl, Rule, RuleOptions, Requirements, Need, RuleContext,
        Finding, Evidence, Location, Patch, PatchOp, Severity, Safety,
    )
"""

from advisor_core.engine.context import RuleContext
from advisor_core.engine.findings import Evidence, Finding, Location, Patch, PatchOp, Safety, Severity
from advisor_core.engine.hookspecs import hookimpl, hookspec
from advisor_core.engine.rule import Measure, Need, Requirements, Rule, RuleOptions

__all__ = [
    "Evidence",
    "Finding",
    "Location",
    "Measure",
    "Need",
    "Patch",
    "PatchOp",
    "Requirements",
    "Rule",
    "RuleContext",
    "RuleOptions",
    "Safety",
    "Severity",
    "hookimpl",
    "hookspec",
]
