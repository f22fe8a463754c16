"""Evidence from the profile: how long the device waits for data per step (step trace, else host queue).

The measure is shared (``_common.data``): the device-side rules use it to tell whether their
saving shows while the data pipeline bounds the step.
"""

from __future__ import annotations

from advisor_rules._common import Wait, data_wait, queue_empty_share, rank_data_wait, steps_of_whole_run_row

__all__ = ["Wait", "data_wait", "queue_empty_share", "rank_data_wait", "steps_of_whole_run_row"]
