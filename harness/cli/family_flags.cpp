#include "harness/cli/family_flags.h"

#include <CLI/CLI.hpp>

namespace tp {

void add_family_flags(CLI::App& command, FamilyFlags& flags) {
  for (const PipelineOption* o : all_pipeline_options()) {
    const std::string takes = pipelines_where(
        [&](const PipelineDescriptor& d) { return pipeline_option(d.name, o->key) == o; }, ", ");
    std::string help = takes + ": " + o->help + " (a case's " + o->syntax + ")";
    if (!o->default_value.empty()) help += "; default " + o->default_value;
    command.add_option("--" + o->flag, flags[o->key], help);
  }
}

std::string pipeline_option_flag(const std::string& key) {
  for (const PipelineOption* o : all_pipeline_options())
    if (o->key == key) return o->flag;
  return key;
}

Expected<OptionValues> family_flag_values(const FamilyFlags& flags, const std::string& pipeline) {
  OptionValues values;
  for (const PipelineOption* o : all_pipeline_options()) {
    auto it = flags.find(o->key);
    if (it == flags.end() || it->second.empty()) continue;
    if (Status s = set_pipeline_option(values, pipeline, o->key, it->second, "--" + o->flag);
        !s.ok())
      return Error("--" + o->flag + " " + it->second + ": " + s.error().message());
  }
  return ordered_options(pipeline, values);
}

}  // namespace tp
