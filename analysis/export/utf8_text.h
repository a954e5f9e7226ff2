// Text for trace files: strings recorded by programs are bytes, trace formats want UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace commprof {

// Appends `s` to `out` as the inside of a JSON string: '"' and '\' escaped, control characters as
// \n \t \r \b \f or \u00XX, valid UTF-8 copied, and each maximal ill-formed subsequence (the
// WHATWG / Unicode "maximal subpart" rule, as Python's errors="replace") replaced by U+FFFD.
void AppendJsonEscaped(std::string& out, std::string_view s);

// Appends `s` as valid UTF-8 (a protobuf string): the same replacement, nothing escaped.
void AppendValidUtf8(std::string& out, std::string_view s);

}  // namespace commprof
