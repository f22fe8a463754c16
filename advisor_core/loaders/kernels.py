"""Device kernels (``kernel_details.csv`` / CANN ``op_summary_*.csv``) and op-type totals.

``kernel_details.csv`` is a renamed projection of CANN's ``op_summary``; both are
read through the same spec, so ``Op Name`` and ``Name`` land in ``name``,
``Task Start Time(us)`` and ``Start Time(us)`` in ``start_ns`` and so on.
PMU metric columns (which depend on ``aic_metrics``) are kept under their
snake_case names, e.g. ``aic_mac_ratio``, ``aiv_vec_ratio``, ``aicore_time_us``,
``cube_utilization_pct``.
"""

from __future__ import annotations

from advisor_core.loaders.csvtable import Col, CsvTableSpec

KERNELS = CsvTableSpec(
    name="kernels",
    title="device kernels",
    columns=(
        Col("step_id", ("Step Id", "Step ID"), "int", "step the kernel belongs to (absent without a schedule)"),
        Col("device_id", ("Device_id", "Device id", "Device ID"), "int", "NPU id (torch_npu ≥ b5873d4, CANN)"),
        Col("model_id", ("Model ID",), "id", "graph/model id; 4294967295 → missing"),
        Col("task_id", ("Task ID",), "id", "task id; N/A for HCCL rows"),
        Col("stream_id", ("Stream ID",), "id", "stream id; N/A for HCCL rows"),
        Col("name", ("Name", "Op Name"), "str", "kernel full name (MindSpore: <launch op>/<kernel>)"),
        Col("type", ("Type", "OP Type"), "str", "operator type, e.g. MatMulV2, TransData, Cast"),
        Col("op_state", ("OP State",), "str", "dynamic | static"),
        Col("accelerator_core", ("Accelerator Core", "Task Type"), "str", "AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, MIX_AIV, HCCL, COMMUNICATION …"),
        Col("start_ns", ("Start Time(us)", "Task Start Time(us)"), "ts_us", "task start, ns since the epoch (exact)"),
        Col("duration_us", ("Duration(us)", "Task Duration(us)"), "float", "task duration in µs"),
        Col("wait_us", ("Wait Time(us)", "Task Wait Time(us)"), "float", "gap since the previous task ended, µs"),
        Col("block_num", ("Block Num", "Block Dim"), "int", "cores used"),
        Col("mix_block_num", ("Mix Block Num", "Mix Block Dim"), "int", "cores used by the mix part"),
        Col("hf32_eligible", ("HF32 Eligible",), "str", "YES | NO"),
        Col("input_shapes", ("Input Shapes",), "shape", "';'-separated shapes, e.g. 81920,4096;8192,512"),
        Col("input_dtypes", ("Input Data Types",), "str", "';'-separated dtypes, e.g. DT_BF16;DT_BF16"),
        Col("input_formats", ("Input Formats",), "str", "';'-separated formats, e.g. ND;FRACTAL_NZ"),
        Col("output_shapes", ("Output Shapes",), "shape", "';'-separated shapes"),
        Col("output_dtypes", ("Output Data Types",), "str", "';'-separated dtypes"),
        Col("output_formats", ("Output Formats",), "str", "';'-separated formats"),
        Col("context_id", ("Context ID",), "id", "sub-task context id"),
    ),
    required=("name", "duration_us"),
    extra_kind="float",
    doc="One row per device task. Level0 collections have no shape columns; PMU columns depend on aic_metrics.",
)

# The columns a default ``rank.table("kernels")`` returns (what built-in rules use).
KERNEL_DEFAULT_COLUMNS: tuple[str, ...] = (
    "step_id",
    "name",
    "type",
    "accelerator_core",
    "start_ns",
    "duration_us",
    "wait_us",
    "input_shapes",
    "input_dtypes",
    "input_formats",
    "output_shapes",
    "output_formats",
)

OP_STATISTIC = CsvTableSpec(
    name="op_statistic",
    title="op-type statistics",
    columns=(
        Col("device_id", ("Device_id", "Device id", "Device ID"), "int"),
        Col("model_name", ("Model Name",), "str"),
        Col("op_type", ("OP Type", "Op Type"), "str", "operator type"),
        Col("core_type", ("Core Type",), "str", "AI_CORE | AI_VECTOR_CORE | AI_CPU …"),
        Col("count", ("Count",), "int", "calls"),
        Col("total_time_us", ("Total Time(us)",), "float"),
        Col("min_time_us", ("Min Time(us)",), "float"),
        Col("avg_time_us", ("Avg Time(us)",), "float"),
        Col("max_time_us", ("Max Time(us)",), "float"),
        Col("ratio_pct", ("Ratio(%)",), "float", "share of the model's total, %"),
    ),
    required=("op_type", "total_time_us"),
)
