"""Case: the same CPU training run with its map op at num_parallel_workers=1 and =2 (issue 16's real pair).

MindSpore 2.10 CPU wheel. GeneratorDataset (384 samples) -> map(python transform, 20 ms of
sleep per sample: waits like I/O or a decode library, so the workers really run in
parallel) -> batch(8) -> a training step of a 3-layer MLP (~40 ms on this 2-core host).
As in ../../../../../shared/real-data/mindspore-2.10-cpu/minddata_profiler (the CPU profiler
does not start MindData profiling), the script drives the C++ MindData profiling manager
directly and then runs the profiler's own MindData parser and viewers, so the output is
what MindSpore writes: raw/{pipeline_profiling,minddata_cpu_utilization,
dataset_iterator_profiling}_0.json|txt and ASCEND_PROFILER_OUTPUT/minddata_pipeline_*_0.*.
It also prints the wall time of every step measured here (steps.txt), for the README.

    python case_md_workers.py OUT WORKERS
"""
import os
import sys
import time

out = os.path.abspath(sys.argv[1])
workers = int(sys.argv[2])
raw_dir = os.path.join(out, "raw")
view_dir = os.path.join(out, "ASCEND_PROFILER_OUTPUT")
os.makedirs(raw_dir, exist_ok=True)
os.makedirs(view_dir, exist_ok=True)

import numpy as np
import mindspore as ms
import mindspore._c_dataengine as cde
import mindspore.dataset as ds
from mindspore import nn

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")
ms.set_seed(0)
ds.config.set_seed(0)
ds.config.set_monitor_sampling_interval(100)  # ms

SAMPLES, BATCH, DIM = 384, 8, 1024


def gen():
    rng = np.random.default_rng(0)
    for _ in range(SAMPLES):
        yield rng.standard_normal(DIM, dtype=np.float32), rng.standard_normal(1, dtype=np.float32)


def slow_transform(x):
    time.sleep(0.02)  # 20 ms per sample
    return x * 2.0


md_prof = cde.GlobalContext.profiling_manager()
md_prof.init()
md_prof.start()

dataset = ds.GeneratorDataset(gen, column_names=["x", "y"], shuffle=False)
dataset = dataset.map(operations=slow_transform, input_columns=["x"], num_parallel_workers=workers)
dataset = dataset.batch(BATCH)

net = nn.SequentialCell([nn.Dense(DIM, 2048), nn.ReLU(), nn.Dense(2048, 2048), nn.ReLU(), nn.Dense(2048, 1)])
train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.01))
steps = []
t = time.perf_counter()
for x, y in dataset.create_tuple_iterator(num_epochs=1):
    loss = train(x, y)
    loss.asnumpy()
    now = time.perf_counter()
    steps.append((now - t) * 1000.0)
    t = now

md_prof.stop()
md_prof.save(raw_dir)

from mindspore.profiler.analysis.parser.ms_minddata_parser import MindDataParser
from mindspore.profiler.analysis.viewer.ms_minddata_viewer import MindDataPipelineRawViewer, MindDataPiplineSummaryViewer
from mindspore.profiler.common.log import ProfilerLogger

ProfilerLogger.init(out)
kw = dict(device_id="0", rank_id="0", activities=["CPU"], framework_path=raw_dir, ascend_ms_dir=out,
          ascend_profiler_output_path=view_dir)
data = MindDataParser(**kw).parse({}) if hasattr(MindDataParser, "parse") else MindDataParser(**kw)._parse({})
MindDataPipelineRawViewer(**kw).save(data)
MindDataPiplineSummaryViewer(**kw).save(data)
with open(os.path.join(out, "steps.txt"), "w") as fh:
    fh.write("\n".join(f"{s:.3f}" for s in steps) + "\n")
steady = sorted(steps[2:])
print(f"workers={workers} steps={len(steps)} mean={np.mean(steps):.1f} ms steady-mean={np.mean(steps[2:]):.1f} ms "
      f"median={steady[len(steady) // 2]:.1f} ms")
