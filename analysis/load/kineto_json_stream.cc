#include "analysis/load/kineto_json_stream.h"

#include <zlib.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

namespace commprof::kineto {
namespace {

constexpr size_t kChunk = 1u << 20;  // decompressed bytes held at a time

// A pull source of decompressed bytes that can copy out the span between BeginCapture and
// EndCapture even when it crosses chunk boundaries.
class ByteSource {
 public:
  // kJsonPadding spare bytes after a full chunk: a capture that lies inside one chunk is handed
  // out in place, and simdjson may read (never use) that far past its end.
  ByteSource(gzFile file, const JsonStreamCallbacks& cb) : file_(file), cb_(cb), buf_(kChunk + kJsonPadding) {}

  // Next byte without consuming it; -1 at the end of the data (or a read error, see error()).
  int Peek() {
    if (pos_ == len_ && !Refill()) return -1;
    return static_cast<unsigned char>(buf_[pos_]);
  }
  int Get() {
    int c = Peek();
    if (c >= 0) ++pos_;
    return c;
  }
  void SkipSpace() {
    for (;;) {
      if (pos_ == len_ && !Refill()) return;
      char c = buf_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
      ++pos_;
    }
  }
  // Consumes an object or array starting at the current '{' / '['; false when the data ends first.
  // Brackets are only counted: simdjson checks that they pair when the caller parses the text.
  // 64 bytes at a time: bit masks of quotes and brackets (SSE2), strings found by a prefix XOR of
  // the quote mask, so only the few brackets outside strings are looked at one by one. A block
  // holding a backslash (none in any reference trace) takes the byte-at-a-time path.
  bool SkipComposite() {
    ScanState st;
    for (;;) {
      if (pos_ == len_ && !Refill()) return false;
      const unsigned char* base = reinterpret_cast<const unsigned char*>(buf_.data());
      size_t at = pos_;
      while (at < len_) {
        // Reading 64 bytes from `at` stays inside buf_ (kJsonPadding spare bytes past a full
        // chunk); bits past len_ are cleared.
        const size_t n = std::min<size_t>(64, len_ - at);
        size_t end = 0;
        if (ScanBlock(base + at, n, st, end)) {
          pos_ = at + end;
          return true;
        }
        at += n;
      }
      pos_ = len_;
    }
  }
  // Consumes a string starting at the current '"'; `out` (if given) gets its raw contents.
  bool SkipString(std::string* out) {
    Get();
    bool escaped = false;
    for (;;) {
      int c = Get();
      if (c < 0) return false;
      if (!escaped && c == '"') return true;
      escaped = !escaped && c == '\\';
      if (out != nullptr) out->push_back(static_cast<char>(c));
    }
  }
  // Consumes any JSON value; false when the data ends inside it.
  bool SkipValue() {
    int c = Peek();
    if (c == '{' || c == '[') return SkipComposite();
    if (c == '"') return SkipString(nullptr);
    bool any = false;
    for (;;) {
      c = Peek();
      if (c < 0) return any;
      if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t') return any;
      any = true;
      ++pos_;
    }
  }
  void BeginCapture(std::string& into) {
    into.clear();
    capture_ = &into;
    capture_from_ = pos_;
  }
  // The captured text, followed by at least kJsonPadding readable bytes: in place when it did not
  // cross a chunk boundary (no copy), else in the capture string, padded with spaces.
  std::string_view EndCapture() {
    std::string& into = *capture_;
    capture_ = nullptr;
    if (into.empty()) return std::string_view(buf_.data() + capture_from_, pos_ - capture_from_);
    into.append(buf_.data() + capture_from_, pos_ - capture_from_);
    const size_t n = into.size();
    into.append(kJsonPadding, ' ');
    return std::string_view(into.data(), n);
  }
  uint64_t offset() const { return consumed_ + pos_; }
  const std::string& read_error() const { return read_error_; }

 private:
  struct ScanState {
    int depth = 0;
    bool in_string = false, escaped = false;
  };

  // One byte of the composite scan; true when it closes the outermost bracket.
  static bool ScanByte(unsigned char ch, ScanState& st) {
    if (st.in_string) {
      if (st.escaped) st.escaped = false;
      else if (ch == '\\') st.escaped = true;
      else if (ch == '"') st.in_string = false;
      return false;
    }
    if (ch == '"') {
      st.in_string = true;
    } else if (ch == '{' || ch == '[') {
      ++st.depth;
    } else if (ch == '}' || ch == ']') {
      if (--st.depth == 0) return true;
    }
    return false;
  }

  // Scans the n (<= 64) bytes at p, of which 64 are readable; true with `end` = the offset just
  // past the closing bracket when the composite ends in them.
  static bool ScanBlock(const unsigned char* p, size_t n, ScanState& st, size_t& end) {
#if defined(__SSE2__)
    const uint64_t valid = n == 64 ? ~0ull : (1ull << n) - 1;
    uint64_t quote = 0, backslash = 0, open = 0, close = 0;
    const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), lower = _mm_set1_epi8(0x20);
    const __m128i ob = _mm_set1_epi8('{'), cb = _mm_set1_epi8('}');
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
      // '[' | 0x20 == '{' and ']' | 0x20 == '}'; no other byte maps onto them.
      const __m128i folded = _mm_or_si128(v, lower);
      const int shift = 16 * k;
      quote |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, q)))) << shift;
      backslash |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, bs)))) << shift;
      open |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, ob)))) << shift;
      close |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, cb)))) << shift;
    }
    if ((backslash & valid) == 0 && !st.escaped) {
      quote &= valid;
      // Bit i: the byte at i lies inside a string (an odd number of quotes up to it, counting an
      // open string carried in from the previous block).
      uint64_t in_string = quote;
      in_string ^= in_string << 1;
      in_string ^= in_string << 2;
      in_string ^= in_string << 4;
      in_string ^= in_string << 8;
      in_string ^= in_string << 16;
      in_string ^= in_string << 32;
      if (st.in_string) in_string = ~in_string;
      open &= valid & ~in_string;
      close &= valid & ~in_string;
      st.in_string = (in_string >> 63) != 0;
      // A handful of brackets per event: one step each (no popcount: the default x86-64 target
      // has no POPCNT instruction).
      for (uint64_t b = open | close; b != 0; b &= b - 1) {
        const int i = std::countr_zero(b);
        if ((open >> i) & 1) {
          ++st.depth;
        } else if (--st.depth == 0) {
          end = static_cast<size_t>(i) + 1;
          return true;
        }
      }
      return false;
    }
#endif
    for (size_t i = 0; i < n; ++i) {
      if (ScanByte(p[i], st)) {
        end = i + 1;
        return true;
      }
    }
    return false;
  }

  bool Refill() {
    if (capture_ != nullptr) {
      capture_->append(buf_.data() + capture_from_, len_ - capture_from_);
      capture_from_ = 0;
    }
    consumed_ += len_;
    pos_ = len_ = 0;
    if (!read_error_.empty()) return false;
    int n = gzread(file_, buf_.data(), static_cast<unsigned>(kChunk));
    if (n <= 0) {
      int code = 0;
      const char* msg = gzerror(file_, &code);
      if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) read_error_ = msg != nullptr ? msg : "read error";
      return false;
    }
    len_ = static_cast<size_t>(n);
    if (cb_.progress) cb_.progress(static_cast<uint64_t>(gzoffset(file_)));
    return true;
  }

  gzFile file_;
  const JsonStreamCallbacks& cb_;
  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0;
  uint64_t consumed_ = 0;
  std::string* capture_ = nullptr;
  size_t capture_from_ = 0;
  std::string read_error_;
};

class Walker {
 public:
  Walker(const std::string& path, ByteSource& src, const JsonStreamCallbacks& cb) : path_(path), src_(src), cb_(cb) {}

  Status Run() {
    src_.SkipSpace();
    int c = src_.Get();
    if (c != '{') {
      if (c < 0) return Fail("the file is empty");
      return Fail("the top-level value is not an object (a Kineto trace is {\"traceEvents\": [...], ...})");
    }
    bool saw_events = false;
    src_.SkipSpace();
    if (src_.Peek() == '}') {
      src_.Get();
    } else {
      for (;;) {
        src_.SkipSpace();
        if (src_.Peek() != '"') return Unexpected("a member name");
        std::string key;
        if (!src_.SkipString(&key)) return Truncated("in a member name");
        src_.SkipSpace();
        if (src_.Get() != ':') return Unexpected("':' after member \"" + key + "\"");
        src_.SkipSpace();
        if (key == "traceEvents") {
          saw_events = true;
          COMMPROF_RETURN_IF_ERROR(ReadEvents());
        } else {
          src_.BeginCapture(value_);
          bool ok = src_.SkipValue();
          std::string_view value = src_.EndCapture();
          if (!ok) return Truncated("in the value of \"" + key + "\"");
          if (cb_.member) COMMPROF_RETURN_IF_ERROR(cb_.member(key, value));
        }
        src_.SkipSpace();
        c = src_.Get();
        if (c == ',') continue;
        if (c == '}') break;
        if (c < 0) return Truncated("after member \"" + key + "\"");
        return Unexpected("',' or '}' after member \"" + key + "\"");
      }
    }
    src_.SkipSpace();
    if (src_.Peek() >= 0) return Fail("unexpected data after the top-level object");
    if (!src_.read_error().empty()) return Truncated("");
    if (!saw_events) return Fail("no \"traceEvents\" member");
    return Status::Ok();
  }

 private:
  Status ReadEvents() {
    if (src_.Get() != '[') return Fail("\"traceEvents\" is not an array");
    src_.SkipSpace();
    if (src_.Peek() == ']') {
      src_.Get();
      return Status::Ok();
    }
    for (uint64_t index = 0;; ++index) {
      src_.SkipSpace();
      int c = src_.Peek();
      if (c < 0) return Truncated("before traceEvents[" + std::to_string(index) + "]");
      if (c != '{') return Fail("traceEvents[" + std::to_string(index) + "] is not an object");
      src_.BeginCapture(event_);
      bool ok = src_.SkipComposite();
      std::string_view event = src_.EndCapture();
      if (!ok) return Truncated("inside traceEvents[" + std::to_string(index) + "]");
      if (cb_.event) COMMPROF_RETURN_IF_ERROR(cb_.event(index, event));
      src_.SkipSpace();
      c = src_.Get();
      if (c == ',') continue;
      if (c == ']') return Status::Ok();
      if (c < 0) return Truncated("after traceEvents[" + std::to_string(index) + "]");
      return Unexpected("',' or ']' after traceEvents[" + std::to_string(index) + "]");
    }
  }
  Status Fail(const std::string& what) {
    return Corrupt(path_ + ": " + what + " (at byte " + std::to_string(src_.offset()) + " of the JSON text)");
  }
  Status Unexpected(const std::string& expected) { return Fail("expected " + expected); }
  Status Truncated(const std::string& where) {
    std::string why = src_.read_error().empty() ? "" : " (" + src_.read_error() + ")";
    return Corrupt(path_ + ": the JSON text ends early" + (where.empty() ? "" : " " + where) + why + " at byte " +
                   std::to_string(src_.offset()) + ": truncated file?");
  }

  const std::string& path_;
  ByteSource& src_;
  const JsonStreamCallbacks& cb_;
  std::string value_;
  std::string event_;
};

}  // namespace

Status ReadKinetoJson(const std::string& path, const JsonStreamCallbacks& callbacks) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return IoError(path + ": cannot open");
  gzbuffer(f, 256u << 10);
  ByteSource src(f, callbacks);
  Walker walker(path, src, callbacks);
  Status st = walker.Run();
  gzclose(f);
  return st;
}

}  // namespace commprof::kineto
