"""Case: the host->device transfer, not the pipeline, starves the device (issue 11, MD001 transfer-bound).

MindSpore 2.10 CPU wheel, non-sink. The CPU backend has no device queue, so the script emulates the
two queues of sink mode around a real MindSpore pipeline and training step: GeneratorDataset (384
samples of 12288 floats, cheap) -> batch(8) fills the host queue (MindData's own, profiled); a transfer
thread takes each batch from it and holds it for bytes / 10 MB/s (an emulated, throttled host->device
link) before putting it into a "device queue" of 2 batches; the training loop dequeues from that queue
(GetNext) and runs the step of an MLP. For every dequeue the loop records when it started waiting,
when the batch arrived and how many batches the device queue held, and writes them as
minddata_aicpu_0.txt in the format MindSpore <= 2.3 writes for Ascend (MinddataParser: header
``node_name start_time end_time queue_size``, then ``GetNext_dequeue_wait <start us> <end us> <size>``).
The MindData files are what MindSpore writes (profiling manager, parser and viewers, as ../md_workers).

    python case_md_transfer.py OUT
"""
import os
import queue
import sys
import threading
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

SAMPLES, BATCH, DIM = 384, 8, 12288
LINK_BYTES_PER_S = 10e6
DEVICE_QUEUE = 2


def gen():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, DIM), dtype=np.float32)
    for i in range(SAMPLES):
        yield x[i % 16], np.array([i % 2], np.float32)


net = nn.SequentialCell([nn.Dense(DIM, 512), nn.ReLU(), nn.Dense(512, 512), nn.ReLU(), nn.Dense(512, 1)])
train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.01))
train(ms.Tensor(np.zeros((BATCH, DIM), np.float32)), ms.Tensor(np.zeros((BATCH, 1), np.float32))).asnumpy()  # compile

md_prof = cde.GlobalContext.profiling_manager()
md_prof.init()
md_prof.start()

dataset = ds.GeneratorDataset(gen, column_names=["x", "y"], shuffle=False).batch(BATCH)
device_queue = queue.Queue(maxsize=DEVICE_QUEUE)
DONE = object()


def transfer():
    for x, y in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True):
        nbytes = x.nbytes + y.nbytes
        t = time.perf_counter()
        x, y = np.copy(x), np.copy(y)
        time.sleep(max(nbytes / LINK_BYTES_PER_S - (time.perf_counter() - t), 0.0))
        device_queue.put((x, y))
    device_queue.put(DONE)


threading.Thread(target=transfer, daemon=True).start()
records, steps = [], []
t = time.perf_counter()
while True:
    size = device_queue.qsize()
    start_us = time.time_ns() // 1000
    item = device_queue.get()
    end_us = time.time_ns() // 1000
    if item is DONE:
        break
    records.append((start_us, end_us, size))
    loss = train(ms.Tensor(item[0]), ms.Tensor(item[1]))
    loss.asnumpy()
    now = time.perf_counter()
    steps.append((now - t) * 1000.0)
    t = now

md_prof.stop()
md_prof.save(raw_dir)
with open(os.path.join(out, "minddata_aicpu_0.txt"), "w") as fh:
    fh.write("node_name start_time end_time queue_size\n")
    fh.writelines(f"GetNext_dequeue_wait {s} {e} {q}\n" for s, e, q in records)

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
waits = [(e - s) / 1000.0 for s, e, _ in records]
print(f"steps={len(steps)} mean={np.mean(steps):.1f} ms median={np.median(steps):.1f} ms "
      f"getnext wait mean={np.mean(waits[1:]):.1f} ms empty={np.mean([q == 0 for _, _, q in records]):.2f}")
