#pragma once
/// \file
/// SqueezeNet 1.1 (Iandola et al. 2016, torchvision's layout): Fire modules
/// of a 1x1 squeeze convolution and parallel 1x1 / 3x3 expand convolutions,
/// max-pools with ceil_mode, and a convolutional classifier. With
/// `options::cifar` the first convolution has stride 1 and padding 1.

#include <array>
#include <cstdint>
#include <string>

#include "memplan/model/builder.hpp"

namespace memplan::model {

/// A Fire module: squeeze to `squeeze` channels, expand to `expand` + `expand`.
inline value fire(builder& b, const std::string& p, const value& x, std::int64_t squeeze, std::int64_t expand) {
  const value s = b.relu(p + ".squeeze_activation",
                         b.conv2d(p + ".squeeze", x, b.width(squeeze), kernel2d::square(1), 1, true));
  const value e1 = b.relu(p + ".expand1x1_activation",
                          b.conv2d(p + ".expand1x1", s, b.width(expand), kernel2d::square(1), 1, true));
  const value e3 = b.relu(p + ".expand3x3_activation",
                          b.conv2d(p + ".expand3x3", s, b.width(expand), kernel2d::square(3, 1, 1), 1, true));
  return b.concat(p + ".cat", {e1, e3});
}

/// SqueezeNet 1.1 (1,235,496 parameters at k = 1).
inline void squeezenet1_1(builder& b) {
  const auto in = b.images(224);
  const kernel2d stem = b.opts().cifar ? kernel2d::square(3, 1, 1) : kernel2d::square(3, 2);
  value x = b.relu("features.1", b.conv2d("features.0", in.images, b.width(64), stem, 1, true));
  x = b.max_pool("features.2", x, kernel2d::square(3, 2), true);
  x = fire(b, "features.3", x, 16, 64);
  x = fire(b, "features.4", x, 16, 64);
  x = b.max_pool("features.5", x, kernel2d::square(3, 2), true);
  x = fire(b, "features.6", x, 32, 128);
  x = fire(b, "features.7", x, 32, 128);
  x = b.max_pool("features.8", x, kernel2d::square(3, 2), true);
  x = fire(b, "features.9", x, 48, 192);
  x = fire(b, "features.10", x, 48, 192);
  x = fire(b, "features.11", x, 64, 256);
  x = fire(b, "features.12", x, 64, 256);
  x = b.dropout("classifier.0", x, 0.5);
  x = b.relu("classifier.2", b.conv2d("classifier.1", x, in.classes, kernel2d::square(1), 1, true));
  x = builder::flatten(b.global_avg_pool("classifier.3", x));
  b.cross_entropy("loss", x, in.labels);
}

}  // namespace memplan::model
