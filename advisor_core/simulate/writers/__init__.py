"""Writers of the simulated profiler output, IR dumps and ground truth."""
