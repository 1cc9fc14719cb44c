#pragma once
/// \file
/// Inception-v3 with its auxiliary classifier (Szegedy et al. 2016,
/// torchvision's layout and names) and Inception-v4 (Szegedy et al. 2017,
/// timm's layout). Every convolution is a BasicConv2d: conv (no bias), batch
/// norm, ReLU. Both take 299x299 inputs; with `options::cifar` the CIFAR-10
/// images are upsampled to 299 (the stem cannot shrink 32x32), with 10 classes.

#include <cstdint>
#include <string>

#include "memplan/model/builder.hpp"

namespace memplan::model {

namespace detail {

/// BasicConv2d with channels scaled by k.
inline value basic_conv(builder& b, const std::string& name, const value& x, std::int64_t out, kernel2d k) {
  return b.conv_bn_relu(name, x, b.width(out), k);
}
inline value conv1x1(builder& b, const std::string& name, const value& x, std::int64_t out) {
  return basic_conv(b, name, x, out, kernel2d::square(1));
}
inline value conv3x3(builder& b, const std::string& name, const value& x, std::int64_t out, int stride = 1,
                     int pad = 0) {
  return basic_conv(b, name, x, out, kernel2d::square(3, stride, pad));
}
inline value pool3x3_same(builder& b, const std::string& name, const value& x) {
  return b.avg_pool(name, x, kernel2d::square(3, 1, 1));
}

}  // namespace detail

// ---- Inception-v3 (torchvision) ----------------------------------------------------

/// torchvision's InceptionA (Mixed_5b-d), named `p`, on `x`: 1x1, 5x5, double
/// 3x3 and average-pooled branches, concatenated; the pooled branch has
/// `pool_features` channels (before the width factor).
inline value inception_v3_a(builder& b, const std::string& p, const value& x, std::int64_t pool_features) {
  using namespace detail;
  const value b1 = conv1x1(b, p + ".branch1x1", x, 64);
  const value b5 = basic_conv(b, p + ".branch5x5_2", conv1x1(b, p + ".branch5x5_1", x, 48), 64, kernel2d::square(5, 1, 2));
  value d = conv1x1(b, p + ".branch3x3dbl_1", x, 64);
  d = conv3x3(b, p + ".branch3x3dbl_3", conv3x3(b, p + ".branch3x3dbl_2", d, 96, 1, 1), 96, 1, 1);
  const value bp = conv1x1(b, p + ".branch_pool", pool3x3_same(b, p + ".avg_pool", x), pool_features);
  return b.concat(p + ".cat", {b1, b5, d, bp});
}

/// InceptionB (Mixed_6a), named `p`, on `x`: the reduction to 17x17, a
/// stride-2 3x3, a double 3x3 and a max-pool, concatenated.
inline value inception_v3_b(builder& b, const std::string& p, const value& x) {
  using namespace detail;
  const value b3 = conv3x3(b, p + ".branch3x3", x, 384, 2);
  value d = conv1x1(b, p + ".branch3x3dbl_1", x, 64);
  d = conv3x3(b, p + ".branch3x3dbl_3", conv3x3(b, p + ".branch3x3dbl_2", d, 96, 1, 1), 96, 2);
  const value bp = b.max_pool(p + ".max_pool", x, kernel2d::square(3, 2));
  return b.concat(p + ".cat", {b3, d, bp});
}

/// InceptionC (Mixed_6b-e), named `p`, on `x`: 1x1, factorised 7x7 (1x7 then
/// 7x1), double factorised 7x7 and pooled branches; the 7x7 branches have
/// `c7` inner channels (before the width factor).
inline value inception_v3_c(builder& b, const std::string& p, const value& x, std::int64_t c7) {
  using namespace detail;
  const value b1 = conv1x1(b, p + ".branch1x1", x, 192);
  value s = conv1x1(b, p + ".branch7x7_1", x, c7);
  s = basic_conv(b, p + ".branch7x7_2", s, c7, kernel2d::rect(1, 7));
  s = basic_conv(b, p + ".branch7x7_3", s, 192, kernel2d::rect(7, 1));
  value d = conv1x1(b, p + ".branch7x7dbl_1", x, c7);
  d = basic_conv(b, p + ".branch7x7dbl_2", d, c7, kernel2d::rect(7, 1));
  d = basic_conv(b, p + ".branch7x7dbl_3", d, c7, kernel2d::rect(1, 7));
  d = basic_conv(b, p + ".branch7x7dbl_4", d, c7, kernel2d::rect(7, 1));
  d = basic_conv(b, p + ".branch7x7dbl_5", d, 192, kernel2d::rect(1, 7));
  const value bp = conv1x1(b, p + ".branch_pool", pool3x3_same(b, p + ".avg_pool", x), 192);
  return b.concat(p + ".cat", {b1, s, d, bp});
}

/// InceptionD (Mixed_7a), named `p`, on `x`: the reduction to 8x8, stride-2
/// 3x3 and 7x7x3 branches and a max-pool, concatenated.
inline value inception_v3_d(builder& b, const std::string& p, const value& x) {
  using namespace detail;
  const value b3 = conv3x3(b, p + ".branch3x3_2", conv1x1(b, p + ".branch3x3_1", x, 192), 320, 2);
  value s = conv1x1(b, p + ".branch7x7x3_1", x, 192);
  s = basic_conv(b, p + ".branch7x7x3_2", s, 192, kernel2d::rect(1, 7));
  s = basic_conv(b, p + ".branch7x7x3_3", s, 192, kernel2d::rect(7, 1));
  s = conv3x3(b, p + ".branch7x7x3_4", s, 192, 2);
  const value bp = b.max_pool(p + ".max_pool", x, kernel2d::square(3, 2));
  return b.concat(p + ".cat", {b3, s, bp});
}

/// InceptionE (Mixed_7b-c), named `p`, on `x`: 1x1, a 3x3 expanded into 1x3
/// and 3x1 side by side, a double 3x3 expanded likewise, and a pooled branch.
inline value inception_v3_e(builder& b, const std::string& p, const value& x) {
  using namespace detail;
  const value b1 = conv1x1(b, p + ".branch1x1", x, 320);
  const value s = conv1x1(b, p + ".branch3x3_1", x, 384);
  const value s3 = b.concat(p + ".branch3x3_cat",
                            {basic_conv(b, p + ".branch3x3_2a", s, 384, kernel2d::rect(1, 3)),
                             basic_conv(b, p + ".branch3x3_2b", s, 384, kernel2d::rect(3, 1))});
  value d = conv3x3(b, p + ".branch3x3dbl_2", conv1x1(b, p + ".branch3x3dbl_1", x, 448), 384, 1, 1);
  const value d3 = b.concat(p + ".branch3x3dbl_cat",
                            {basic_conv(b, p + ".branch3x3dbl_3a", d, 384, kernel2d::rect(1, 3)),
                             basic_conv(b, p + ".branch3x3dbl_3b", d, 384, kernel2d::rect(3, 1))});
  const value bp = conv1x1(b, p + ".branch_pool", pool3x3_same(b, p + ".avg_pool", x), 192);
  return b.concat(p + ".cat", {b1, s3, d3, bp});
}

/// The auxiliary classifier on Mixed_6e, trained with its own loss.
inline void inception_v3_aux(builder& b, const value& x, std::int64_t classes, const value& labels) {
  using namespace detail;
  value y = b.avg_pool("AuxLogits.avg_pool", x, kernel2d::square(5, 3));
  y = conv1x1(b, "AuxLogits.conv0", y, 128);
  y = basic_conv(b, "AuxLogits.conv1", y, 768, kernel2d::square(5));
  y = builder::flatten(b.global_avg_pool("AuxLogits.adaptive_avg_pool", y));
  b.cross_entropy("AuxLogits.loss", b.linear("AuxLogits.fc", y, classes), labels);
}

/// Inception-v3 with the auxiliary head (27,161,264 parameters at k = 1).
inline void inception_v3(builder& b) {
  using namespace detail;
  const auto in = b.images(299, false, 299);
  value x = conv3x3(b, "Conv2d_1a_3x3", in.images, 32, 2);
  x = conv3x3(b, "Conv2d_2a_3x3", x, 32);
  x = conv3x3(b, "Conv2d_2b_3x3", x, 64, 1, 1);
  x = b.max_pool("maxpool1", x, kernel2d::square(3, 2));
  x = conv1x1(b, "Conv2d_3b_1x1", x, 80);
  x = conv3x3(b, "Conv2d_4a_3x3", x, 192);
  x = b.max_pool("maxpool2", x, kernel2d::square(3, 2));
  x = inception_v3_a(b, "Mixed_5b", x, 32);
  x = inception_v3_a(b, "Mixed_5c", x, 64);
  x = inception_v3_a(b, "Mixed_5d", x, 64);
  x = inception_v3_b(b, "Mixed_6a", x);
  x = inception_v3_c(b, "Mixed_6b", x, 128);
  x = inception_v3_c(b, "Mixed_6c", x, 160);
  x = inception_v3_c(b, "Mixed_6d", x, 160);
  x = inception_v3_c(b, "Mixed_6e", x, 192);
  inception_v3_aux(b, x, in.classes, in.labels);
  x = inception_v3_d(b, "Mixed_7a", x);
  x = inception_v3_e(b, "Mixed_7b", x);
  x = inception_v3_e(b, "Mixed_7c", x);
  b.classifier("", x, in.classes, in.labels, 0.5);
}

// ---- Inception-v4 (timm) -------------------------------------------------------------

/// timm's Inception_A, named `p`, on `x`: 1x1, 3x3, double 3x3 and pooled
/// branches of 96 channels each (before the width factor).
inline value inception_v4_a(builder& b, const std::string& p, const value& x) {
  using namespace detail;
  const value b0 = conv1x1(b, p + ".branch0", x, 96);
  const value b1 = conv3x3(b, p + ".branch1.1", conv1x1(b, p + ".branch1.0", x, 64), 96, 1, 1);
  value b2 = conv3x3(b, p + ".branch2.1", conv1x1(b, p + ".branch2.0", x, 64), 96, 1, 1);
  b2 = conv3x3(b, p + ".branch2.2", b2, 96, 1, 1);
  const value b3 = conv1x1(b, p + ".branch3.1", pool3x3_same(b, p + ".branch3.0", x), 96);
  return b.concat(p + ".cat", {b0, b1, b2, b3});
}

/// Inception_B, named `p`, on `x`: 1x1, factorised 7x7 (1x7, 7x1), double
/// factorised 7x7 and pooled branches (1024 channels at k = 1).
inline value inception_v4_b(builder& b, const std::string& p, const value& x) {
  using namespace detail;
  const value b0 = conv1x1(b, p + ".branch0", x, 384);
  value b1 = conv1x1(b, p + ".branch1.0", x, 192);
  b1 = basic_conv(b, p + ".branch1.1", b1, 224, kernel2d::rect(1, 7));
  b1 = basic_conv(b, p + ".branch1.2", b1, 256, kernel2d::rect(7, 1));
  value b2 = conv1x1(b, p + ".branch2.0", x, 192);
  b2 = basic_conv(b, p + ".branch2.1", b2, 192, kernel2d::rect(7, 1));
  b2 = basic_conv(b, p + ".branch2.2", b2, 224, kernel2d::rect(1, 7));
  b2 = basic_conv(b, p + ".branch2.3", b2, 224, kernel2d::rect(7, 1));
  b2 = basic_conv(b, p + ".branch2.4", b2, 256, kernel2d::rect(1, 7));
  const value b3 = conv1x1(b, p + ".branch3.1", pool3x3_same(b, p + ".branch3.0", x), 128);
  return b.concat(p + ".cat", {b0, b1, b2, b3});
}

/// Inception_C, named `p`, on `x`: 1x1, a 1x1 expanded into 1x3 and 3x1, a
/// 3x1-1x3 stack expanded likewise, and a pooled branch (1536 channels at k = 1).
inline value inception_v4_c(builder& b, const std::string& p, const value& x) {
  using namespace detail;
  const value b0 = conv1x1(b, p + ".branch0", x, 256);
  const value b1 = conv1x1(b, p + ".branch1_0", x, 384);
  const value b1a = basic_conv(b, p + ".branch1_1a", b1, 256, kernel2d::rect(1, 3));
  const value b1b = basic_conv(b, p + ".branch1_1b", b1, 256, kernel2d::rect(3, 1));
  value b2 = conv1x1(b, p + ".branch2_0", x, 384);
  b2 = basic_conv(b, p + ".branch2_1", b2, 448, kernel2d::rect(3, 1));
  b2 = basic_conv(b, p + ".branch2_2", b2, 512, kernel2d::rect(1, 3));
  const value b2a = basic_conv(b, p + ".branch2_3a", b2, 256, kernel2d::rect(1, 3));
  const value b2b = basic_conv(b, p + ".branch2_3b", b2, 256, kernel2d::rect(3, 1));
  const value b3 = conv1x1(b, p + ".branch3.1", pool3x3_same(b, p + ".branch3.0", x), 256);
  return b.concat(p + ".cat", {b0, b1a, b1b, b2a, b2b, b3});
}

/// Inception-v4 (42,679,816 parameters at k = 1).
inline void inception_v4(builder& b) {
  using namespace detail;
  const auto in = b.images(299, false, 299);
  value x = conv3x3(b, "features.0", in.images, 32, 2);
  x = conv3x3(b, "features.1", x, 32);
  x = conv3x3(b, "features.2", x, 64, 1, 1);
  // Mixed_3a: max-pool beside a strided convolution.
  x = b.concat("features.3.cat", {b.max_pool("features.3.maxpool", x, kernel2d::square(3, 2)),
                                  conv3x3(b, "features.3.conv", x, 96, 2)});
  // Mixed_4a.
  const value a = conv3x3(b, "features.4.branch0.1", conv1x1(b, "features.4.branch0.0", x, 64), 96);
  value c = conv1x1(b, "features.4.branch1.0", x, 64);
  c = basic_conv(b, "features.4.branch1.1", c, 64, kernel2d::rect(1, 7));
  c = basic_conv(b, "features.4.branch1.2", c, 64, kernel2d::rect(7, 1));
  c = conv3x3(b, "features.4.branch1.3", c, 96);
  x = b.concat("features.4.cat", {a, c});
  // Mixed_5a.
  x = b.concat("features.5.cat", {conv3x3(b, "features.5.conv", x, 192, 2),
                                  b.max_pool("features.5.maxpool", x, kernel2d::square(3, 2))});
  int index = 6;
  for (int i = 0; i < 4; ++i) x = inception_v4_a(b, "features." + std::to_string(index++), x);
  {  // Reduction_A
    const std::string p = "features." + std::to_string(index++);
    const value b0 = conv3x3(b, p + ".branch0", x, 384, 2);
    value b1 = conv3x3(b, p + ".branch1.1", conv1x1(b, p + ".branch1.0", x, 192), 224, 1, 1);
    b1 = conv3x3(b, p + ".branch1.2", b1, 256, 2);
    x = b.concat(p + ".cat", {b0, b1, b.max_pool(p + ".branch2", x, kernel2d::square(3, 2))});
  }
  for (int i = 0; i < 7; ++i) x = inception_v4_b(b, "features." + std::to_string(index++), x);
  {  // Reduction_B
    const std::string p = "features." + std::to_string(index++);
    const value b0 = conv3x3(b, p + ".branch0.1", conv1x1(b, p + ".branch0.0", x, 192), 192, 2);
    value b1 = conv1x1(b, p + ".branch1.0", x, 256);
    b1 = basic_conv(b, p + ".branch1.1", b1, 256, kernel2d::rect(1, 7));
    b1 = basic_conv(b, p + ".branch1.2", b1, 320, kernel2d::rect(7, 1));
    b1 = conv3x3(b, p + ".branch1.3", b1, 320, 2);
    x = b.concat(p + ".cat", {b0, b1, b.max_pool(p + ".branch2", x, kernel2d::square(3, 2))});
  }
  for (int i = 0; i < 3; ++i) x = inception_v4_c(b, "features." + std::to_string(index++), x);
  b.classifier("", x, in.classes, in.labels, 0.2);
}

}  // namespace memplan::model
