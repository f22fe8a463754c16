"""MD001: the MindData pipeline cannot keep up with the device.

* :mod:`.rule` — the rule class: help page, options, the check over ranks;
* :mod:`.wait` — how long the device waits for data per step (step trace, host queue);
* :mod:`.bottleneck` — which pipeline op is the bottleneck (queue usage);
* :mod:`.cores` — host CPU cores one device's pipeline may use;
* :mod:`.finding` — the finding from a profile: workers to add, the step after, patches;
* :mod:`.config_only` — the config-alone check (``advisor lint``): assumed transform costs.
"""

from __future__ import annotations

from advisor_rules.md001_minddata.rule import MinddataBottleneck

__all__ = ["MinddataBottleneck"]
