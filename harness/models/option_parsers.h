// Parsers for the options families declare (PipelineOption::parse): whole numbers and numbers in a
// range, written back in the canonical text a case id prints, and model names. Shared by the
// families; no family's names here.
#pragma once

#include <string>

#include "harness/models/family.h"

namespace tp {

// A whole number in [lo, hi]; canonical: its decimal digits. The error shows `syntax`.
std::function<Expected<std::string>(std::string_view)> whole_number_option(std::string syntax,
                                                                           int64_t lo, int64_t hi);
// A finite number with `valid` true; canonical: printf's %.9g. The error is `expected`.
std::function<Expected<std::string>(std::string_view)> number_option(
    std::function<bool(double)> valid, std::string expected);
// The options every denoising loop takes, as diffusers' pipelines name them: steps=N
// (num_inference_steps, 1 to 1000) and guidance=SCALE (guidance_scale, off at <= 1), with the
// pipeline's defaults.
PipelineOption steps_option(int default_steps);
PipelineOption guidance_option(double default_scale);
// Another model: a built-in config name or a folder, as written.
std::function<Expected<std::string>(std::string_view)> model_option();

}  // namespace tp
