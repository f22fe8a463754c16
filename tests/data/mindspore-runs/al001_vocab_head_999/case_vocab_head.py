"""Case: a 999-token batch through aligned Dense layers into an unaligned GPT-2-size vocab head, IR dumped (issue 11).

MindSpore 2.10 CPU wheel, graph mode, float32. Every weight dim (256, 512) is a multiple of 16; the token count
999 is not, and the vocab head's 50257 is not. In the backward, the weight-gradient MatMuls (dW = dYᵀ·X)
contract over the 999 tokens and put the vocab dim first: roles by operand position read 999 as K and 50257
as M there.

    MS_DEV_SAVE_GRAPHS=1 MS_DEV_DUMP_IR_PASSES=validate,graph_build MS_DEV_SAVE_GRAPHS_PATH=ir python case_vocab_head.py
"""
import numpy as np
import mindspore as ms
from mindspore import nn

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")
ms.set_seed(0)

TOKENS, HIDDEN, FFN, VOCAB = 999, 256, 512, 50257


class TinyLM(nn.Cell):
    def __init__(self):
        super().__init__()
        self.up = nn.Dense(HIDDEN, FFN)
        self.act = nn.ReLU()
        self.down = nn.Dense(FFN, HIDDEN)
        self.head = nn.Dense(HIDDEN, VOCAB, has_bias=False)

    def construct(self, x):
        h = x + self.down(self.act(self.up(x)))
        return self.head(h)


net = TinyLM()
loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
train = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.SGD(net.trainable_params(), 0.01))
x = ms.Tensor(np.random.default_rng(0).standard_normal((TOKENS, HIDDEN), dtype=np.float32))
y = ms.Tensor(np.random.default_rng(1).integers(0, VOCAB, TOKENS).astype(np.int32))
for _ in range(2):
    out = train(x, y)
print("loss", float(out.asnumpy()))
