"""CT002: TransData (format conversion) kernels that a consistent layout would avoid.

* :mod:`.rule` — the rule class: help page, options, the check over pipeline stages;
* :mod:`.groups` — a :class:`Group` of conversions with one cause, and format names;
* :mod:`.from_ir` — groups from the backend kernel graph (sandwiches, weights, cancelling pairs);
* :mod:`.from_kernels` — groups from ``kernel_details`` alone (kernel order and formats);
* :mod:`.estimate` — a group's time per step (measured kernels, else bytes over HBM);
* :mod:`.finding` — the finding.
"""

from __future__ import annotations

from advisor_rules.ct002_transdata.rule import TransDataExcess

__all__ = ["TransDataExcess"]
