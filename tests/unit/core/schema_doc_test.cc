// docs/file-format.md and the schema (core/schema/) must describe the same file: every column,
// attribute, dataset and enum value the code has is in the documentation's tables, with the
// same type and name, and the documentation lists nothing the code lacks.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "commprof/event.h"
#include "core/schema/analysis_tables.h"
#include "core/schema/enums.h"
#include "core/schema/file_schema.h"

namespace commprof::schema {
namespace {

// One markdown table: its header cells and its rows (cells trimmed, `\|` kept as `|`).
struct MdTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  // The cells of column `name` (by header), one per row.
  std::vector<std::string> Column(const std::string& name) const {
    size_t k = 0;
    while (k < header.size() && header[k] != name) {
      ++k;
    }
    std::vector<std::string> out;
    if (k == header.size()) {
      ADD_FAILURE() << "no column '" << name << "' in a table";
      return out;
    }
    for (const auto& r : rows) {
      out.push_back(k < r.size() ? r[k] : "");
    }
    return out;
  }
};

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> Cells(std::string line) {
  const std::string kBar = "\x01";
  for (size_t p = line.find("\\|"); p != std::string::npos; p = line.find("\\|", p)) {
    line.replace(p, 2, kBar);
  }
  std::vector<std::string> cells;
  std::stringstream ss(Trim(line));
  std::string cell;
  std::getline(ss, cell, '|');  // before the leading bar
  while (std::getline(ss, cell, '|')) {
    for (size_t p = cell.find(kBar); p != std::string::npos; p = cell.find(kBar)) {
      cell.replace(p, 1, "|");
    }
    cells.push_back(Trim(cell));
  }
  if (!cells.empty() && cells.back().empty()) {
    cells.pop_back();  // after the trailing bar
  }
  return cells;
}

// The tables of the section whose heading line is exactly `heading`, up to the next heading of
// the same or a higher level.
std::vector<MdTable> TablesUnder(const std::string& heading) {
  std::ifstream in(COMMPROF_FILE_FORMAT_DOC);
  EXPECT_TRUE(in.good()) << "cannot read " << COMMPROF_FILE_FORMAT_DOC;
  std::vector<MdTable> tables;
  std::string line;
  const size_t level = heading.find_first_not_of('#');
  bool inside = false;
  bool fenced = false;
  MdTable* open = nullptr;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
    }
    if (!fenced && line.rfind("#", 0) == 0) {
      const size_t l = line.find_first_not_of('#');
      if (inside && l <= level) {
        break;
      }
      if (line == heading) {
        inside = true;
      }
      open = nullptr;
      continue;
    }
    if (!inside || fenced) {
      continue;
    }
    if (line.rfind("|", 0) != 0) {
      open = nullptr;
      continue;
    }
    if (open == nullptr) {
      open = &tables.emplace_back();
      open->header = Cells(line);
    } else if (line.find("---") != std::string::npos && open->rows.empty()) {
      continue;  // the alignment row
    } else {
      open->rows.push_back(Cells(line));
    }
  }
  EXPECT_TRUE(inside) << "no heading '" << heading << "' in " << COMMPROF_FILE_FORMAT_DOC;
  return tables;
}

// `name` -> name; "–" (no name) -> "".
std::string Unquote(const std::string& cell) {
  if (cell == "–") {
    return "";
  }
  if (cell.size() >= 2 && cell.front() == '`' && cell.back() == '`') {
    return cell.substr(1, cell.size() - 2);
  }
  return cell;
}

std::string OrEmpty(const char* s) { return s != nullptr ? s : ""; }

std::string DocType(const Column& c) {
  return c.type == ColumnType::kText ? "str[" + std::to_string(c.size) + "]" : ColumnTypeName(c.type);
}

// name -> (type, meaning) of a `| column/attribute | type | meaning |` table.
std::map<std::string, std::pair<std::string, std::string>> NameTypeDoc(const MdTable& t, const std::string& key) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  auto names = t.Column(key);
  auto types = t.Column("type");
  auto docs = t.Column("meaning");
  for (size_t i = 0; i < names.size(); ++i) {
    out[Unquote(names[i])] = {types[i], docs[i]};
  }
  return out;
}

void ExpectColumnsDocumented(std::span<const Column> columns, const std::string& heading) {
  auto tables = TablesUnder(heading);
  ASSERT_FALSE(tables.empty()) << heading;
  auto doc = NameTypeDoc(tables.back(), "column");
  std::map<std::string, std::pair<std::string, std::string>> code;
  for (const Column& c : columns) {
    code[c.name] = {DocType(c), OrEmpty(c.doc)};
  }
  EXPECT_EQ(code, doc) << heading << ": the code's columns (name -> type, meaning) differ from the documentation's";
  // The documented order is the stored order.
  auto names = tables.back().Column("column");
  ASSERT_EQ(names.size(), columns.size()) << heading;
  for (size_t i = 0; i < columns.size(); ++i) {
    EXPECT_EQ(Unquote(names[i]), columns[i].name) << heading << " row " << i;
  }
}

TEST(SchemaDoc, AnalysisTablesAndTheirColumns) {
  auto tables = TablesUnder("## The analysis group");
  ASSERT_GE(tables.size(), 2u);
  // The second table lists the datasets.
  std::map<std::string, std::string> doc;
  auto names = tables[1].Column("dataset");
  auto rows = tables[1].Column("one row per");
  for (size_t i = 0; i < names.size(); ++i) {
    doc[Unquote(names[i])] = rows[i];
  }
  std::map<std::string, std::string> code;
  for (const TableInfo& t : kAnalysisTables) {
    code[t.name] = t.row;
    ExpectColumnsDocumented(t.columns, std::string("### `") + t.name + "`");
  }
  ASSERT_EQ(doc.count(kReportJsonDataset), 1u);
  doc.erase(kReportJsonDataset);
  EXPECT_EQ(code, doc);
}

TEST(SchemaDoc, AnalysisAttributes) {
  auto tables = TablesUnder("## The analysis group");
  ASSERT_GE(tables.size(), 1u);
  std::map<std::string, std::pair<std::string, std::string>> code;
  for (const AttrInfo& a : kAnalysisAttrs) {
    code[a.name] = {AttrTypeName(a.type), OrEmpty(a.doc)};
  }
  EXPECT_EQ(code, NameTypeDoc(tables[0], "attribute"));
}

// name -> type of the schema's attributes.
std::map<std::string, std::string> AttrTypes(std::span<const AttrInfo> attrs) {
  std::map<std::string, std::string> out;
  for (const AttrInfo& a : attrs) {
    out[a.name] = AttrTypeName(a.type);
  }
  return out;
}

TEST(SchemaDoc, RootAttributes) {
  auto tables = TablesUnder("## Root attributes");
  ASSERT_EQ(tables.size(), 1u);
  std::map<std::string, std::string> doc;
  for (const auto& [name, type_doc] : NameTypeDoc(tables[0], "attribute")) {
    doc[name] = type_doc.first;
  }
  EXPECT_EQ(AttrTypes(kRootAttrs), doc);
}

TEST(SchemaDoc, RankAttributesTheWriterGivesEveryRank) {
  auto tables = TablesUnder("## /ranks/&lt;rank&gt; attributes");
  ASSERT_GE(tables.size(), 1u);
  const MdTable& t = tables[0];
  auto names = t.Column("attribute");
  auto types = t.Column("type");
  auto written = t.Column("written");
  std::map<std::string, std::string> doc;
  for (size_t i = 0; i < names.size(); ++i) {
    // The collector's counters ("bye only") are stored under the names it sends: not the schema's.
    if (written[i] == "bye only") {
      continue;
    }
    EXPECT_EQ(names[i].find(','), std::string::npos) << "one writer attribute per row: " << names[i];
    doc[Unquote(names[i])] = types[i];
  }
  EXPECT_EQ(AttrTypes(kRankAttrs), doc);
}

TEST(SchemaDoc, RankStatusValues) {
  auto tables = TablesUnder("### Status values");
  ASSERT_EQ(tables.size(), 1u);
  std::set<std::string> doc, code;
  for (const auto& s : tables[0].Column("status")) {
    doc.insert(Unquote(s));
  }
  for (const EnumEntry& e : RankStatuses()) {
    code.insert(e.name);
  }
  EXPECT_EQ(code, doc);
}

TEST(SchemaDoc, EventsCompoundType) {
  auto tables = TablesUnder("## The `events` dataset");
  ASSERT_GE(tables.size(), 1u);
  const MdTable& t = tables[0];
  auto offsets = t.Column("offset");
  auto fields = t.Column("field");
  auto h5types = t.Column("HDF5 type");
  auto numpy = t.Column("numpy");
  ASSERT_EQ(fields.size(), std::size(kEventColumns));
  const std::map<ColumnType, std::pair<std::string, std::string>> spelled = {
      {ColumnType::kU8, {"`H5T_STD_U8LE`", "`u1`"}},    {ColumnType::kU16, {"`H5T_STD_U16LE`", "`<u2`"}},
      {ColumnType::kU32, {"`H5T_STD_U32LE`", "`<u4`"}}, {ColumnType::kI32, {"`H5T_STD_I32LE`", "`<i4`"}},
      {ColumnType::kU64, {"`H5T_STD_U64LE`", "`<u8`"}}, {ColumnType::kI64, {"`H5T_STD_I64LE`", "`<i8`"}},
  };
  size_t end = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const Column& c = kEventColumns[i];
    EXPECT_EQ(Unquote(fields[i]), c.name) << "row " << i;
    EXPECT_EQ(offsets[i], std::to_string(c.offset)) << c.name;
    ASSERT_EQ(spelled.count(c.type), 1u) << c.name;
    EXPECT_EQ(h5types[i], spelled.at(c.type).first) << c.name;
    EXPECT_EQ(numpy[i], spelled.at(c.type).second) << c.name;
    EXPECT_EQ(c.offset, end) << c.name << ": the record has no padding";
    end = c.offset + c.size;
  }
  EXPECT_EQ(end, sizeof(commprof_event));
}

TEST(SchemaDoc, ClockTables) {
  ExpectColumnsDocumented(kClockPointColumns, "## The `clock_points` dataset");
  ExpectColumnsDocumented(kClockSampleColumns, "## The `clock_samples` dataset");
}

// value -> (C name, short name) of an enum table; `short_header` "" when the table has none.
std::map<uint32_t, std::pair<std::string, std::string>> DocEnum(const std::string& heading,
                                                                const std::string& value_header,
                                                                const std::string& short_header) {
  auto tables = TablesUnder(heading);
  std::map<uint32_t, std::pair<std::string, std::string>> out;
  if (tables.empty()) {
    ADD_FAILURE() << "no table under " << heading;
    return out;
  }
  auto values = tables[0].Column(value_header);
  auto names = tables[0].Column("name");
  auto shorts = short_header.empty() ? std::vector<std::string>(values.size()) : tables[0].Column(short_header);
  for (size_t i = 0; i < values.size(); ++i) {
    out[static_cast<uint32_t>(std::stoul(values[i]))] = {Unquote(names[i]), Unquote(shorts[i])};
  }
  return out;
}

std::map<uint32_t, std::pair<std::string, std::string>> CodeEnum(std::span<const EnumEntry> entries, bool with_short) {
  std::map<uint32_t, std::pair<std::string, std::string>> out;
  for (const EnumEntry& e : entries) {
    out[e.value] = {e.c_name, with_short ? OrEmpty(e.name) : ""};
  }
  return out;
}

TEST(SchemaDoc, Kinds) {
  auto doc = DocEnum("### `kind` (`enum commprof_kind`)", "value", "short name");
  // The documentation also lists the bound, which is not a kind.
  ASSERT_EQ(doc.count(COMMPROF_KIND_COUNT_), 1u);
  EXPECT_EQ(doc[COMMPROF_KIND_COUNT_].first, "COMMPROF_KIND_COUNT_");
  doc.erase(COMMPROF_KIND_COUNT_);
  EXPECT_EQ(CodeEnum(Kinds(), true), doc);
}

TEST(SchemaDoc, OpTypesWithTheirThreeNames) {
  auto tables = TablesUnder("### `subtype` (`enum commprof_op_type`)");
  ASSERT_GE(tables.size(), 1u);
  const MdTable& t = tables[0];
  auto values = t.Column("value");
  auto names = t.Column("name");
  auto shorts = t.Column("short name");
  auto kineto = t.Column("Kineto name");
  auto collective = t.Column("collective");
  std::map<uint32_t, std::vector<std::string>> doc, code;
  for (size_t i = 0; i < values.size(); ++i) {
    doc[static_cast<uint32_t>(std::stoul(values[i]))] = {Unquote(names[i]), Unquote(shorts[i]), Unquote(kineto[i]),
                                                         collective[i]};
  }
  for (const OpEntry& e : OpTypes()) {
    code[e.value] = {e.c_name, OrEmpty(e.name), OrEmpty(e.canonical), e.collective ? "yes" : "no"};
  }
  EXPECT_EQ(code, doc);
}

TEST(SchemaDoc, DatatypesReduceOpsFlagsAndMemoryKinds) {
  EXPECT_EQ(CodeEnum(Datatypes(), false), DocEnum("### `datatype` (`enum commprof_datatype`)", "value", ""));
  EXPECT_EQ(CodeEnum(ReduceOps(), false), DocEnum("### `reduce_op` (`enum commprof_reduce_op`)", "value", ""));
  EXPECT_EQ(CodeEnum(EventFlags(), false), DocEnum("### `flags` (`enum commprof_event_flags`, bits)", "value", ""));
  EXPECT_EQ(CodeEnum(MemoryKinds(), true),
            DocEnum("### `memory_kind` (`CUpti_ActivityMemoryKind`)", "value", "short name"));
}

// The names the code prints come from these tables (one table, one lookup).
TEST(SchemaNames, LookupsFallBackForUnknownValues) {
  EXPECT_STREQ(KindName(COMMPROF_KIND_MPI_P2P), "mpi_p2p");
  EXPECT_STREQ(KindName(COMMPROF_KIND_NONE), "unknown");
  EXPECT_STREQ(KindName(200), "unknown");
  EXPECT_STREQ(OpName(COMMPROF_OP_WAITANY), "waitany");
  EXPECT_STREQ(OpName(COMMPROF_OP_NCCL_COMM_INIT), "nccl_comm_init");
  EXPECT_STREQ(OpName(COMMPROF_OP_NONE), "other");
  EXPECT_STREQ(CollectiveOpName(COMMPROF_OP_REDUCE_SCATTER_BLOCK), "reduce_scatter_block");
  EXPECT_STREQ(CollectiveOpName(COMMPROF_OP_SEND), "other");
  EXPECT_STREQ(CanonicalOpName(COMMPROF_OP_ALLTOALL), "AllToAll");
  EXPECT_STREQ(CanonicalOpName(COMMPROF_OP_SCAN), "Collective");
  EXPECT_STREQ(MemoryKindName(6), "device_static");
  EXPECT_STREQ(MemoryKindName(0), "unknown");
  EXPECT_STREQ(RankStatusName(RankStatus::kMissing), "missing");
}

// The count both readers of a failure message take from it (the reader's write_status, the root's
// relay failures): the digits before " events not stored", else 0.
TEST(WriteStatus, TheEventsNotStoredCountIsReadBackOrZero) {
  EXPECT_EQ(EventsNotStoredIn("failed: writing /ranks/3/events: No space left on device; 4096 events not stored"),
            4096u);
  EXPECT_EQ(EventsNotStoredIn("failed: relay on n1 (pid 7): its shard failed; 12 events not stored (in its ranks' "
                              "kept spools)"),
            12u);
  EXPECT_EQ(EventsNotStoredIn("18446744073709551615 events not stored"), 0u);  // 20 digits: not ours
  EXPECT_EQ(EventsNotStoredIn("9999999999999999999 events not stored"), 9999999999999999999u);
  EXPECT_EQ(EventsNotStoredIn("failed: some events not stored"), 0u);
  EXPECT_EQ(EventsNotStoredIn("failed: writing /analysis: No space left on device"), 0u);
  EXPECT_EQ(EventsNotStoredIn(""), 0u);
}

}  // namespace
}  // namespace commprof::schema
