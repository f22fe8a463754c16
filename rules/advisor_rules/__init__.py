"""Built-in rules of the advisor, one module (or package, for the larger ones) per rule.

Installed as the top-level package ``advisor_rules`` (the ``rules/`` directory
itself is not a package and never lands in site-packages). It registers through
the ``advisor`` entry-point group exactly like a third-party plugin.
"""

from __future__ import annotations

from advisor_core.engine import hookimpl


@hookimpl
def advisor_register_rules():  # type: ignore[no-untyped-def]
    from advisor_rules.al001_alignment import Alignment16
    from advisor_rules.cl001_slow_rank import SlowRank
    from advisor_rules.cl002_slow_link import SlowLink
    from advisor_rules.cl003_step_spread import StepSpread
    from advisor_rules.cm001_comm import UnexpectedCommunication
    from advisor_rules.ct001_cast import CastExcess
    from advisor_rules.ct002_transdata import TransDataExcess
    from advisor_rules.lc001_recompute_patterns import RecomputePatternUnmatched
    from advisor_rules.lc002_recompute_stages import RecomputeStageForm
    from advisor_rules.lc004_device_count import DeviceCount
    from advisor_rules.lc005_micro_batch import MicroBatchNum
    from advisor_rules.lc006_fusion_config import FusionConfigOrder
    from advisor_rules.md001_minddata import MinddataBottleneck
    from advisor_rules.rc001_recompute import RecomputeNotEffective

    return [
        MinddataBottleneck,
        CastExcess,
        TransDataExcess,
        Alignment16,
        UnexpectedCommunication,
        RecomputeNotEffective,
        RecomputePatternUnmatched,
        RecomputeStageForm,
        DeviceCount,
        MicroBatchNum,
        FusionConfigOrder,
        SlowRank,
        SlowLink,
        StepSpread,
    ]
