"""CT001: Cast operators that undo each other, do nothing, or fight the framework.

* :mod:`.rule` — the rule class: help page, options, the check over pipeline stages;
* :mod:`.chains` — Cast chains in one rank's front-end and backend graphs;
* :mod:`.estimate` — a chain's time per step (measured kernels, else bytes over HBM);
* :mod:`.config_only` — the config-alone check (``advisor lint``);
* :mod:`.finding` — the finding.
"""

from __future__ import annotations

from advisor_rules.ct001_cast.rule import CastExcess

__all__ = ["CastExcess"]
