// What reasoning models write before their answer, kept apart from the answer. Internal to
// src/llm: the client strips it from every reply, so no prompt kind ever parses a model's
// thoughts as its answer (a `<think>` block holding braces once made every extraction fail).
#pragma once

#include <string>
#include <string_view>

namespace grag::llm_internal {

struct ThinkingSplit {
  std::string answer;    // the reply without its thinking, trimmed of the space around it
  std::string thinking;  // what was inside the thinking block(s); "" when there was none
  // The reply stopped inside a thinking block (no closing tag): the model ran out of tokens, or
  // of patience, before it answered. `answer` is then "".
  bool unclosed = false;
};

// Splits a reply into thinking and answer. Recognised: a leading `<think>…</think>` (Qwen3,
// DeepSeek-R1, QwQ), `<thinking>`, `<reasoning>` and `<reflection>` blocks, a reply that only
// closes the block (a chat template that opened `<think>` in the prompt), and several blocks in
// a row. A tag in the middle of an answer (a model quoting one) is left alone.
ThinkingSplit SplitThinking(std::string_view reply);

// The same over a stream of deltas: passes on only what is answer, holding back bytes that may
// still turn out to be a tag. Feed every delta in order, then Finish.
class ThinkingFilter {
 public:
  // Returns the answer text this delta releases (maybe "").
  std::string Feed(std::string_view delta);
  // The answer text still held back when the stream ends.
  std::string Finish();
  bool saw_thinking() const { return saw_thinking_; }

 private:
  enum class State { kStart, kThinking, kAnswer };
  State state_ = State::kStart;
  std::string pending_;    // bytes not yet classified
  std::string close_tag_;  // while thinking: the tag that ends it
  bool saw_thinking_ = false;
};

}  // namespace grag::llm_internal
