#pragma once
/// \file
/// Transformers: TSPLIT's base encoder-decoder (Vaswani et al. 2017, the
/// "base" model: 6+6 layers, d 512, 8 heads, FFN 2048; fairseq's names),
/// BERT-base and BERT-large (Devlin et al. 2019, HuggingFace's names, with
/// the pooler and a 2-way sequence-classification head as in TSPLIT's MRPC
/// fine-tuning), and GPT-2 (Radford et al. 2019, pre-norm, LM head tied to
/// the token embedding) with any number of layers. The width factor k scales
/// the hidden size (rounded to a multiple of the head count) and the FFN with it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "memplan/error.hpp"
#include "memplan/model/builder.hpp"

namespace memplan::model {

/// The sizes of a Transformer.
struct transformer_config {
  const char* name;    ///< the zoo's name ("bert-base", ...)
  int layers;          ///< encoder layers (decoder layers too for the encoder-decoder)
  std::int64_t hidden;  ///< the model width d (scaled by k, a multiple of `heads`)
  std::int64_t heads;   ///< attention heads
  std::int64_t ffn;     ///< the feed-forward layer's inner width (scaled by k)
  std::int64_t vocab;   ///< vocabulary size: the token embedding's rows (and the output projection's width)
  std::int64_t max_positions;  ///< learned position embeddings; 0 = sinusoidal (no parameters)
  std::int64_t type_vocab;     ///< BERT's segment embeddings; 0 = none
  int seq_len;                 ///< default sequence length
  double dropout;              ///< dropout probability; > 0 makes attention and dropout ops not recomputable
};

/// TSPLIT's Transformer (IWSLT 2016): base model, 32k BPE vocabularies, 128 tokens.
inline constexpr transformer_config transformer_base{"transformer", 6, 512, 8, 2048, 32000, 0, 0, 128, 0.1};
/// BERT-base uncased: 110M parameters, 128-token fine-tuning sequences.
inline constexpr transformer_config bert_base{"bert-base", 12, 768, 12, 3072, 30522, 512, 2, 128, 0.1};
/// BERT-large uncased: 340M parameters.
inline constexpr transformer_config bert_large{"bert-large", 24, 1024, 16, 4096, 30522, 512, 2, 128, 0.1};
/// GPT-2 small: 124M parameters, 1024-token context.
inline constexpr transformer_config gpt2_small{"gpt2", 12, 768, 12, 3072, 50257, 1024, 0, 1024, 0.1};

namespace detail {

/// The config with `options` applied: width factor, layer count, sequence length.
inline transformer_config resolve(const builder& b, transformer_config c) {
  const auto& o = b.opts();
  if (o.scale != 1.0) {
    c.hidden = std::max<std::int64_t>(1, std::llround(static_cast<double>(c.hidden) * o.scale / static_cast<double>(c.heads))) * c.heads;
    c.ffn = std::max<std::int64_t>(1, std::llround(static_cast<double>(c.ffn) * o.scale));
  }
  if (o.layers > 0) c.layers = o.layers;
  if (o.seq_len > 0) c.seq_len = o.seq_len;
  MEMPLAN_EXPECTS(c.max_positions == 0 || c.seq_len <= c.max_positions, invalid_argument, "model '", c.name,
                  "': seq_len ", c.seq_len, " exceeds its ", c.max_positions, " learned positions");
  return c;
}

}  // namespace detail

/// Multi-head attention `prefix` of `x` over `memory` (self-attention when
/// they are the same): q, k, v projections, attention, output projection.
inline value multi_head_attention(builder& b, const std::string& prefix, const std::string& out_name, const value& x,
                                  const value& memory, const transformer_config& c, bool causal) {
  const value q = b.linear(prefix + ".query", x, c.hidden);
  const value k = b.linear(prefix + ".key", memory, c.hidden);
  const value v = b.linear(prefix + ".value", memory, c.hidden);
  const value a = b.attention(prefix + ".attention", q, k, v, c.heads, c.dropout, causal);
  return b.linear(out_name, a, c.hidden);
}

/// Post-norm residual: LayerNorm(x + dropout(y)) (the original Transformer and BERT).
inline value add_norm(builder& b, const std::string& prefix, const value& x, const value& y, double dropout) {
  return b.layer_norm(prefix + ".LayerNorm", b.add(prefix + ".add", b.dropout(prefix + ".dropout", y, dropout), x));
}

/// The position-wise feed-forward network: linear, GELU (ReLU for the
/// original Transformer), linear.
inline value feed_forward(builder& b, const std::string& in_name, const std::string& out_name, const value& x,
                          const transformer_config& c, bool relu) {
  value h = b.linear(in_name, x, c.ffn);
  h = relu ? b.relu(in_name + ".act", h) : b.gelu(in_name + ".act", h);
  return b.linear(out_name, h, c.hidden);
}

/// BERT (HuggingFace's BertForSequenceClassification with 2 labels): the
/// published count (109,482,240 for base) is the backbone with its pooler;
/// the 2-way classifier is reported as `task_head_parameters`.
inline void bert(builder& b, transformer_config config) {
  const transformer_config c = detail::resolve(b, config);
  const std::int64_t batch = b.batch(), seq = c.seq_len;
  const value ids = b.input("input_ids", {batch, seq}, element::int64);
  const value types = b.input("token_type_ids", {batch, seq}, element::int64);
  const value positions = b.input("position_ids", {1, seq}, element::int64);
  const value labels = b.input("labels", {batch}, element::int64);
  value x = b.embedding("embeddings.word_embeddings", ids, c.vocab, c.hidden);
  x = b.add("embeddings.add_position",
            x, b.embedding("embeddings.position_embeddings", positions, c.max_positions, c.hidden));
  x = b.add("embeddings.add_token_type",
            x, b.embedding("embeddings.token_type_embeddings", types, c.type_vocab, c.hidden));
  x = b.dropout("embeddings.dropout", b.layer_norm("embeddings.LayerNorm", x), c.dropout);
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i);
    const value a = multi_head_attention(b, p + ".attention.self", p + ".attention.output.dense", x, x, c, false);
    x = add_norm(b, p + ".attention.output", x, a, c.dropout);
    x = add_norm(b, p + ".output", x, feed_forward(b, p + ".intermediate.dense", p + ".output.dense", x, c, false),
                 c.dropout);
  }
  // The pooler reads the first token: a view of the sequence output.
  const value first{x.id, {batch, c.hidden}};
  const value pooled = b.tanh("pooler.activation", b.linear("pooler.dense", first, c.hidden));
  b.set_task_head(true);
  const value logits = b.linear("classifier", b.dropout("dropout", pooled, c.dropout), 2);
  b.set_task_head(false);
  b.cross_entropy("loss", logits, labels);
}

/// GPT-2 (HuggingFace's GPT2LMHeadModel) with `options::layers` blocks.
inline void gpt2(builder& b, transformer_config config) {
  const transformer_config c = detail::resolve(b, config);
  const std::int64_t batch = b.batch(), seq = c.seq_len;
  const value ids = b.input("input_ids", {batch, seq}, element::int64);
  const value positions = b.input("position_ids", {1, seq}, element::int64);
  const value labels = b.input("labels", {batch, seq}, element::int64);
  const value wte = b.parameter("wte.weight", {c.vocab, c.hidden});
  value x = b.add("add_position", b.embedding("wte", ids, c.vocab, c.hidden, &wte),
                  b.embedding("wpe", positions, c.max_positions, c.hidden));
  x = b.dropout("drop", x, c.dropout);
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "h." + std::to_string(i);
    const value n1 = b.layer_norm(p + ".ln_1", x);
    const value a = multi_head_attention(b, p + ".attn", p + ".attn.c_proj", n1, n1, c, true);
    x = b.add(p + ".add_1", x, b.dropout(p + ".attn.resid_dropout", a, c.dropout));
    const value n2 = b.layer_norm(p + ".ln_2", x);
    const value m = feed_forward(b, p + ".mlp.c_fc", p + ".mlp.c_proj", n2, c, false);
    x = b.add(p + ".add_2", x, b.dropout(p + ".mlp.dropout", m, c.dropout));
  }
  x = b.layer_norm("ln_f", x);
  b.cross_entropy("loss", b.linear("lm_head", x, c.vocab, false, &wte), labels);
}

/// The encoder-decoder Transformer: post-norm layers, sinusoidal positions
/// (an input, no parameters), target embedding tied to the output projection.
inline void transformer(builder& b, transformer_config config) {
  const transformer_config c = detail::resolve(b, config);
  const std::int64_t batch = b.batch(), seq = c.seq_len;
  const value src = b.input("src_tokens", {batch, seq}, element::int64);
  const value tgt = b.input("prev_output_tokens", {batch, seq}, element::int64);
  const value labels = b.input("target", {batch, seq}, element::int64);
  const value positions = b.input("sinusoidal_positions", {1, seq, c.hidden});
  value x = b.add("encoder.embed_positions", b.embedding("encoder.embed_tokens", src, c.vocab, c.hidden), positions);
  x = b.dropout("encoder.dropout", x, c.dropout);
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "encoder.layers." + std::to_string(i);
    x = add_norm(b, p + ".self_attn_layer_norm", x,
                 multi_head_attention(b, p + ".self_attn", p + ".self_attn.out_proj", x, x, c, false), c.dropout);
    x = add_norm(b, p + ".final_layer_norm", x, feed_forward(b, p + ".fc1", p + ".fc2", x, c, true), c.dropout);
  }
  const value memory = x;
  const value embed = b.parameter("decoder.embed_tokens.weight", {c.vocab, c.hidden});
  value y = b.add("decoder.embed_positions", b.embedding("decoder.embed_tokens", tgt, c.vocab, c.hidden, &embed),
                  positions);
  y = b.dropout("decoder.dropout", y, c.dropout);
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "decoder.layers." + std::to_string(i);
    y = add_norm(b, p + ".self_attn_layer_norm", y,
                 multi_head_attention(b, p + ".self_attn", p + ".self_attn.out_proj", y, y, c, true), c.dropout);
    y = add_norm(b, p + ".encoder_attn_layer_norm", y,
                 multi_head_attention(b, p + ".encoder_attn", p + ".encoder_attn.out_proj", y, memory, c, false),
                 c.dropout);
    y = add_norm(b, p + ".final_layer_norm", y, feed_forward(b, p + ".fc1", p + ".fc2", y, c, true), c.dropout);
  }
  b.cross_entropy("loss", b.linear("decoder.output_projection", y, c.vocab, false, &embed), labels);
}

}  // namespace memplan::model
