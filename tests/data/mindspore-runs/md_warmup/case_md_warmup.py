"""Case: a pipeline that waits for data only while its shard cache warms up (issue 11, MD001 warm-up only).

MindSpore 2.10 CPU wheel, non-sink. A random-access source reads samples from 24 shards; the first
read of a shard costs 50 ms (opening and fetching a shard from remote storage: sleep, like I/O), later
reads come from the in-memory cache. GeneratorDataset (shuffled, 384 samples) -> batch(8) -> a
training step of an MLP (~15-20 ms here), compiled before the pipeline starts. The first batches touch cold shards and the training loop
waits for them; once every shard is cached the pipeline runs far ahead of the step and its queues
stay full. As in ../md_workers, the script drives MindSpore's C++ MindData profiling manager and then
its own MindData parser and viewers, so the files are what MindSpore writes.

    python case_md_warmup.py OUT
"""
import os
import sys
import time

out = os.path.abspath(sys.argv[1])
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

SHARDS, PER_SHARD, BATCH, DIM = 24, 16, 8, 1024
COLD_SHARD_S = 0.05


class ShardedSource:
    """Random access over shards; a shard is fetched once (50 ms), then served from memory."""

    def __init__(self):
        self.cache = {}

    def __len__(self):
        return SHARDS * PER_SHARD

    def __getitem__(self, index):
        shard, row = divmod(int(index), PER_SHARD)
        if shard not in self.cache:
            time.sleep(COLD_SHARD_S)
            rng = np.random.default_rng(shard)
            self.cache[shard] = (rng.standard_normal((PER_SHARD, DIM), dtype=np.float32),
                                 rng.standard_normal((PER_SHARD, 1), dtype=np.float32))
        x, y = self.cache[shard]
        return x[row], y[row]


net = nn.SequentialCell([nn.Dense(DIM, 2048), nn.ReLU(), nn.Dense(2048, 2048), nn.ReLU(), nn.Dense(2048, 1)])
train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.01))
# Compile the step before the pipeline starts, so the first steps show the data warm-up, not compilation.
train(ms.Tensor(np.zeros((BATCH, DIM), np.float32)), ms.Tensor(np.zeros((BATCH, 1), np.float32))).asnumpy()

md_prof = cde.GlobalContext.profiling_manager()
md_prof.init()
md_prof.start()

dataset = ds.GeneratorDataset(ShardedSource(), column_names=["x", "y"], shuffle=True)
dataset = dataset.batch(BATCH)
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
print(f"steps={len(steps)} mean={np.mean(steps):.1f} ms first={[round(s) for s in steps[:8]]} "
      f"median={np.median(steps):.1f} ms")
