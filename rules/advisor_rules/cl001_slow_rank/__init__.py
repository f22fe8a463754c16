"""CL001: a rank slower than its pipeline-stage peers, and why.

* :mod:`.evidence` — what one rank contributes (in its per-rank unit): steady-step figures and
  its compute time per op type;
* :mod:`.rule` — the rule class: peers per stage, robust outliers, the cause and the finding.
"""

from __future__ import annotations

from advisor_rules.cl001_slow_rank.rule import SlowRank

__all__ = ["SlowRank"]
