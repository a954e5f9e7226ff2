// One pass over every readable rank's event rows that finds what the cross-rank analyses cannot
// take (docs/file-format.md#reading-rules): a row that ends before it starts, a collective
// sequence number a rank used twice, a collective the ranks disagree on, an unreadable chunk or string table. Such
// a rank is moved out of the reader's ranks into its faults (ProfileReader::MarkUnreadable), so the
// other ranks are still summarised and analysed and the bad one is named with its row.
#pragma once

#include <vector>

#include "analysis/load/profile_reader.h"

namespace commprof {

// Returns the number of ranks it marked unreadable.
size_t ScreenEventRows(ProfileReader& reader);
// The same, returning the faults it added (each naming its rank), in order: what a distributed
// command's screening process tells the others to leave out.
std::vector<RankFault> ScreenEventRowsLeftOut(ProfileReader& reader);
// How many ranks' string tables cannot be read (a part of ScreenEventRows that reads no events);
// marks nothing.
size_t UnreadableStringTables(const ProfileReader& reader);

}  // namespace commprof
