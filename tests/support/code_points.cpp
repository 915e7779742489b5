#include "support/code_points.h"

#include <vector>

namespace grag::testing {

std::string CodePointSlice(const std::string& text, int64_t start, int64_t end) {
  std::vector<size_t> at;  // byte offset of each code point, then the end
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) at.push_back(i);
  }
  at.push_back(text.size());
  if (start < 0 || end < start || static_cast<size_t>(end) >= at.size()) return "<out of range>";
  return text.substr(at[start], at[end] - at[start]);
}

}  // namespace grag::testing
