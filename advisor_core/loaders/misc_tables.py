"""Smaller CSV tables: ``dataset.csv``, memory files, MindSpore CPU op details.

Units follow the files (see ``ascend-profile-formats.md`` §4.10, §4.16, §4.19):
MindSpore's memory "MB" columns are KB/1000 — kept as written, the column name
says MB. Allocation/release times and memory timestamps become exact ns.
"""

from __future__ import annotations

from advisor_core.loaders.csvtable import Col, CsvTableSpec

DATASET = CsvTableSpec(
    name="dataset",
    title="dataset operations",
    columns=(
        Col("operation", ("Operation",), "str", "dataset event name"),
        Col("stage", ("Stage",), "str"),
        Col("occurrences", ("Occurrences",), "int"),
        Col("avg_time_us", ("Avg. time (us)", "Avg. time(us)"), "float", "mean duration, µs"),
        Col("custom_info", ("Custom Info",), "str"),
    ),
    required=("operation", "avg_time_us"),
)

OPERATOR_MEMORY = CsvTableSpec(
    name="operator_memory",
    title="operator memory",
    columns=(
        Col("name", ("Name",), "str"),
        Col("size_kb", ("Size(KB)",), "float"),
        Col("allocation_ns", ("Allocation Time(us)",), "ts_us"),
        Col("release_ns", ("Release Time(us)",), "ts_us", "missing for blocks never released"),
        Col("active_release_ns", ("Active Release Time(us)",), "ts_us"),
        Col("duration_us", ("Duration(us)",), "float"),
        Col("active_duration_us", ("Active Duration(us)",), "float"),
        Col("allocation_total_allocated_mb", ("Allocation Total Allocated(MB)",), "float"),
        Col("allocation_total_reserved_mb", ("Allocation Total Reserved(MB)",), "float"),
        Col("allocation_total_active_mb", ("Allocation Total Active(MB)",), "float"),
        Col("release_total_allocated_mb", ("Release Total Allocated(MB)",), "float"),
        Col("release_total_reserved_mb", ("Release Total Reserved(MB)",), "float"),
        Col("release_total_active_mb", ("Release Total Active(MB)",), "float"),
        Col("stream_ptr", ("Stream Ptr",), "str"),
        Col("device_type", ("Device Type", "Device"), "str", "NPU:<id>"),
    ),
    required=("name", "size_kb"),
)

MEMORY_RECORD = CsvTableSpec(
    name="memory_record",
    title="memory over time",
    columns=(
        Col("component", ("Component",), "str", "GE | MindSpore | MindSpore+GE | APP | PTA …"),
        Col("timestamp_ns", ("Timestamp(us)",), "ts_us"),
        Col("total_allocated_mb", ("Total Allocated(MB)",), "float"),
        Col("total_reserved_mb", ("Total Reserved(MB)",), "float"),
        Col("total_active_mb", ("Total Active(MB)",), "float"),
        Col("stream_ptr", ("Stream Ptr",), "str"),
        Col("device_type", ("Device Type", "Device"), "str"),
    ),
    required=("component", "total_reserved_mb"),
)

NPU_MODULE_MEM = CsvTableSpec(
    name="npu_module_mem",
    title="NPU module memory",
    columns=(
        Col("device_id", ("Device_id", "Device id", "Device ID"), "int"),
        Col("component", ("Component",), "str"),
        Col("timestamp_ns", ("Timestamp(us)",), "ts_us"),
        Col("total_reserved_mb", ("Total Reserved(MB)",), "float"),
        Col("device", ("Device",), "str"),
    ),
    required=("component", "total_reserved_mb"),
)

CPU_OP_DETAIL = CsvTableSpec(
    name="host_ops",
    title="MindSpore CPU op timings",
    columns=(
        Col("op_side", ("op_side",), "str"),
        Col("op_type", ("op_type",), "str"),
        Col("op_name", ("op_name",), "str"),
        Col("full_op_name", ("full_op_name",), "str", "equals the IR '# Fullname with scope'"),
        Col("occurrences", ("op_occurrences",), "int"),
        Col("total_time_ms", ("op_total_time(ms)",), "float"),
        Col("avg_time_ms", ("op_avg_time(ms)",), "float"),
        Col("total_proportion", ("total_proportion",), "float", "fraction 0–1"),
        Col("subgraph", ("subgraph",), "str"),
        Col("pid", ("pid",), "int"),
    ),
    required=("full_op_name", "total_time_ms"),
)
