// Collector configuration from COMMPROF_* environment variables.
#include "core/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock_domain.h"

namespace commprof {
namespace {

const char* const kVars[] = {"COMMPROF_AGGREGATOR",    "COMMPROF_SECRET",           "COMMPROF_JOB_ID",
                             "COMMPROF_SPOOL_DIR",     "COMMPROF_BUFFER_EVENTS",    "COMMPROF_MEMORY_MB",
                             "COMMPROF_FLUSH_MS",      "COMMPROF_REQUEST_SLOTS",    "COMMPROF_CONNECT_TIMEOUT_MS",
                             "COMMPROF_ACTIVITIES",    "COMMPROF_CUDA_API",         "COMMPROF_CUPTI_BUFFER_KB",
                             "COMMPROF_CUPTI_BUFFERS", "COMMPROF_AGGREGATOR_CLOCK", "COMMPROF_SHARD_DIR"};

// Clears the COMMPROF_* variables for one test and restores them afterwards.
class ConfigEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  static void Set(const char* name, const char* value) { ASSERT_EQ(setenv(name, value, 1), 0); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(ConfigEnv, DefaultsApplyWhenNothingIsSet) {
  Config c = ConfigFromEnv();
  EXPECT_EQ(c.aggregator, "");
  EXPECT_EQ(c.secret, "");
  EXPECT_EQ(c.job_id, "");
  EXPECT_EQ(c.spool_dir, "commprof-spool");
  EXPECT_EQ(c.buffer_events, 65536u);
  EXPECT_EQ(c.memory_mb, 256u);
  EXPECT_EQ(c.flush_ms, 20u);
  EXPECT_EQ(c.request_slots, 65536u);
  EXPECT_EQ(c.connect_timeout_ms, 5000u);
}

TEST_F(ConfigEnv, CuptiOptionsDefaultToLaunchCallsAnd16BuffersOf4MiBAndCapBuffersAt64) {
  Config c = ConfigFromEnv();
  EXPECT_EQ(c.cuda_api, "launch");
  EXPECT_EQ(c.cupti_buffer_kb, 4096u);
  EXPECT_EQ(c.cupti_buffers, 16u);
  Set("COMMPROF_CUDA_API", "all");
  Set("COMMPROF_CUPTI_BUFFER_KB", "1024");
  Set("COMMPROF_CUPTI_BUFFERS", "100");
  c = ConfigFromEnv();
  EXPECT_EQ(c.cuda_api, "all");
  EXPECT_EQ(c.cupti_buffer_kb, 1024u);
  EXPECT_EQ(c.cupti_buffers, 64u);
  Set("COMMPROF_CUPTI_BUFFER_KB", "8");  // below the 64 KiB minimum: the default, with a warning
  Set("COMMPROF_CUPTI_BUFFERS", "0");
  c = ConfigFromEnv();
  EXPECT_EQ(c.cupti_buffer_kb, 4096u);
  EXPECT_EQ(c.cupti_buffers, 16u);
}

TEST_F(ConfigEnv, EnvironmentOverridesEveryOption) {
  Set("COMMPROF_AGGREGATOR", "10.0.0.1:7777");
  Set("COMMPROF_SECRET", "hunter2");
  Set("COMMPROF_JOB_ID", "job-9");
  Set("COMMPROF_SPOOL_DIR", "/tmp/spool-here");
  Set("COMMPROF_BUFFER_EVENTS", "1024");
  Set("COMMPROF_MEMORY_MB", "64");
  Set("COMMPROF_FLUSH_MS", "5");
  Set("COMMPROF_REQUEST_SLOTS", "2048");
  Set("COMMPROF_CONNECT_TIMEOUT_MS", "0");
  Config c = ConfigFromEnv();
  EXPECT_EQ(c.aggregator, "10.0.0.1:7777");
  EXPECT_EQ(c.secret, "hunter2");
  EXPECT_EQ(c.job_id, "job-9");
  EXPECT_EQ(c.spool_dir, "/tmp/spool-here");
  EXPECT_EQ(c.buffer_events, 1024u);
  EXPECT_EQ(c.memory_mb, 64u);
  EXPECT_EQ(c.flush_ms, 5u);
  EXPECT_EQ(c.request_slots, 2048u);
  EXPECT_EQ(c.connect_timeout_ms, 0u);
}

// COMMPROF_AGGREGATOR_CLOCK, as `commprof run` writes it (FormatClockDomain of its clock's key):
// read back to the very key; anything but 16 hex digits is no key (the rank then measures).
TEST_F(ConfigEnv, TheAggregatorsClockKeyIsReadBackExactlyAndAnythingElseIsNoKey) {
  EXPECT_FALSE(ConfigFromEnv().aggregator_clock_domain.has_value());
  for (uint64_t key : {uint64_t{0}, uint64_t{255}, SystemClockDomain(), ~uint64_t{0}}) {
    const std::string text = FormatClockDomain(key);
    EXPECT_EQ(text.size(), 16u) << text;
    Set("COMMPROF_AGGREGATOR_CLOCK", text.c_str());
    EXPECT_EQ(ConfigFromEnv().aggregator_clock_domain, std::optional<uint64_t>(key)) << text;
  }
  Set("COMMPROF_AGGREGATOR_CLOCK", "00000000000000FF");  // upper case too
  EXPECT_EQ(ConfigFromEnv().aggregator_clock_domain, std::optional<uint64_t>(255));
  for (const char* bad : {"ff", "00000000000000ff0", "0000000000000x00", "-000000000000001", " 00000000000000f"}) {
    Set("COMMPROF_AGGREGATOR_CLOCK", bad);
    EXPECT_FALSE(ConfigFromEnv().aggregator_clock_domain.has_value()) << bad;
  }
}

// The relay reports its shard by this path to the job's aggregator, which links it from its own
// working directory: a relative one would name another file there.
TEST_F(ConfigEnv, ARelativeShardDirectoryIsTakenFromTheWorkingDirectory) {
  Set("COMMPROF_SHARD_DIR", "/abs/job.h5.shards");
  EXPECT_EQ(ConfigFromEnv().shard_dir, "/abs/job.h5.shards");
  Set("COMMPROF_SHARD_DIR", "rel/shards");
  std::array<char, 4096> cwd{};
  ASSERT_NE(::getcwd(cwd.data(), cwd.size()), nullptr);
  EXPECT_EQ(ConfigFromEnv().shard_dir, std::string(cwd.data()) + "/rel/shards");
}

TEST_F(ConfigEnv, LargestThirtyTwoBitValueIsAccepted) {
  Set("COMMPROF_CONNECT_TIMEOUT_MS", "4294967295");
  EXPECT_EQ(ConfigFromEnv().connect_timeout_ms, 4294967295u);
}

TEST_F(ConfigEnv, MalformedNumbersFallBackToTheDefault) {
  Set("COMMPROF_BUFFER_EVENTS", "12abc");
  Set("COMMPROF_MEMORY_MB", "");
  Set("COMMPROF_FLUSH_MS", "fast");
  Set("COMMPROF_REQUEST_SLOTS", "4294967296");  // does not fit in 32 bits
  Set("COMMPROF_CONNECT_TIMEOUT_MS", "-1");
  Config c = ConfigFromEnv();
  EXPECT_EQ(c.buffer_events, 65536u);
  EXPECT_EQ(c.memory_mb, 256u);
  EXPECT_EQ(c.flush_ms, 20u);
  EXPECT_EQ(c.request_slots, 65536u);
  EXPECT_EQ(c.connect_timeout_ms, 5000u);
}

TEST_F(ConfigEnv, NumbersBelowTheMinimumFallBackToTheDefault) {
  Set("COMMPROF_BUFFER_EVENTS", "15");  // minimum 16
  Set("COMMPROF_MEMORY_MB", "0");       // minimum 1
  Set("COMMPROF_FLUSH_MS", "0");        // minimum 1
  Set("COMMPROF_REQUEST_SLOTS", "8");   // minimum 16
  Config c = ConfigFromEnv();
  EXPECT_EQ(c.buffer_events, 65536u);
  EXPECT_EQ(c.memory_mb, 256u);
  EXPECT_EQ(c.flush_ms, 20u);
  EXPECT_EQ(c.request_slots, 65536u);
  Set("COMMPROF_BUFFER_EVENTS", "16");
  Set("COMMPROF_FLUSH_MS", "1");
  c = ConfigFromEnv();
  EXPECT_EQ(c.buffer_events, 16u);
  EXPECT_EQ(c.flush_ms, 1u);
}

TEST_F(ConfigEnv, ActivitiesDefaultToAllAndParseFromTheEnvironment) {
  EXPECT_EQ(ConfigFromEnv().activities, static_cast<uint32_t>(kActivityAll));
  Set("COMMPROF_ACTIVITIES", "mpi,nvtx");
  EXPECT_EQ(ConfigFromEnv().activities, static_cast<uint32_t>(kActivityMpi | kActivityNvtx));
  Set("COMMPROF_ACTIVITIES", "mpi,gpu");  // a bad list records everything rather than nothing
  EXPECT_EQ(ConfigFromEnv().activities, static_cast<uint32_t>(kActivityAll));
}

TEST(Activities, ParseEveryNameAndRejectUnknownOrRepeatedOnesByName) {
  uint32_t m = 0;
  std::string error;
  ASSERT_TRUE(ParseActivities("cpu,mpi,nccl,cuda,memory,nvtx", m, error));
  EXPECT_EQ(m, static_cast<uint32_t>(kActivityAll));
  ASSERT_TRUE(ParseActivities("memory", m, error));
  EXPECT_EQ(m, static_cast<uint32_t>(kActivityMemory));
  ASSERT_TRUE(ParseActivities("all", m, error));
  EXPECT_EQ(m, static_cast<uint32_t>(kActivityAll));
  EXPECT_FALSE(ParseActivities("mpi,CUDA", m, error));
  EXPECT_NE(error.find("'CUDA'"), std::string::npos) << error;
  EXPECT_FALSE(ParseActivities("mpi,,nvtx", m, error));
  EXPECT_NE(error.find("''"), std::string::npos) << error;
  EXPECT_FALSE(ParseActivities("nccl,nccl", m, error));
  EXPECT_NE(error.find("twice"), std::string::npos) << error;
  EXPECT_EQ(m, static_cast<uint32_t>(kActivityAll)) << "a failed parse leaves the mask alone";
  EXPECT_EQ(ActivitiesToString(kActivityAll), "cpu,mpi,nccl,cuda,memory,nvtx");
  EXPECT_EQ(ActivitiesToString(kActivityNvtx | kActivityCpu), "cpu,nvtx");
  EXPECT_EQ(ActivitiesToString(0), "none");
}

TEST(ConfigOptions, DeclaresEveryVariableOnceWithADescription) {
  auto opts = ConfigOptions();
  for (const char* v : kVars) {
    int found = 0;
    for (const auto& o : opts) {
      if (std::string_view(o.env) == v) {
        ++found;
        EXPECT_NE(std::string_view(o.description), "") << v;
      }
    }
    EXPECT_EQ(found, 1) << v;
  }
  bool has_log = false;
  for (const auto& o : opts) {
    has_log = has_log || std::string_view(o.env) == "COMMPROF_LOG";
  }
  EXPECT_TRUE(has_log);
}

// ---- the one table of environment variables against the docs and the code

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The "## Environment" section of docs/cli.md, up to the next "## " heading.
std::string EnvironmentSection() {
  std::string doc = ReadFile(std::filesystem::path(COMMPROF_SOURCE_DIR) / "docs" / "cli.md");
  size_t begin = doc.find("\n## Environment\n");
  if (begin == std::string::npos) {
    return {};
  }
  size_t end = doc.find("\n## ", begin + 1);
  return doc.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

std::set<std::string> TableNames() {
  std::set<std::string> names;
  for (const auto& o : EnvironmentVariables()) {
    names.insert(o.env);
  }
  return names;
}

TEST(EnvironmentVariables, EachIsDeclaredOnceWithAMeaning) {
  std::set<std::string> seen;
  for (const auto& o : EnvironmentVariables()) {
    EXPECT_TRUE(seen.insert(o.env).second) << o.env << " is declared twice";
    EXPECT_NE(std::string_view(o.description), "") << o.env;
  }
  for (const auto& o : ConfigOptions()) {
    EXPECT_EQ(o.reader, EnvReader::kCollector) << o.env;
  }
  size_t collector = 0;
  for (const auto& o : EnvironmentVariables()) {
    collector += o.reader == EnvReader::kCollector ? 1 : 0;
  }
  EXPECT_EQ(ConfigOptions().size(), collector) << "the collector's options are the table's first entries";
}

TEST(EnvironmentVariables, HelpEnvPrintsEveryVariableWithItsDefault) {
  std::string help = EnvironmentHelp();
  for (const auto& o : EnvironmentVariables()) {
    std::string line = "  " + std::string(o.env);
    if (*o.default_value != '\0') {
      line += std::string(" (default ") + o.default_value + ")";
    }
    line += std::string(": ") + o.description + "\n";
    EXPECT_NE(help.find(line), std::string::npos) << o.env;
  }
}

// docs/cli.md "Environment" has a row `| \`NAME\` | DEFAULT | meaning |` for every variable of the
// table, with the default in it, and no row for a variable the table lacks.
TEST(EnvironmentVariables, DocsListExactlyTheTable) {
  std::string section = EnvironmentSection();
  ASSERT_FALSE(section.empty()) << "docs/cli.md has no \"## Environment\" section";
  for (const auto& o : EnvironmentVariables()) {
    std::string row_start = "\n| `" + std::string(o.env) + "` |";
    size_t at = section.find(row_start);
    if (at == std::string::npos) {
      ADD_FAILURE() << o.env << " is read by commprof but has no row in docs/cli.md \"Environment\"";
      continue;
    }
    std::string row = section.substr(at + 1, section.find('\n', at + 1) - at - 1);
    std::string cell = "| `" + std::string(*o.default_value != '\0' ? o.default_value : "") + "`";
    if (*o.default_value == '\0') {
      cell = "| unset";
    }
    EXPECT_NE(row.find(cell), std::string::npos)
        << o.env << ": the docs row should give the default as " << cell << " |...: " << row;
  }
  std::set<std::string> names = TableNames();
  std::regex row_re(R"(\n\| `([A-Z][A-Z0-9_]+)` \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row_re); it != std::sregex_iterator(); ++it) {
    EXPECT_TRUE(names.count((*it)[1].str()) == 1)
        << (*it)[1].str() << " is documented in docs/cli.md \"Environment\" but not in kEnvironment (core/config.cc)";
  }
}

// The product code names no environment variable the table lacks: every string literal given to a
// getenv (getenv, secure_getenv, spank_getenv), and every literal that looks like one of the
// variable families commprof reads or sets (COMMPROF_*, SLURM_*, PMI*_*, OMPI_*, NCCL_*, NVTX_*,
// CUDA_*, LD_*), wherever it is (variables read through a list of names are found that way).
TEST(EnvironmentVariables, ProductCodeReadsNoUndeclaredVariable) {
  const std::filesystem::path root(COMMPROF_SOURCE_DIR);
  const std::regex getenv_re(R"((?:secure_getenv|getenv)\(\s*(?:[A-Za-z_]+\s*,\s*)?"([A-Za-z0-9_]+)\")");
  const std::regex family_re(R"re("((?:COMMPROF|SLURM|PMIX|PMI|OMPI|NCCL|NVTX|CUDA|LD)_[A-Z0-9_]+)")re");
  std::set<std::string> names = TableNames();
  size_t files = 0;
  for (const char* dir : {"aggregator", "analysis", "cli", "collector", "core", "include", "nccl_hooks", "slurm"}) {
    if (!std::filesystem::exists(root / dir)) {
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / dir)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".c" && ext != ".cu")) {
        continue;
      }
      ++files;
      const std::string text = ReadFile(entry.path());
      for (const std::regex* re : {&getenv_re, &family_re}) {
        for (auto it = std::sregex_iterator(text.begin(), text.end(), *re); it != std::sregex_iterator(); ++it) {
          EXPECT_TRUE(names.count((*it)[1].str()) == 1)
              << entry.path().lexically_relative(root).string() << " names the environment variable " << (*it)[1].str()
              << ", which kEnvironment (core/config.cc) does not declare";
        }
      }
    }
  }
  EXPECT_GT(files, 50u) << "the product sources were not found under " << root;
}

}  // namespace
}  // namespace commprof
