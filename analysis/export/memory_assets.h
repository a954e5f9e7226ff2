// The memory timeline page's static assets, analysis/report/assets/memory.css and memory.js,
// embedded at build time like the report's (report/assets/embed_assets.cmake with PREFIX=Memory).
#pragma once

#include <string_view>

namespace commprof {

std::string_view MemoryCss();  // assets/memory.css: the page's style sheet
std::string_view MemoryJs();   // assets/memory.js: draws the charts and the hover read-out

}  // namespace commprof
