#pragma once
/// \file
/// The model zoo: the papers' workloads by name, built as full training
/// iterations (forward, backward, optimizer update) sized by `options` and
/// timed on a device with the roofline model. docs/models.md lists them.

#include <array>
#include <cmath>
#include <span>
#include <string>
#include <string_view>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/model/builder.hpp"
#include "memplan/model/densenet.hpp"
#include "memplan/model/inception.hpp"
#include "memplan/model/mobilenet.hpp"
#include "memplan/model/options.hpp"
#include "memplan/model/resnet.hpp"
#include "memplan/model/squeezenet.hpp"
#include "memplan/model/transformer.hpp"
#include "memplan/model/vgg.hpp"

namespace memplan::model {

namespace detail {
inline constexpr std::array<std::string_view, 16> model_names{
    "vgg16",       "vgg19",       "resnet50",  "resnet101",  "resnet152",   "resnext50", "inception_v3", "inception_v4",
    "densenet121", "mobilenet",   "squeezenet", "plain20",   "transformer", "bert-base", "bert-large",   "gpt2"};

inline bool is_sequence_model(std::string_view name) {
  return name == "transformer" || name == "bert-base" || name == "bert-large" || name == "gpt2";
}

inline std::string known_models() {
  std::string known;
  for (const auto n : model_names) (known += known.empty() ? "" : ", ") += n;
  return known;
}

inline void check_options(std::string_view name, const options& o) {
  MEMPLAN_EXPECTS(o.batch >= 1, invalid_argument, "model '", name, "': batch must be at least 1, got ", o.batch);
  MEMPLAN_EXPECTS(std::isfinite(o.scale) && o.scale > 0, invalid_argument, "model '", name,
                  "': scale must be a positive number, got ", o.scale);
  MEMPLAN_EXPECTS(o.resolution >= 0, invalid_argument, "model '", name, "': resolution must be >= 0, got ",
                  o.resolution);
  MEMPLAN_EXPECTS(o.seq_len >= 0, invalid_argument, "model '", name, "': seq_len must be >= 0, got ", o.seq_len);
  MEMPLAN_EXPECTS(o.layers >= 0, invalid_argument, "model '", name, "': layers must be >= 0, got ", o.layers);
  const bool seq = is_sequence_model(name);
  MEMPLAN_EXPECTS(!seq || (o.resolution == 0 && !o.cifar), invalid_argument, "model '", name,
                  "' is a sequence model: resolution and cifar do not apply");
  MEMPLAN_EXPECTS(seq || (o.seq_len == 0 && o.layers == 0), invalid_argument, "model '", name,
                  "' is an image model: seq_len and layers do not apply");
}

inline std::string graph_name(std::string_view name, const options& o) {
  std::string s = std::string(name) + "-b" + std::to_string(o.batch);
  if (o.scale != 1.0) {
    std::string k = std::to_string(o.scale);
    while (!k.empty() && k.back() == '0') k.pop_back();
    if (!k.empty() && k.back() == '.') k.pop_back();
    s += "-k" + k;
  }
  return s;
}
}  // namespace detail

/// The zoo's model names: vgg16, vgg19, resnet50, resnet101, resnet152,
/// resnext50, inception_v3, inception_v4, densenet121, mobilenet,
/// squeezenet, plain20, transformer, bert-base, bert-large, gpt2.
[[nodiscard]] inline std::span<const std::string_view> names() noexcept { return detail::model_names; }

/// Builds model `name` and returns its graph with parameter and FLOP counts.
/// \throws invalid_argument for an unknown name (listing the known ones) or
///         bad options (batch < 1, scale <= 0, an option that does not apply).
[[nodiscard]] inline built_model build_model(std::string_view name, const options& opt, const device_spec& dev) {
  bool known = false;
  for (const auto n : detail::model_names) known = known || n == name;
  MEMPLAN_EXPECTS(known, invalid_argument, "unknown model '", name, "'; known models: ", detail::known_models());
  detail::check_options(name, opt);
  builder b(detail::graph_name(name, opt), opt, dev);
  if (name == "vgg16") vgg(b, vgg16_config);
  else if (name == "vgg19") vgg(b, vgg19_config);
  else if (name == "resnet50") resnet(b, resnet50_blocks);
  else if (name == "resnet101") resnet(b, resnet101_blocks);
  else if (name == "resnet152") resnet(b, resnet152_blocks);
  else if (name == "resnext50") resnet(b, resnet50_blocks, 32, 4);
  else if (name == "inception_v3") inception_v3(b);
  else if (name == "inception_v4") inception_v4(b);
  else if (name == "densenet121") densenet121(b);
  else if (name == "mobilenet") mobilenet_v1(b);
  else if (name == "squeezenet") squeezenet1_1(b);
  else if (name == "plain20") plain20(b);
  else if (name == "transformer") transformer(b, transformer_base);
  else if (name == "bert-base") bert(b, bert_base);
  else if (name == "bert-large") bert(b, bert_large);
  else gpt2(b, gpt2_small);
  return b.finish();
}

/// Builds model `name` on `dev`: op times come from the roofline model.
/// \throws invalid_argument as `build_model`.
[[nodiscard]] inline memplan::graph build(std::string_view name, const options& opt, const device_spec& dev) {
  return build_model(name, opt, dev).graph;
}

}  // namespace memplan::model
