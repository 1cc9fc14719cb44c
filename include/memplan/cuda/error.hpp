#pragma once
/// \file
/// CUDA errors (after rmm's detail/error.hpp): `MEMPLAN_CUDA_TRY(call)`
/// throws `memplan::cuda_error` naming the call, the error and where;
/// `MEMPLAN_CUDA_ASSERT_OK(call)` is for destructors, which never throw.

#include <cstdio>

#include <cuda_runtime_api.h>

#include "memplan/error.hpp"

namespace memplan::cuda::detail {

/// Throws cuda_error for `status`, after clearing the sticky last error so
/// that the next call does not report it again.
[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  (void)cudaGetLastError();
  throw cuda_error(memplan::detail::concat("CUDA error at ", file, ":", line, ": ", call, " returned ",
                                           cudaGetErrorName(status), " (", cudaGetErrorString(status), ")"));
}

}  // namespace memplan::cuda::detail

/// Runs a CUDA runtime call and throws `memplan::cuda_error` unless it
/// returns cudaSuccess: `MEMPLAN_CUDA_TRY(cudaMalloc(&p, n));`
#define MEMPLAN_CUDA_TRY(call)                                                              \
  do {                                                                                      \
    const cudaError_t memplan_cuda_status = (call);                                         \
    if (memplan_cuda_status != cudaSuccess) {                                               \
      ::memplan::cuda::detail::throw_cuda_error(memplan_cuda_status, #call, __FILE__, __LINE__); \
    }                                                                                       \
  } while (false)

/// For destructors and other noexcept paths: reports a failed call on
/// stderr and goes on.
#define MEMPLAN_CUDA_ASSERT_OK(call)                                                               \
  do {                                                                                             \
    const cudaError_t memplan_cuda_status = (call);                                                \
    if (memplan_cuda_status != cudaSuccess) {                                                      \
      (void)cudaGetLastError();                                                                    \
      std::fprintf(stderr, "memplan: %s:%d: %s returned %s\n", __FILE__, __LINE__, #call,          \
                   cudaGetErrorName(memplan_cuda_status));                                         \
    }                                                                                              \
  } while (false)
