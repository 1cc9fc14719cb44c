#pragma once
/// \file
/// VGG-16 and VGG-19 (Simonyan & Zisserman 2015, configurations D and E;
/// torchvision's layout without batch norm). With `options::cifar` the
/// classifier is one 512 -> 10 linear layer, as in the usual CIFAR port.

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "memplan/model/builder.hpp"

namespace memplan::model {

///@{
/// Output channels of each 3x3 convolution; 0 marks a 2x2 max-pool.
inline constexpr std::array<int, 18> vgg16_config{64, 64, 0, 128, 128, 0, 256, 256, 256, 0,
                                                  512, 512, 512, 0, 512, 512, 512, 0};
inline constexpr std::array<int, 21> vgg19_config{64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0,
                                                  512, 512, 512, 512, 0, 512, 512, 512, 512, 0};
///@}

/// VGG with `config`; convolution channels scale with k, the 4096-wide
/// classifier does not (TSPLIT Table V scales "channels of convolution kernels").
inline void vgg(builder& b, std::span<const int> config) {
  const auto in = b.images(224);
  value x = in.images;
  int index = 0;  // torchvision's `features.<index>` numbering
  for (const int c : config) {
    const std::string name = "features." + std::to_string(index);
    if (c == 0) {
      x = b.max_pool(name, x, kernel2d::square(2, 2));
      ++index;
    } else {
      x = b.relu("features." + std::to_string(index + 1),
                 b.conv2d(name, x, b.width(c), kernel2d::square(3, 1, 1), 1, /*bias=*/true));
      index += 2;
    }
  }
  if (b.opts().cifar) {
    b.cross_entropy("loss", b.linear("classifier", builder::flatten(x), in.classes), in.labels);
    return;
  }
  // adaptive_avg_pool2d(7): the identity at 224x224; a plain window elsewhere.
  if (x.shape[2] != 7 || x.shape[3] != 7) {
    const int sh = static_cast<int>(x.shape[2] / 7), sw = static_cast<int>(x.shape[3] / 7);
    MEMPLAN_EXPECTS(sh >= 1 && sw >= 1, invalid_argument, "vgg: resolution ", in.images.shape[2],
                    " leaves a feature map smaller than 7x7");
    x = b.avg_pool("avgpool", x, {static_cast<int>(x.shape[2]) - 6 * sh, static_cast<int>(x.shape[3]) - 6 * sw, sh, sw, 0, 0});
  }
  x = builder::flatten(x);
  x = b.dropout("classifier.2", b.relu("classifier.1", b.linear("classifier.0", x, 4096)), 0.5);
  x = b.dropout("classifier.5", b.relu("classifier.4", b.linear("classifier.3", x, 4096)), 0.5);
  b.cross_entropy("loss", b.linear("classifier.6", x, in.classes), in.labels);
}

}  // namespace memplan::model
