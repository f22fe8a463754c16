"""Derived and JSON tables in ``docs/tables.md``: where each column comes from, and the dtypes the readers give."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from advisor_core.docs.fields import model_fields_table
from advisor_core.docs.markdown import code_span, rst_to_md, table_cell
from advisor_core.docs.tables_specs import spec_table

# Where the columns of the tables not read through a single CSV spec come from. Every entry
# must name a column the loader declares (checked when the page is generated); columns of a
# derived table that share a name with a column of its input CSV spec are filled in from it.
_TS_NOTE = "µs text → exact ns"
_SOURCES: dict[str, dict[str, str]] = {
    "step_trace": {
        "step": "`Step` (empty → missing); legacy `step_num` (MindSpore's own average row `-` is dropped)",
        "whole_run": "true for the single whole-collection row (`Step` = 0 or empty) MindSpore ≥ 2.5 writes",
        "device_id": "`Device_id` / `Device id` / `Device ID` (modern file only)",
        "total_us": "legacy `total` × 10 ns; otherwise `computing_us + communication_not_overlapped_us + free_us`",
        "iteration_interval_us": "legacy `iteration_interval` × 10 ns (step gap: waiting for data); NaN otherwise",
        "fp_bp_us": "legacy `fp_and_bp` (or `fp`) × 10 ns; NaN otherwise",
        "tail_us": "legacy `tail` × 10 ns (gradient AllReduce + update); NaN otherwise",
    },
    "trace_events": {
        "ph": "`ph`; rows for `X`, `B`, `E`, `i`, `I`, `C` (metadata `M` and flow events are folded into names)",
        "name": "`name`",
        "cat": "`cat`",
        "pid": "`pid`, as text",
        "tid": "`tid`, as text",
        "ts_ns": "`ts` (string or number, µs) → exact ns",
        "dur_us": "`dur` (number or string), µs",
        "process_name": "`args.name` of the `process_name` metadata event of the pid",
        "thread_name": "`args.name` of the `thread_name` metadata event of (pid, tid)",
        "device_id": "`NPU <id>` in the `args.labels` of the pid's `process_labels` metadata event",
        "args": "`args` (a dict; only returned when asked for)",
    },
    "step_events": {
        "ph": "`ph` of `ProfilerStep#<n>` and `Overlap Analysis` events (`X`, `B`, `E`, `i`, `I`)",
        "name": "`name`: `ProfilerStep#<n>`, `Computing`, `Communication`, `Communication(Not Overlapped)`, `Free`",
        "pid": "`pid`, as text",
        "tid": "`tid`, as text",
        "ts_ns": "`ts` (string or number, µs) → exact ns",
        "dur_us": "`dur` (number or string), µs",
        "process_name": "`args.name` of the `process_name` metadata event of the pid",
        "thread_name": "`args.name` of the `thread_name` metadata event of (pid, tid)",
    },
    "communication": {
        "rank": "`cluster_communication.json` only: the rank key; missing in the per-rank file",
        "step": "step key `step` / `step<N>` → N (missing for a bare `step`)",
        "group_kind": "group key `p2p` / `collective` (cluster file: the rank-set key)",
        "op_name": "op key before `@` (e.g. `hcom_allReduce__123_0_1`); `Total Op Info` is skipped",
        "group": "op key after `@` (group hash)",
        "op_type": "derived from `op_name`: longest of send, receive, allreduce, allgather, reducescatter, broadcast, alltoall(v/vc), batchsendrecv … (else `other`)",
        "start_ns": f"`Communication Time Info` › `Start Timestamp(us)`, {_TS_NOTE}",
        "elapse_us": "`Elapse Time(ms)` × 1000",
        "transit_us": "`Transit Time(ms)` × 1000",
        "wait_us": "`Wait Time(ms)` × 1000",
        "synchronization_us": "`Synchronization Time(ms)` × 1000",
        "idle_us": "`Idle Time(ms)` (or the misspelt `Idel Time(ms)`) × 1000",
        "wait_ratio": "`Wait Time Ratio` (0–1)",
        "synchronization_ratio": "`Synchronization Time Ratio` (0–1)",
        "transit_size_mb": "sum of `Transit Size(MB)` over every link of `Communication Bandwidth Info`",
    },
    "communication_bandwidth": {
        "rank": "`cluster_communication.json` only: the rank key",
        "step": "step key `step` / `step<N>` → N",
        "op_name": "op key before `@`",
        "group": "op key after `@`",
        "link_type": "key of `Communication Bandwidth Info`: RDMA, HCCS, PCIE, SDMA, SIO … (unknown types kept)",
        "transit_size_mb": "`Transit Size(MB)`",
        "transit_us": "`Transit Time(ms)` × 1000",
        "bandwidth_gbps": "`Bandwidth(GB/s)`",
        "large_packet_ratio": "`Large Packet Ratio`",
    },
    "communication_matrix": {
        "step": "step key `step` / `step<N>` → N",
        "group_kind": "group key `p2p` / `collective`",
        "op_key": "op key as written",
        "op_type": "op key before the first `-`",
        "rank_set": "op key after `@`",
        "src_rank": "link key `src-dst`: `src`",
        "dst_rank": "link key `src-dst`: `dst`",
        "transport_type": "`Transport Type`",
        "transit_size_mb": "`Transit Size(MB)`",
        "transit_us": "`Transit Time(ms)` × 1000",
        "bandwidth_gbps": "`Bandwidth(GB/s)`",
        "op_name": "`Op Name`",
    },
    "minddata_pipeline": {
        "op_id": "CSV `op_id`; JSON `op_info[].op_id`",
        "op_type": "CSV `op_type`; JSON `op_info[].op_type`",
        "num_workers": "CSV `num_workers`; JSON `op_info[].num_workers`",
        "queue_sizes": "CSV `output_queue_size` (list literal); JSON `metrics.output_queue.size` — sampled output-queue sizes",
        "queue_average_size": "CSV `output_queue_average_size`; JSON mean of the samples",
        "queue_length": "CSV `output_queue_length`; JSON `metrics.output_queue.length` (capacity)",
        "queue_usage_rate": "CSV `output_queue_usage_rate`; JSON average ÷ length (0–1)",
        "queue_empty_freq": "share of queue samples equal to 0 (0–1), computed",
        "sample_interval_ms": "CSV `sample_interval`; JSON `sampling_interval`",
        "parent_id": "CSV `parent_id`; JSON: the op listing this one in `children`",
        "children_ids": "CSV `children_id` (list literal); JSON `op_info[].children`",
    },
    "minddata_cpu": {
        "op_id": "`op_info[].op_id`",
        "avg_sys_pct": "mean of `op_info[].metrics.sys_utilization`",
        "avg_user_pct": "mean of `op_info[].metrics.user_utilization`",
        "avg_cpu_pct": "`avg_sys_pct + avg_user_pct`",
    },
    "host_queue": {
        "step": "third field of each line (`type sub_type step value [timestamp]`)",
        "queue_size": "value of a type-1 (connector size) line",
        "queue_capacity": "sub_type of a type-1 line",
        "get_ms": "value of a type-0 line with sub_type 0",
        "push_ms": "value of a type-0 line with sub_type 1",
        "total_ms": "value of a type-0 line with sub_type 2",
        "timestamp_ms": "fifth field (host clock, ms) of the type-0 sub_type-0 line",
    },
    "device_queue": {
        "step": "1-based, in time order",
        "node_name": "first field (`GetNext_dequeue_wait`); CSV `Node Name`",
        "start_us": "second field; CSV `Start Time(us)` (GPU: ns ÷ 1000)",
        "end_us": "third field; CSV `End Time(us)` (GPU: ns ÷ 1000)",
        "wait_us": "`end_us − start_us`",
        "queue_size": "fourth field; CSV `Queue Size` (0: the device queue was empty)",
    },
}

# Columns whose reader gives Python objects (an empty sample cannot show it).
_OBJECT_DTYPES = {
    ("trace_events", "args"): "object (dict)",
    ("minddata_pipeline", "queue_sizes"): "object (list[int])",
    ("minddata_pipeline", "children_ids"): "object (list[int])",
    ("minddata_summary", "children_ids"): "object (list[int])",
}


def _sample_inputs() -> dict[str, str]:
    """The smallest valid file of each non-CSV artifact kind (header only, empty JSON)."""
    from advisor_core.loaders import minddata as mdl
    from advisor_core.loaders import steps

    def header(spec: Any) -> str:
        return ",".join(c.headers[0] for c in spec.columns) + "\n"

    return {
        "step_trace_time": header(steps.STEP_TRACE_TIME),
        "trace_view": "[]",
        "communication": "{}",
        "communication_matrix": "{}",
        "minddata_pipeline_raw": header(mdl.PIPELINE_RAW),
        "minddata_pipeline_summary_json": '{"op_ids": []}',
        "minddata_cpu_utilization": "{}",
        "device_queue_profiling": "0 0 1 1.0\n",
        "minddata_aicpu": "node_name start_time end_time queue_size\nGetNext_dequeue_wait 1 2 0\n",
    }


def reader_dtypes(loader: Any) -> dict[str, str]:
    """Column → dtype the loader's reader produces (read from a minimal sample file)."""
    from advisor_core.diagnostics import DiagnosticSink

    samples = _sample_inputs()
    kind = next((k for k in loader.artifacts if k in samples), None)
    if kind is None:
        return {}
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"{kind}.sample"
        p.write_text(samples[kind], encoding="utf-8")
        res = loader.read(p, kind, None, DiagnosticSink())
    if res is None:
        return {}
    out = {c: str(t) for c, t in res.frame.dtypes.items()}
    for (table, col), dt in _OBJECT_DTYPES.items():
        if table == loader.name and col in out:
            out[col] = dt
    return out


def derived_table_lines(ld: Any, inputs: dict[str, list[tuple[str, Any]]], placed: set[str]) -> list[str]:
    """The section body of a table not read through one CSV spec: columns, reader dtypes, sources, input specs.

    Adds the names of the input specs it documents to ``placed``.
    """
    from advisor_core.loaders import minddata as mdl

    L: list[str] = []
    dtypes = reader_dtypes(ld)
    sources = dict(_SOURCES.get(ld.name, {}))
    stale = sorted(set(sources) - set(ld.columns))
    if stale:
        raise ValueError(f"docs: _SOURCES[{ld.name!r}] names columns the loader does not have: {stale}")
    for _, spec_in in inputs.get(ld.name, []):
        for c in spec_in.columns:
            if c.name in ld.columns and c.name not in sources:
                sources[c.name] = ", ".join(code_span(h) for h in c.headers) + (f" — {c.doc}" if c.doc else "")
    if ld.name == "minddata_summary":
        for key, col in mdl._SUMMARY_LISTS.items():
            sources.setdefault(col, f"`{key}` (a list, one entry per op)")
    if ld.doc:
        L += [rst_to_md(ld.doc), ""]
    if ld.name == "minddata_summary":
        L += ["The JSON has one list per column; the CSV twin one row per key (`key,value1,value2,…`).",
              "MindSpore's `-1` (no metric, e.g. for the root op) becomes missing.", ""]
    L += ["| column | dtype | source |", "|---|---|---|"]
    for col in ld.columns:
        L.append(f"| `{col}` | {dtypes.get(col, '?')} | {table_cell(sources.get(col, ''))} |")
    L.append("")
    if ld.name == "minddata_summary":
        L += [
            "`rank.record(\"minddata_summary\")` gives the scalar and text fields as a",
            "`MinddataSummary`:",
            "",
            *model_fields_table(mdl.MinddataSummary, with_source={
                **{dst: f"`{src}` (ms)" for src, dst in mdl._SUMMARY_SCALARS.items()},
                **{k: f"`{k}`" for k in mdl._SUMMARY_TEXTS},
            }),
            "",
        ]
    if ld.name == "minddata_cpu":
        L += [
            "`rank.record(\"minddata_cpu\")` gives host facts as a `MinddataCpuInfo`:",
            "",
            *model_fields_table(mdl.MinddataCpuInfo, with_source={
                "cpu_processor_num": "`cpu_processor_num`",
                "host_avg_idle_pct": "mean of `device_info.idle_utilization`",
                "host_avg_user_pct": "mean of `device_info.user_utilization`",
                "host_avg_sys_pct": "mean of `device_info.sys_utilization`",
                "sampling_interval_ms": "`sampling_interval`",
                "process_avg_cpu_pct": "mean of `process_info.user_utilization + sys_utilization` (% of one core)",
            }),
            "",
        ]
    for kind, spec_in in inputs.get(ld.name, []):
        placed.add(spec_in.name)
        L += [f"### Header spellings of `{kind}` (file spec `{spec_in.name}`)", ""]
        if spec_in.required:
            L += ["Required (the file is unusable without them): " + ", ".join(f"`{c}`" for c in spec_in.required) + ".", ""]
        L += spec_table(spec_in) + [""]
    return L
