#pragma once
/// \file
/// Options shared by every model builder of the zoo (see zoo.hpp).

/// The model zoo: training graphs of the papers' CNNs and Transformers,
/// built layer by layer (builder.hpp) and listed by name (zoo.hpp).
namespace memplan::model {

/// Element type of activations, gradients, parameters and optimizer state.
enum class dtype { fp32, fp16, bf16 };

/// The optimizer whose update ops and state end the iteration.
enum class optimizer {
  sgd_momentum,  ///< one momentum buffer per parameter
  adam,          ///< two moment buffers per parameter
};

/// How to size a model. TSPLIT Tables IV-V scale `batch` and, with `scale`,
/// channels (CNNs) or hidden size (Transformers).
struct options {
  int batch = 32;      ///< samples per iteration, >= 1
  double scale = 1.0;  ///< width factor k: channels or hidden size times k
  int resolution = 0;  ///< input height and width; 0 = model default
  int seq_len = 0;     ///< sequence length; 0 = model default
  dtype type = dtype::fp32;                 ///< element type of the model's tensors (statistics stay FP32)
  optimizer opt = optimizer::sgd_momentum;  ///< the update ops and their state
  int layers = 0;      ///< Transformer layers; 0 = model default (used to grow gpt2 graphs)
  bool cifar = false;  ///< CIFAR-10 32x32 inputs with CIFAR-style stems, as HOME §4.1
};

}  // namespace memplan::model
