// The model zoo: parameter counts against the published ones, FLOPs, tensor
// sizes a reader can check by hand, what the backward keeps, and that every
// model compiles into a problem.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/problem.hpp"

using namespace memplan;

namespace {

const device_spec& titan() { return find_device("titan-rtx"); }

model::options batch_of(int batch) {
  model::options o;
  o.batch = batch;
  return o;
}

index_t tensor_named(const graph& g, std::string_view name) {
  for (std::size_t t = 0; t < g.num_tensors(); ++t) {
    if (g.tensor(static_cast<index_t>(t)).name == name) return static_cast<index_t>(t);
  }
  FAIL("no tensor named ", name);
  return no_index;
}

index_t op_named(const graph& g, std::string_view name) {
  for (std::size_t v = 0; v < g.num_ops(); ++v) {
    if (g.op(static_cast<index_t>(v)).name == name) return static_cast<index_t>(v);
  }
  FAIL("no op named ", name);
  return no_index;
}

bool reads(const graph& g, index_t op, index_t tensor) {
  const auto& in = g.op(op).inputs;
  return std::find(in.begin(), in.end(), tensor) != in.end();
}

std::size_t count_kind(const graph& g, tensor_kind k) {
  std::size_t n = 0;
  for (std::size_t t = 0; t < g.num_tensors(); ++t) n += g.tensor(static_cast<index_t>(t)).kind == k ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("parameter counts equal the published ones") {
  struct expected {
    std::string_view name;
    std::int64_t parameters;
  };
  // torchvision, HuggingFace (bert-base-uncased with pooler) and the papers.
  const expected table[] = {
      {"resnet50", 25'557'032},     {"resnet101", 44'549'160},   {"resnet152", 60'192'808},
      {"vgg16", 138'357'544},       {"vgg19", 143'667'240},      {"densenet121", 7'978'856},
      {"resnext50", 25'028'904},    {"squeezenet", 1'235'496},   {"inception_v3", 27'161'264},
      {"bert-base", 109'482'240},   {"bert-large", 335'141'888}, {"inception_v4", 42'679'816},
      {"gpt2", 124'439'808},        {"plain20", 269'722},
  };
  for (const auto& e : table) {
    CAPTURE(e.name);
    const auto m = model::build_model(e.name, batch_of(2), titan());
    CHECK(m.parameters == e.parameters);
  }
  // BERT is trained with a 2-way classifier on the pooled output (MRPC).
  CHECK(model::build_model("bert-base", batch_of(2), titan()).task_head_parameters == 768 * 2 + 2);
}

TEST_CASE("mobilenet v1 is within 1% of Keras's 4,253,864") {
  const auto m = model::build_model("mobilenet", batch_of(2), titan());
  // Keras counts the BN moving mean/variance (2 x 21,888 non-trainable); we count what trains.
  CHECK(m.parameters == 4'231'976);
  CHECK(std::abs(static_cast<double>(m.parameters) / 4'253'864.0 - 1.0) < 0.01);
}

TEST_CASE("the parameter tensors' bytes add up to the parameter count") {
  const auto m = model::build_model("resnet50", batch_of(4), titan());
  bytes_t total = 0;
  for (std::size_t t = 0; t < m.graph.num_tensors(); ++t) {
    const auto& info = m.graph.tensor(static_cast<index_t>(t));
    if (info.kind == tensor_kind::parameter) total += info.bytes;
  }
  CHECK(total == 4 * 25'557'032);
}

TEST_CASE("resnet50 forward is 4.1 GMAC per 224x224 image") {
  const auto m = model::build_model("resnet50", batch_of(8), titan());
  const double per_image = m.forward_macs / 8;
  CHECK(per_image == doctest::Approx(4.1e9).epsilon(0.03));
  CHECK(per_image == doctest::Approx(4'089'184'256.0));  // conv + fc multiply-adds, as fvcore counts them
}

TEST_CASE("tensor sizes a reader can check by hand") {
  const graph g = model::build("resnet50", batch_of(32), titan());
  // DESIGN.md §4's example graph: these three tensors, to the byte.
  CHECK(g.tensor(tensor_named(g, "images")).bytes == 32LL * 3 * 224 * 224 * 4);  // 19,267,584
  CHECK(g.tensor(tensor_named(g, "conv1.weight")).bytes == 64LL * 3 * 7 * 7 * 4);  // 37,632
  CHECK(g.tensor(tensor_named(g, "conv1.out")).bytes == 32LL * 64 * 112 * 112 * 4);  // 102,760,448
  CHECK(g.tensor(tensor_named(g, "conv1.out")).shape == std::vector<std::int64_t>{32, 64, 112, 112});
  // max-pool keeps int64 indices of its 56x56 output; BN keeps mean and invstd in FP32.
  CHECK(g.tensor(tensor_named(g, "maxpool.indices")).bytes == 32LL * 64 * 56 * 56 * 8);
  CHECK(g.tensor(tensor_named(g, "bn1.saved_stats")).bytes == 2 * 64 * 4);
  CHECK(g.tensor(tensor_named(g, "layer4.2.conv3.out")).bytes == 32LL * 2048 * 7 * 7 * 4);
  CHECK(g.tensor(tensor_named(g, "fc.weight")).bytes == 1000LL * 2048 * 4);
  // Gradients are sized exactly: the activation's and the parameter's bytes.
  CHECK(g.tensor(tensor_named(g, "conv1.out.grad")).bytes == 32LL * 64 * 112 * 112 * 4);
  CHECK(g.tensor(tensor_named(g, "fc.weight.grad")).kind == tensor_kind::parameter_gradient);
  CHECK(g.tensor(tensor_named(g, "fc.weight.grad")).bytes == 1000LL * 2048 * 4);
  CHECK(g.tensor(tensor_named(g, "fc.weight.momentum_buffer")).kind == tensor_kind::optimizer_state);

  const graph v = model::build("vgg16", batch_of(32), titan());
  CHECK(v.tensor(tensor_named(v, "classifier.0.weight")).bytes == 4096LL * 25088 * 4);
  CHECK(v.tensor(tensor_named(v, "classifier.2.mask")).bytes == 32LL * 4096);  // one byte per element

  const graph bert = model::build("bert-base", batch_of(8), titan());
  // Attention probabilities: batch x heads x seq x seq, the default 128 tokens.
  CHECK(bert.tensor(tensor_named(bert, "encoder.layer.0.attention.self.attention.probs")).bytes ==
        8LL * 12 * 128 * 128 * 4);
  CHECK(bert.tensor(tensor_named(bert, "embeddings.word_embeddings.weight")).bytes == 30522LL * 768 * 4);
}

TEST_CASE("what each backward keeps") {
  const graph g = model::build("resnet50", batch_of(4), titan());
  // conv: input and weight.
  const index_t conv = op_named(g, "layer1.0.conv2.backward");
  CHECK(reads(g, conv, tensor_named(g, "layer1.0.relu1.out")));
  CHECK(reads(g, conv, tensor_named(g, "layer1.0.conv2.weight")));
  CHECK(reads(g, conv, tensor_named(g, "layer1.0.conv2.out.grad")));
  // ReLU: its output, not its input.
  const index_t relu = op_named(g, "layer1.0.relu1.backward");
  CHECK(reads(g, relu, tensor_named(g, "layer1.0.relu1.out")));
  CHECK_FALSE(reads(g, relu, tensor_named(g, "layer1.0.bn1.out")));
  // batch norm: input and saved statistics.
  const index_t bn = op_named(g, "layer1.0.bn1.backward");
  CHECK(reads(g, bn, tensor_named(g, "layer1.0.conv1.out")));
  CHECK(reads(g, bn, tensor_named(g, "layer1.0.bn1.saved_stats")));
  // max-pool: input and indices.
  const index_t pool = op_named(g, "maxpool.backward");
  CHECK(reads(g, pool, tensor_named(g, "relu.out")));
  CHECK(reads(g, pool, tensor_named(g, "maxpool.indices")));
  // A block's input feeds conv1 and the shortcut: its gradient is accumulated.
  CHECK(g.op(op_named(g, "maxpool.out.accumulate_grad2")).type == "accumulate_grad");

  const graph v = model::build("vgg16", batch_of(4), titan());
  const index_t drop = op_named(v, "classifier.2");
  CHECK_FALSE(v.op(drop).recomputable);  // a fresh mask each time: no recompute without a saved seed
  CHECK(reads(v, op_named(v, "classifier.2.backward"), tensor_named(v, "classifier.2.mask")));
  CHECK(v.op(op_named(v, "features.0")).recomputable);
  CHECK(v.op(op_named(v, "features.0")).split_dims == std::vector<int>{0, 1});

  const graph bert = model::build("bert-base", batch_of(2), titan());
  // attention: q, k, v and its softmax output.
  const index_t att = op_named(bert, "encoder.layer.3.attention.self.attention.backward");
  CHECK(reads(bert, att, tensor_named(bert, "encoder.layer.3.attention.self.query.out")));
  CHECK(reads(bert, att, tensor_named(bert, "encoder.layer.3.attention.self.value.out")));
  CHECK(reads(bert, att, tensor_named(bert, "encoder.layer.3.attention.self.attention.probs")));
  // layer norm: input and statistics.
  const index_t ln = op_named(bert, "encoder.layer.3.output.LayerNorm.backward");
  CHECK(reads(bert, ln, tensor_named(bert, "encoder.layer.3.output.add.out")));
  CHECK(reads(bert, ln, tensor_named(bert, "encoder.layer.3.output.LayerNorm.saved_stats")));
}

TEST_CASE("batch norm may not be split along the batch") {
  const graph g = model::build("resnet50", batch_of(2), titan());
  CHECK(g.op(op_named(g, "bn1")).split_dims == std::vector<int>{1});
}

TEST_CASE("phases, optimizer state and parameter gradients") {
  auto o = batch_of(2);
  const graph sgd = model::build("resnet50", o, titan());
  const std::size_t params = count_kind(sgd, tensor_kind::parameter);
  CHECK(params == 161);  // 53 convs + 53 BNs x 2 + fc x 2
  CHECK(count_kind(sgd, tensor_kind::optimizer_state) == params);
  CHECK(count_kind(sgd, tensor_kind::parameter_gradient) == params);
  std::size_t updates = 0;
  for (std::size_t v = 0; v < sgd.num_ops(); ++v) {
    const auto& op = sgd.op(static_cast<index_t>(v));
    if (op.phase == phase::update) {
      ++updates;
      CHECK(op.type == "sgd_momentum");
      CHECK_FALSE(op.recomputable);
    }
    CHECK(op.time_us > 0);
  }
  CHECK(updates == params);
  o.opt = model::optimizer::adam;
  const graph adam = model::build("resnet50", o, titan());
  CHECK(count_kind(adam, tensor_kind::optimizer_state) == 2 * params);
}

TEST_CASE("tied weights accumulate their gradient once") {
  const auto m = model::build_model("gpt2", [] {
    model::options o;
    o.batch = 1;
    o.seq_len = 64;
    o.layers = 2;
    return o;
  }(), titan());
  const graph& g = m.graph;
  CHECK(g.tensor(tensor_named(g, "wte.weight.grad")).kind == tensor_kind::parameter_gradient);
  CHECK(g.tensor(tensor_named(g, "wte.weight.grad.1")).kind == tensor_kind::gradient);
  CHECK(m.parameters == 50257LL * 768 + 1024LL * 768 + 2 * 7'087'872 + 2 * 768);
}

TEST_CASE("options scale the model") {
  auto o = batch_of(2);
  o.scale = 2;
  const graph wide = model::build("resnet50", o, titan());
  CHECK(wide.tensor(tensor_named(wide, "conv1.weight")).bytes == 128LL * 3 * 7 * 7 * 4);
  CHECK(wide.name() == "resnet50-b2-k2");

  o = batch_of(2);
  o.type = model::dtype::fp16;
  const graph half = model::build("resnet50", o, titan());
  CHECK(half.tensor(tensor_named(half, "conv1.out")).bytes == 2LL * 64 * 112 * 112 * 2);
  CHECK(half.tensor(tensor_named(half, "conv1.out")).dtype == "float16");

  o = batch_of(2);
  o.cifar = true;
  const graph cifar = model::build("resnet50", o, titan());
  CHECK(cifar.tensor(tensor_named(cifar, "images")).shape == std::vector<std::int64_t>{2, 3, 32, 32});
  CHECK(cifar.tensor(tensor_named(cifar, "fc.weight")).shape == std::vector<std::int64_t>{10, 2048});

  o = batch_of(2);
  o.resolution = 256;
  const graph big = model::build("resnet50", o, titan());
  CHECK(big.tensor(tensor_named(big, "conv1.out")).shape == std::vector<std::int64_t>{2, 64, 128, 128});

  o = batch_of(2);
  o.scale = 1.5;
  const auto bert = model::build_model("bert-base", o, titan());
  // 768 x 1.5 = 1152 = 12 heads x 96.
  CHECK(bert.graph.tensor(tensor_named(bert.graph, "pooler.dense.weight")).shape ==
        std::vector<std::int64_t>{1152, 1152});
}

TEST_CASE("every model compiles and has a positive baseline peak") {
  for (const auto name : model::names()) {
    CAPTURE(name);
    model::options o = batch_of(2);
    if (name == "gpt2") o.seq_len = 128;
    const graph g = model::build(name, o, titan());
    const problem p = compile(g);
    CHECK(p.num_steps() == g.num_ops());
    CHECK(p.baseline_peak() > 0);
    CHECK(p.baseline_time_us() > 0);
  }
}

TEST_CASE("baseline peak grows with the batch") {
  const auto peak = [](int batch) { return compile(model::build("resnet50", batch_of(batch), titan())).baseline_peak(); };
  CHECK(peak(16) < peak(32));
  CHECK(peak(32) < peak(64));
}

TEST_CASE("gpt2 grows to 100,000 ops") {
  model::options o;
  o.batch = 1;
  o.seq_len = 128;
  o.layers = 2100;
  const graph g = model::build("gpt2", o, titan());
  CHECK(g.num_ops() >= 100'000);
  CHECK(g.num_ops() < 102'000);
}

TEST_CASE("bad names and options are refused with a message") {
  CHECK_THROWS_WITH_AS(model::build("resnet51", {}, titan()),
                       doctest::Contains("unknown model 'resnet51'; known models: vgg16, vgg19, resnet50"),
                       invalid_argument);
  CHECK_THROWS_WITH_AS(model::build("resnet50", batch_of(0), titan()),
                       doctest::Contains("batch must be at least 1, got 0"), invalid_argument);
  model::options o;
  o.scale = 0;
  CHECK_THROWS_WITH_AS(model::build("vgg16", o, titan()), doctest::Contains("scale must be a positive"),
                       invalid_argument);
  o = {};
  o.seq_len = 10;
  CHECK_THROWS_AS(model::build("resnet50", o, titan()), invalid_argument);
  o = {};
  o.seq_len = 1025;
  CHECK_THROWS_WITH_AS(model::build("gpt2", o, titan()), doctest::Contains("exceeds its 1024 learned positions"),
                       invalid_argument);
  o = {};
  o.resolution = 16;
  CHECK_THROWS_WITH_AS(model::build("vgg16", o, titan()), doctest::Contains("smaller than"), invalid_argument);
  CHECK(model::names().size() == 16);
}
