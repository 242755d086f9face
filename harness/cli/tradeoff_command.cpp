// `twinpath tradeoff`: error and cost per dtype policy and resolution, as report.h5 and a
// self-contained report.html in --out.
#include <filesystem>
#include <iostream>
#include <map>

#include "harness/cli/commands.h"
#include "harness/core/format.h"
#include "harness/runner/tradeoff.h"
#include "reports/tradeoff_report.h"
#ifdef TWINPATH_HAVE_TORCH
#include "reference/torch/torch_path.h"
#endif

namespace tp {

Expected<int> tradeoff_command(const TradeoffCommandOptions& o, const std::string& command_line) {
  namespace fs = std::filesystem;
  TradeoffOptions t;
  t.model = o.model;
  t.pipeline = o.pipeline;
  t.policies = o.policies;
  t.repeats = o.repeats;
  TP_ASSIGN_OR_RETURN(t.memory_budget, memory_budget_option(o.mem));
  TP_ASSIGN_OR_RETURN(t.device, compiled::parse_device(o.device));
  if (!o.pipeline.empty() && !is_pipeline_name(o.pipeline))
    return Error("--pipeline " + o.pipeline + " is unknown; use " + pipeline_choices());
  for (const auto& [key, value] : o.family)
    if (!value.empty() && o.pipeline.empty())
      return Error("--" + pipeline_option_flag(key) +
                   " is a pipeline's option: add --pipeline with the pipeline it is for");
  if (!o.pipeline.empty()) {
    TP_ASSIGN_OR_RETURN(t.options, family_flag_values(o.family, o.pipeline));
  }
  t.resolutions.clear();
  for (const std::string& r : split_list(o.resolutions, ',')) {
    Case c;
    if (Status s = apply_case_option(c, "res=" + r); !s.ok())
      return Error("--res " + r + ": " + s.error().message());
    t.resolutions.emplace_back(c.height, c.width);
  }
  if (t.resolutions.empty())
    return Error("--res needs at least one HEIGHTxWIDTH, e.g. --res 256x256,512x512");
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec || !fs::is_directory(o.out))
    return Error("cannot create the output folder " + o.out + ": " + ec.message());
  t.progress = [](const std::string& line) { std::cerr << line << std::endl; };
#ifdef TWINPATH_HAVE_TORCH
  // The peer: LibTorch's ops on the same graphs, fp32 on the CPU; f16 and bf16 on CUDA.
  const bool cuda = t.device == compiled::Device::kCuda;
  t.make_peers = [cuda](const Model&) -> Expected<std::vector<TradeoffPeer>> {
    std::vector<TradeoffPeer> peers;
    if (cuda && !torch_path::cuda_available())
      return std::vector<TradeoffPeer>{{"LibTorch CUDA", {}}};  // a row that says why
    for (DType dt :
         cuda ? std::vector<DType>{DType::kF16, DType::kBF16} : std::vector<DType>{DType::kF32}) {
      // One runner (its parameters converted once) per model the pipeline runs: a
      // text-to-image pipeline's UNet, refiner and VAE.
      auto runners =
          std::make_shared<std::map<const Weights*, std::unique_ptr<torch_path::Runner>>>();
      peers.push_back({std::string("LibTorch ") + (cuda ? "CUDA " : "CPU ") + dtype_name(dt),
                       [runners, dt, cuda](const Graph& g, const Weights& w,
                                           const NamedTensors& in) -> Expected<NamedTensors> {
                         std::unique_ptr<torch_path::Runner>& runner = (*runners)[&w];
                         if (!runner) {
                           auto made = torch_path::Runner::create(w, dt, cuda);
                           if (!made.ok()) return made.error();
                           runner = std::move(made).value();
                         }
                         return runner->run(g, in);
                       }});
    }
    return peers;
  };
#endif
  TP_ASSIGN_OR_RETURN(Tradeoff result, measure_tradeoff(t));
  const RunReport header = report_header(command_line, t.device);
  const std::string h5 = (fs::path(o.out) / "report.h5").string(),
                    html = (fs::path(o.out) / "report.html").string();
  TP_RETURN_IF_ERROR(write_tradeoff_h5(h5, result, header));
  TP_RETURN_IF_ERROR(write_tradeoff_html(html, result, header));
  int ran = 0;
  for (const PolicyPoint& p : result.points) ran += p.ran;
  std::cout << ran << " of " << result.points.size()
            << " policy x resolution points measured\nreport: " << h5 << "\npage: " << html << "\n";
  return 0;
}

}  // namespace tp
