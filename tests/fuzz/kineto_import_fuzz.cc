// Fuzz target for the Kineto (torch.profiler Chrome trace) importer, analysis/load/kineto_*
// (docs/kineto-import.md): the bytes are one rank's trace file, or two when they hold the line
// "--rank--" (the text before it is rank0.json, after it rank1.json), so the matching of the
// ranks' collectives and the clock alignment run on hostile input too. Plain JSON or gzip, as the
// reader detects from the content. The job goes through ImportKineto, `commprof import kineto`'s
// entry point, with --align none and (on inputs of odd length) collective-ends.
//
// Besides "no crash, no sanitizer report, no hang", what the importer hands on must hold what its
// header promises: ranks sorted and distinct, every record's name_id inside its string table.
//
// Built like frame_decoder_fuzz (tests/fuzz/CMakeLists.txt): a libFuzzer target under the `fuzz`
// preset, else this file plus fuzz_replay_main.cc as kineto_import_replay, which replays the
// corpus and deterministic mutations of it (ctest KinetoImportFuzz.ReplaysCorpusAndMutations).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "analysis/load/kineto_import.h"
#include "fuzz_input_file.h"

namespace {

[[noreturn]] void Broken(const std::string& what) {
  std::fprintf(stderr, "kineto_import_fuzz: %s\n", what.c_str());
  std::abort();
}

void CheckJob(const commprof::kineto::ImportedJob& job) {
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const auto& r = job.ranks[i];
    if (i > 0 && job.ranks[i - 1].rank >= r.rank) Broken("ranks not sorted and distinct");
    for (const auto& e : r.trace.events) {
      if (e.name_id >= r.trace.strings.size()) {
        Broken("rank " + std::to_string(r.rank) + ": name_id " + std::to_string(e.name_id) + " past its " +
               std::to_string(r.trace.strings.size()) + " strings");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = commprof::fuzz;
  const auto& dir = fz::ScratchDir();
  std::string_view in(size == 0 ? "" : reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSplit = "\n--rank--\n";
  size_t cut = in.find(kSplit);
  commprof::kineto::ImportOptions options;
  auto put = [&](const char* name, std::string_view bytes) {
    auto p = dir / name;
    if (!fz::WriteBytes(p, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) return false;
    options.inputs.push_back(p.string());
    return true;
  };
  bool ok = cut == std::string_view::npos
                ? put("rank0.json", in)
                : put("rank0.json", in.substr(0, cut)) && put("rank1.json", in.substr(cut + kSplit.size()));
  if (ok) {
    options.align = size % 2 == 1 ? commprof::kineto::Align::kCollectiveEnds : commprof::kineto::Align::kNone;
    auto job = commprof::kineto::ImportKineto(options);
    if (job.ok()) CheckJob(job.value());
  }
  for (const auto& p : options.inputs) std::remove(p.c_str());
  return 0;
}
