"""``advisor compare BEFORE AFTER``: the measured change of a fix beside the estimate that promised it.

:func:`compare_runs` takes two analysis sessions and returns a :class:`Comparison`;
:func:`render` turns it into text, JSON, Markdown or HTML.
"""

from advisor_core.compare.compare import compare_runs
from advisor_core.compare.model import Comparison, FindingOutcome
from advisor_core.compare.render import FORMATS, render

__all__ = ["FORMATS", "Comparison", "FindingOutcome", "compare_runs", "render"]
