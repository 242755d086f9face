#include "reports/h5_report.h"

#include <hdf5.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <sstream>

#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "reports/h5_rows.h"
#include "reports/result_schema.h"

namespace tp {
namespace {

using namespace h5;

void write_provenance(hid_t parent, const Provenance& p) {
  Handle g(check_id(H5Gcreate2(parent, "provenance", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    "provenance"),
           H5Gclose);
  put_int(g.get(), "found", p.found);
  put_string(g.get(), "checkpoint", p.checkpoint);
  put_string(g.get(), "graph", p.graph);
  put_string(g.get(), "step", p.step);
  put_int(g.get(), "group", p.group);
  put_string(g.get(), "layer", p.layer);
  put_string(g.get(), "op", p.op);
  put_string(g.get(), "stored_layer", p.stored_layer);
  put_string(g.get(), "stored_op", p.stored_op);
  put_string(g.get(), "cause", p.cause);
  put_string(g.get(), "detail", p.detail);
  put_string(g.get(), "index", join_numbers(p.index, ','));
  put_double(g.get(), "value", p.value);
  put_double(g.get(), "reference_value", p.reference_value);
  put_double(g.get(), "reference_max_abs", p.reference_max_abs);
  put_double(g.get(), "dtype_max", p.dtype_max);
  std::vector<OriginInput> rows;
  for (const auto& [name, value] : p.inputs) rows.push_back({name, value});
  write_rows(g.get(), "inputs", origin_input_schema(), rows);
}

Provenance read_provenance(hid_t parent) {
  Provenance p;
  if (H5Lexists(parent, "provenance", H5P_DEFAULT) <= 0) return p;
  Handle g(check_id(H5Gopen2(parent, "provenance", H5P_DEFAULT), "provenance"), H5Gclose);
  p.found = get_int(g.get(), "found") != 0;
  p.checkpoint = get_string(g.get(), "checkpoint");
  p.graph = get_string(g.get(), "graph");
  p.step = get_string(g.get(), "step");
  p.group = int(get_int(g.get(), "group"));
  p.layer = get_string(g.get(), "layer");
  p.op = get_string(g.get(), "op");
  if (H5Aexists(g.get(), "stored_layer") > 0) {  // reports before issue 18 lack them
    p.stored_layer = get_string(g.get(), "stored_layer");
    p.stored_op = get_string(g.get(), "stored_op");
  }
  p.cause = get_string(g.get(), "cause");
  p.detail = get_string(g.get(), "detail");
  for (const std::string& n : split_list(get_string(g.get(), "index"), ','))
    p.index.push_back(h5::parse_whole(n, "origin index"));
  p.value = get_double(g.get(), "value");
  p.reference_value = get_double(g.get(), "reference_value");
  p.reference_max_abs = get_double(g.get(), "reference_max_abs");
  p.dtype_max = get_double(g.get(), "dtype_max");
  for (const OriginInput& r : read_rows(g.get(), "inputs", origin_input_schema()))
    p.inputs.emplace_back(r.name, r.value);
  return p;
}

void write_dumps(hid_t parent, const NamedTensors& dumps) {
  Handle g(check_id(H5Gcreate2(parent, "dumps", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "dumps"),
           H5Gclose);
  for (std::size_t i = 0; i < dumps.size(); ++i) {
    const Tensor t = dumps[i].second.to(DType::kF32);
    std::vector<hsize_t> dims(t.shape().begin(), t.shape().end());
    Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
    char name[32];
    std::snprintf(name, sizeof name, "%04zu", i);
    Handle ds(check_id(H5Dcreate2(g.get(), name, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                  H5P_DEFAULT, H5P_DEFAULT),
                       "dump"),
              H5Dclose);
    check(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()), "dump");
    put_string(ds.get(), "name", dumps[i].first);
  }
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}
std::vector<std::string> children(hid_t group) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names);
  return names;
}

NamedTensors read_dumps(hid_t parent) {
  NamedTensors out;
  if (H5Lexists(parent, "dumps", H5P_DEFAULT) <= 0) return out;
  Handle g(check_id(H5Gopen2(parent, "dumps", H5P_DEFAULT), "dumps"), H5Gclose);
  for (const std::string& n : children(g.get())) {
    Handle ds(check_id(H5Dopen2(g.get(), n.c_str(), H5P_DEFAULT), "dump"), H5Dclose);
    Handle space(check_id(H5Dget_space(ds.get()), "dump"), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0 || rank > 8) throw H5Failure{"dump"};
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "dump");
    // Dumps are stored uncompressed: a shape whose floats would not fit in the file is damage,
    // not a reason to allocate.
    Handle file(check_id(H5Iget_file_id(ds.get()), "dump"), H5Fclose);
    hsize_t file_bytes = 0;
    check(H5Fget_filesize(file.get(), &file_bytes), "dump");
    hsize_t bytes = sizeof(float);
    for (hsize_t d : dims) {
      if (d != 0 && bytes > file_bytes / d) throw H5Failure{"dump"};
      bytes *= d;
    }
    Tensor t(DType::kF32, Shape(dims.begin(), dims.end()));
    check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()), "dump");
    out.emplace_back(get_string(ds.get(), "name"), std::move(t));
  }
  return out;
}

void write_case(hid_t cases, std::size_t index, const CaseResult& c) {
  char name[32];
  std::snprintf(name, sizeof name, "%06zu", index);
  Handle g(check_id(H5Gcreate2(cases, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "case group"),
           H5Gclose);
  put_string(g.get(), "id", c.id);
  put_int(g.get(), "ordinal", c.ordinal);
  put_number(g.get(), "seed", c.seed, H5T_NATIVE_UINT64);
  put_string(g.get(), "outcome", outcome_name(c.outcome));
  put_string(g.get(), "reason", c.reason);
  put_string(g.get(), "repro", c.repro);
  put_string(g.get(), "device", c.device);
  put_double(g.get(), "reference_seconds", c.reference_seconds);
  put_double(g.get(), "compiled_seconds", c.compiled_seconds);
  put_int(g.get(), "peak_rss_bytes", c.peak_rss_bytes);
  put_string(g.get(), "plan_stats", c.plan_stats);
  put_int(g.get(), "searched", c.searched);
  put_string(g.get(), "keep_fp32", join_list(c.keep_fp32, ','));
  put_string(g.get(), "search_note", c.search_note);
  put_int(g.get(), "search_runs", c.search_runs);
  std::vector<WorstRow> worst;
  for (const CheckpointRecord& r : c.checkpoints)
    for (bool local : {false, true}) {
      const std::vector<WorstElement>& ws = local ? r.local.worst : r.accumulated.worst;
      for (std::size_t k = 0; k < ws.size(); ++k)
        worst.push_back(WorstRow{r.name, local, int32_t(k), ws[k].index, ws[k].got, ws[k].want,
                                 ws[k].abs_error});
    }
  write_rows(g.get(), "checkpoints", checkpoint_schema(), c.checkpoints);
  write_rows(g.get(), "worst", worst_schema(), worst);
  if (!c.stream.empty()) write_rows(g.get(), "stream", stream_schema(), c.stream);
  if (!c.contract.empty()) write_rows(g.get(), "contract", contract_row_schema(), c.contract);
  if (!c.plans.empty()) write_rows(g.get(), "plans", plan_summary_schema(), c.plans);
  if (c.provenance.found || !c.provenance.detail.empty()) write_provenance(g.get(), c.provenance);
  if (!c.dumps.empty()) write_dumps(g.get(), c.dumps);
}

CaseResult read_case(hid_t cases, const std::string& name) {
  Handle g(check_id(H5Gopen2(cases, name.c_str(), H5P_DEFAULT), "case group"), H5Gclose);
  CaseResult c;
  c.id = get_string(g.get(), "id");
  c.ordinal = get_int(g.get(), "ordinal");
  c.seed = get_number<uint64_t>(g.get(), "seed", H5T_NATIVE_UINT64);
  if (!parse_outcome(get_string(g.get(), "outcome"), c.outcome)) throw H5Failure{"case outcome"};
  c.reason = get_string(g.get(), "reason");
  c.repro = get_string(g.get(), "repro");
  c.device = get_string(g.get(), "device");
  c.reference_seconds = get_double(g.get(), "reference_seconds");
  c.compiled_seconds = get_double(g.get(), "compiled_seconds");
  c.peak_rss_bytes = get_int(g.get(), "peak_rss_bytes");  // 0 in reports before issue 45
  c.plan_stats = get_string(g.get(), "plan_stats");
  c.searched = get_int(g.get(), "searched") != 0;
  c.keep_fp32 = split_list(get_string(g.get(), "keep_fp32"), ',');
  c.search_note = get_string(g.get(), "search_note");
  c.search_runs = int(get_int(g.get(), "search_runs"));
  c.checkpoints = read_rows(g.get(), "checkpoints", checkpoint_schema());
  c.stream = read_rows(g.get(), "stream", stream_schema());
  c.contract = read_rows(g.get(), "contract", contract_row_schema());
  c.plans = read_rows(g.get(), "plans", plan_summary_schema());
  for (const WorstRow& w : read_rows(g.get(), "worst", worst_schema()))
    for (CheckpointRecord& r : c.checkpoints)
      if (r.name == w.checkpoint) {
        (w.local ? r.local : r.accumulated)
            .worst.push_back(WorstElement{w.index, w.got, w.want, w.abs_error});
        break;
      }
  c.provenance = read_provenance(g.get());
  c.dumps = read_dumps(g.get());
  return c;
}

}  // namespace

Status write_h5_report(const std::string& path, const RunReport& report) {
  H5Eset_auto2(H5E_DEFAULT, nullptr,
               nullptr);  // errors become our messages, not HDF5's stack dumps
  return write_path_atomically(path, [&](const std::string& tmp) -> Status {
    try {
      Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
      if (!file.ok())
        return Error("cannot write the report " + path +
                     "; check that its folder exists and is writable");
      const hid_t root = file.get();
      put_int(root, "schema_version", report.schema_version);
      put_string(root, "tool_version", report.tool_version);
      put_string(root, "git_commit", report.git_commit);
      put_string(root, "command_line", report.command_line);
      put_string(root, "host", report.host);
      put_string(root, "device", report.device);
      put_string(root, "backend", report.backend);
      put_string(root, "utc_time", report.utc_time);
      put_string(root, "shard", report.shard);
      put_string(root, "summary", outcome_counts(report.cases));
      put_int(root, "incomplete", report.incomplete);
      std::string not_run;
      for (const auto& [ordinal, id] : report.not_run)
        not_run += std::to_string(ordinal) + " " + id + "\n";
      put_string(root, "not_run", not_run);
      Handle cases(
          check_id(H5Gcreate2(root, "cases", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "cases"),
          H5Gclose);
      for (std::size_t i = 0; i < report.cases.size(); ++i)
        write_case(cases.get(), i, report.cases[i]);
      check(H5Fflush(root, H5F_SCOPE_GLOBAL), "flush");
    } catch (const H5Failure& f) {
      return Error("writing the report " + path + " failed at " + f.what + " (disk full?)");
    }
    return Status();
  });
}

Expected<RunReport> read_h5_report(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (!std::filesystem::exists(path))
    return Error(path + ": no such report; pass a file written by `twinpath run --report`");
  if (H5Fis_hdf5(path.c_str()) <= 0)
    return Error(path + " is not an HDF5 file; pass a report written by `twinpath run --report`");
  try {
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.ok())
      return Error("cannot open the report " + path +
                   ": libhdf5 cannot open it, so the file is likely damaged or truncated; restore "
                   "it, or rerun what wrote it");
    const hid_t root = file.get();
    if (H5Aexists(root, "kind") > 0 && get_string(root, "kind") == "tradeoff")
      return Error(path +
                   " is a report of `twinpath tradeoff` (error and speed per policy), not of a "
                   "run: open the page report.html beside it, or read its points table with "
                   "h5py; `report show` reads the reports of `twinpath run` and `triage`");
    RunReport r;
    r.schema_version = int(get_int(root, "schema_version"));
    if (r.schema_version != kReportSchemaVersion)
      return Error(path + " has report schema " + std::to_string(r.schema_version) +
                   ", this twinpath reads schema " + std::to_string(kReportSchemaVersion) +
                   "; use the twinpath that wrote it");
    r.tool_version = get_string(root, "tool_version");
    r.git_commit = get_string(root, "git_commit");
    r.command_line = get_string(root, "command_line");
    r.host = get_string(root, "host");
    r.device = get_string(root, "device");
    if (H5Aexists(root, "backend") > 0) r.backend = get_string(root, "backend");
    r.utc_time = get_string(root, "utc_time");
    r.shard = get_string(root, "shard");
    if (H5Aexists(root, "incomplete") > 0) {  // reports before issue 18 lack them
      r.incomplete = get_int(root, "incomplete") != 0;
      std::istringstream lines(get_string(root, "not_run"));
      for (std::string line; std::getline(lines, line);) {
        int64_t ordinal = 0;
        const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), ordinal);
        if (ec != std::errc() || end == line.data() + line.size() || *end != ' ')
          return Error(path + ": its not_run list holds '" + line +
                       "', not 'ORDINAL CASE-ID'; rerun the suite instead of resuming");
        r.not_run.emplace_back(ordinal, line.substr(std::size_t(end - line.data()) + 1));
      }
    }
    if (H5Lexists(root, "cases", H5P_DEFAULT) <= 0)
      return Error(path + " has no /cases group: not a twinpath report");
    Handle cases(check_id(H5Gopen2(root, "cases", H5P_DEFAULT), "cases"), H5Gclose);
    for (const std::string& name : children(cases.get()))
      r.cases.push_back(read_case(cases.get(), name));
    return r;
  } catch (const H5Failure& f) {
    return Error("reading the report " + path + " failed at " + f.what +
                 "; the file is damaged or not a twinpath report");
  } catch (const std::bad_alloc&) {
    return Error("reading the report " + path +
                 " asked for more memory than a report of its size needs; the file is likely "
                 "damaged: restore it, or rerun what wrote it");
  }
}

}  // namespace tp
