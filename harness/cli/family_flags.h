// The options families declare for their pipelines (PipelineOption), as flags of exec, triage
// and tradeoff: --FLAG VALUE for each, made from the registry, so a new family's options reach
// the command line without a line here.
#pragma once

#include <map>
#include <string>

#include "harness/core/status.h"
#include "harness/models/family.h"

namespace CLI {
class App;
}

namespace tp {

// Given values by option key ("" when the flag was not given).
using FamilyFlags = std::map<std::string, std::string>;

// Adds --FLAG for every option any family declares, each with its syntax, help and default.
void add_family_flags(CLI::App& command, FamilyFlags& flags);
// The flag of option `key` ("guidance" -> "guidance-scale").
std::string pipeline_option_flag(const std::string& key);
// The given flags checked for `pipeline` (an error names a flag the pipeline does not take),
// as a case's option values.
Expected<OptionValues> family_flag_values(const FamilyFlags& flags, const std::string& pipeline);

}  // namespace tp
