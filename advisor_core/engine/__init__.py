"""The rule engine: pluggy hookspecs, plugin manager, rule registry, evidence checks, ranking."""
