// Every input a fuzz target once crashed, hung or tripped a sanitizer on (tests/fuzz/regressions/
// TARGET/) is refused by its reader with a sentence, in the ordinary build too; a new regression
// file without a row here fails the last test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cases/case.h"
#include "harness/core/tensor_io.h"
#include "harness/models/family.h"
#include "reports/baseline.h"
#include "reports/h5_report.h"
#include "tests/support/test_name.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

const fs::path kRegressions = fs::path(TWINPATH_SOURCE_DIR) / "tests/fuzz/regressions";

struct Regression {
  const char* file;     // under tests/fuzz/regressions
  const char* refusal;  // what the reader's error says
};

std::ostream& operator<<(std::ostream& os, const Regression& r) { return os << r.file; }

const Regression kFound[] = {
    {"npy/shape-not-a-number.npy", "is not a whole number; the file is corrupt"},
    {"baseline/tab-line.txt", "a line of tabs alone"},
    {"h5_report/table-extent-huge.h5", "the file is damaged or not a twinpath report"},
    {"case_line/stream-empty.txt", "stream= names no resolution"},
    {"model_config/int-field-2.5e88.json", "has the wrong type or is out of range"},
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

template <class T>
Status status_of(const Expected<T>& e) {
  return e.ok() ? Status() : Status(e.error());
}

// The reader the file's target fuzzes, as the target calls it.
Status read_as_its_target(const fs::path& file) {
  const std::string target = file.parent_path().filename().string();
  const std::string path = file.string();
  if (target == "npy") return status_of(read_npy(path));
  if (target == "baseline") return status_of(read_baseline(path));
  if (target == "h5_report") return status_of(read_h5_report(path));
  if (target == "case_line") return status_of(parse_case(read_text(file)));
  if (target == "model_config") {
    const nlohmann::json j = nlohmann::json::parse(read_text(file), nullptr, false);
    if (j.is_discarded()) return Error("not JSON");
    return status_of(parse_model_config(j, path));
  }
  return Error("no reader for target " + target);
}

class FuzzRegression : public ::testing::TestWithParam<Regression> {};

TEST_P(FuzzRegression, IsRefusedWithASentence) {
  const Status s = read_as_its_target(kRegressions / GetParam().file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find(GetParam().refusal), std::string::npos) << s.error().message();
}

INSTANTIATE_TEST_SUITE_P(Found, FuzzRegression, ::testing::ValuesIn(kFound),
                         [](const ::testing::TestParamInfo<Regression>& info) {
                           return testing::test_name(info.param.file);
                         });

TEST(FuzzRegressions, EveryRegressionFileHasARow) {
  std::set<std::string> listed;
  for (const Regression& r : kFound) listed.insert(r.file);
  for (const auto& e : fs::recursive_directory_iterator(kRegressions)) {
    if (!e.is_regular_file()) continue;
    EXPECT_TRUE(listed.count(fs::relative(e.path(), kRegressions).string()))
        << e.path() << " has no row in tests/fuzz_regression_test.cpp";
  }
}

}  // namespace
}  // namespace tp
