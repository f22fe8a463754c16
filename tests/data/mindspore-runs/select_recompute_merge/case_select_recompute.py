"""Case: MindFormers-style select_recompute on a Llama feed-forward block (MindSpore 2.10, CPU, graph mode).

The net mirrors the names MindFormers gives a Llama layer (model.layers.N.feed_forward.{w1,w3,w2,mul},
Linear = reshape -> matmul -> [activation] -> reshape, w1's activation a one-op LlamaSiLU cell), and
select_recompute is read from a MindFormers YAML and applied the way MindFormers does: each pattern is
split on the literal '\\.', every segment but the last is matched (re.fullmatch) against child cell
names, the last against the attributes of the cell reached; a primitive match calls
Primitive.recompute(), a cell match Cell.recompute().

usage: python case_select_recompute.py CONFIG.yaml IR_DIR
"""
import os
import re
import sys


cfg_path, out = sys.argv[1], sys.argv[2]
os.environ.setdefault("MS_DEV_SAVE_GRAPHS", "1")
os.environ["MS_DEV_SAVE_GRAPHS_PATH"] = out
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.common.initializer import Normal, initializer
from mindspore.ops import operations as P
from mindspore.ops.auto_generate import SiLU

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")


def read_config(path):
    """The few keys this case reads from the YAML (the MindSpore venv has no YAML library): integer
    ``key: value`` lines and the flow-style ``select_recompute: [...]`` list."""
    text = open(path, encoding="utf-8").read()
    ints = {k: int(v) for k, v in re.findall(r"^\s*(\w+):\s*(\d+)\s*$", text, re.M)}
    sel = re.search(r"^\s*select_recompute:\s*(\[.*\])\s*$", text, re.M).group(1)
    # single-quoted YAML keeps backslashes as written; double-quoted escapes them
    patterns = [sq if sq else dq.replace("\\\\", "\\") for sq, dq in re.findall(r"'([^']*)'|\"([^\"]*)\"", sel)]
    return ints, patterns


ints, select = read_config(cfg_path)
H, F, S, B, L = (ints[k] for k in ("hidden_size", "intermediate_size", "seq_length", "batch_size", "num_layers"))


class LlamaSiLU(nn.Cell):
    def __init__(self):
        super().__init__()
        self.silu = SiLU()

    def construct(self, x):
        return self.silu(x)


class Linear(nn.Cell):
    def __init__(self, cin, cout, activation=None):
        super().__init__()
        self.in_channels, self.out_channels = cin, cout
        self.weight = Parameter(initializer(Normal(0.02), [cout, cin], ms.float32), name="weight")
        self.matmul = P.MatMul(transpose_b=True)
        self.reshape = P.Reshape()
        self.shape = P.Shape()
        self.activation_flag = activation is not None
        if self.activation_flag:
            self.activation = activation

    def construct(self, x):
        out_shape = self.shape(x)[:-1] + (self.out_channels,)
        x = self.reshape(x, (-1, self.in_channels))
        x = self.matmul(x, self.weight)
        if self.activation_flag:
            x = self.activation(x)
        return self.reshape(x, out_shape)


class LlamaFeedForward(nn.Cell):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = Linear(h, f, activation=LlamaSiLU())
        self.w3 = Linear(h, f)
        self.w2 = Linear(f, h)
        self.mul = P.Mul()

    def construct(self, x):
        gate = self.w1(x)
        hidden = self.w3(x)
        hidden = self.mul(hidden, gate)
        return self.w2(hidden)


class LLamaDecodeLayer(nn.Cell):
    def __init__(self, h, f):
        super().__init__()
        self.feed_forward = LlamaFeedForward(h, f)
        self.add = P.Add()

    def construct(self, x):
        return self.add(x, self.feed_forward(x))


class LlamaModel(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layers = nn.CellList([LLamaDecodeLayer(H, F) for _ in range(L)])

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class LlamaForCausalLM(nn.Cell):
    def __init__(self):
        super().__init__()
        self.model = LlamaModel()

    def construct(self, x):
        return self.model(x)


def apply_select_recompute(layer, patterns):
    """MindFormers' select_recompute on one layer (see the module docstring)."""
    for pattern in patterns:
        segs = pattern.split("\\.")
        cells = [layer]
        for seg in segs[:-1]:
            cells = [c for cell in cells for name, c in cell.name_cells().items() if re.fullmatch(seg, name)]
        for cell in cells:
            for name, value in list(vars(cell).items()) + list(cell.name_cells().items()):
                if not re.fullmatch(segs[-1], name):
                    continue
                if isinstance(value, nn.Cell):
                    value.recompute()
                elif isinstance(value, ms.ops.Primitive):
                    value.recompute()


net = LlamaForCausalLM()
for layer in net.model.layers:
    apply_select_recompute(layer, select)
loss = nn.WithLossCell(net, nn.MSELoss())
train = nn.TrainOneStepCell(loss, nn.SGD(net.trainable_params(), 0.01))
x = Tensor(np.random.default_rng(0).standard_normal((B, S, H)).astype(np.float32))
print("loss", train(x, x))
