"""Case: AMP O2 on a small MLP with unaligned Dense sizes (1000, 1001, 77), IR dumped (issues 11, 12).

MindSpore 2.10 CPU wheel, graph mode. ``amp.build_train_network(level="O2")`` casts the network to
float16 (AMP inserts front-end Casts at the cast cells) while the CPU backend inserts Casts back to
float32 where its kernels lack float16 (``is_backend_cast: Bool(1)``). Dense sizes 1000 and 1001 are not
multiples of 16; 77 is small.

    MS_DEV_SAVE_GRAPHS=1 MS_DEV_DUMP_IR_PASSES=validate,graph_build MS_DEV_SAVE_GRAPHS_PATH=ir python case_amp_o2.py
"""
import numpy as np
import mindspore as ms
from mindspore import amp, nn

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")
ms.set_seed(0)


class MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(512, 1000)
        self.act = nn.ReLU()
        self.fc2 = nn.Dense(1000, 1001)
        self.fc3 = nn.Dense(1001, 77)

    def construct(self, x):
        h = self.act(self.fc1(x))
        h = self.act(self.fc2(h))
        return self.fc3(h)


net = MLP()
train = amp.build_train_network(net, nn.Momentum(net.trainable_params(), 0.01, 0.9), nn.MSELoss(), level="O2",
                                 loss_scale_manager=None)  # the CPU backend supports no dynamic loss scale
x = ms.Tensor(np.random.default_rng(0).standard_normal((24, 512), dtype=np.float32))
y = ms.Tensor(np.random.default_rng(1).standard_normal((24, 77), dtype=np.float32))
for _ in range(3):
    loss = train(x, y)
print("loss", float(loss.asnumpy()))
