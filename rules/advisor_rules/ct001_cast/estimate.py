"""A chain's time per step on one pipeline stage: its Cast kernels (and 32-bit inner ops), else launches + bytes."""

from __future__ import annotations

from typing import Any

from advisor_rules._common import StageEvidence, tensor_bytes
from advisor_rules._common import conversion_estimate_us
from advisor_rules.ct001_cast.chains import Chain, dtype_of


def chain_cost(chain: Chain, unit: StageEvidence, hbm_gbps: float, launch_us: float) -> None:
    """µs per step of the chain on ``unit``'s stage: its Cast kernels, plus what 16-bit inner ops would save.

    Without a profile each Cast node is one kernel per step costing the launch floor ``launch_us``
    plus its bytes (read and written) at ``hbm_gbps``.

    An op between a config chain's up- and down-cast runs on 32-bit data; in the compute
    dtype it would move ``ratio`` of the bytes. Such ops are memory-bound, so its time
    beyond the fixed per-launch cost shrinks by the same ratio.
    """
    names = dict.fromkeys(n.kernel_full_name for n in chain.nodes if n.kernel_full_name in unit.times)
    measured = [unit.times[name] for name in names]
    if measured:
        cast_us = sum(measured) / unit.steps
        inner_us = 0.0
        inner = {n.kernel_full_name: n for n in chain.inner if n.kernel_full_name in unit.times}
        for name, n in inner.items():
            total = unit.times[name] - unit.launches.get(name, 0) * unit.fixed_us
            inner_us += max(total, 0.0) * (1.0 - bytes_ratio_16bit(n)) / unit.steps
        chain.cost[unit.stage] = cast_us + inner_us
        chain.inner_cost[unit.stage] = inner_us
        chain.measured = True
        chain.how = f"{len(measured)} Cast kernel(s) measured"
        if inner_us:
            chain.how += f" + {len(chain.inner)} 32-bit op(s) at 16-bit bytes (fixed {unit.fixed_us:.1f} µs/launch)"
        return
    nbytes = 0.0
    sized = 0
    for n in chain.nodes:
        i = tensor_bytes(getattr(n.in_types[0], "shape", None) if n.in_types else None, dtype_of(n.in_types[0]) if n.in_types else None)
        o = tensor_bytes(getattr(n.out_types[0], "shape", None) if n.out_types else None, dtype_of(n.out_types[0]) if n.out_types else None)
        nbytes += (i or 0.0) + (o or 0.0)
        sized += i is not None or o is not None
    if not sized:
        # A compact dump (MS_DEV_DUMP_IR_FORMAT=0) has no type lines: the chain is certain, its size is not.
        chain.how = ("unknown, the dump has no tensor shapes (compact IR format); dump with the default "
                     "format or add a profile to measure it")
        return
    chain.cost[unit.stage] = conversion_estimate_us(nbytes, sized, hbm_gbps, launch_us)
    chain.how = (f"estimated: {sized} Cast kernel(s) × {launch_us:.1f} µs launch + {nbytes / 1e6:.2f} MB moved at "
                 f"{hbm_gbps:.0f} GB/s")


def bytes_ratio_16bit(node: Any) -> float:
    """Bytes ``node`` would move with its 32-bit float tensors in 16 bits, over the bytes it moves now."""
    now = after = 0.0
    for t in [*node.in_types, *node.out_types]:
        b = tensor_bytes(getattr(t, "shape", None), dtype_of(t))
        if not b:
            continue
        now += b
        after += b / 2 if dtype_of(t) == "Float32" else b
    return after / now if now else 0.5
