#include "analysis/load/kineto_json_stream.h"

#include <zlib.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define COMMPROF_CRC32_CLMUL 1
#endif

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace commprof::kineto {
namespace {

constexpr size_t kChunk = 1u << 20;  // decompressed bytes held at a time

// CRC-32 of gzip by carry-less multiplication (Intel, "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ"; the bit-reflected constants as in Chromium's zlib), 16-byte
// multiples of at least 64 bytes; zlib's table code does the rest. zlib 1.2.13 spends ~4
// instructions per byte on it, as much as half of its inflate time.
#if COMMPROF_CRC32_CLMUL
__attribute__((target("pclmul,sse4.1"))) uint32_t Crc32Clmul(const unsigned char* buf, size_t len, uint32_t crc) {
  alignas(16) static const uint64_t k1k2[] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const uint64_t k3k4[] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const uint64_t k5k0[] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const uint64_t poly[] = {0x01db710641, 0x01f7011641};
  __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;
  x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 0x00));
  x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 0x10));
  x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 0x20));
  x4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 0x30));
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(static_cast<int>(crc)));
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  buf += 64;
  len -= 64;
  while (len >= 64) {  // four 128-bit lanes folded in parallel
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
    x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
    x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
    x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
    y5 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 0x00));
    y6 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 0x10));
    y7 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 0x20));
    y8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 0x30));
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
    x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
    x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
    x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
    buf += 64;
    len -= 64;
  }
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));  // fold the lanes into one
  for (__m128i next : {x2, x3, x4}) {
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, next), x5);
  }
  while (len >= 16) {
    x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    buf += 16;
    len -= 16;
  }
  // 128 -> 64 bits, then Barrett reduction to 32.
  x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
  x3 = _mm_setr_epi32(~0, 0, ~0, 0);
  x1 = _mm_srli_si128(x1, 8);
  x1 = _mm_xor_si128(x1, x2);
  x0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2 = _mm_srli_si128(x1, 4);
  x1 = _mm_and_si128(x1, x3);
  x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2 = _mm_and_si128(x1, x3);
  x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
  x2 = _mm_and_si128(x2, x3);
  x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}
#endif

// Reads a file's bytes, inflating gzip (one or more members; bytes after the last member that do
// not start another are ignored, as gzread does). The gzip check values are verified here, with
// the CRC computed by Crc32 instead of zlib's slower table code.
class Input {
 public:
  ~Input() {
    if (inflating_) {
      inflateEnd(&zs_);
    }
    if (file_ != nullptr) {
      std::fclose(file_);
    }
  }
  bool Open(const std::string& path) {
    path_ = path;
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      return false;
    }
    in_.reset(new unsigned char[kInput]);
    if (!FillInput()) {
      return true;  // empty (or unreadable: error() says which)
    }
    gzip_ = in_len_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (gzip_) {
      zs_.next_in = in_.get();
      zs_.avail_in = static_cast<uInt>(in_len_);
      if (inflateInit2(&zs_, 15 + 16) != Z_OK) {
        return Fail("out of memory");
      }
      inflating_ = true;
#if ZLIB_VERNUM >= 0x1290
      inflateValidate(&zs_, 0);  // checked below, with the faster CRC
      own_check_ = true;
#endif
    }
    return true;
  }
  // Up to `cap` bytes into `out`: the count, 0 at the end of the data, -1 on an error.
  long Read(unsigned char* out, size_t cap) {
    if (!error_.empty()) {
      return -1;
    }
    if (!gzip_) {
      if (in_pos_ < in_len_) {
        const size_t n = std::min(cap, in_len_ - in_pos_);
        std::memcpy(out, in_.get() + in_pos_, n);
        in_pos_ += n;
        return static_cast<long>(n);
      }
      if (eof_) {
        return 0;
      }
      const size_t n = std::fread(out, 1, cap, file_);
      file_bytes_ += n;
      if (n < cap) {
        eof_ = true;
        if (std::ferror(file_)) {
          Fail("read error");
          return -1;
        }
      }
      return static_cast<long>(n);
    }
    size_t got = 0;
    while (got < cap && !done_) {
      if (zs_.avail_in == 0 && !FillInput()) {
        if (!error_.empty()) {
          break;
        }
        Fail("unexpected end of file");
        break;
      }
      zs_.next_out = out + got;
      zs_.avail_out = static_cast<uInt>(cap - got);
      const int ret = inflate(&zs_, Z_NO_FLUSH);
      const size_t produced = static_cast<size_t>(zs_.next_out - (out + got));
      if (own_check_ && produced > 0) {
        crc_ = Crc32(crc_, out + got, produced);
      }
      got += produced;
      if (ret == Z_STREAM_END) {
        if (!MemberEnd()) {
          break;
        }
      } else if (ret == Z_NEED_DICT || ret == Z_DATA_ERROR) {
        Fail(zs_.msg != nullptr ? zs_.msg : "compressed data error");
        break;
      } else if (ret == Z_MEM_ERROR) {
        Fail("out of memory");
        break;
      }
    }
    if (got > 0) {
      return static_cast<long>(got);
    }
    return error_.empty() ? 0 : -1;
  }
  uint64_t compressed_bytes_read() const { return file_bytes_; }
  // "<path>: <what>", as gzerror words it; empty when there was no error.
  const std::string& error() const { return error_; }

  static uint32_t Crc32(uint32_t crc, const unsigned char* p, size_t n) {
#if COMMPROF_CRC32_CLMUL
    static const bool clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (clmul && n >= 64) {
      const size_t blocks = n & ~size_t{15};
      crc = ~Crc32Clmul(p, blocks, ~crc);
      p += blocks;
      n -= blocks;
    }
#endif
    return static_cast<uint32_t>(crc32(crc, p, static_cast<uInt>(n)));
  }

 private:
  static constexpr size_t kInput = 1u << 20;

  bool Fail(const char* what) {
    if (error_.empty()) {
      error_ = path_ + ": " + what;
    }
    return false;
  }
  // Refills the input buffer once it is used up; false at the end of the file (or on an error).
  // The last 8 bytes of the old input are kept: a gzip trailer may straddle the two.
  bool FillInput() {
    if (eof_) {
      return false;
    }
    const size_t keep = std::min<size_t>(in_len_, 8);
    std::memmove(last_ + 8 - keep, in_.get() + in_len_ - keep, keep);
    in_len_ = std::fread(in_.get(), 1, kInput, file_);
    in_pos_ = 0;
    file_bytes_ += in_len_;
    if (in_len_ < kInput) {
      eof_ = true;
      if (std::ferror(file_)) {
        return Fail("read error");
      }
    }
    zs_.next_in = in_.get();
    zs_.avail_in = static_cast<uInt>(in_len_);
    return in_len_ > 0;
  }
  // After a member: checks its trailer, then starts the next member if one follows.
  bool MemberEnd() {
    if (own_check_) {
      unsigned char t[8];
      const size_t in_buf = static_cast<size_t>(zs_.next_in - in_.get());
      for (size_t i = 0; i < 8; ++i) {
        const size_t back = 8 - i;  // bytes before next_in
        t[i] = back <= in_buf ? zs_.next_in[-static_cast<ptrdiff_t>(back)] : last_[8 - (back - in_buf)];
      }
      const uint32_t want_crc = t[0] | t[1] << 8 | t[2] << 16 | static_cast<uint32_t>(t[3]) << 24;
      const uint32_t want_len = t[4] | t[5] << 8 | t[6] << 16 | static_cast<uint32_t>(t[7]) << 24;
      if (want_crc != crc_) {
        return Fail("incorrect data check");
      }
      if (want_len != static_cast<uint32_t>(zs_.total_out)) {
        return Fail("incorrect length check");
      }
    }
    // Another member needs its two magic bytes in view.
    if (zs_.avail_in < 2 && !eof_) {
      unsigned char carry = zs_.avail_in == 1 ? zs_.next_in[0] : 0;
      const bool had_one = zs_.avail_in == 1;
      if (had_one) {
        // Re-read with the one pending byte first.
        const size_t n = std::fread(in_.get() + 1, 1, kInput - 1, file_);
        file_bytes_ += n;
        if (n < kInput - 1) {
          eof_ = true;
        }
        in_[0] = carry;
        in_len_ = n + 1;
        zs_.next_in = in_.get();
        zs_.avail_in = static_cast<uInt>(in_len_);
      } else {
        FillInput();
      }
      if (!error_.empty()) {
        return false;
      }
    }
    if (zs_.avail_in >= 2 && zs_.next_in[0] == 0x1f && zs_.next_in[1] == 0x8b) {
      inflateReset(&zs_);
      crc_ = 0;
      return true;
    }
    done_ = true;  // end of the data (trailing bytes ignored)
    return true;
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<unsigned char[]> in_;
  size_t in_len_ = 0, in_pos_ = 0;
  unsigned char last_[8] = {};
  bool eof_ = false, gzip_ = false, inflating_ = false, own_check_ = false, done_ = false;
  z_stream zs_{};
  uint32_t crc_ = 0;
  uint64_t file_bytes_ = 0;
  std::string error_;
};

// A pull source of decompressed bytes that can copy out the span between BeginCapture and
// EndCapture even when it crosses chunk boundaries.
class ByteSource {
 public:
  // kJsonPadding spare bytes after a full chunk: a capture that lies inside one chunk is handed
  // out in place, and simdjson may read (never use) that far past its end.
  ByteSource(Input& input, const JsonStreamCallbacks& cb) : input_(input), cb_(cb), buf_(kChunk + kJsonPadding) {}

  // Next byte without consuming it; -1 at the end of the data (or a read error, see error()).
  int Peek() {
    if (pos_ == len_ && !Refill()) {
      return -1;
    }
    return static_cast<unsigned char>(buf_[pos_]);
  }
  int Get() {
    int c = Peek();
    if (c >= 0) {
      ++pos_;
    }
    return c;
  }
  void SkipSpace() {
    for (;;) {
      if (pos_ == len_ && !Refill()) {
        return;
      }
      char c = buf_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        return;
      }
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
      if (pos_ == len_ && !Refill()) {
        return false;
      }
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
      if (c < 0) {
        return false;
      }
      if (!escaped && c == '"') {
        return true;
      }
      escaped = !escaped && c == '\\';
      if (out != nullptr) {
        out->push_back(static_cast<char>(c));
      }
    }
  }
  // Consumes any JSON value; false when the data ends inside it.
  bool SkipValue() {
    int c = Peek();
    if (c == '{' || c == '[') {
      return SkipComposite();
    }
    if (c == '"') {
      return SkipString(nullptr);
    }
    bool any = false;
    for (;;) {
      c = Peek();
      if (c < 0) {
        return any;
      }
      if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        return any;
      }
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
    if (into.empty()) {
      return std::string_view(buf_.data() + capture_from_, pos_ - capture_from_);
    }
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
      if (st.escaped) {
        st.escaped = false;
      } else if (ch == '\\') {
        st.escaped = true;
      } else if (ch == '"') {
        st.in_string = false;
      }
      return false;
    }
    if (ch == '"') {
      st.in_string = true;
    } else if (ch == '{' || ch == '[') {
      ++st.depth;
    } else if (ch == '}' || ch == ']') {
      if (--st.depth == 0) {
        return true;
      }
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
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + static_cast<ptrdiff_t>(16) * k));
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
      if (st.in_string) {
        in_string = ~in_string;
      }
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
    if (!read_error_.empty()) {
      return false;
    }
    const long n = input_.Read(reinterpret_cast<unsigned char*>(buf_.data()), kChunk);
    if (n <= 0) {
      if (n < 0) {
        read_error_ = input_.error().empty() ? "read error" : input_.error();
      }
      return false;
    }
    len_ = static_cast<size_t>(n);
    if (cb_.progress) {
      cb_.progress(input_.compressed_bytes_read());
    }
    return true;
  }

  Input& input_;
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
      if (c < 0) {
        return Fail("the file is empty");
      }
      return Fail("the top-level value is not an object (a Kineto trace is {\"traceEvents\": [...], ...})");
    }
    bool saw_events = false;
    src_.SkipSpace();
    if (src_.Peek() == '}') {
      src_.Get();
    } else {
      for (;;) {
        src_.SkipSpace();
        if (src_.Peek() != '"') {
          return Unexpected("a member name");
        }
        std::string key;
        if (!src_.SkipString(&key)) {
          return Truncated("in a member name");
        }
        src_.SkipSpace();
        if (src_.Get() != ':') {
          return Unexpected("':' after member \"" + key + "\"");
        }
        src_.SkipSpace();
        if (key == "traceEvents") {
          saw_events = true;
          COMMPROF_RETURN_IF_ERROR(ReadEvents());
        } else {
          src_.BeginCapture(value_);
          bool ok = src_.SkipValue();
          std::string_view value = src_.EndCapture();
          if (!ok) {
            return Truncated("in the value of \"" + key + "\"");
          }
          if (cb_.member) {
            COMMPROF_RETURN_IF_ERROR(cb_.member(key, value));
          }
        }
        src_.SkipSpace();
        c = src_.Get();
        if (c == ',') {
          continue;
        }
        if (c == '}') {
          break;
        }
        if (c < 0) {
          return Truncated("after member \"" + key + "\"");
        }
        return Unexpected("',' or '}' after member \"" + key + "\"");
      }
    }
    src_.SkipSpace();
    if (src_.Peek() >= 0) {
      return Fail("unexpected data after the top-level object");
    }
    if (!src_.read_error().empty()) {
      return Truncated("");
    }
    if (!saw_events) {
      return Fail("no \"traceEvents\" member");
    }
    return Status::Ok();
  }

 private:
  Status ReadEvents() {
    if (src_.Get() != '[') {
      return Fail("\"traceEvents\" is not an array");
    }
    src_.SkipSpace();
    if (src_.Peek() == ']') {
      src_.Get();
      return Status::Ok();
    }
    for (uint64_t index = 0;; ++index) {
      src_.SkipSpace();
      int c = src_.Peek();
      if (c < 0) {
        return Truncated("before traceEvents[" + std::to_string(index) + "]");
      }
      if (c != '{') {
        return Fail("traceEvents[" + std::to_string(index) + "] is not an object");
      }
      src_.BeginCapture(event_);
      bool ok = src_.SkipComposite();
      std::string_view event = src_.EndCapture();
      if (!ok) {
        return Truncated("inside traceEvents[" + std::to_string(index) + "]");
      }
      if (cb_.event) {
        COMMPROF_RETURN_IF_ERROR(cb_.event(index, event));
      }
      src_.SkipSpace();
      c = src_.Get();
      if (c == ',') {
        continue;
      }
      if (c == ']') {
        return Status::Ok();
      }
      if (c < 0) {
        return Truncated("after traceEvents[" + std::to_string(index) + "]");
      }
      return Unexpected("',' or ']' after traceEvents[" + std::to_string(index) + "]");
    }
  }
  Status Fail(const std::string& what) {
    return Corrupt(path_ + ": " + what + " (at byte " + std::to_string(src_.offset()) + " of the JSON text)");
  }
  Status Unexpected(const std::string& expected) { return Fail("expected " + expected); }
  Status Truncated(const std::string& where) {
    const std::string& err = src_.read_error();
    const std::string at = " at byte " + std::to_string(src_.offset());
    // A gzip stream that decompressed but fails its CRC or length check (or inflate's own
    // checks) is damaged, not cut: say so rather than "truncated".
    if (!err.empty() && err.find("unexpected end of file") == std::string::npos) {
      return Corrupt(path_ + ": the compressed data is damaged (" + err + ")" + at + " of the JSON text" +
                     (where.empty() ? "" : ", " + where));
    }
    std::string why = err.empty() ? "" : " (" + err + ")";
    return Corrupt(path_ + ": the JSON text ends early" + (where.empty() ? "" : " " + where) + why + at +
                   ": truncated file?");
  }

  const std::string& path_;
  ByteSource& src_;
  const JsonStreamCallbacks& cb_;
  std::string value_;
  std::string event_;
};

}  // namespace

uint32_t GzipCrc32(uint32_t crc, const unsigned char* data, size_t size) { return Input::Crc32(crc, data, size); }

Status ReadKinetoJson(const std::string& path, const JsonStreamCallbacks& callbacks) {
  Input input;
  if (!input.Open(path)) {
    return IoError(path + ": cannot open");
  }
  ByteSource src(input, callbacks);
  Walker walker(path, src, callbacks);
  Status st = walker.Run();
  return st;
}

}  // namespace commprof::kineto
