#include "thinking.h"

#include <array>
#include <cctype>

namespace grag::llm_internal {
namespace {

struct Tag {
  std::string_view open;
  std::string_view close;
};

constexpr std::array<Tag, 4> kTags = {{
    {"<think>", "</think>"},
    {"<thinking>", "</thinking>"},
    {"<reasoning>", "</reasoning>"},
    {"<reflection>", "</reflection>"},
}};

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view Trim(std::string_view s) {
  s = TrimLeft(s);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

size_t FindNoCase(std::string_view s, std::string_view needle) {
  if (needle.size() > s.size()) return std::string_view::npos;
  for (size_t i = 0; i + needle.size() <= s.size(); ++i) {
    if (StartsWithNoCase(s.substr(i), needle)) return i;
  }
  return std::string_view::npos;
}

// The tag `s` opens with, or nullptr.
const Tag* OpeningTag(std::string_view s) {
  for (const Tag& t : kTags) {
    if (StartsWithNoCase(s, t.open)) return &t;
  }
  return nullptr;
}

// Whether `s` (shorter than every tag it could be) may still grow into an opening tag.
bool MayBecomeTag(std::string_view s) {
  for (const Tag& t : kTags) {
    if (s.size() < t.open.size() && StartsWithNoCase(t.open, s)) return true;
  }
  return false;
}

void AppendThought(std::string& to, std::string_view thought) {
  thought = Trim(thought);
  if (thought.empty()) return;
  if (!to.empty()) to += "\n";
  to += thought;
}

}  // namespace

ThinkingSplit SplitThinking(std::string_view reply) {
  ThinkingSplit out;
  std::string_view rest = TrimLeft(reply);
  bool opened = false;
  while (const Tag* tag = OpeningTag(rest)) {
    opened = true;
    rest.remove_prefix(tag->open.size());
    const size_t end = FindNoCase(rest, tag->close);
    if (end == std::string_view::npos) {
      AppendThought(out.thinking, rest);
      out.unclosed = true;
      return out;
    }
    AppendThought(out.thinking, rest.substr(0, end));
    rest = TrimLeft(rest.substr(end + tag->close.size()));
  }
  if (!opened) {
    // A chat template that opens the block in the prompt leaves only its end in the reply.
    const size_t end = FindNoCase(rest, "</think>");
    if (end != std::string_view::npos &&
        FindNoCase(rest.substr(0, end), "<think>") == std::string_view::npos) {
      AppendThought(out.thinking, rest.substr(0, end));
      rest = rest.substr(end + 8);
    }
  }
  out.answer = std::string(Trim(rest));
  return out;
}

std::string ThinkingFilter::Feed(std::string_view delta) {
  pending_ += delta;
  std::string released;
  for (;;) {
    switch (state_) {
      case State::kStart: {
        std::string_view p = TrimLeft(pending_);
        if (p.empty()) return released;
        if (const Tag* tag = OpeningTag(p)) {
          saw_thinking_ = true;
          close_tag_ = std::string(tag->close);
          pending_ = std::string(p.substr(tag->open.size()));
          state_ = State::kThinking;
          continue;
        }
        if (MayBecomeTag(p)) return released;
        state_ = State::kAnswer;
        pending_ = std::string(p);
        continue;
      }
      case State::kThinking: {
        const size_t end = FindNoCase(pending_, close_tag_);
        if (end == std::string::npos) {
          // Keep only what may be the start of the closing tag.
          const size_t keep = std::min(pending_.size(), close_tag_.size() - 1);
          pending_.erase(0, pending_.size() - keep);
          return released;
        }
        pending_.erase(0, end + close_tag_.size());
        state_ = State::kStart;
        continue;
      }
      case State::kAnswer:
        released += pending_;
        pending_.clear();
        return released;
    }
  }
}

std::string ThinkingFilter::Finish() {
  std::string out;
  if (state_ != State::kThinking) out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace grag::llm_internal
