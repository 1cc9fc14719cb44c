#pragma once
// The trainers' kernels on a GPU: cuDNN (convolution, batch norm, pooling,
// ReLU, softmax) and cuBLAS (linear layers, the loss's gradient, SGD), the
// contract of host_kernels.hpp. No kernel of our own, so g++ builds it.
//
// Deterministic by construction, so that a planned run matches the
// unplanned one to the bit: fixed deterministic convolution algorithms
// (implicit GEMM forward, algo 1 backward), FMA math (no TF32), the
// deterministic max pooling, and per-sample calls as dispatch.hpp makes
// them: the same calls in the same order however the plan splits the batch.

#include <cstddef>
#include <utility>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "memplan/cuda/error.hpp"
#include "memplan/cuda/stream.hpp"
#include "memplan/error.hpp"
#include "network.hpp"

namespace memplan::trainers {

namespace cuda_detail {

[[noreturn]] inline void fail(const char* call, const char* status, const char* file, int line) {
  throw cuda_error(memplan::detail::concat(file, ":", line, ": ", call, " returned ", status));
}

}  // namespace cuda_detail

#define MEMPLAN_CUDNN_TRY(call)                                                                     \
  do {                                                                                              \
    const cudnnStatus_t memplan_status = (call);                                                    \
    if (memplan_status != CUDNN_STATUS_SUCCESS) {                                                   \
      ::memplan::trainers::cuda_detail::fail(#call, cudnnGetErrorString(memplan_status), __FILE__, __LINE__); \
    }                                                                                               \
  } while (false)

#define MEMPLAN_CUBLAS_TRY(call)                                                                    \
  do {                                                                                              \
    const cublasStatus_t memplan_status = (call);                                                   \
    if (memplan_status != CUBLAS_STATUS_SUCCESS) {                                                  \
      ::memplan::trainers::cuda_detail::fail(#call, cublasGetStatusString(memplan_status), __FILE__, __LINE__); \
    }                                                                                               \
  } while (false)

namespace cuda_detail {

/// A cuDNN descriptor or handle, destroyed with its scope.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class cudnn_object {
 public:
  cudnn_object() { MEMPLAN_CUDNN_TRY(Create(&value_)); }
  cudnn_object(const cudnn_object&) = delete;
  cudnn_object& operator=(const cudnn_object&) = delete;
  ~cudnn_object() { (void)Destroy(value_); }
  operator T() const noexcept { return value_; }  // NOLINT(google-explicit-constructor)

 private:
  T value_{};
};

using tensor_desc = cudnn_object<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using filter_desc = cudnn_object<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using conv_desc =
    cudnn_object<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using pool_desc = cudnn_object<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using act_desc =
    cudnn_object<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

/// An NCHW float tensor descriptor.
class nchw : public tensor_desc {
 public:
  nchw(int n, int c, int h, int w) {
    MEMPLAN_CUDNN_TRY(cudnnSetTensor4dDescriptor(*this, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  }
};

/// The descriptors of one sample's 3x3 convolution, padding 1.
struct conv_setup {
  explicit conv_setup(const dims& d) : x(1, d.c_in, d.h, d.w), y(1, d.c_out, d.h, d.w) {
    MEMPLAN_CUDNN_TRY(cudnnSetFilter4dDescriptor(filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d.c_out, d.c_in, 3, 3));
    MEMPLAN_CUDNN_TRY(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    MEMPLAN_CUDNN_TRY(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
  }
  nchw x, y;
  filter_desc filter;
  conv_desc conv;
};

inline constexpr cudnnConvolutionFwdAlgo_t forward_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
inline constexpr cudnnConvolutionBwdDataAlgo_t data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
inline constexpr cudnnConvolutionBwdFilterAlgo_t filter_algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;

}  // namespace cuda_detail

class cuda_kernels {
 public:
  /// \throws cuda_error if cuDNN or cuBLAS cannot start (no GPU, no driver).
  cuda_kernels() {
    MEMPLAN_CUDNN_TRY(cudnnCreate(&dnn_));
    if (const cublasStatus_t s = cublasCreate(&blas_); s != CUBLAS_STATUS_SUCCESS) {
      (void)cudnnDestroy(dnn_);
      cuda_detail::fail("cublasCreate", cublasGetStatusString(s), __FILE__, __LINE__);
    }
    MEMPLAN_CUDNN_TRY(cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    MEMPLAN_CUDNN_TRY(cudnnSetPooling2dDescriptor(pool_, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_NOT_PROPAGATE_NAN, 2, 2,
                                                  0, 0, 2, 2));
  }
  cuda_kernels(const cuda_kernels&) = delete;
  cuda_kernels& operator=(const cuda_kernels&) = delete;
  ~cuda_kernels() {
    (void)cublasDestroy(blas_);
    (void)cudnnDestroy(dnn_);
  }

  /// Later calls enqueue on `view`.
  void bind(cuda::stream_view view) {
    stream_ = view.value();
    MEMPLAN_CUDNN_TRY(cudnnSetStream(dnn_, stream_));
    MEMPLAN_CUBLAS_TRY(cublasSetStream(blas_, stream_));
  }

  /// Convolutions: what cuDNN asks for the fixed algorithm; batch norm: the
  /// running statistics it insists on writing (2 x channels floats); the
  /// loss: the log-probabilities (classes floats).
  [[nodiscard]] bytes_t workspace_bytes(layer_op kind, const dims& d) const {
    switch (kind) {
      case layer_op::conv:
      case layer_op::conv_grad_x:
      case layer_op::conv_grad_w: return conv_workspace(kind, d);
      case layer_op::batchnorm: return static_cast<bytes_t>(2 * sizeof(float)) * d.c_in;
      case layer_op::loss: return static_cast<bytes_t>(sizeof(float)) * d.c_in;
      default: return 0;
    }
  }

  void conv_forward(const dims& d, const float* x, const float* w, float* y, void* ws) const {
    const cuda_detail::conv_setup c(d);
    MEMPLAN_CUDNN_TRY(cudnnConvolutionForward(dnn_, &one_, c.x, x, c.filter, w, c.conv, cuda_detail::forward_algo, ws,
                                              workspace(layer_op::conv, c), &zero_, c.y, y));
  }
  void conv_backward_data(const dims& d, const float* dy, const float* w, float* dx, void* ws) const {
    const cuda_detail::conv_setup c(d);
    MEMPLAN_CUDNN_TRY(cudnnConvolutionBackwardData(dnn_, &one_, c.filter, w, c.y, dy, c.conv, cuda_detail::data_algo, ws,
                                                   workspace(layer_op::conv_grad_x, c), &zero_, c.x, dx));
  }
  void conv_backward_filter(const dims& d, const float* x, const float* dy, float* dw, bool accumulate, void* ws) const {
    const cuda_detail::conv_setup c(d);
    MEMPLAN_CUDNN_TRY(cudnnConvolutionBackwardFilter(dnn_, &one_, c.x, x, c.y, dy, c.conv, cuda_detail::filter_algo, ws,
                                                     workspace(layer_op::conv_grad_w, c), accumulate ? &one_ : &zero_,
                                                     c.filter, dw));
  }

  void maxpool_forward(const dims& d, const float* x, float* y) const {
    const cuda_detail::nchw in(1, d.c_in, d.h, d.w), out(1, d.c_in, d.h / 2, d.w / 2);
    MEMPLAN_CUDNN_TRY(cudnnPoolingForward(dnn_, pool_, &one_, in, x, &zero_, out, y));
  }
  void maxpool_backward(const dims& d, const float* x, const float* y, const float* dy, float* dx) const {
    const cuda_detail::nchw in(1, d.c_in, d.h, d.w), out(1, d.c_in, d.h / 2, d.w / 2);
    MEMPLAN_CUDNN_TRY(cudnnPoolingBackward(dnn_, pool_, &one_, out, y, out, dy, in, x, &zero_, in, dx));
  }

  // W is out x in row-major: column-major in x out with leading dimension in.
  void linear_forward(const dims& d, const float* x, const float* wb, float* y) const {
    const float* bias = wb + static_cast<std::size_t>(d.c_out) * d.c_in;
    MEMPLAN_CUDA_TRY(cudaMemcpyAsync(y, bias, sizeof(float) * static_cast<std::size_t>(d.c_out),
                                     cudaMemcpyDeviceToDevice, stream_));
    MEMPLAN_CUBLAS_TRY(cublasSgemv(blas_, CUBLAS_OP_T, d.c_in, d.c_out, &one_, wb, d.c_in, x, 1, &one_, y, 1));
  }
  void linear_backward_data(const dims& d, const float* dy, const float* wb, float* dx) const {
    MEMPLAN_CUBLAS_TRY(cublasSgemv(blas_, CUBLAS_OP_N, d.c_in, d.c_out, &one_, wb, d.c_in, dy, 1, &zero_, dx, 1));
  }
  void linear_backward_weights(const dims& d, const float* x, const float* dy, float* dwb, bool accumulate) const {
    const std::size_t weights = static_cast<std::size_t>(d.c_out) * d.c_in;
    if (!accumulate) MEMPLAN_CUDA_TRY(cudaMemsetAsync(dwb, 0, sizeof(float) * (weights + d.c_out), stream_));
    MEMPLAN_CUBLAS_TRY(cublasSger(blas_, d.c_in, d.c_out, &one_, x, 1, dy, 1, dwb, d.c_in));
    MEMPLAN_CUBLAS_TRY(cublasSaxpy(blas_, d.c_out, &one_, dy, 1, dwb + weights, 1));
  }

  void loss(const dims& d, const float* logits, const float* onehot, float* dlogits, float* log_likelihood,
            void* ws) {
    const cuda_detail::nchw t(1, d.c_in, 1, 1);
    auto* log_p = static_cast<float*>(ws);
    MEMPLAN_CUDNN_TRY(cudnnSoftmaxForward(dnn_, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE, &one_, t, logits, &zero_,
                                          t, log_p));
    MEMPLAN_CUDNN_TRY(cudnnSoftmaxForward(dnn_, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &one_, t, logits,
                                          &zero_, t, dlogits));
    const float scale = 1.0f / static_cast<float>(d.batch), minus = -scale;
    MEMPLAN_CUBLAS_TRY(cublasSgeam(blas_, CUBLAS_OP_N, CUBLAS_OP_N, d.c_in, 1, &scale, dlogits, d.c_in, &minus, onehot,
                                   d.c_in, dlogits, d.c_in));  // in place: C = A is allowed
    MEMPLAN_CUBLAS_TRY(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_DEVICE));
    const cublasStatus_t dot = cublasSdot(blas_, d.c_in, log_p, 1, onehot, 1, log_likelihood);
    MEMPLAN_CUBLAS_TRY(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_HOST));
    MEMPLAN_CUBLAS_TRY(dot);
  }

  void relu_forward(std::size_t n, const float* x, float* y) const {
    const cuda_detail::nchw t(1, static_cast<int>(n), 1, 1);
    MEMPLAN_CUDNN_TRY(cudnnActivationForward(dnn_, relu_, &one_, t, x, &zero_, t, y));
  }
  /// ReLU's derivative from its output: y > 0 exactly where x > 0.
  void relu_backward(std::size_t n, const float* y, const float* dy, float* dx) const {
    const cuda_detail::nchw t(1, static_cast<int>(n), 1, 1);
    MEMPLAN_CUDNN_TRY(cudnnActivationBackward(dnn_, relu_, &one_, t, y, t, dy, t, y, &zero_, t, dx));
  }
  void sgd(std::size_t n, float lr, const float* w, const float* g, float* w_new) const {
    MEMPLAN_CUDA_TRY(cudaMemcpyAsync(w_new, w, sizeof(float) * n, cudaMemcpyDeviceToDevice, stream_));
    const float minus_lr = -lr;
    MEMPLAN_CUBLAS_TRY(cublasSaxpy(blas_, static_cast<int>(n), &minus_lr, g, 1, w_new, 1));
  }

  void batchnorm_forward(const dims& d, const float* x, const float* gb, float* y, void* ws) const {
    const cuda_detail::nchw data(d.batch, d.c_in, d.h, d.w), channels(1, d.c_in, 1, 1);
    auto* running = static_cast<float*>(ws);  // written, never read: factor 1 replaces it
    MEMPLAN_CUDNN_TRY(cudnnBatchNormalizationForwardTraining(dnn_, CUDNN_BATCHNORM_SPATIAL, &one_, &zero_, data, x, data,
                                                             y, channels, gb, gb + d.c_in, 1.0, running,
                                                             running + d.c_in, batchnorm_epsilon, nullptr, nullptr));
  }
  /// With no saved statistics, cuDNN computes them again from x.
  void batchnorm_backward(const dims& d, const float* x, const float* dy, const float* gb, float* dx, float* dgb) const {
    const cuda_detail::nchw data(d.batch, d.c_in, d.h, d.w), channels(1, d.c_in, 1, 1);
    MEMPLAN_CUDNN_TRY(cudnnBatchNormalizationBackward(dnn_, CUDNN_BATCHNORM_SPATIAL, &one_, &zero_, &one_, &zero_, data, x,
                                                      data, dy, data, dx, channels, gb, dgb, dgb + d.c_in,
                                                      batchnorm_epsilon, nullptr, nullptr));
  }

 private:
  [[nodiscard]] bytes_t conv_workspace(layer_op kind, const dims& d) const {
    return static_cast<bytes_t>(workspace(kind, cuda_detail::conv_setup(d)));
  }
  /// cuDNN's workspace for `kind`'s fixed algorithm on the descriptors `c` (one call, one setup).
  [[nodiscard]] std::size_t workspace(layer_op kind, const cuda_detail::conv_setup& c) const {
    std::size_t bytes = 0;
    if (kind == layer_op::conv) {
      MEMPLAN_CUDNN_TRY(
          cudnnGetConvolutionForwardWorkspaceSize(dnn_, c.x, c.filter, c.conv, c.y, cuda_detail::forward_algo, &bytes));
    } else if (kind == layer_op::conv_grad_x) {
      MEMPLAN_CUDNN_TRY(cudnnGetConvolutionBackwardDataWorkspaceSize(dnn_, c.filter, c.y, c.conv, c.x,
                                                                     cuda_detail::data_algo, &bytes));
    } else {
      MEMPLAN_CUDNN_TRY(cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn_, c.x, c.y, c.conv, c.filter,
                                                                       cuda_detail::filter_algo, &bytes));
    }
    return bytes;
  }

  cudnnHandle_t dnn_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cuda_detail::act_desc relu_;
  cuda_detail::pool_desc pool_;
  static constexpr float one_ = 1.0f, zero_ = 0.0f;
};

}  // namespace memplan::trainers
