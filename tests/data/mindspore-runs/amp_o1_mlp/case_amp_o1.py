"""Case: AMP O1 on a small MLP with LayerNorm, IR dumped (issue 11: casts AMP inserts, attributed to AMP).

MindSpore 2.10 CPU wheel, graph mode. ``amp.build_train_network(level="O1")`` rewrites the network
(``mindspore.rewrite``) so that the ops on AMP's white list (``MatMul``, ``Conv2D``, …) run in float16:
a Cast to float16 before each and a Cast back to float32 after it. Between two Dense layers the
float16 result is cast up to float32 and straight back down to float16 for the next MatMul, a
round trip the user never wrote.

    MS_DEV_SAVE_GRAPHS=1 MS_DEV_DUMP_IR_PASSES=validate,graph_build MS_DEV_SAVE_GRAPHS_PATH=ir python case_amp_o1.py
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
        self.fc1 = nn.Dense(512, 1024)
        self.fc2 = nn.Dense(1024, 1024)
        self.fc3 = nn.Dense(1024, 64)

    def construct(self, x):
        h = self.fc1(x)
        h = self.fc2(h)
        return self.fc3(h)


net = MLP()
train = amp.build_train_network(net, nn.Momentum(net.trainable_params(), 0.01, 0.9), nn.MSELoss(), level="O1",
                                 loss_scale_manager=None)  # the CPU backend supports no dynamic loss scale
x = ms.Tensor(np.random.default_rng(0).standard_normal((32, 512), dtype=np.float32))
y = ms.Tensor(np.random.default_rng(1).standard_normal((32, 64), dtype=np.float32))
for _ in range(3):
    loss = train(x, y)
print("loss", float(loss.asnumpy()))
