// A whole pipeline on a device backend against the CPU emulation of the same plans. The two
// differ only in summation order, and rounding makes such differences grow through a
// pipeline's layers as any two correct implementations' do, so the pipeline-level test is not
// their distance but their accuracy: each against the fp32 reference, the device no worse than
// 1.5 times the emulation's error (which ci holds to the policy's bar), plus 1e-6 for outputs
// the emulation matches almost exactly. A second device run must give the same bits: a race
// (a copy or kernel not ordered on the stream) shows as run-to-run differences. Group by group,
// group_match.h holds each stored value to a few ulps.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "harness/core/tensor.h"
#include "tests/support/compare.h"

namespace tp::testing {

struct PipelineRuns {
  NamedTensors reference, emulated, device, device_again;
};

// Checks every output of `runs.device`; `record` stores the figures as test properties.
template <typename Record>
void expect_device_as_accurate_as_emulation(const PipelineRuns& runs, const std::string& what,
                                            Record record) {
  for (const auto& [name, got] : runs.device) {
    const Tensor* want = find_tensor(runs.reference, name);
    const Tensor* emulated = find_tensor(runs.emulated, name);
    const Tensor* again = find_tensor(runs.device_again, name);
    ASSERT_TRUE(want && emulated && again) << what << ": " << name << " missing from a run";
    const double device_err = relative_l2(got, *want), emulated_err = relative_l2(*emulated, *want);
    EXPECT_LE(device_err, 1.5 * emulated_err + 1e-6)
        << what << " " << name << ": the device is " << device_err
        << " from the fp32 reference, the emulation " << emulated_err;
    ASSERT_EQ(got.nbytes(), again->nbytes()) << what << " " << name;
    EXPECT_EQ(std::memcmp(got.raw(), again->raw(), got.nbytes()), 0)
        << what << " " << name << ": two device runs of the same input differ";
    char figure[96];
    std::snprintf(figure, sizeof figure, "device %.3e, emulation %.3e, between them %.3e",
                  device_err, emulated_err, relative_l2(got, *emulated));
    record(what + "." + name, figure);
  }
}

}  // namespace tp::testing
