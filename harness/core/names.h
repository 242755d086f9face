// "Did you mean": the known name a mistyped one most likely stands for, for error messages;
// module globs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tp {

// The name among `names` that `typed` most likely meant: one that differs only in case or in
// '_' for '-', else the nearest within a few edits (one for names up to 4 characters, two up to
// 8, three beyond), the first of equals; "" when none is that near.
std::string closest_name(std::string_view typed, const std::vector<std::string>& names);
// "; did you mean X?" for closest_name's answer, or "" when it has none.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& names);

// Whether a module glob (`*` any run of characters, `?` one character) matches `name` whole.
bool glob_match(std::string_view pattern, std::string_view name);

}  // namespace tp
