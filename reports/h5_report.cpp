#include "reports/h5_report.h"

#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "reports/h5_util.h"

namespace tp {
namespace {

using namespace h5;

// --- compound tables ---------------------------------------------------------------------

constexpr std::size_t kNameLen = 192;

struct MetricsRow {
  int64_t count, nonfinite_got, nonfinite_want, nonfinite_new;
  double max_abs, max_rel, rel_l2, cosine, ulp_median, ulp_p99, ulp_max, ref_max_abs, headroom;
};

struct CheckpointRow {
  char name[kNameLen];
  char graph[32];
  int32_t group;
  char op_class[16];
  char dtype[8];
  MetricsRow acc;
  uint8_t has_local;
  MetricsRow local;
  double tol_rel_l2, tol_max_element;
  char tol_basis[48];
  uint8_t passed;
};

struct WorstRow {
  char checkpoint[kNameLen];
  uint8_t local;
  int32_t rank;
  char index[48];
  double got, want, abs_error;
};

struct InputRow {
  char name[kNameLen];
  double value;
};

struct StreamRow {
  char resolution[16];
  char input_shape[48];
  int64_t compilations, total_compilations;
  double compile_seconds;
  int64_t arena_bytes, peak_arena_bytes, evictions, need_bytes;
  uint8_t refused;
  int64_t exact_compilations;
  double bucket_vs_exact_max_abs;
  char note[kNameLen];
};

#define TP_FIELD(type, struct_, member, h5type) \
  H5Tinsert(type, #member, HOFFSET(struct_, member), h5type)

void insert_metrics(hid_t type, std::size_t base, const std::string& prefix) {
  auto field = [&](const char* name, std::size_t off, hid_t t) {
    H5Tinsert(type, (prefix + name).c_str(), base + off, t);
  };
  field("count", HOFFSET(MetricsRow, count), H5T_NATIVE_INT64);
  field("max_abs", HOFFSET(MetricsRow, max_abs), H5T_NATIVE_DOUBLE);
  field("max_rel", HOFFSET(MetricsRow, max_rel), H5T_NATIVE_DOUBLE);
  field("rel_l2", HOFFSET(MetricsRow, rel_l2), H5T_NATIVE_DOUBLE);
  field("cosine", HOFFSET(MetricsRow, cosine), H5T_NATIVE_DOUBLE);
  field("ulp_median", HOFFSET(MetricsRow, ulp_median), H5T_NATIVE_DOUBLE);
  field("ulp_p99", HOFFSET(MetricsRow, ulp_p99), H5T_NATIVE_DOUBLE);
  field("ulp_max", HOFFSET(MetricsRow, ulp_max), H5T_NATIVE_DOUBLE);
  field("nonfinite_got", HOFFSET(MetricsRow, nonfinite_got), H5T_NATIVE_INT64);
  field("nonfinite_want", HOFFSET(MetricsRow, nonfinite_want), H5T_NATIVE_INT64);
  field("nonfinite_new", HOFFSET(MetricsRow, nonfinite_new), H5T_NATIVE_INT64);
  field("ref_max_abs", HOFFSET(MetricsRow, ref_max_abs), H5T_NATIVE_DOUBLE);
  field("headroom", HOFFSET(MetricsRow, headroom), H5T_NATIVE_DOUBLE);
}

struct Types {
  Handle name{string_type(kNameLen), H5Tclose}, s32{string_type(32), H5Tclose},
      s16{string_type(16), H5Tclose}, s8{string_type(8), H5Tclose}, s48{string_type(48), H5Tclose};
  Handle checkpoint{H5Tcreate(H5T_COMPOUND, sizeof(CheckpointRow)), H5Tclose};
  Handle worst{H5Tcreate(H5T_COMPOUND, sizeof(WorstRow)), H5Tclose};
  Handle input{H5Tcreate(H5T_COMPOUND, sizeof(InputRow)), H5Tclose};
  Handle stream{H5Tcreate(H5T_COMPOUND, sizeof(StreamRow)), H5Tclose};
  Types() {
    hid_t c = checkpoint.get();
    TP_FIELD(c, CheckpointRow, name, name.get());
    TP_FIELD(c, CheckpointRow, graph, s32.get());
    TP_FIELD(c, CheckpointRow, group, H5T_NATIVE_INT32);
    TP_FIELD(c, CheckpointRow, op_class, s16.get());
    TP_FIELD(c, CheckpointRow, dtype, s8.get());
    insert_metrics(c, HOFFSET(CheckpointRow, acc), "");
    TP_FIELD(c, CheckpointRow, has_local, H5T_NATIVE_UINT8);
    insert_metrics(c, HOFFSET(CheckpointRow, local), "local_");
    TP_FIELD(c, CheckpointRow, tol_rel_l2, H5T_NATIVE_DOUBLE);
    TP_FIELD(c, CheckpointRow, tol_max_element, H5T_NATIVE_DOUBLE);
    TP_FIELD(c, CheckpointRow, tol_basis, s48.get());
    TP_FIELD(c, CheckpointRow, passed, H5T_NATIVE_UINT8);
    hid_t w = worst.get();
    TP_FIELD(w, WorstRow, checkpoint, name.get());
    TP_FIELD(w, WorstRow, local, H5T_NATIVE_UINT8);
    TP_FIELD(w, WorstRow, rank, H5T_NATIVE_INT32);
    TP_FIELD(w, WorstRow, index, s48.get());
    TP_FIELD(w, WorstRow, got, H5T_NATIVE_DOUBLE);
    TP_FIELD(w, WorstRow, want, H5T_NATIVE_DOUBLE);
    TP_FIELD(w, WorstRow, abs_error, H5T_NATIVE_DOUBLE);
    hid_t in = input.get();
    TP_FIELD(in, InputRow, name, name.get());
    TP_FIELD(in, InputRow, value, H5T_NATIVE_DOUBLE);
    hid_t st = stream.get();
    TP_FIELD(st, StreamRow, resolution, s16.get());
    TP_FIELD(st, StreamRow, input_shape, s48.get());
    TP_FIELD(st, StreamRow, compilations, H5T_NATIVE_INT64);
    TP_FIELD(st, StreamRow, total_compilations, H5T_NATIVE_INT64);
    TP_FIELD(st, StreamRow, compile_seconds, H5T_NATIVE_DOUBLE);
    TP_FIELD(st, StreamRow, arena_bytes, H5T_NATIVE_INT64);
    TP_FIELD(st, StreamRow, peak_arena_bytes, H5T_NATIVE_INT64);
    TP_FIELD(st, StreamRow, evictions, H5T_NATIVE_INT64);
    TP_FIELD(st, StreamRow, need_bytes, H5T_NATIVE_INT64);
    TP_FIELD(st, StreamRow, refused, H5T_NATIVE_UINT8);
    TP_FIELD(st, StreamRow, exact_compilations, H5T_NATIVE_INT64);
    TP_FIELD(st, StreamRow, bucket_vs_exact_max_abs, H5T_NATIVE_DOUBLE);
    TP_FIELD(st, StreamRow, note, name.get());
  }
};

MetricsRow to_row(const Metrics& m) {
  return MetricsRow{m.count,   m.non_finite_got, m.non_finite_want, m.non_finite_new, m.max_abs,
                    m.max_rel, m.rel_l2,         m.cosine,          m.ulp_median,     m.ulp_p99,
                    m.ulp_max, m.want_max_abs,   m.headroom};
}
Metrics from_row(const MetricsRow& r) {
  Metrics m;
  m.count = r.count;
  m.non_finite_got = r.nonfinite_got;
  m.non_finite_want = r.nonfinite_want;
  m.non_finite_new = r.nonfinite_new;
  m.max_abs = r.max_abs;
  m.max_rel = r.max_rel;
  m.rel_l2 = r.rel_l2;
  m.cosine = r.cosine;
  m.ulp_median = r.ulp_median;
  m.ulp_p99 = r.ulp_p99;
  m.ulp_max = r.ulp_max;
  m.want_max_abs = r.ref_max_abs;
  m.headroom = r.headroom;
  return m;
}

Shape parse_index(const std::string& s) {
  Shape idx;
  for (const std::string& n : split_list(s, ',')) idx.push_back(std::stoll(n));
  return idx;
}

void write_provenance(hid_t parent, const Provenance& p, const Types& t) {
  Handle g(check_id(H5Gcreate2(parent, "provenance", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    "provenance"),
           H5Gclose);
  put_int(g.get(), "found", p.found);
  put_string(g.get(), "checkpoint", p.checkpoint);
  put_string(g.get(), "graph", p.graph);
  put_int(g.get(), "group", p.group);
  put_string(g.get(), "layer", p.layer);
  put_string(g.get(), "op", p.op);
  put_string(g.get(), "cause", p.cause);
  put_string(g.get(), "detail", p.detail);
  put_string(g.get(), "index", join_numbers(p.index, ','));
  put_double(g.get(), "value", p.value);
  put_double(g.get(), "reference_value", p.reference_value);
  put_double(g.get(), "reference_max_abs", p.reference_max_abs);
  put_double(g.get(), "dtype_max", p.dtype_max);
  std::vector<InputRow> rows(p.inputs.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    copy_string(rows[i].name, kNameLen, p.inputs[i].first);
    rows[i].value = p.inputs[i].second;
  }
  write_table(g.get(), "inputs", t.input.get(), rows);
}

Provenance read_provenance(hid_t parent, const Types& t) {
  Provenance p;
  if (H5Lexists(parent, "provenance", H5P_DEFAULT) <= 0) return p;
  Handle g(check_id(H5Gopen2(parent, "provenance", H5P_DEFAULT), "provenance"), H5Gclose);
  p.found = get_int(g.get(), "found") != 0;
  p.checkpoint = get_string(g.get(), "checkpoint");
  p.graph = get_string(g.get(), "graph");
  p.group = int(get_int(g.get(), "group"));
  p.layer = get_string(g.get(), "layer");
  p.op = get_string(g.get(), "op");
  p.cause = get_string(g.get(), "cause");
  p.detail = get_string(g.get(), "detail");
  p.index = parse_index(get_string(g.get(), "index"));
  p.value = get_double(g.get(), "value");
  p.reference_value = get_double(g.get(), "reference_value");
  p.reference_max_abs = get_double(g.get(), "reference_max_abs");
  p.dtype_max = get_double(g.get(), "dtype_max");
  for (const InputRow& r : read_table<InputRow>(g.get(), "inputs", t.input.get()))
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
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(std::size_t(std::max(rank, 0)));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    Tensor t(DType::kF32, Shape(dims.begin(), dims.end()));
    check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()), "dump");
    out.emplace_back(get_string(ds.get(), "name"), std::move(t));
  }
  return out;
}

void write_case(hid_t cases, std::size_t index, const CaseResult& c, const Types& t) {
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
  put_string(g.get(), "plan_stats", c.plan_stats);
  put_int(g.get(), "searched", c.searched);
  put_string(g.get(), "keep_fp32", join_list(c.keep_fp32, ','));
  put_string(g.get(), "search_note", c.search_note);
  put_int(g.get(), "search_runs", c.search_runs);
  std::vector<CheckpointRow> rows(c.checkpoints.size());
  std::vector<WorstRow> worst;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CheckpointRecord& r = c.checkpoints[i];
    CheckpointRow& row = rows[i];
    std::memset(&row, 0, sizeof row);
    copy_string(row.name, sizeof row.name, r.name);
    copy_string(row.graph, sizeof row.graph, r.graph);
    row.group = r.group;
    copy_string(row.op_class, sizeof row.op_class, r.op_class);
    copy_string(row.dtype, sizeof row.dtype, r.dtype);
    row.acc = to_row(r.accumulated);
    row.has_local = r.has_local;
    row.local = to_row(r.local);
    row.tol_rel_l2 = r.tolerance_rel_l2;
    row.tol_max_element = r.tolerance_max_element;
    copy_string(row.tol_basis, sizeof row.tol_basis, r.tolerance_basis);
    row.passed = r.passed;
    for (int side = 0; side < 2; ++side) {
      const std::vector<WorstElement>& ws = side ? r.local.worst : r.accumulated.worst;
      for (std::size_t k = 0; k < ws.size(); ++k) {
        WorstRow w{};
        copy_string(w.checkpoint, kNameLen, r.name);
        w.local = uint8_t(side);
        w.rank = int32_t(k);
        copy_string(w.index, sizeof w.index, join_numbers(ws[k].index, ','));
        w.got = ws[k].got;
        w.want = ws[k].want;
        w.abs_error = ws[k].abs_error;
        worst.push_back(w);
      }
    }
  }
  write_table(g.get(), "checkpoints", t.checkpoint.get(), rows);
  write_table(g.get(), "worst", t.worst.get(), worst);
  if (!c.stream.empty()) {
    std::vector<StreamRow> steps(c.stream.size());
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const StreamStep& s = c.stream[i];
      StreamRow& row = steps[i];
      std::memset(&row, 0, sizeof row);
      copy_string(row.resolution, sizeof row.resolution, s.resolution);
      copy_string(row.input_shape, sizeof row.input_shape, s.input_shape);
      row.compilations = s.compilations;
      row.total_compilations = s.total_compilations;
      row.compile_seconds = s.compile_seconds;
      row.arena_bytes = s.arena_bytes;
      row.peak_arena_bytes = s.peak_arena_bytes;
      row.evictions = s.evictions;
      row.need_bytes = s.need_bytes;
      row.refused = s.refused;
      row.exact_compilations = s.exact_compilations;
      row.bucket_vs_exact_max_abs = s.bucket_vs_exact_max_abs;
      copy_string(row.note, sizeof row.note, s.note);
    }
    write_table(g.get(), "stream", t.stream.get(), steps);
  }
  if (c.provenance.found || !c.provenance.detail.empty())
    write_provenance(g.get(), c.provenance, t);
  if (!c.dumps.empty()) write_dumps(g.get(), c.dumps);
}

CaseResult read_case(hid_t cases, const std::string& name, const Types& t) {
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
  c.plan_stats = get_string(g.get(), "plan_stats");
  c.searched = get_int(g.get(), "searched") != 0;
  c.keep_fp32 = split_list(get_string(g.get(), "keep_fp32"), ',');
  c.search_note = get_string(g.get(), "search_note");
  c.search_runs = int(get_int(g.get(), "search_runs"));
  for (const CheckpointRow& row :
       read_table<CheckpointRow>(g.get(), "checkpoints", t.checkpoint.get())) {
    CheckpointRecord r;
    r.name = row.name;
    r.graph = row.graph;
    r.group = row.group;
    r.op_class = row.op_class;
    r.dtype = row.dtype;
    r.accumulated = from_row(row.acc);
    r.has_local = row.has_local;
    r.local = from_row(row.local);
    r.tolerance_rel_l2 = row.tol_rel_l2;
    r.tolerance_max_element = row.tol_max_element;
    r.tolerance_basis = row.tol_basis;
    r.passed = row.passed;
    c.checkpoints.push_back(std::move(r));
  }
  for (const StreamRow& row : read_table<StreamRow>(g.get(), "stream", t.stream.get()))
    c.stream.push_back(StreamStep{
        row.resolution, row.input_shape, row.compilations, row.total_compilations,
        row.compile_seconds, row.arena_bytes, row.peak_arena_bytes, row.evictions, row.need_bytes,
        row.refused != 0, row.exact_compilations, row.bucket_vs_exact_max_abs, row.note});
  for (const WorstRow& w : read_table<WorstRow>(g.get(), "worst", t.worst.get()))
    for (CheckpointRecord& r : c.checkpoints)
      if (r.name == w.checkpoint) {
        (w.local ? r.local : r.accumulated)
            .worst.push_back(WorstElement{parse_index(w.index), w.got, w.want, w.abs_error});
        break;
      }
  c.provenance = read_provenance(g.get(), t);
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
      put_string(root, "utc_time", report.utc_time);
      put_string(root, "shard", report.shard);
      put_string(root, "summary", outcome_counts(report.cases));
      const Types types;
      Handle cases(
          check_id(H5Gcreate2(root, "cases", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "cases"),
          H5Gclose);
      for (std::size_t i = 0; i < report.cases.size(); ++i)
        write_case(cases.get(), i, report.cases[i], types);
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
    if (!file.ok()) return Error("cannot open the report " + path);
    const hid_t root = file.get();
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
    r.utc_time = get_string(root, "utc_time");
    r.shard = get_string(root, "shard");
    if (H5Lexists(root, "cases", H5P_DEFAULT) <= 0)
      return Error(path + " has no /cases group: not a twinpath report");
    const Types types;
    Handle cases(check_id(H5Gopen2(root, "cases", H5P_DEFAULT), "cases"), H5Gclose);
    for (const std::string& name : children(cases.get()))
      r.cases.push_back(read_case(cases.get(), name, types));
    return r;
  } catch (const H5Failure& f) {
    return Error("reading the report " + path + " failed at " + f.what +
                 "; the file is damaged or not a twinpath report");
  }
}

}  // namespace tp
