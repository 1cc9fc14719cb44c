#pragma once
// The trainers' kernels in plain C++, for host::device. The kernel-set
// contract (cuda_kernels.hpp implements the same one with cuDNN and cuBLAS):
//
//   per sample (one image, row-major, channels first):
//     conv_forward(d, x, w, y, ws)            y = conv3x3(x, w), padding 1
//     conv_backward_data(d, dy, w, dx, ws)    dx = the input gradient
//     conv_backward_filter(d, x, dy, dw, accumulate, ws)
//     maxpool_forward(d, x, y)                2x2 windows, stride 2
//     maxpool_backward(d, x, y, dy, dx)
//     linear_forward(d, x, wb, y)             y = W x + b; wb holds W (out x in) then b
//     linear_backward_data(d, dy, wb, dx)     dx = Wᵀ dy
//     linear_backward_weights(d, x, dy, dwb, accumulate)   dW += dy xᵀ, db += dy
//     loss(d, logits, onehot, dlogits, log_likelihood, ws)
//         dlogits = (softmax(logits) - onehot) / d.batch; *log_likelihood = log softmax(logits)[label]
//   over n elements of any shape:
//     relu_forward(n, x, y), relu_backward(n, y, dy, dx), sgd(n, lr, w, g, w_new) (w_new = w - lr g)
//   over the whole batch (statistics per channel over batch, height, width):
//     batchnorm_forward(d, x, gb, y, ws)      gb = gamma then beta
//     batchnorm_backward(d, x, dy, gb, dx, dgb)   the statistics computed again from x
//
// `accumulate`: add this sample's share to what the output holds, else
// replace it. The dispatcher (dispatch.hpp) runs a weight gradient sample
// by sample in batch order, so a micro-batched op adds the same terms in
// the same order as the whole op and the result is the same to the bit.
// `ws`: the op's workspace in the device arena, `workspace_bytes(kind, d)`
// long (the graph's workspace_bytes); the kernels with no `ws` need none.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "memplan/host/device.hpp"
#include "network.hpp"

namespace memplan::trainers {

class host_kernels {
 public:
  void bind(host::stream_view) const noexcept {}
  /// Scratch an op needs in the device arena: none here.
  [[nodiscard]] bytes_t workspace_bytes(layer_op, const dims&) const noexcept { return 0; }

  void conv_forward(const dims& d, const float* x, const float* w, float* y, void*) const {
    for (int co = 0; co < d.c_out; ++co) {
      for (int i = 0; i < d.h; ++i) {
        for (int j = 0; j < d.w; ++j) {
          float v = 0;
          for (int ci = 0; ci < d.c_in; ++ci) {
            for (int a = 0; a < 3; ++a) {
              for (int b = 0; b < 3; ++b) {
                const int r = i + a - 1, c = j + b - 1;
                if (r >= 0 && r < d.h && c >= 0 && c < d.w) v += x[at(d, ci, r, c)] * w[filter(d, co, ci, a, b)];
              }
            }
          }
          y[(static_cast<std::size_t>(co) * d.h + i) * d.w + j] = v;
        }
      }
    }
  }
  void conv_backward_data(const dims& d, const float* dy, const float* w, float* dx, void*) const {
    for (int ci = 0; ci < d.c_in; ++ci) {
      for (int r = 0; r < d.h; ++r) {
        for (int c = 0; c < d.w; ++c) {
          float v = 0;
          for (int co = 0; co < d.c_out; ++co) {
            for (int a = 0; a < 3; ++a) {
              for (int b = 0; b < 3; ++b) {
                const int i = r - a + 1, j = c - b + 1;
                if (i >= 0 && i < d.h && j >= 0 && j < d.w) v += dy[at(d, co, i, j)] * w[filter(d, co, ci, a, b)];
              }
            }
          }
          dx[at(d, ci, r, c)] = v;
        }
      }
    }
  }
  void conv_backward_filter(const dims& d, const float* x, const float* dy, float* dw, bool accumulate, void*) const {
    for (int co = 0; co < d.c_out; ++co) {
      for (int ci = 0; ci < d.c_in; ++ci) {
        for (int a = 0; a < 3; ++a) {
          for (int b = 0; b < 3; ++b) {
            float v = 0;
            for (int i = 0; i < d.h; ++i) {
              for (int j = 0; j < d.w; ++j) {
                const int r = i + a - 1, c = j + b - 1;
                if (r >= 0 && r < d.h && c >= 0 && c < d.w) v += dy[at(d, co, i, j)] * x[at(d, ci, r, c)];
              }
            }
            float& out = dw[filter(d, co, ci, a, b)];
            out = accumulate ? out + v : v;
          }
        }
      }
    }
  }

  void maxpool_forward(const dims& d, const float* x, float* y) const {
    for_each_window(d, [&](std::size_t out, const std::size_t (&in)[4]) {
      y[out] = std::max(std::max(x[in[0]], x[in[1]]), std::max(x[in[2]], x[in[3]]));
    });
  }
  /// The gradient goes to the first position of the window holding the maximum.
  void maxpool_backward(const dims& d, const float* x, const float* y, const float* dy, float* dx) const {
    std::fill_n(dx, d.in_elements(), 0.0f);
    for_each_window(d, [&](std::size_t out, const std::size_t (&in)[4]) {
      for (const std::size_t k : in) {
        if (x[k] == y[out]) {
          dx[k] = dy[out];
          break;
        }
      }
    });
  }

  void linear_forward(const dims& d, const float* x, const float* wb, float* y) const {
    const float* bias = wb + static_cast<std::size_t>(d.c_out) * d.c_in;
    for (int o = 0; o < d.c_out; ++o) {
      float v = bias[o];
      for (int i = 0; i < d.c_in; ++i) v += wb[static_cast<std::size_t>(o) * d.c_in + i] * x[i];
      y[o] = v;
    }
  }
  void linear_backward_data(const dims& d, const float* dy, const float* wb, float* dx) const {
    for (int i = 0; i < d.c_in; ++i) {
      float v = 0;
      for (int o = 0; o < d.c_out; ++o) v += wb[static_cast<std::size_t>(o) * d.c_in + i] * dy[o];
      dx[i] = v;
    }
  }
  void linear_backward_weights(const dims& d, const float* x, const float* dy, float* dwb, bool accumulate) const {
    float* db = dwb + static_cast<std::size_t>(d.c_out) * d.c_in;
    for (int o = 0; o < d.c_out; ++o) {
      for (int i = 0; i < d.c_in; ++i) {
        float& out = dwb[static_cast<std::size_t>(o) * d.c_in + i];
        out = accumulate ? out + dy[o] * x[i] : dy[o] * x[i];
      }
      db[o] = accumulate ? db[o] + dy[o] : dy[o];
    }
  }

  void loss(const dims& d, const float* logits, const float* onehot, float* dlogits, float* log_likelihood,
            void*) const {
    const int k = d.c_in;
    const float top = *std::max_element(logits, logits + k);
    double sum = 0;
    for (int c = 0; c < k; ++c) sum += std::exp(static_cast<double>(logits[c] - top));
    const double log_sum = std::log(sum);
    double ll = 0;
    for (int c = 0; c < k; ++c) {
      const double log_p = static_cast<double>(logits[c] - top) - log_sum;
      ll += log_p * onehot[c];
      dlogits[c] = static_cast<float>((std::exp(log_p) - onehot[c]) / d.batch);
    }
    *log_likelihood = static_cast<float>(ll);
  }

  void relu_forward(std::size_t n, const float* x, float* y) const {
    for (std::size_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
  }
  void relu_backward(std::size_t n, const float* y, const float* dy, float* dx) const {
    for (std::size_t i = 0; i < n; ++i) dx[i] = y[i] > 0 ? dy[i] : 0.0f;
  }
  void sgd(std::size_t n, float lr, const float* w, const float* g, float* w_new) const {
    for (std::size_t i = 0; i < n; ++i) w_new[i] = w[i] - lr * g[i];
  }

  void batchnorm_forward(const dims& d, const float* x, const float* gb, float* y, void*) const {
    for (int c = 0; c < d.c_in; ++c) {
      const auto [mean, inv_std] = statistics(d, x, c);
      for_each_in_channel(d, c, [&](std::size_t k) { y[k] = gb[c] * ((x[k] - mean) * inv_std) + gb[d.c_in + c]; });
    }
  }
  void batchnorm_backward(const dims& d, const float* x, const float* dy, const float* gb, float* dx, float* dgb) const {
    const double m = static_cast<double>(d.h) * d.w * d.batch;
    for (int c = 0; c < d.c_in; ++c) {
      const auto [mean, inv_std] = statistics(d, x, c);
      double dbeta = 0, dgamma = 0;
      for_each_in_channel(d, c, [&](std::size_t k) {
        dbeta += dy[k];
        dgamma += dy[k] * ((x[k] - mean) * inv_std);
      });
      dgb[c] = static_cast<float>(dgamma);
      dgb[d.c_in + c] = static_cast<float>(dbeta);
      const double scale = gb[c] * inv_std / m;
      for_each_in_channel(d, c, [&](std::size_t k) {
        const double x_hat = (x[k] - mean) * inv_std;
        dx[k] = static_cast<float>(scale * (m * dy[k] - dbeta - x_hat * dgamma));
      });
    }
  }

 private:
  static std::size_t at(const dims& d, int c, int r, int col) {
    return (static_cast<std::size_t>(c) * d.h + r) * d.w + col;
  }
  static std::size_t filter(const dims& d, int co, int ci, int a, int b) {
    return ((static_cast<std::size_t>(co) * d.c_in + ci) * 3 + a) * 3 + b;
  }
  struct moments {
    float mean, inv_std;
  };
  /// Channel c's mean and 1/sqrt(biased variance + eps) over the batch.
  static moments statistics(const dims& d, const float* x, int c) {
    const double m = static_cast<double>(d.h) * d.w * d.batch;
    double sum = 0, squares = 0;
    for_each_in_channel(d, c, [&](std::size_t k) { sum += x[k]; });
    const double mean = sum / m;
    for_each_in_channel(d, c, [&](std::size_t k) { squares += (x[k] - mean) * (x[k] - mean); });
    return {static_cast<float>(mean), static_cast<float>(1.0 / std::sqrt(squares / m + batchnorm_epsilon))};
  }
  /// Calls f(output index, the window's four input indices) per 2x2 window.
  template <class F>
  static void for_each_window(const dims& d, F&& f) {
    const int oh = d.h / 2, ow = d.w / 2;
    for (int c = 0; c < d.c_in; ++c) {
      for (int i = 0; i < oh; ++i) {
        for (int j = 0; j < ow; ++j) {
          const std::size_t in[4] = {at(d, c, 2 * i, 2 * j), at(d, c, 2 * i, 2 * j + 1), at(d, c, 2 * i + 1, 2 * j),
                                     at(d, c, 2 * i + 1, 2 * j + 1)};
          f((static_cast<std::size_t>(c) * oh + i) * ow + j, in);
        }
      }
    }
  }
  /// Calls f(index) for every element of channel c over the batch.
  template <class F>
  static void for_each_in_channel(const dims& d, int c, F&& f) {
    const std::size_t hw = static_cast<std::size_t>(d.h) * d.w;
    for (int n = 0; n < d.batch; ++n) {
      const std::size_t base = (static_cast<std::size_t>(n) * d.c_in + c) * hw;
      for (std::size_t k = 0; k < hw; ++k) f(base + k);
    }
  }
};

}  // namespace memplan::trainers
