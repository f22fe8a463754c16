"""MindSpore parameter names: which are the model's weights and which the optimizer's state or a counter.

A training graph (and a checkpoint) lists, besides the weights, each weight again under
an optimizer prefix (``adam_m.model.layers.0.…``) and a few scalars (``global_step``,
the loss scale). What reads weights — the run's dimensions, a rank's trainable
parameters — leaves those out by these prefixes.
"""

from __future__ import annotations

# Per-weight optimizer state: the weight's own name behind the prefix, the weight's shape.
OPTIMIZER_STATE_PREFIXES: tuple[str, ...] = ("adam_m.", "adam_v.", "moment1.", "moment2.", "accu_grads.")
# Everything that is not a model weight: the optimizer state, plus the counters and loss-scale values.
NOT_WEIGHT_PREFIXES: tuple[str, ...] = OPTIMIZER_STATE_PREFIXES + (
    "global_step", "learning_rate", "scale_sense", "beta1_power", "beta2_power", "current_iterator_step",
    "last_overflow_iterator_step", "epoch_num", "step_num", "loss_scale")
