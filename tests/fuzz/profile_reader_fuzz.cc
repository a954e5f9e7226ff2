// Fuzz target for the reader of our own HDF5 files, analysis/load/profile_reader.* (every command
// that takes a .h5 opens it through ProfileReader::Open): the bytes are a file handed to
// `commprof info`/`report`; each is opened, and when that succeeds every rank's string table and
// events are read, as `info --events` and the analysis do.
//
// HDF5 itself (Debian's libhdf5, not instrumented) parses the container; a crash inside it on a
// malformed file is still a crash of commprof and is reported like any other.
//
// Besides "no crash, no sanitizer report, no hang", what the reader hands on must hold what its
// header promises: ranks sorted and distinct, and the events of a rank no more than its table
// holds (event_count, when the reader gives one, is what ForEachEventChunk delivers).
//
// Built like frame_decoder_fuzz (tests/fuzz/CMakeLists.txt): a libFuzzer target under the `fuzz`
// preset, else this file plus fuzz_replay_main.cc as profile_reader_replay (ctest
// ProfileReaderFuzz.ReplaysCorpus). Seeds: profile_seed_gen writes real files with the
// aggregator's Hdf5Writer; corpus_h5/ holds the minimised corpus.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "analysis/load/profile_reader.h"
#include "core/h5/h5_util.h"
#include "fuzz_input_file.h"

namespace {

[[noreturn]] void Broken(const std::string& what) {
  std::fprintf(stderr, "profile_reader_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = commprof::fuzz;
  static const bool quiet = [] {
    commprof::h5::QuietErrors();  // the reader turns HDF5's own error stack into messages
    return true;
  }();
  (void)quiet;
  const auto path = fz::ScratchDir() / "in.h5";
  if (!fz::WriteBytes(path, data, size)) return 0;
  auto reader = commprof::ProfileReader::Open(path.string());
  if (reader.ok()) {
    const auto& info = reader.value()->info();
    for (size_t i = 0; i < info.ranks.size(); ++i) {
      const auto& r = info.ranks[i];
      if (i > 0 && info.ranks[i - 1].rank >= r.rank) Broken("ranks not sorted and distinct");
      (void)reader.value()->Strings(r.rank);
      uint64_t n = 0;
      auto st =
          reader.value()->ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) { n += chunk.size(); });
      if (st.ok() && r.event_count != 0 && n != r.event_count) {
        Broken("rank " + std::to_string(r.rank) + ": event_count " + std::to_string(r.event_count) + ", " +
               std::to_string(n) + " events read");
      }
    }
  }
  std::remove(path.c_str());
  return 0;
}
