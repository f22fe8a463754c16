"""The one exception the simulator raises for bad input (config, hardware file, flags, faults).

The CLI turns it into one line on stderr and exit code 2; its message names the key and says
what is wrong (``parallel_config.model_parallel: 3 does not divide num_heads 32``).
"""

from __future__ import annotations


class SimulationInputError(ValueError):
    """Input the simulator cannot use; the message is meant for the user as is."""
