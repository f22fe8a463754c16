"""Helpers shared by the built-in rules (not a rule; rules never import each other).

One module per topic; everything is re-exported here, so ``from advisor_rules._common import X``
is the one import a rule needs:

* :mod:`.units` — step-time shares, severities, dtype sizes, rates assumed without a profile;
* :mod:`.scopes` — MindSpore full names: decoder layer, cell path, ``select_recompute`` patterns;
* :mod:`.ir` — IR nodes as report locations (IR line, model-code line);
* :mod:`.kernels` — ``kernel_details`` per IR full name: time, launches, fixed cost, cell;
* :mod:`.pipeline` — pipeline stages, per-stage evidence and the 1F1B step-time saving;
* :mod:`.parameters` — a rank's trainable parameters, from the IR or a Llama config;
* :mod:`.config` — plain config values and the model family the rules model;
* :mod:`.data` — the device's wait for data per step, and the share of a device-side saving it lets show;
* :mod:`.conversions` — Cast and TransData time from kernels alone (the triage without an IR dump);
* :mod:`.cluster` — robust outliers among peers and per-rank step figures (the CL rules);
* :mod:`.measure` — what ``advisor compare`` measures for a finding: a selection of ops' kernel time as step time.
"""

from __future__ import annotations

from advisor_rules._common.cluster import (
    Outlier,
    high_outliers,
    low_outliers,
    parallel_group,
    rank_label,
    steady_breakdown,
)
from advisor_rules._common.config import LLAMA_TYPES, is_llama, plain
from advisor_rules._common.conversions import (
    CONVERSION_LAUNCH_US,
    ConversionTime,
    conversion_estimate_us,
    conversion_evidence,
    conversion_time,
    triage_finding,
    unaligned_matmul_cells,
)
from advisor_rules._common.data import (
    DataBound,
    DataBoundEffect,
    Wait,
    data_bound_effect,
    data_bound_headroom,
    data_wait,
    queue_empty_share,
    rank_data_wait,
    realised_saving,
    steps_of_whole_run_row,
)
from advisor_rules._common.ir import ir_location, source_location, user_source
from advisor_rules._common.kernels import (
    COMM_CORE_NAMES,
    kernel_cell,
    kernel_fixed_cost_us,
    kernel_launches_by_scope,
    kernel_scope,
    kernel_time_by_scope,
)
from advisor_rules._common.measure import (
    finding_ops,
    fold_layer,
    folded_cells,
    in_cells,
    primitive_of,
    selected_time,
    stage_measure,
    stages_step_time,
)
from advisor_rules._common.parameters import ir_parameters, is_model_weight, llama_parameters, trainable_parameters
from advisor_rules._common.pipeline import (
    StageEvidence,
    fill_stages_without_ir,
    ir_dumps_for,
    micro_batches_per_step,
    one_f_one_b_step_saving,
    pipeline_micro_batches,
    pipeline_stage_of,
    stage_busy_and_micro,
    stage_evidence,
    stage_representatives,
)
from advisor_rules._common.scopes import (
    LAYER_ITEM,
    cell_path_in_layer,
    fold_layer_index,
    layer_of_scope,
    layer_prefix,
    pattern_for,
)
from advisor_rules._common.units import (
    ASSUMED_CUBE_TFLOPS,
    ASSUMED_HBM_GBPS,
    DTYPE_BYTES,
    HIGH_SHARE_PCT,
    MEDIUM_SHARE_PCT,
    PRECISION,
    severity_for_share,
    share_pct,
    tensor_bytes,
)

__all__ = [
    "CONVERSION_LAUNCH_US",
    "conversion_estimate_us",
    "finding_ops",
    "fold_layer",
    "folded_cells",
    "in_cells",
    "parallel_group",
    "primitive_of",
    "selected_time",
    "stage_measure",
    "stages_step_time",
    "Outlier",
    "high_outliers",
    "low_outliers",
    "rank_label",
    "steady_breakdown",
    "ConversionTime",
    "conversion_evidence",
    "conversion_time",
    "triage_finding",
    "unaligned_matmul_cells",
    "ASSUMED_CUBE_TFLOPS",
    "ASSUMED_HBM_GBPS",
    "COMM_CORE_NAMES",
    "DTYPE_BYTES",
    "DataBound",
    "DataBoundEffect",
    "HIGH_SHARE_PCT",
    "LLAMA_TYPES",
    "MEDIUM_SHARE_PCT",
    "PRECISION",
    "StageEvidence",
    "Wait",
    "LAYER_ITEM",
    "cell_path_in_layer",
    "fold_layer_index",
    "data_bound_effect",
    "data_bound_headroom",
    "data_wait",
    "rank_data_wait",
    "fill_stages_without_ir",
    "ir_dumps_for",
    "ir_location",
    "ir_parameters",
    "is_llama",
    "is_model_weight",
    "kernel_cell",
    "kernel_fixed_cost_us",
    "kernel_launches_by_scope",
    "kernel_scope",
    "kernel_time_by_scope",
    "layer_of_scope",
    "layer_prefix",
    "llama_parameters",
    "one_f_one_b_step_saving",
    "pattern_for",
    "micro_batches_per_step",
    "pipeline_micro_batches",
    "pipeline_stage_of",
    "plain",
    "queue_empty_share",
    "realised_saving",
    "severity_for_share",
    "share_pct",
    "source_location",
    "stage_busy_and_micro",
    "stage_evidence",
    "stage_representatives",
    "steps_of_whole_run_row",
    "tensor_bytes",
    "trainable_parameters",
    "user_source",
]
