"""ResNet-50 as MindSpore's ModelZoo defines it (official/cv/ResNet/src/resnet.py: ResidualBlock, _make_layer,
end_point), trained one step with Momentum in graph mode, to dump the IR: parameter names, shapes and order,
and the kernels' full names (issue 11, CM001 seed case).

usage: python case_resnet50.py IR_DIR
"""
import os
import sys

os.environ["MS_DEV_SAVE_GRAPHS_PATH"] = sys.argv[1] if len(sys.argv) > 1 else "./ir"
import numpy as np
import mindspore as ms
from mindspore import Tensor, nn, ops

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")


def _conv(cin, cout, k, stride=1):
    return nn.Conv2d(cin, cout, kernel_size=k, stride=stride, padding=k // 2, pad_mode="pad", has_bias=False)


def _bn(c):
    return nn.BatchNorm2d(c, eps=1e-5, momentum=0.9)


class ResidualBlock(nn.Cell):
    expansion = 4

    def __init__(self, in_channel, out_channel, stride=1):
        super().__init__()
        channel = out_channel // self.expansion
        self.conv1 = _conv(in_channel, channel, 1)
        self.bn1 = _bn(channel)
        self.conv2 = _conv(channel, channel, 3, stride)
        self.bn2 = _bn(channel)
        self.conv3 = _conv(channel, out_channel, 1)
        self.bn3 = _bn(out_channel)
        self.relu = nn.ReLU()
        self.down_sample = stride != 1 or in_channel != out_channel
        self.down_sample_layer = None
        if self.down_sample:
            self.down_sample_layer = nn.SequentialCell([_conv(in_channel, out_channel, 1, stride), _bn(out_channel)])

    def construct(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.down_sample:
            identity = self.down_sample_layer(identity)
        return self.relu(out + identity)


class ResNet(nn.Cell):
    def __init__(self, layer_nums=(3, 4, 6, 3), in_channels=(64, 256, 512, 1024), out_channels=(256, 512, 1024, 2048),
                 strides=(1, 2, 2, 2), num_classes=1001):
        super().__init__()
        self.conv1 = _conv(3, 64, 7, 2)
        self.bn1 = _bn(64)
        self.relu = ops.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="same")
        self.layer1 = self._make_layer(layer_nums[0], in_channels[0], out_channels[0], strides[0])
        self.layer2 = self._make_layer(layer_nums[1], in_channels[1], out_channels[1], strides[1])
        self.layer3 = self._make_layer(layer_nums[2], in_channels[2], out_channels[2], strides[2])
        self.layer4 = self._make_layer(layer_nums[3], in_channels[3], out_channels[3], strides[3])
        self.mean = ops.ReduceMean(keep_dims=True)
        self.flatten = nn.Flatten()
        self.end_point = nn.Dense(out_channels[3], num_classes, has_bias=True)

    @staticmethod
    def _make_layer(n, cin, cout, stride):
        layers = [ResidualBlock(cin, cout, stride)]
        layers += [ResidualBlock(cout, cout, 1) for _ in range(n - 1)]
        return nn.SequentialCell(layers)

    def construct(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.end_point(self.flatten(self.mean(x, (2, 3))))


net = ResNet()
loss = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
train = nn.TrainOneStepCell(loss, nn.Momentum(net.trainable_params(), 0.1, 0.9))
x = Tensor(np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32))
y = Tensor(np.array([1, 2], np.int32))
print("loss", train(x, y), "trainable", len(net.trainable_params()))
