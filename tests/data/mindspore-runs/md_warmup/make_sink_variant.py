"""The sink-mode twin of a non-sink case: the iterator's file renamed to device_queue_profiling_0.txt, viewers re-run.

The MindSpore CPU backend cannot run in sink mode (Model.train falls back to non-sink; GetNext has no
CPU kernel), so it never writes device_queue_profiling_{id}.txt. Both files are written by the same
recorder with the same line format, ``type sub_type step value timestamp``: per batch, type 0 sub 0 is
the time the consumer (the iterator in non-sink mode, the DataQueueOp in sink mode) waited for the
pipeline's batch, sub 1 the push time, sub 2 the total; type 1 the size of the queue it reads from.
Only the name changes; then MindSpore's own MindData parser and viewers run again, so the summary is
what MindSpore derives in sink mode (per_batch_time from the sub-2 records instead of the timestamps).

    python make_sink_variant.py NONSINK_OUT SINK_OUT
"""
import os
import shutil
import sys

src, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
raw_dir = os.path.join(out, "raw")
view_dir = os.path.join(out, "ASCEND_PROFILER_OUTPUT")
os.makedirs(raw_dir, exist_ok=True)
os.makedirs(view_dir, exist_ok=True)
for name in ("pipeline_profiling_0.json", "minddata_cpu_utilization_0.json"):
    shutil.copy(os.path.join(src, "raw", name), os.path.join(raw_dir, name))
shutil.copy(os.path.join(src, "raw", "dataset_iterator_profiling_0.txt"), os.path.join(raw_dir, "device_queue_profiling_0.txt"))

from mindspore.profiler.analysis.parser.ms_minddata_parser import MindDataParser
from mindspore.profiler.analysis.viewer.ms_minddata_viewer import MindDataPipelineRawViewer, MindDataPiplineSummaryViewer
from mindspore.profiler.common.log import ProfilerLogger

ProfilerLogger.init(out)
kw = dict(device_id="0", rank_id="0", activities=["CPU"], framework_path=raw_dir, ascend_ms_dir=out,
          ascend_profiler_output_path=view_dir)
data = MindDataParser(**kw).parse({}) if hasattr(MindDataParser, "parse") else MindDataParser(**kw)._parse({})
MindDataPipelineRawViewer(**kw).save(data)
MindDataPiplineSummaryViewer(**kw).save(data)
