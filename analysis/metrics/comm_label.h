// How every output names a communicator and its members, so the text report, the HTML report and
// the JSON's names agree: ids in hexadecimal ("0x100000001"; a 64-bit id is not printed through a
// double, which would round it), names as "MPI_COMM_WORLD", "MPI communicator 0x…" or "NCCL
// communicator 0x…", members as ranges ("ranks 0-3,8,10-12").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commprof {

std::string CommIdText(uint64_t comm_id);
std::string CommName(uint64_t comm_id, bool nccl);
// "ranks 0-3,8,10-12" for sorted world ranks (any order is sorted first), "rank 5" for one,
// "members unknown" for none; past `max_ranges` ranges the rest is counted ("…, 40 more").
std::string MemberRanks(std::vector<int64_t> ranks, size_t max_ranges = 16);

}  // namespace commprof
