// Suite files: plain text, one case or sweep per line, `#` comments. In a sweep, a comma list
// in any token (`w=f16,bf16`, `vae.encode,vae.decode`) and an integer range `A:B:STEP`
// (inclusive) in either dimension of `res` (`res=60:68:4x64`), and a range of drawn configs
// `model=random:FAMILY:A..B` (harness/models/config_space.h), expand to the cross product, the
// first token varying slowest. Each expanded line is parsed as a case (cases/case.h); the
// same case listed twice runs once. `res=tiling` generates the resolutions around the model's
// tiling boundaries (cases/tiling_points.h). Errors point at FILE:LINE:COLUMN and the token.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cases/case.h"

namespace tp {

// At most this many cases in one suite (or --case list): past it the expansion is refused
// before anything runs, naming the count and the line.
constexpr std::size_t kMaxSuiteCases = 20000;

// `source` names the text in errors ("ci", "my-suite.txt").
Expected<std::vector<Case>> expand_suite(std::string_view text, const std::string& source);

// A built-in suite by name (ci, nightly, field-reports), else a suite file.
Expected<std::vector<Case>> load_suite(const std::string& name_or_path);
const std::vector<std::string>& builtin_suite_names();
// The text of a built-in suite (compiled into the binary from cases/suites/NAME.txt).
const char* builtin_suite_text(const std::string& name);

}  // namespace tp
