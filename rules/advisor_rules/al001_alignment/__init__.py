"""AL001: MatMul-like dimensions not multiples of 16 (32 for int8) on Ascend.

* :mod:`.rule` — the rule class: help page, options, the check;
* :mod:`.shapes` — MatMul (M, K, N) from kernel or IR shapes, alignment and padding;
* :mod:`.dims` — evidence: unaligned dims from the profile, the IR or the config, and their config keys;
* :mod:`.saving` — time at stake per pipeline stage (MatMul penalty, TransData, other kernels);
* :mod:`.memory` — parameter and optimizer memory the padding adds;
* :mod:`.fix` — the config change that aligns a key;
* :mod:`.finding` — one finding per config key.
"""

from __future__ import annotations

from advisor_rules.al001_alignment.rule import Alignment16

__all__ = ["Alignment16"]
