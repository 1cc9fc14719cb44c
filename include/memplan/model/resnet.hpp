#pragma once
/// \file
/// Residual networks: ResNet-50/101/152 (He et al. 2016, torchvision's v1.5
/// layout with the stride on the 3x3 convolution), ResNeXt-50 32x4d (Xie et
/// al. 2017) and Plain-20, the shortcut-free CIFAR net of He et al. §4.2 that
/// HOME evaluates. With `options::cifar` the stem is a 3x3 stride-1
/// convolution without max-pooling (the usual CIFAR adaptation).

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "memplan/model/builder.hpp"

namespace memplan::model {

///@{
/// Blocks per stage of the bottleneck ResNets.
inline constexpr std::array<int, 4> resnet50_blocks{3, 4, 6, 3};
inline constexpr std::array<int, 4> resnet101_blocks{3, 4, 23, 3};
inline constexpr std::array<int, 4> resnet152_blocks{3, 8, 36, 3};
///@}

/// One bottleneck block `prefix` (`layer1.0`): 1x1, 3x3 (grouped for
/// ResNeXt), 1x1 expanding 4x, with a projection shortcut where the shape changes.
inline value bottleneck(builder& b, const std::string& prefix, const value& x, std::int64_t planes, int stride,
                        std::int64_t groups, std::int64_t width_per_group) {
  const std::int64_t width = b.width(planes * width_per_group / 64) * groups;
  const std::int64_t out = b.width(planes * 4);
  value y = b.relu(prefix + ".relu1", b.batch_norm(prefix + ".bn1", b.conv2d(prefix + ".conv1", x, width, kernel2d::square(1))));
  y = b.relu(prefix + ".relu2",
             b.batch_norm(prefix + ".bn2", b.conv2d(prefix + ".conv2", y, width, kernel2d::square(3, stride, 1), groups)));
  y = b.batch_norm(prefix + ".bn3", b.conv2d(prefix + ".conv3", y, out, kernel2d::square(1)));
  value shortcut = x;
  if (stride != 1 || x.shape[1] != out) {
    shortcut = b.batch_norm(prefix + ".downsample.1",
                            b.conv2d(prefix + ".downsample.0", x, out, kernel2d::square(1, stride)));
  }
  return b.relu(prefix + ".relu3", b.add(prefix + ".add", y, shortcut));
}

/// The stem: 7x7/2 convolution and 3x3/2 max-pool, or CIFAR's 3x3/1 convolution.
inline value resnet_stem(builder& b, const value& images, std::int64_t channels) {
  if (b.opts().cifar) {
    return b.relu("relu", b.batch_norm("bn1", b.conv2d("conv1", images, channels, kernel2d::square(3, 1, 1))));
  }
  const value x = b.relu("relu", b.batch_norm("bn1", b.conv2d("conv1", images, channels, kernel2d::square(7, 2, 3))));
  return b.max_pool("maxpool", x, kernel2d::square(3, 2, 1));
}

/// A bottleneck ResNet with `blocks` per stage; `groups` x `width_per_group`
/// = 32 x 4 makes ResNeXt-50 32x4d, 1 x 64 the plain ResNets.
inline void resnet(builder& b, std::span<const int> blocks, std::int64_t groups = 1,
                   std::int64_t width_per_group = 64) {
  const auto in = b.images(224);
  value x = resnet_stem(b, in.images, b.width(64));
  for (std::size_t stage = 0; stage < blocks.size(); ++stage) {
    const std::int64_t planes = std::int64_t{64} << stage;
    for (int i = 0; i < blocks[stage]; ++i) {
      const int stride = (i == 0 && stage > 0) ? 2 : 1;
      x = bottleneck(b, "layer" + std::to_string(stage + 1) + "." + std::to_string(i), x, planes, stride, groups,
                     width_per_group);
    }
  }
  b.classifier("", x, in.classes, in.labels);
}

/// Plain-20 (He et al. 2016 §4.2): 19 3x3 conv-BN-ReLU layers in three
/// stages of 16, 32, 64 channels, no shortcuts, then a 10-way classifier.
/// Always CIFAR-10 (32x32).
inline void plain20(builder& b) {
  const auto in = b.images(32, /*cifar_only=*/true);
  value x = b.conv_bn_relu("conv1", in.images, b.width(16), kernel2d::square(3, 1, 1));
  for (int stage = 0; stage < 3; ++stage) {
    const std::int64_t channels = b.width(std::int64_t{16} << stage);
    for (int block = 0; block < 3; ++block) {
      const std::string prefix = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      const int stride = (block == 0 && stage > 0) ? 2 : 1;
      x = b.conv_bn_relu(prefix + ".1", x, channels, kernel2d::square(3, stride, 1));
      x = b.conv_bn_relu(prefix + ".2", x, channels, kernel2d::square(3, 1, 1));
    }
  }
  b.classifier("", x, in.classes, in.labels);
}

}  // namespace memplan::model
