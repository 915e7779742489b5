// Writing a JSON string fast, for the texts written on every model call and index row (prompts,
// report findings). Nothing throws.
#pragma once

#include <string>
#include <string_view>

namespace grag {

// Appends `text` as a JSON string, byte for byte what nlohmann's dump (ensure_ascii off, invalid
// UTF-8 replaced) writes, at a fraction of its cost (tests/llm_wire_test.cpp compares the two).
void AppendJsonString(std::string& out, std::string_view text);

}  // namespace grag
