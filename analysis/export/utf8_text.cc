#include "analysis/export/utf8_text.h"

namespace commprof {

namespace {

// Copies `s` as valid UTF-8, each ill-formed subsequence replaced by U+FFFD; with kJson, also
// escapes what a JSON string cannot hold as is.
template <bool kJson>
void AppendText(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Fast path: a run of printable ASCII that needs no escape.
    size_t j = i;
    while (j < n && p[j] < 0x80 && (!kJson || (p[j] >= 0x20 && p[j] != '"' && p[j] != '\\'))) {
      ++j;
    }
    out.append(s.data() + i, j - i);
    i = j;
    if (i >= n) {
      break;
    }
    const unsigned char c = p[i];
    if (c < 0x80) {  // only reached with kJson: a character JSON escapes
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
      }
      ++i;
      continue;
    }
    // A multi-byte sequence: the allowed range of the second byte depends on the lead (this
    // excludes overlong forms, surrogates and code points above U+10FFFF); later bytes are
    // 80..BF. On the first byte out of range, the bytes consumed so far (the maximal subpart)
    // become one U+FFFD and decoding resumes at the offending byte.
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) {
        lo = 0xA0;
      }
      if (c == 0xED) {
        hi = 0x9F;
      }
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) {
        lo = 0x90;
      }
      if (c == 0xF4) {
        hi = 0x8F;
      }
    }
    if (len == 0) {  // 80..C1 or F5..FF can never start a character
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      const unsigned char b = p[i + k];
      if (b < lo || b > hi) {
        break;
      }
      lo = 0x80;
      hi = 0xBF;
    }
    if (k == len) {
      out.append(s.data() + i, len);
    } else {
      out += kReplacement;
    }
    i += k;
  }
}

}  // namespace

void AppendJsonEscaped(std::string& out, std::string_view s) { AppendText<true>(out, s); }

void AppendValidUtf8(std::string& out, std::string_view s) { AppendText<false>(out, s); }

}  // namespace commprof
