// memplan-train-mlp, memplan-train-cnn and their -cuda variants: one source,
// the network and the backend chosen at build time (CMakeLists.txt).
#include "networks.hpp"
#include "trainer.hpp"

#ifdef MEMPLAN_TRAINER_CUDA
#include "cuda_backend.hpp"
using backend = memplan::trainers::cuda_backend;
#else
#include "host_backend.hpp"
using backend = memplan::trainers::host_backend;
#endif

int main(int argc, char** argv) {
  using namespace memplan::trainers;
  return train_main<backend>(MEMPLAN_TRAINER_NAME, argc, argv, [](int batch, float lr, const auto& timing, const auto& k) {
    return MEMPLAN_TRAINER_NETWORK(batch, lr, timing, k);
  });
}
