#pragma once
// The memplan CLI's commands as data: each command's synopsis, summary,
// options and example. The parser (arguments.hpp) accepts exactly these
// options, and `memplan CMD --help` prints them: one source for both.

#include <algorithm>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "arguments.hpp"
#include "memplan/planners/registry.hpp"

namespace memplan::cli {

/// Exit statuses (DESIGN.md §8), the same for every command.
inline constexpr std::string_view exit_statuses =
    "exit status: 0 success; 1 bad input or an invalid plan; 2 no plan fits the budget;\n"
    "             3 a planner refuses the input (size limit, not a chain) or runs out of time\n";

inline constexpr option_spec model_options[] = {
    {"model", "NAME", "a zoo model (memplan models lists them)"},
    {"batch", "N", "batch size (default 32)"},
    {"scale", "K", "width factor: channels or hidden size times K (TSPLIT Table V)"},
    {"resolution", "R", "input height and width (default: the model's)"},
    {"seq-len", "L", "sequence length (default: the model's)"},
    {"dtype", "T", "fp32, fp16 or bf16 (default fp32)"},
    {"optimizer", "O", "sgd or adam (default sgd with momentum)"},
    {"layers", "N", "Transformer layers (default: the model's)"},
    {"cifar", "", "CIFAR-10 32x32 inputs and CIFAR-style stems (HOME §4.1)"}};
inline constexpr option_spec file_sources[] = {
    {"graph", "FILE", "a memplan-graph JSON document (docs/formats.md)"},
    {"dtr-log", "FILE", "a DTR operator log (docs/formats.md)"}};
inline constexpr option_spec parallel_options[] = {
    {"parallel", "MODE",
     "plan one rank of distributed training: ddp, zero1, zero2, zero3 or pipeline (1F1B; docs/distributed.md)"},
    {"ranks", "N", "data-parallel ranks (default 8)"},
    {"stages", "P", "pipeline stages, one GPU each (default 2, at most 64)"},
    {"stage", "K", "the pipeline stage planned, 0 to P-1 (default 0)"},
    {"micro-batches", "M", "micro-batches per iteration; --batch is one micro-batch (default 4)"},
    {"cluster", "C", "the ranks' machines, a100-node or dgx-h100; the device is its GPU (memplan models lists them)"}};
inline constexpr option_spec device_options[] = {
    {"device", "D", "the device (memplan models lists them)"},
    {"device-profile", "FILE", "a measured device profile overriding D's figures (docs/devices.md)"}};
inline constexpr option_spec json_option{"json", "", "one JSON document on stdout instead of the table"};
inline constexpr option_spec budget_option{
    "budget", "SIZE", "device memory: bytes, 24GiB, 11GB, 800MiB, or 60% of the baseline peak"};
inline constexpr option_spec svg_option{
    "svg", "FILE", "write a picture of the simulated run: memory by tensor kind, budget, streams (docs/pictures.md)"};
inline constexpr option_spec ascii_option{"ascii", "", "after the table, memory over time against the budget as text"};
inline constexpr option_spec host_memory_option{
    "host-memory", "SIZE", "the most host memory the plan's host copies may take at once (default: no limit)"};
inline constexpr option_spec common_planner_options[] = {
    {"seed", "N", "random seed of the searches (default 1)"},
    {"time-limit", "S", "stop a planner after S seconds (0: none)"},
    {"threads", "N", "threads for the searches (default: every core; same plans on any number)"}};

/// What the help of a command lists besides its own options.
enum class extras : unsigned { none = 0, source = 1, planners = 2, model = 4 };
[[nodiscard]] constexpr bool has(extras set, extras e) { return (static_cast<unsigned>(set) & static_cast<unsigned>(e)) != 0; }
[[nodiscard]] constexpr extras operator|(extras a, extras b) {
  return static_cast<extras>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

struct command_spec {
  std::string_view name;
  std::string_view synopsis;
  std::string_view summary;
  std::vector<option_spec> own;  ///< besides SOURCE's and the planners'
  extras with = extras::none;
  std::string_view example;

  /// Every option the parser accepts for this command (all but `models`
  /// and `import` take the device options).
  [[nodiscard]] std::vector<option_spec> accepted() const {
    std::vector<option_spec> all = own;
    const auto add = [&](std::span<const option_spec> more) {
      for (const auto& o : more) {
        if (std::ranges::find(all, o.name, &option_spec::name) == all.end()) all.push_back(o);
      }
    };
    if (has(with, extras::source) || has(with, extras::model)) add(model_options);
    if (has(with, extras::source) || has(with, extras::model)) add(parallel_options);
    if (has(with, extras::source)) add(file_sources);
    if (name != "models" && name != "import") add(device_options);
    if (has(with, extras::planners)) {
      add(common_planner_options);
      for (const auto& e : planners()) {
        for (const planner_option& o : e.options) {
          const option_spec spec{o.name, o.value, o.help};
          add(std::span(&spec, 1));
        }
      }
    }
    return all;
  }
};

inline const std::vector<command_spec>& commands() {
  static const std::vector<command_spec> all{
      {"models", "[--json]", "The zoo models, devices and planners.", {json_option}, extras::none, "memplan models"},
      {"info", "SOURCE [--device D] [--json]",
       "A graph's ops, tensors, parameters, baseline peak and time (device titan-rtx unless given).",
       {json_option}, extras::source, "memplan info --model resnet50 --batch 64 --device titan-rtx"},
      {"plan", "SOURCE --device D --budget SIZE --planner P [options]",
       "Plans SOURCE for the budget with planner P and simulates the plan.",
       {budget_option, {"planner", "P", "the planner (memplan models lists them)", true}, json_option,
        {"out", "FILE", "write the plan (docs/formats.md)"}, {"trace", "FILE", "write the simulated run as a Chrome trace"},
        {"explain", "", "per tensor moved, rebuilt or split: when it leaves, when it is back, the stall it causes"},
        svg_option, ascii_option, host_memory_option},
       extras::source | extras::planners,
       "memplan plan --model resnet50 --batch 64 --device titan-rtx --budget 60% --planner tsplit"},
      {"compare", "SOURCE --device D --budget SIZE [--planners a,b,...] [options]",
       "Plans SOURCE with several planners (every fast one by default) and tabulates them.",
       {budget_option, {"planners", "a,b,...", "the planners to run (default: all but the searches home and milp)"},
        json_option, {"svg", "FILE", "write each fitting plan's memory curve against the budget as a picture"},
        host_memory_option},
       extras::source | extras::planners,
       "memplan compare --model resnet50 --batch 128 --device titan-rtx --budget 60%"},
      {"maxbatch", "--model M --device D [--budget SIZE] [--planners a,b,...] [options]",
       "The largest batch (or width factor) at which each planner's plan fits.",
       {{"budget", "SIZE", "device memory (default: the device's)"},
        {"planners", "a,b,...", "the planners to run (default: all but the searches home and milp)"},
        {"max-overhead", "X", "only plans at most X slower than the unplanned step count (1 = half the throughput)"},
        {"search", "batch|scale", "search the batch (default) or the width factor at --batch"},
        {"window", "N",
         "after doubling and bisection, plan every batch up to max(N, 5 % of it) above the best, moving up on each "
         "fit (default 16; 0: bisection only)"},
        host_memory_option,
        json_option},
       extras::model | extras::planners, "memplan maxbatch --model vgg16 --device titan-rtx --planners tsplit,capuchin"},
      {"simulate", "SOURCE --plan FILE --device D [--budget SIZE] [--json] [--trace t.json] [--svg s.svg] [--ascii]",
       "Simulates a plan file on the graph it was made for (the budget in the plan unless given).",
       {{"plan", "FILE", "a plan document (plan --out); refused if made for another graph", true}, budget_option,
        json_option, {"trace", "FILE", "write the simulated run as a Chrome trace"}, svg_option, ascii_option},
       extras::source, "memplan simulate --graph g.json --plan p.json --device titan-rtx"},
      {"validate", "SOURCE --plan FILE --budget SIZE [--device D] [--json]",
       "Checks a plan file against its graph and the budget with the independent validator.",
       {{"plan", "FILE", "a plan document (plan --out); refused if made for another graph", true}, budget_option,
        json_option},
       extras::source, "memplan validate --graph g.json --plan p.json --budget 8GiB"},
      {"execute", "SOURCE --device D --budget SIZE (--planner P | --plan FILE) [--json]",
       "Runs the plan on the host executor in an arena of exactly the budget, ops touching every byte.",
       {budget_option, {"planner", "P", "plan with P"}, {"plan", "FILE", "or run this plan document"}, json_option},
       extras::source | extras::planners,
       "memplan execute --graph tests/data/pytorch_cnn.json --device titan-rtx --budget 70% --planner tsplit"},
      {"import", "--dtr-log FILE [--out g.json]", "A DTR operator log as a memplan-graph document.",
       {{"dtr-log", "FILE", "the log", true}, {"out", "FILE", "write here instead of stdout"}}, extras::none,
       "memplan import --dtr-log resnet32-56.log --out resnet32.json"},
  };
  return all;
}

/// The command called `name`, or null.
inline const command_spec* find_command(std::string_view name) {
  const auto& all = commands();
  const auto it = std::ranges::find(all, name, &command_spec::name);
  return it == all.end() ? nullptr : &*it;
}

inline void print_options(std::ostream& out, std::span<const option_spec> options) {
  for (const auto& o : options) {
    std::string left = "  --";
    left += o.name;
    if (!o.value.empty()) (left += ' ') += o.value;
    out << left << std::string(left.size() < 26 ? 26 - left.size() : 1, ' ') << o.help
        << (o.required ? " (required)" : "") << "\n";
  }
}

/// `memplan CMD --help`; with `only_planner`, that planner's options only.
inline void print_help(std::ostream& out, const command_spec& c, std::string_view only_planner = {}) {
  out << "usage: memplan " << c.name << " " << c.synopsis << "\n\n" << c.summary << "\n\noptions:\n";
  print_options(out, c.own);
  if (has(c.with, extras::source)) {
    out << "SOURCE, one of --model, --graph, --dtr-log:\n";
    print_options(out, file_sources);
  }
  if (has(c.with, extras::source) || has(c.with, extras::model)) {
    out << "model options:\n";
    print_options(out, model_options);
    out << "distributed (one rank's iteration):\n";
    print_options(out, parallel_options);
  }
  if (c.name != "models" && c.name != "import") {
    out << "device:\n";
    print_options(out, device_options);
  }
  if (has(c.with, extras::planners)) {
    out << "planners' options:\n";
    print_options(out, common_planner_options);
    for (const auto& e : planners()) {
      if (e.options.empty() || (!only_planner.empty() && e.name != only_planner)) continue;
      out << e.name << ":\n";
      for (const planner_option& o : e.options) {
        const option_spec s{o.name, o.value, o.help};
        print_options(out, std::span(&s, 1));
      }
    }
  }
  out << "\nexample:\n  " << c.example << "\n\n" << exit_statuses;
}

/// `memplan --help`: one line per command.
inline void print_usage(std::ostream& out) {
  out << "usage: memplan COMMAND [options]   (memplan COMMAND --help: its options and an example)\n\n";
  for (const auto& c : commands()) {
    out << "  " << c.name << std::string(10 - c.name.size(), ' ') << c.summary << "\n";
  }
  out << "\nSIZE := bytes | 24GiB | 11GB | 800MiB | 60% (of the baseline peak)\n" << exit_statuses;
}

}  // namespace memplan::cli
