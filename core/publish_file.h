// A one-line file written whole: a reader polling for it sees no file, the old one, or the new one
// complete, never a part (written beside it, then renamed into place). How `commprof aggregate`
// publishes its address and a relay its own (core/relay_rendezvous.h).
#pragma once

#include <string>
#include <string_view>

namespace commprof {

// Writes `line` and a newline to `path`; false when it could not be written or renamed.
bool PublishLine(const std::string& path, std::string_view line);

}  // namespace commprof
