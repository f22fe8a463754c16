"""The fix: the config change that pads a key to the next aligned value, keeping related keys consistent."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from advisor_rules.al001_alignment.dims import Dim
from advisor_rules.al001_alignment.shapes import pad_to


class Fix(NamedTuple):
    """The config change that aligns a key."""

    value: int  # the key's new value (the patch)
    changes: list[tuple[str, int]]
    note: str  # what else changes with it
    dim: int  # the new unsliced MatMul dim it gives


def new_value(cfg: Any, d: Dim) -> Fix | None:
    """The config change that aligns ``d`` (see Fix), and the new unsliced dim it gives."""
    key = d.config_key
    if cfg is None or key is None:
        return None
    if key == "model.multiple_of":
        f, _ = cfg.ffn_hidden_size()
        return Fix(256, [(key, 256)], "The FFN size is derived from hidden_size and multiple_of.", pad_to(f or 0, 256))
    cur = cfg.get(key)
    if not isinstance(cur, int) or isinstance(cur, bool):
        return None
    step = d.align * d.divisor
    heads = cfg.num_heads
    if key == "model.hidden_size" and heads:
        hd_explicit = cfg.int_of("model.head_dim")
        if hd_explicit and heads * hd_explicit == cur:
            hd = pad_to(hd_explicit, d.align)
            return Fix(heads * hd, [(key, heads * hd), ("model.head_dim", hd)],
                        f"head_dim rounds with it ({hd_explicit} → {hd}) so num_heads × head_dim stays equal to hidden_size.",
                        heads * hd)
        if hd_explicit:
            return Fix(pad_to(cur, step), [(key, pad_to(cur, step))],
                        f"num_heads × head_dim = {heads * hd_explicit} is set by head_dim and does not change; "
                        "every hidden-sized weight (embedding, norms, projections, lm_head) is zero-padded.", pad_to(cur, step))
        step = step * heads // math.gcd(step, heads)
        up, down = pad_to(cur, step), (cur // step) * step
        new = down if 0 < down and (cur - down) < (up - cur) else up
        return Fix(new, [(key, new)], f"hidden_size stays a multiple of num_heads={heads} (head_dim = hidden_size / "
                                       f"num_heads = {new // heads}).", new)
    if key == "model.head_dim":
        hd = pad_to(cur, d.align)
        return Fix(hd, [(key, hd)], "The attention projections change width with it.", (heads or 1) * hd)
    if key == "model.seq_length":
        up, down = pad_to(cur, step), (cur // step) * step
        new = down if 0 < down and (cur - down) < (up - cur) else up
        return Fix(new, [(key, new)], "The dataset's sequence length must match.", new)
    new = pad_to(cur, step)
    note = "Every token id still fits; the extra logits are never a label." if key == "model.vocab_size" else \
        "Zero-padded rows/columns keep a converted checkpoint's function."
    return Fix(new, [(key, new)], note, new)
