"""Case: a C++ JPEG-decode map on a 2-core host, its workers from the training config (issue 11, MD001 cores).

MindSpore 2.10 CPU wheel, non-sink. GeneratorDataset (JPEG bytes, 320 samples) -> map(vision.Decode,
vision.Resize: C++ transforms, num_parallel_workers from the config) -> batch -> a training step of an
MLP on the decoded pixels. The training step itself runs on the host's cores (the CPU backend), as an
Ascend job's own host threads do: a second map worker competes with it for the two cores. As in
../md_workers, the script drives MindSpore's C++ MindData profiling manager and then its own MindData
parser and viewers, so the files are what MindSpore writes.

    python case_md_cores.py CONFIG.yaml OUT
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
import mindspore.dataset.vision as vision
from mindspore import nn

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")
ms.set_seed(0)
ds.config.set_seed(0)
ds.config.set_monitor_sampling_interval(100)  # ms
ds.config.set_prefetch_size(int(td.get("prefetch_size", 1)))

SAMPLES, SIDE, OUT_SIDE = 1920, 512, 48
BATCH = int(td["batch_size"])


def make_jpegs():
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:SIDE, 0:SIDE]
    out = []
    for i in range(16):  # 16 distinct smooth images with noise, cycled
        img = np.stack([(np.sin(xx / (7 + i)) + np.cos(yy / (5 + c + i))) * 60 + 128 for c in range(3)], axis=-1)
        img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
        out.append(vision.encode_jpeg(img, 90))
    return out


JPEGS = make_jpegs()


def gen():
    for i in range(SAMPLES):
        yield JPEGS[i % len(JPEGS)], np.array([i % 2], np.float32)


md_prof = cde.GlobalContext.profiling_manager()
md_prof.init()
md_prof.start()

dataset = ds.GeneratorDataset(gen, column_names=["image", "label"], shuffle=False)
dataset = dataset.map(operations=[vision.Decode(), vision.Resize((OUT_SIDE, OUT_SIDE))], input_columns=["image"],
                      num_parallel_workers=int(td["num_parallel_workers"]))
dataset = dataset.batch(BATCH)

DIM = OUT_SIDE * OUT_SIDE * 3


class Net(nn.Cell):
    """uint8 pixels → float in [0, 1] → a 3-layer MLP (the scaling runs in the graph)."""

    def __init__(self):
        super().__init__()
        self.mlp = nn.SequentialCell([nn.Flatten(), nn.Dense(DIM, 1024), nn.ReLU(), nn.Dense(1024, 1024), nn.ReLU(),
                                      nn.Dense(1024, 1)])

    def construct(self, x):
        return self.mlp(ms.ops.cast(x, ms.float32) * (1.0 / 255.0))


net = Net()
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
print(f"workers={td['num_parallel_workers']} steps={len(steps)} mean={np.mean(steps):.1f} ms "
      f"steady-mean={np.mean(steps[2:]):.1f} ms median={np.median(steps[2:]):.1f} ms")
