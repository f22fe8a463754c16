"""CM001: communication the configured layout should not need — redistribution chains, exposed gradient AllReduce.

* :mod:`.rule` — the rule class: help page, options, the two checks;
* :mod:`.kernels` — the per-step kernel table of a profiled rank (both checks read it);
* (A) :mod:`.chains` (IR evidence), :mod:`.estimate` (time per step), :mod:`.strategy` (the fix),
  :mod:`.redistribution` (the findings);
* (B) :mod:`.tail` (profile evidence: the tail and its buckets; the parameter list),
  :mod:`.readiness` (when each gradient exists), :mod:`.buckets` (split points and what they
  leave exposed), :mod:`.fusion` (the finding and its config patch).
"""

from __future__ import annotations

from advisor_rules.cm001_comm.rule import UnexpectedCommunication

__all__ = ["UnexpectedCommunication"]
