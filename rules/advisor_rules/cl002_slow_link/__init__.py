"""CL002: a communication link slower than the same kind of link elsewhere in the job, and who waits on it.

* :mod:`.evidence` — per rank: bytes and transfer time per link type, each op's share not hidden
  by compute, the rank's waits per communication group and its links to its peers;
* :mod:`.rule` — the rule class: peer medians per link type, the outliers, their cost.
"""

from __future__ import annotations

from advisor_rules.cl002_slow_link.rule import SlowLink

__all__ = ["SlowLink"]
