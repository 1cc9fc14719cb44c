#pragma once
// The two trainers' networks. Deep enough that the activations kept for
// the backward pass, not one op's inputs and outputs, make the peak: a
// budget of half the peak leaves each op room to run.

#include "network.hpp"

namespace memplan::trainers {

template <class Kernels>
workspace_fn workspace_of(const Kernels& k) {
  return [&k](layer_op kind, const dims& d) { return k.workspace_bytes(kind, d); };
}

/// An MLP on 64 features: six hidden layers of 64 with ReLUs, 10 classes.
/// `batch` 0: 512.
template <class Kernels>
network make_mlp(int batch, float lr, const device_spec& timing, const Kernels& k) {
  net_builder b("mlp", batch > 0 ? batch : 512, 64, 1, 1, timing, workspace_of(k));
  for (int layer = 0; layer < 6; ++layer) {
    b.linear(64);
    b.relu();
  }
  b.linear(10);
  return b.finish(lr);
}

/// A small CNN on 3x16x16 images: two stages (8 channels at 16x16, 16 at
/// 8x8) of two conv 3x3 - batch norm - ReLU blocks each, 2x2 max pooling
/// after each stage, then a linear layer to 10 classes. `batch` 0: 64.
template <class Kernels>
network make_cnn(int batch, float lr, const device_spec& timing, const Kernels& k) {
  net_builder b("cnn", batch > 0 ? batch : 64, 3, 16, 16, timing, workspace_of(k));
  for (const int channels : {8, 16}) {
    for (int block = 0; block < 2; ++block) {
      b.conv(channels);
      b.batchnorm();
      b.relu();
    }
    b.maxpool();
  }
  b.linear(10);
  return b.finish(lr);
}

}  // namespace memplan::trainers
