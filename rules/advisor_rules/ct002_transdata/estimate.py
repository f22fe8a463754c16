"""A group's time per step on one pipeline stage: its measured TransData kernels, else launches + bytes over HBM."""

from __future__ import annotations

from advisor_rules._common import StageEvidence, tensor_bytes
from advisor_rules._common import conversion_estimate_us
from advisor_rules.ct002_transdata.groups import Group


def group_cost(g: Group, unit: StageEvidence, hbm_gbps: float, launch_us: float) -> None:
    """µs per step of the group's TransData kernels on ``unit``'s stage (without a profile: each TransData node
    one kernel paying the launch floor ``launch_us``, plus its bytes read and written at ``hbm_gbps``)."""
    if g.trans:
        names = dict.fromkeys(n.kernel_full_name for n in g.trans if n.kernel_full_name in unit.times)
        measured = [unit.times[nm] for nm in names]
    elif g.kernel_names and unit.rank is not None and unit.rank.op_view() is not None:
        ops = unit.rank.op_view().ops
        sums = ops.loc[ops["name"].isin(g.kernel_names)].groupby("name")["total_us"].sum()
        measured = [float(v) for v in sums.to_numpy()]
    else:
        measured = []
    if measured:
        g.cost[unit.stage] = sum(measured) / unit.steps
        g.measured = True
        g.how = f"{len(measured)} TransData kernel(s) measured per stage"
        return
    nbytes = 0.0
    for n in g.trans:
        t = n.in_types[0] if n.in_types else None
        nbytes += 2 * (tensor_bytes(getattr(t, "shape", None), getattr(t, "dtype", None)) or 0.0)
    g.cost[unit.stage] = conversion_estimate_us(nbytes, len(g.trans), hbm_gbps, launch_us)
    g.how = (f"estimated: {len(g.trans)} TransData kernel(s) × {launch_us:.1f} µs launch + {nbytes / 1e6:.2f} MB "
             f"moved at {hbm_gbps:.0f} GB/s")
