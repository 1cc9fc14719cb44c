#pragma once
/// \file
/// DenseNet-121 (Huang et al. 2017, torchvision's layout: growth 32,
/// bottleneck 4x, blocks 6-12-24-16, compression 0.5). Each dense layer
/// concatenates every earlier feature map afresh, as torchvision does
/// without `memory_efficient`, so activation memory grows quadratically in
/// the block depth. With `options::cifar` the stem is a 3x3 stride-1
/// convolution without max-pooling.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "memplan/model/builder.hpp"

namespace memplan::model {

/// DenseNet-121's layers per dense block.
inline constexpr std::array<int, 4> densenet121_blocks{6, 12, 24, 16};

/// BN, ReLU, then a convolution: DenseNet's pre-activation order.
inline value bn_relu_conv(builder& b, const std::string& p, const std::string& suffix, const value& x,
                          std::int64_t out, kernel2d k) {
  const value y = b.relu(p + ".relu" + suffix, b.batch_norm(p + ".norm" + suffix, x));
  return b.conv2d(p + ".conv" + suffix, y, out, k);
}

/// One dense block: `layers` layers, each adding `growth` channels.
inline value dense_block(builder& b, const std::string& p, const value& x, int layers, std::int64_t growth,
                         std::int64_t bn_size) {
  std::vector<value> features{x};
  for (int i = 0; i < layers; ++i) {
    const std::string name = p + ".denselayer" + std::to_string(i + 1);
    const value in = features.size() == 1 ? features.front() : b.concat(name + ".cat", features);
    const value y = bn_relu_conv(b, name, "1", in, bn_size * growth, kernel2d::square(1));
    features.push_back(bn_relu_conv(b, name, "2", y, growth, kernel2d::square(3, 1, 1)));
  }
  return b.concat(p + ".cat", features);
}

/// DenseNet-121 (7,978,856 parameters at k = 1).
inline void densenet121(builder& b) {
  const auto in = b.images(224);
  const std::int64_t growth = b.width(32);
  constexpr std::int64_t bn_size = 4;
  value x;
  if (b.opts().cifar) {
    x = b.conv2d("features.conv0", in.images, b.width(64), kernel2d::square(3, 1, 1));
  } else {
    x = b.conv2d("features.conv0", in.images, b.width(64), kernel2d::square(7, 2, 3));
    x = b.relu("features.relu0", b.batch_norm("features.norm0", x));
    x = b.max_pool("features.pool0", x, kernel2d::square(3, 2, 1));
  }
  for (std::size_t i = 0; i < densenet121_blocks.size(); ++i) {
    x = dense_block(b, "features.denseblock" + std::to_string(i + 1), x, densenet121_blocks[i], growth, bn_size);
    if (i + 1 < densenet121_blocks.size()) {
      const std::string t = "features.transition" + std::to_string(i + 1);
      x = bn_relu_conv(b, t, "", x, x.shape[1] / 2, kernel2d::square(1));
      x = b.avg_pool(t + ".pool", x, kernel2d::square(2, 2));
    }
  }
  x = b.relu("features.relu5", b.batch_norm("features.norm5", x));
  b.classifier("", x, in.classes, in.labels);
}

}  // namespace memplan::model
