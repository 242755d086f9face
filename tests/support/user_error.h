// A user error from the twinpath binary: exit code 2, one line naming the problem, never an
// internal error.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/support/command.h"

namespace tp::testing {

inline void expect_user_error(const std::string& args, const std::string& fragment) {
  const CommandResult r = twinpath(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

}  // namespace tp::testing
