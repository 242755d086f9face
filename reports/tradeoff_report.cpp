#include "reports/tradeoff_report.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "reports/h5_rows.h"
#include "reports/svg_plot.h"

namespace tp {
namespace {

using namespace h5;

// A row of the points table: a policy point and whether it is on its resolution's Pareto front.
struct PointRow {
  PolicyPoint p;
  bool pareto = false;
};

const RowSchema<PointRow>& point_schema() {
  static const RowSchema<PointRow> s = [] {
    using P = PolicyPoint;
    RowSchema<P> point = {column("policy", &P::policy, 48),
                          column("resolution", &P::resolution, 16),
                          column("peer", &P::peer),
                          column("ran", &P::ran),
                          column("note", &P::note, 192),
                          column("rel_l2", &P::rel_l2),
                          column("max_abs", &P::max_abs),
                          column("psnr_db", &P::psnr_db),
                          column("non_finite", &P::non_finite),
                          column("seconds_median", &P::seconds_median),
                          column("seconds_min", &P::seconds_min),
                          column("seconds_max", &P::seconds_max),
                          column("repeats", &P::repeats),
                          column("peak_arena_bytes", &P::peak_arena_bytes),
                          column("weight_bytes", &P::weight_bytes)};
    RowSchema<PointRow> s;
    append_nested(s, "", &PointRow::p, point);
    s.push_back(column("pareto", &PointRow::pareto));
    Column<PointRow> worst{"worst_layers", ColumnType::kString, 512, {}, {}};
    worst.get = [](const PointRow& r) -> ColumnValue { return join_list(r.p.worst_layers, ';'); };
    worst.set = [](PointRow& r, const ColumnValue& v) {
      r.p.worst_layers = split_list(std::get<std::string>(v), ';');
    };
    s.push_back(worst);
    return s;
  }();
  return s;
}

void write_matrix(hid_t parent, const char* name, const std::vector<std::vector<double>>& rows,
                  std::size_t cols) {
  const hsize_t dims[2] = {rows.size(), cols};
  std::vector<double> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
  Handle ds(check_id(H5Dcreate2(parent, name, H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                H5P_DEFAULT),
                     name),
            H5Dclose);
  if (!flat.empty())
    check(H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, flat.data()), name);
}

void write_strings(hid_t parent, const char* name, const std::vector<std::string>& values) {
  std::vector<const char*> ptrs;
  for (const std::string& v : values) ptrs.push_back(v.c_str());
  const hsize_t n = values.size();
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  check(H5Tset_size(type.get(), H5T_VARIABLE), "string type");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "string charset");
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle ds(check_id(H5Dcreate2(parent, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                H5P_DEFAULT),
                     name),
            H5Dclose);
  if (n) check(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), name);
}

void put_header(hid_t root, const Tradeoff& t, const RunReport& h) {
  put_int(root, "schema_version", 1);
  put_string(root, "kind", "tradeoff");
  put_string(root, "tool_version", h.tool_version);
  put_string(root, "git_commit", h.git_commit);
  put_string(root, "command_line", h.command_line);
  put_string(root, "host", h.host);
  put_string(root, "utc_time", h.utc_time);
  put_string(root, "model", t.model);
  put_string(root, "pipeline", t.pipeline);
  put_string(root, "device", t.device);
  put_int(root, "repeats", t.repeats);
}

std::string readable_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : "; ") + i;
  return out;
}

std::string ms(double seconds) { return format_number(seconds * 1e3); }
std::string mib(int64_t bytes) { return format_number(double(bytes) / (1 << 20)); }
std::string psnr_text(const PolicyPoint& p, const Tradeoff& t) {
  if (!t.image_output) return "–";
  return std::isinf(p.psnr_db) ? "∞ (identical bytes)" : format_number(p.psnr_db);
}

}  // namespace

std::vector<std::size_t> pareto_front(const Tradeoff& t, const std::string& resolution) {
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < t.points.size(); ++i) {
    const PolicyPoint& a = t.points[i];
    if (a.resolution != resolution || a.peer || !a.ran || !std::isfinite(a.rel_l2) || a.non_finite)
      continue;
    bool dominated = false;
    for (const PolicyPoint& b : t.points)
      if (&b != &a && b.resolution == resolution && !b.peer && b.ran && !b.non_finite &&
          b.rel_l2 <= a.rel_l2 && std::max(b.seconds_max, b.seconds_median) < a.seconds_min)
        dominated = true;
    if (!dominated) front.push_back(i);
  }
  std::sort(front.begin(), front.end(), [&](std::size_t x, std::size_t y) {
    return t.points[x].seconds_median < t.points[y].seconds_median;
  });
  return front;
}

Status write_tradeoff_h5(const std::string& path, const Tradeoff& t, const RunReport& header) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return write_path_atomically(path, [&](const std::string& tmp) -> Status {
    try {
      Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
      if (!file.ok())
        return Error("cannot write " + path + "; check that its folder exists and is writable");
      const hid_t root = file.get();
      put_header(root, t, header);
      std::vector<PointRow> rows;
      for (const PolicyPoint& p : t.points) rows.push_back({p, false});
      for (const TradeoffResolution& res : t.resolutions)
        for (std::size_t i : pareto_front(t, res.resolution)) rows[i].pareto = true;
      write_rows(root, "points", point_schema(), rows);
      Handle group(check_id(H5Gcreate2(root, "resolutions", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                            "resolutions"),
                   H5Gclose);
      for (const TradeoffResolution& res : t.resolutions) {
        Handle g(check_id(H5Gcreate2(group.get(), res.resolution.c_str(), H5P_DEFAULT, H5P_DEFAULT,
                                     H5P_DEFAULT),
                          "resolution"),
                 H5Gclose);
        put_double(g.get(), "reference_seconds", res.reference_seconds);
        write_strings(g.get(), "layers", res.layers);
        write_matrix(g.get(), "f16_headroom", {res.f16_headroom}, res.f16_headroom.size());
        std::vector<std::string> policies;
        std::vector<std::vector<double>> acc, local;
        for (const PolicyPoint& p : t.points)
          if (p.resolution == res.resolution && p.layer_rel_l2.size() == res.layers.size()) {
            policies.push_back(p.policy);
            acc.push_back(p.layer_rel_l2);
            local.push_back(p.layer_local_rel_l2);
          }
        write_strings(g.get(), "policies", policies);
        write_matrix(g.get(), "layer_rel_l2", acc, res.layers.size());
        write_matrix(g.get(), "layer_local_rel_l2", local, res.layers.size());
      }
      check(H5Fflush(root, H5F_SCOPE_GLOBAL), "flush");
    } catch (const H5Failure& f) {
      return Error("writing " + path + " failed at " + f.what + " (disk full?)");
    }
    return Status();
  });
}

Status write_tradeoff_html(const std::string& path, const Tradeoff& t, const RunReport& header) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>twinpath tradeoff: "
    << markup_escape(t.model) << " " << markup_escape(t.pipeline)
    << "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}"
    << "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px "
       "7px;text-align:right}"
    << "th{background:#f2f2f2}td.l{text-align:left}tr.front "
       "td{background:#eef7ee}.note{color:#555;font-size:13px}</style></head><body>\n";
  o << "<h1>Precision/performance tradeoff: " << markup_escape(t.model) << ", "
    << markup_escape(t.pipeline) << "</h1>\n";
  o << "<p class=\"note\">twinpath " << markup_escape(header.tool_version) << " ("
    << markup_escape(header.git_commit) << ") on " << markup_escape(header.host) << ", "
    << markup_escape(t.device) << ", " << markup_escape(header.utc_time) << ". Error: the compiled "
    << "path's output against the fp32 reference on the same procedural picture. Time: median of "
    << t.repeats
    << " runs after a warm-up (the bar through each point: its fastest to its slowest run), "
       "plans compiled once. Memory: the session's peak arena bytes; "
       "weights as stored.<br><code>"
    << markup_escape(header.command_line) << "</code></p>\n";
  for (const TradeoffResolution& res : t.resolutions) {
    o << "<h2>" << markup_escape(res.resolution) << "</h2>\n";
    const std::vector<std::size_t> front = pareto_front(t, res.resolution);
    std::vector<PlotSeries> scatter;
    std::vector<PlotSeries> profiles, locals;
    for (std::size_t i = 0; i < t.points.size(); ++i) {
      const PolicyPoint& p = t.points[i];
      if (p.resolution != res.resolution || !p.ran) continue;
      PlotSeries s;
      s.name = p.peer ? p.policy + " (peer)" : p.policy;
      s.points = {{p.seconds_median * 1e3, p.rel_l2}};
      s.x_spread = {{p.seconds_min * 1e3, std::max(p.seconds_max, p.seconds_median) * 1e3}};
      s.titles = {s.name + ": rel L2 " + format_number(p.rel_l2) + ", median " +
                  ms(p.seconds_median) + " ms of " + std::to_string(p.repeats) + " runs (" +
                  ms(p.seconds_min) + " to " + ms(p.seconds_max) + ")"};
      if (p.peer) s.colour = "#000";
      scatter.push_back(s);
      if (p.peer) continue;
      PlotSeries prof;
      prof.name = p.policy;
      prof.lines = true;
      prof.markers = false;
      PlotSeries loc = prof;
      for (std::size_t k = 0; k < p.layer_rel_l2.size(); ++k) {
        prof.points.emplace_back(double(k), p.layer_rel_l2[k]);
        loc.points.emplace_back(double(k), p.layer_local_rel_l2[k]);
      }
      profiles.push_back(prof);
      locals.push_back(loc);
    }
    PlotSeries pareto;  // rings, not a line: points whose timings overlap share the front
    pareto.name = "on the Pareto front";
    pareto.rings = true;
    pareto.colour = "#000";
    for (std::size_t i : front) {
      pareto.points.emplace_back(t.points[i].seconds_median * 1e3, t.points[i].rel_l2);
      pareto.titles.push_back(t.points[i].policy + " is on the Pareto front");
    }
    scatter.push_back(pareto);
    o << svg_plot("Output error vs time per dtype policy", {"median time per run (ms)", false},
                  {"output relative L2 error vs fp32 reference", true}, scatter);
    o << svg_plot("Per-layer accumulated error (whole run)",
                  {"layer (execution order; names in the HDF5 report)", false},
                  {"relative L2 error at the layer's output", true}, profiles);
    o << svg_plot("Per-layer local error (each layer alone on the reference's inputs)",
                  {"layer (execution order)", false},
                  {"relative L2 error of the layer alone", true}, locals);
    PlotSeries head;
    head.name = "65504 / max|reference|";
    head.lines = true;
    head.markers = true;
    for (std::size_t k = 0; k < res.f16_headroom.size(); ++k) {
      head.points.emplace_back(double(k), res.f16_headroom[k]);
      head.titles.push_back(res.layers[k] + ": headroom " + format_number(res.f16_headroom[k]));
    }
    o << svg_plot("Per-layer f16 headroom (reference activations)",
                  {"layer (execution order; hover for names)", false},
                  {"f16 largest finite / max |activation|", true}, {head},
                  {{1.0, "below 1: the layer overflows f16"}});
    o << "<table><tr><th>policy</th><th>output rel L2</th><th>max abs</th><th>PSNR (dB, "
         "8-bit)</th><th>median ms</th>"
      << "<th>min ms</th><th>max ms</th><th>arena peak MiB</th><th>weights MiB</th><th "
         "class=\"l\">worst layers "
         "(local error / its tolerance)</th></tr>\n";
    for (std::size_t i = 0; i < t.points.size(); ++i) {
      const PolicyPoint& p = t.points[i];
      if (p.resolution != res.resolution) continue;
      const bool on_front = std::find(front.begin(), front.end(), i) != front.end();
      o << "<tr" << (on_front ? " class=\"front\"" : "") << "><td class=\"l\">"
        << markup_escape(p.policy) << (on_front ? " ★" : "") << (p.peer ? " (peer)" : "")
        << "</td>";
      if (!p.ran) {
        o << "<td class=\"l\" colspan=\"9\">not run: " << markup_escape(p.note) << "</td></tr>\n";
        continue;
      }
      o << "<td>" << format_number(p.rel_l2) << "</td><td>" << format_number(p.max_abs)
        << "</td><td>" << psnr_text(p, t) << "</td><td>" << ms(p.seconds_median) << "</td><td>"
        << ms(p.seconds_min) << "</td><td>" << ms(p.seconds_max) << "</td><td>"
        << (p.peer ? "–" : mib(p.peak_arena_bytes)) << "</td><td>"
        << (p.peer ? "–" : mib(p.weight_bytes)) << "</td><td class=\"l\">"
        << markup_escape(readable_list(p.worst_layers)) << "</td></tr>\n";
    }
    o << "</table>\n<p class=\"note\">★ Pareto front: no other policy is at least as "
         "accurate with its slowest run faster than this one's fastest (timings that overlap "
         "decide nothing). A peer (LibTorch's ops "
      << "doing the same work, black marker) is measured for comparison, not as a policy. "
         "Reference (fp32) run: "
      << format_number(res.reference_seconds) << " s.</p>\n";
  }
  o << "</body></html>\n";
  const std::string text = o.str();
  return write_file_atomically(path, [&](std::ostream& out) -> Status {
    out << text;
    return out ? Status() : Error("writing " + path + " failed (disk full?)");
  });
}

}  // namespace tp
