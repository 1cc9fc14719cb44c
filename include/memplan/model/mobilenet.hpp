#pragma once
/// \file
/// MobileNet v1 (Howard et al. 2017, width 1.0, Keras's layout and names):
/// a 3x3 stride-2 convolution, 13 depthwise-separable blocks, global
/// pooling, dropout 0.001 and the 1x1 prediction convolution (a linear layer
/// on the pooled 1x1 map). With `options::cifar` the first convolution has stride 1.

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "memplan/model/builder.hpp"

namespace memplan::model {

/// (pointwise output channels, depthwise stride) of the 13 blocks.
inline constexpr std::array<std::pair<int, int>, 13> mobilenet_v1_blocks{{{64, 1},
                                                                          {128, 2},
                                                                          {128, 1},
                                                                          {256, 2},
                                                                          {256, 1},
                                                                          {512, 2},
                                                                          {512, 1},
                                                                          {512, 1},
                                                                          {512, 1},
                                                                          {512, 1},
                                                                          {512, 1},
                                                                          {1024, 2},
                                                                          {1024, 1}}};

/// MobileNet v1: 4,231,976 trainable parameters at k = 1 (Keras's
/// 4,253,864 adds the BN moving statistics, which are not trained).
inline void mobilenet_v1(builder& b) {
  const auto in = b.images(224);
  const int stem_stride = b.opts().cifar ? 1 : 2;
  value x = b.conv_bn_relu("conv1", in.images, b.width(32), kernel2d::square(3, stem_stride, 1), 1, /*six=*/true);
  int id = 1;
  for (const auto& [channels, stride] : mobilenet_v1_blocks) {
    const std::string n = std::to_string(id++);
    x = b.conv_bn_relu("conv_dw_" + n, x, x.shape[1], kernel2d::square(3, stride, 1), x.shape[1], true);
    x = b.conv_bn_relu("conv_pw_" + n, x, b.width(channels), kernel2d::square(1), 1, true);
  }
  b.classifier("", x, in.classes, in.labels, 1e-3);
}

}  // namespace memplan::model
