// `twinpath selftest --device cuda`: one command for a GPU owner. The built-in suite `selftest`
// (small cases over every family, both CUDA kernel sets, CUDA graphs on and off, reload=on for
// the same bits in a fresh session) runs on the CUDA kernels with the numerics-contract check;
// the report (HDF5 and JUnit) and a short markdown summary go to --out.
#include <filesystem>
#include <iostream>

#include "compiled/device.h"
#include "harness/cli/commands.h"
#include "harness/core/atomic_file.h"
#include "reports/selftest_summary.h"

namespace tp {
namespace {

// The summary a GPU owner shares (reports/selftest_summary.h), written atomically.
Status write_summary(const std::string& path, const RunReport& r, int rc) {
  const std::string text =
      selftest_summary(r, rc == 0, cuda_device_description(0) + "; " + cuda_versions());
  return write_file_atomically(path, [&](std::ostream& os) {
    os << text;
    return Status();
  });
}

}  // namespace

Expected<int> selftest_command(const SelftestOptions& o, const std::string& command_line) {
  if (o.device != "cuda")
    return Error(
        "selftest checks a GPU's CUDA kernels: give --device cuda (`twinpath run --suite "
        "ci` checks the CPU's emulated kernels)");
  if (cuda_device_count() == 0)
    return Error("selftest --device cuda: no CUDA device is visible to this process (" +
                 cuda_versions() +
                 "); run it on a machine whose NVIDIA GPU and driver nvidia-smi lists, or check "
                 "the emulated kernels with `twinpath run --suite ci`");
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) return Error("--out " + o.out + ": cannot make the folder (" + ec.message() + ")");
  RunCommandOptions r;
  r.suite = "selftest";
  r.device = "cuda";
  r.report = o.out + "/selftest.h5";
  r.junit = o.out + "/selftest.xml";
  TP_ASSIGN_OR_RETURN(const int rc, run_command(r, command_line));
  TP_ASSIGN_OR_RETURN(const RunReport report, read_report_file(r.report));
  const std::string summary = o.out + "/summary.md";
  TP_RETURN_IF_ERROR(write_summary(summary, report, rc));
  std::cout << "summary: " << summary << "\n";
  return rc;
}

}  // namespace tp
