"""MindData files: raw inputs (``FRAMEWORK/``) and what MindSpore's viewers derive from them.

Raw (as the MindData profiling manager saves them): ``pipeline_profiling_{rank}.json``,
``minddata_cpu_utilization_{rank}.json`` (with ``cpu_processor_num``) and
``device_queue_profiling_{rank}.txt`` (sink mode: the host queue). CANN's export of the device
queue, ``PROF_*/mindstudio_profiler_output/aicpu_mi_*.csv`` (one GetNext per step: its wait and
the device queue's size). Derived, with MindSpore ≥ 2.5's own logic
(``ms_minddata_viewer.py``) re-implemented line for line — including its ``BottleneckAnalyzer``,
which scans leaf → root and, through Python's ``list[-1]`` on a missing child, can name a
neighbour of the slow op: ``minddata_pipeline_raw_{rank}.csv`` (BFS from the root, inline ops
skipped), ``minddata_pipeline_summary_{rank}.json`` / ``.csv``. Plus ``dataset.csv``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from advisor_core.simulate.minddata import DEQUEUE_LATENCY_US, SAMPLING_INTERVAL_MS, PipelineModel

__all__ = ["write_minddata", "summarize", "BottleneckAnalyzer"]

# CPU the training process's own host threads use besides its pipeline (% of one core): MindSpore's runtime
# launching the step's kernels and the Python training loop — about one busy core on a sink-mode Ascend job.
TRAINING_HOST_CPU_PCT = 90.0


def _raw_pipeline(model: PipelineModel) -> dict:
    ops = []
    for op in model.ops:
        entry: dict = {"op_id": op.op_id, "op_type": op.op_type, "num_workers": op.num_workers}
        if op.queue_sizes:
            entry["metrics"] = {"output_queue": {"size": op.queue_sizes, "length": model.queue_capacity}}
        else:
            entry["metrics"] = None
        if op.children:
            entry["children"] = list(op.children)
        ops.append(entry)
    return {"sampling_interval": SAMPLING_INTERVAL_MS, "op_info": ops}


def _cpu_json(model: PipelineModel, cores_total: int) -> dict:
    """``minddata_cpu_utilization``: ops and the process in % of one core, the host in % of all its cores."""
    n = len(model.ops[0].cpu_user)
    user = np.zeros(n)
    sys_ = np.zeros(n)
    for op in model.ops:
        user += np.array(op.cpu_user)
        sys_ += np.array(op.cpu_sys)
    # the training process: its pipeline threads and its own (runtime launching the step, the Python loop)
    proc_user = np.round(user + TRAINING_HOST_CPU_PCT * 0.85, 2)
    proc_sys = np.round(sys_ + TRAINING_HOST_CPU_PCT * 0.15, 2)
    # device-wide shares of all host cores (this process is one of devices_per_node)
    user_pct = np.round(proc_user / cores_total, 2)
    sys_pct = np.round(proc_sys / cores_total, 2)
    idle = np.round(np.clip(100.0 - user_pct - sys_pct - 5.0, 0, 100), 2)
    return {
        "cpu_processor_num": cores_total,
        "device_info": {
            "context_switch_count": [int(400 + 3 * i % 50) for i in range(n)],
            "idle_utilization": [float(x) for x in idle],
            "io_utilization": [0.0] * n,
            "runnable_process": [2] * n,
            "sys_utilization": [float(x) for x in sys_pct],
            "user_utilization": [float(x) for x in user_pct],
        },
        "op_info": [{"op_id": op.op_id, "metrics": {"sys_utilization": op.cpu_sys, "user_utilization": op.cpu_user}}
                    for op in model.ops],
        "process_info": {"sys_utilization": [float(x) for x in proc_sys], "user_utilization": [float(x) for x in proc_user]},
        "process_memory_info": {"pss_mbytes": [2048.0] * n, "rss_mbytes": [2304.0] * n, "uss_mbytes": [1920.0] * n},
        "system_memory_info": {"total_mbytes": 1572864.0, "free_mbytes": [1200000.0] * n, "used_mbytes": [372864.0] * n},
        "sampling_interval": SAMPLING_INTERVAL_MS,
        "time_stamp": [i * SAMPLING_INTERVAL_MS for i in range(n)],
    }


def _device_queue_lines(model: PipelineModel, step_start_ns: np.ndarray, t0_ns: int) -> list[str]:
    """``type sub step value timestamp``: per batch the pipeline/push/batch times (ms) and the host queue's size.

    The host queue is full when the device or the push (transfer) is slower than the pipeline,
    empty when a pipeline op is the slowest, and empty for the cold batches of a warm-up (their
    pipeline time grows by their extra cost).
    """
    lines = []
    push_ms = int(round(model.push_us / 1000.0))
    full = model.queue_capacity if (model.device_bound or model.transfer_bound) else 0
    for i, t in enumerate(step_start_ns.tolist()):
        ts = (int(t) - t0_ns) // 1_000_000
        step = i + 1
        cold = model.warmup_extra_us[i] if i < len(model.warmup_extra_us) else 0.0
        pipe_ms = int(round((model.period_us + cold) / 1000.0))
        size = 0 if cold else full
        lines += [f"0 0 {step} {pipe_ms} {ts}", f"0 1 {step} {push_ms} {ts}", f"0 2 {step} {pipe_ms + push_ms} {ts}",
                  f"1 {model.queue_capacity} {step} {size} {ts}"]
    return lines


def _aicpu_mi_rows(model: PipelineModel, step_start_ns: np.ndarray, wait_ns: np.ndarray, device_id: int) -> list[list]:
    """CANN's ``aicpu_mi``: per step the device's GetNext — from the step start for its wait, and the device queue's size.

    A GetNext that waits longer than the dequeue itself found the device queue empty; otherwise
    the queue held the batches the host pushed ahead (its capacity).
    """
    rows = []
    empty_after_ns = int(DEQUEUE_LATENCY_US * 1000) + 1000
    for t, w in zip(step_start_ns.tolist(), wait_ns.tolist()):
        start_us, end_us = int(t) // 1000, (int(t) + int(w)) // 1000
        rows.append([device_id, "GetNext_dequeue_wait", f"{start_us}\t", f"{end_us}\t",
                     0 if int(w) > empty_after_ns else model.queue_capacity])
    return rows


# --------------------------------------------------------------------------------------- MindSpore's viewer
def _metrics_info(metrics: dict | None) -> list:
    q = metrics.get("output_queue", {}) if metrics else {}
    size = q.get("size", [])
    length = q.get("length", 0)
    if not size:
        return [-1] * 5
    avg = round(sum(size) / len(size), 2)
    util = round(100 * avg / length, 2) if length else -1
    empty = round(100 * size.count(0) / len(size), 2)
    return [size, length, avg, util, empty]


def summarize(raw: dict, cpu: dict, trace_lines: list[str], device_queue_file_found: bool = True) -> dict:
    """``minddata_pipeline_summary``: MindSpore's ``MindDataPiplineSummaryViewer._analyse_data``.

    ``trace_lines``: ``device_queue_profiling`` (sink mode, ``device_queue_file_found``) or
    ``dataset_iterator_profiling`` lines; in the latter case the batch time is the gap between
    successive connector-size records, as MindSpore computes it.
    """
    op_info = {o["op_id"]: o for o in raw["op_info"]}
    out: dict[str, list] = {k: [] for k in ("op_ids", "op_names", "pipeline_ops", "num_workers", "queue_average_size",
                                            "queue_utilization_pct", "queue_empty_freq_pct", "children_ids")}
    parent: dict[int, int] = {}
    for oid, info in sorted(op_info.items()):
        name = info["op_type"][0:-2]
        q = _metrics_info(info.get("metrics") or {})
        children = info.get("children", [])
        for c in children:
            parent[c] = oid
        out["op_ids"].append(oid)
        out["op_names"].append(name)
        out["pipeline_ops"].append(f"{name}(id={oid})")
        out["num_workers"].append(info.get("num_workers"))
        out["queue_average_size"].append(q[2])
        out["queue_utilization_pct"].append(q[3])
        out["queue_empty_freq_pct"].append(q[4])
        out["children_ids"].append(children)
    out["parent_id"] = [parent.get(i, -1) for i in out["op_ids"]]
    per_op = {o["op_id"]: [a + b for a, b in zip(o["metrics"]["sys_utilization"], o["metrics"]["user_utilization"])]
              for o in cpu["op_info"] if o["op_id"] != -1}
    avg = [-1] * len(per_op)
    for oid, vals in per_op.items():
        avg[oid] = round(sum(vals) / len(vals) if vals else 0, 2)
    out["avg_cpu_pct"] = avg
    q_time: list[list[int]] = [[], [], []]
    prev_time = 0
    for line in trace_lines:
        rec = [int(d) for d in line.split(" ")][0:5]
        if rec[2] < 2:  # the first batch is skipped
            prev_time = rec[4]
            continue
        if rec[0] == 0:
            q_time[rec[1]].append(rec[3])
        elif rec[0] == 1 and not device_queue_file_found:
            q_time[2].append(rec[4] - prev_time)
            prev_time = rec[4]
    avg_t = [sum(t) / len(t) if t else -1 for t in q_time]
    out["per_pipeline_time"] = [round(avg_t[0], 3)]
    out["per_push_queue_time"] = [round(avg_t[1], 3)]
    out["per_batch_time"] = [round(avg_t[2], 3)]
    if len(out["pipeline_ops"]) == len(out["avg_cpu_pct"]):
        out["avg_cpu_pct_per_worker"] = [round(c / n if (n != 0 and c >= 0) else -1, 2)
                                         for c, n in zip(out["avg_cpu_pct"], out["num_workers"])]
        try:
            out.update(BottleneckAnalyzer(out).analyze())
        except IndexError:
            pass
    return out


class BottleneckAnalyzer:
    """MindSpore's bottleneck heuristic, unchanged (thresholds and messages included)."""

    MAX_CPU, MIN_CPU = 75.0, 20.0
    LEAF_EMPTY_MAX, DEVICEQUEUE_EMPTY_MAX, IN_OUT_DIFF_MAX, IN_QUEUE_MAX = 50, 60, 50, 10
    NON_MULTITHREADED = {"Barrier", "Concat", "EpochCtrl", "Rename", "Repeat", "Shuffle", "Skip", "Take", "Zip"}

    def __init__(self, s: dict) -> None:
        self.pipeline_ops, self.op_names, self.op_ids = s["pipeline_ops"], s["op_names"], s["op_ids"]
        self.num_workers, self.queue_average_size = s["num_workers"], s["queue_average_size"]
        self.queue_utilization_pct, self.queue_empty_freq_pct = s["queue_utilization_pct"], s["queue_empty_freq_pct"]
        self.children_ids, self.avg_cpu_pct_per_worker = s["children_ids"], s["avg_cpu_pct_per_worker"]

    def analyze(self) -> dict:
        d: dict = {}
        cpu, queue = self._cpu(), self._queue()
        if cpu:
            d["cpu_analysis_details"] = cpu
        if queue:
            d["queue_analysis_details"] = queue
        bottleneck, suggestion = self._bottleneck()
        if bottleneck[0]:
            d["bottleneck_warning"] = bottleneck
            d["bottleneck_suggestion"] = suggestion
        return d

    def _child(self, op_id: int) -> int:
        if op_id == -1 or not self.children_ids[op_id]:
            return -1
        c = self.children_ids[op_id][0]
        if self.queue_average_size[c] != -1:
            return c
        return self._child(c)

    def _high(self, op_id: int, pct: float) -> str:
        return (f"{self.pipeline_ops[op_id]} is using {pct}% CPU per worker. "
                f"Setting num_parallel_workers>{self.num_workers[op_id]} might bring extra performance.")

    def _cpu(self) -> list[str]:
        out = []
        for op_id in self.op_ids:
            if op_id == -1 or self.op_names[op_id] in self.NON_MULTITHREADED:
                continue
            pct = self.avg_cpu_pct_per_worker[op_id]
            if pct > self.MAX_CPU and self.op_names[op_id]:
                out.append(self._high(op_id, pct))
            elif pct < self.MIN_CPU and self.num_workers[op_id] > 1:
                out.append(f"{self.pipeline_ops[op_id]} is using {pct}% CPU per worker. Using num_parallel_workers="
                           f"{self.num_workers[op_id]} might not bring as much benefit due to low CPU usage per worker.")
        return out

    def _queue(self) -> list[str]:
        out = []
        for op_id in self.op_ids:
            if op_id == -1 or self.op_names[op_id] in self.NON_MULTITHREADED or self.op_names[op_id] == "Batch":
                continue
            in_id, out_q = self._child(op_id), self.queue_utilization_pct[op_id]
            if in_id == -1 and out_q != -1:
                if out_q < self.LEAF_EMPTY_MAX:
                    out.append(f"Leaf op {self.pipeline_ops[op_id]} is using {out_q}% of its output queue. "
                               f"Setting num_parallel_workers>{self.num_workers[op_id]} might speed up I/O.")
            elif self.op_names[op_id] == "DeviceQueue" and in_id != -1:
                if self.queue_empty_freq_pct[in_id] > self.DEVICEQUEUE_EMPTY_MAX:
                    e = self.queue_empty_freq_pct[in_id]
                    out.append(f"{self.pipeline_ops[op_id]}'s input queue is empty {e}% of the time. This might indicate "
                               f"dataset bottlenecks. Hence host cannot keep up with the device {e}% of the time. "
                               "Device waits whenever input queue is empty.")
            elif in_id != -1 and out_q != -1:
                in_q = self.queue_utilization_pct[in_id]
                if in_q != -1 and in_q - out_q > self.IN_OUT_DIFF_MAX:
                    out.append(f"{self.pipeline_ops[op_id]}'s input queue usage={in_q}% is greater than output queue "
                               f"usage={out_q}%. This indicates child op {self.pipeline_ops[in_id]} might be producing "
                               f"faster than its parent {self.pipeline_ops[op_id]} can consume. If this op has low CPU "
                               "utilization, try increasing prefetch_size or increasing num_workers.")
        return out

    def _bottleneck(self) -> tuple[list[str], list[str]]:
        bottleneck, suggestion = "", ""
        for op_id in reversed(self.op_ids):
            if op_id == -1 or self.op_names[op_id] in self.NON_MULTITHREADED or self.op_names[op_id] == "DeviceQueue":
                continue
            in_id, out_q = self._child(op_id), self.queue_utilization_pct[op_id]
            wkr = self.avg_cpu_pct_per_worker[op_id]
            if wkr > self.MAX_CPU:
                bottleneck, suggestion = self.pipeline_ops[op_id], self._high(op_id, wkr)
            elif wkr < self.MIN_CPU:
                in_q = self.queue_utilization_pct[in_id]  # in_id == -1 reads the last op: MindSpore's quirk, kept
                if in_id != -1 and (in_q < self.IN_QUEUE_MAX or out_q - in_q > self.IN_OUT_DIFF_MAX):
                    bottleneck = self.pipeline_ops[op_id]
                    suggestion = (f"{self.pipeline_ops[op_id]} has low CPU utilization per worker of "
                                  f"{self.avg_cpu_pct_per_worker[op_id]}% and abnormal queue usage. Try increasing prefetch_size.")
        return [bottleneck], [suggestion]


def _raw_csv_rows(raw: dict) -> list[list]:
    """``minddata_pipeline_raw``: BFS from the root; children without an output queue are skipped."""
    by_id = {o["op_id"]: dict(o) for o in raw["op_info"]}
    root = by_id[0]
    root["parent_id"] = None
    queue = [root]
    rows = []
    while queue:
        node = queue.pop(0)
        children, pending = [], list(node.get("children", []))
        while pending:
            c = by_id.get(pending.pop(0))
            if c is None:
                continue
            if not (c.get("metrics") or {}).get("output_queue"):
                pending.extend(c.get("children", []))
            else:
                children.append(c["op_id"])
        node["children"] = children
        q = (node.get("metrics") or {}).get("output_queue") or {}
        size, length = q.get("size"), q.get("length")
        avg = sum(size) / len(size) if size else None
        rows.append([node["op_id"], node["op_type"], node["num_workers"], size, avg, length,
                     avg / length if avg is not None else None, raw["sampling_interval"], node.get("parent_id"),
                     children if children else None])
        for c in children:
            sub = by_id[c]
            sub["parent_id"] = node["op_id"]
            queue.append(sub)
    return rows


def _csv_text(rows: list[list], header: list[str] | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header:
        w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue()


def write_minddata(apo: Path, fw: Path, rank: int, model: PipelineModel, step_start_ns: np.ndarray, t0_ns: int,
                   cores_total: int, wait_ns: np.ndarray | None = None, prof_dir: Path | None = None,
                   device_id: int = 0) -> dict:
    """Every MindData file of one rank; with ``wait_ns`` (per step) and ``prof_dir`` also CANN's ``aicpu_mi`` export."""
    if wait_ns is not None and prof_dir is not None:
        out = prof_dir / "mindstudio_profiler_output"
        out.mkdir(parents=True, exist_ok=True)
        stamp = prof_dir.name.split("_")[2] if prof_dir.name.count("_") >= 2 else "0"
        (out / f"aicpu_mi_{stamp}.csv").write_text(
            _csv_text(_aicpu_mi_rows(model, step_start_ns, wait_ns, device_id),
                      ["Device_id", "Node Name", "Start Time(us)", "End Time(us)", "Queue Size"]), encoding="utf-8")
    raw = _raw_pipeline(model)
    cpu = _cpu_json(model, cores_total)
    lines = _device_queue_lines(model, step_start_ns, t0_ns)
    (fw / f"pipeline_profiling_{rank}.json").write_text(json.dumps(raw, separators=(",", ":")), encoding="utf-8")
    (fw / f"minddata_cpu_utilization_{rank}.json").write_text(json.dumps(cpu, separators=(",", ":")), encoding="utf-8")
    (fw / f"device_queue_profiling_{rank}.txt").write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    header = ["op_id", "op_type", "num_workers", "output_queue_size", "output_queue_average_size", "output_queue_length",
              "output_queue_usage_rate", "sample_interval", "parent_id", "children_id"]
    (apo / f"minddata_pipeline_raw_{rank}.csv").write_text(_csv_text(_raw_csv_rows(raw), header), encoding="utf-8")
    summary = summarize(raw, cpu, lines)
    (apo / f"minddata_pipeline_summary_{rank}.json").write_text(json.dumps(summary), encoding="utf-8")
    (apo / f"minddata_pipeline_summary_{rank}.csv").write_text(
        _csv_text([[k] + list(v) for k, v in summary.items()]), encoding="utf-8")
    steps = len(step_start_ns)
    mop = model.op(model.map_op_id)
    rows = [["GetNext", "DataQueueOp", steps, round(model.gap_ns / 1000.0, 2), ""],
            ["PushDeviceQueue", "DataQueueOp", steps, round(model.push_us, 2), ""],
            ["Batch", "BatchOp", steps, round(model.op(next(o.op_id for o in model.ops if o.op_type == "BatchOp")).period_us, 2), ""],
            ["Map", "MapOp", steps, round(mop.period_us, 2), "|".join(mop.transforms)]]
    (apo / "dataset.csv").write_text(_csv_text(rows, ["Operation", "Stage", "Occurrences", "Avg. time (us)", "Custom Info"]),
                                     encoding="utf-8")
    return summary
