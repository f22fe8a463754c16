"""Case: a slow ``batch(per_batch_map=…)`` whose workers come from the training config (issue 11, MD001).

MindSpore 2.10 CPU wheel, non-sink. The pipeline is built the way MindFormers' dataset classes build
theirs from ``train_dataset`` (``BaseDataset.init_dataset_config`` + ``dataset_batch_func``):
``ds.config.set_num_parallel_workers/set_prefetch_size`` from the config, then
``batch(batch_size, drop_remainder, num_parallel_workers=train_dataset.num_parallel_workers,
per_batch_map=pad_batch)``. GeneratorDataset (384 samples of 1024 floats, cheap) -> batch(8) whose
per_batch_map pads the batch and waits 15 ms per sample (sleep: like a tokenizer or a fetch that
releases the GIL, so the batch workers really overlap) -> a training step of an MLP (~15-20 ms here).

    python case_md_batch_map.py CONFIG.yaml OUT
"""
import os
import sys
import time


def train_dataset_keys(path):
    """The scalar ``key: value`` lines under ``train_dataset:`` (the MindSpore venv has no YAML library)."""
    keys, inside = {}, False
    for line in open(path, encoding="utf-8"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            inside = line.startswith("train_dataset:")
            continue
        if inside and ":" in line:
            key, _, value = line.strip().partition(":")
            keys[key.strip()] = value.split("#")[0].strip()
    return keys


cfg_path, out = sys.argv[1], os.path.abspath(sys.argv[2])
td = train_dataset_keys(cfg_path)
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
# MindFormers' BaseDataset.init_dataset_config
ds.config.set_prefetch_size(int(td["prefetch_size"]))
ds.config.set_num_parallel_workers(int(td["num_parallel_workers"]))

SAMPLES, DIM = 384, 1024
BATCH = int(td["batch_size"])


def gen():
    rng = np.random.default_rng(0)
    for _ in range(SAMPLES):
        yield rng.standard_normal(DIM, dtype=np.float32), rng.standard_normal(1, dtype=np.float32)


def pad_batch(xs, ys, batch_info):
    """Pad every sample to DIM (a no-op here) and wait 15 ms per sample, as a per-sample fetch would."""
    time.sleep(0.015 * len(xs))
    return [np.pad(x, (0, DIM - len(x))) for x in xs], ys


net = nn.SequentialCell([nn.Dense(DIM, 2048), nn.ReLU(), nn.Dense(2048, 2048), nn.ReLU(), nn.Dense(2048, 1)])
train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.01))

md_prof = cde.GlobalContext.profiling_manager()
md_prof.init()
md_prof.start()

dataset = ds.GeneratorDataset(gen, column_names=["x", "y"], shuffle=False)
# MindFormers' dataset_batch_func
dataset = dataset.batch(BATCH, drop_remainder=True, num_parallel_workers=int(td["num_parallel_workers"]),
                        per_batch_map=pad_batch)
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
print(f"workers={td['num_parallel_workers']} prefetch={td['prefetch_size']} steps={len(steps)} mean={np.mean(steps):.1f} ms "
      f"from step 3={np.mean(steps[2:]):.1f} ms median={np.median(steps[2:]):.1f} ms")
