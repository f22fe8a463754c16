"""RC001: operators configured for recomputation that MindSpore does not recompute.

* :mod:`.rule` — the rule class: help page, options, the check;
* :mod:`.issues` — one :class:`Issue` per configured op that is not recomputed, and IR node predicates;
* :mod:`.from_ir` — issues from the IR (``recompute`` / ``duplicated`` marks);
* :mod:`.from_config` — issues from ``select_recompute`` and MindFormers' Llama layer structure;
* :mod:`.select` — the fixed ``select_recompute`` value and its patch;
* :mod:`.effect` and :mod:`.meter` — what the fix saves in memory and costs in time;
* :mod:`.finding` — the finding.
"""

from __future__ import annotations

from advisor_rules.rc001_recompute.rule import RecomputeNotEffective

__all__ = ["RecomputeNotEffective"]
