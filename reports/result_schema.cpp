#include "reports/result_schema.h"

#include <stdexcept>

#include "harness/core/format.h"
#include "harness/core/numbers.h"

namespace tp {
namespace {

// A whole number written as text; anything else throws (a damaged file: the readers turn it
// into their sentence).
int64_t whole_number(const std::string& text) {
  if (const auto v = parse_number<int64_t>(text)) return *v;
  throw std::invalid_argument("'" + excerpt(text) + "' is not a whole number");
}

// An element index (a Shape) as a comma-separated string column.
template <class Row>
Column<Row> index_column(std::string name, Shape Row::*member) {
  Column<Row> c{std::move(name), ColumnType::kString, 48, {}, {}};
  c.get = [member](const Row& r) -> ColumnValue { return join_numbers(r.*member, ','); };
  c.set = [member](Row& r, const ColumnValue& v) {
    (r.*member).clear();
    for (const std::string& n : split_list(std::get<std::string>(v), ','))
      (r.*member).push_back(whole_number(n));
  };
  return c;
}

}  // namespace

const RowSchema<Metrics>& metrics_schema() {
  static const RowSchema<Metrics> s = {
      column("count", &Metrics::count),
      column("max_abs", &Metrics::max_abs),
      column("max_rel", &Metrics::max_rel),
      column("rel_l2", &Metrics::rel_l2),
      column("cosine", &Metrics::cosine),
      column("ulp_median", &Metrics::ulp_median),
      column("ulp_p99", &Metrics::ulp_p99),
      column("ulp_max", &Metrics::ulp_max),
      column("bias_ulp", &Metrics::bias_ulp),
      column("bias_se", &Metrics::bias_se),
      column("ulp_rms", &Metrics::ulp_rms),
      column("bias_ratio", &Metrics::bias_ratio),
      column("toward_zero", &Metrics::toward_zero),
      column("away_from_zero", &Metrics::away_from_zero),
      column("nonfinite_got", &Metrics::non_finite_got),
      column("nonfinite_want", &Metrics::non_finite_want),
      column("nonfinite_new", &Metrics::non_finite_new),
      column("ref_max_abs", &Metrics::want_max_abs),
      column("headroom", &Metrics::headroom),
  };
  return s;
}

const RowSchema<ContractMetrics>& contract_metrics_schema() {
  using R = ContractMetrics;
  static const RowSchema<R> s = {column("checked", &R::checked),
                                 column("decided", &R::decided),
                                 column("ambiguous", &R::ambiguous),
                                 column("violations", &R::violations),
                                 column("toward_zero", &R::toward_zero),
                                 column("worst_ulps", &R::worst_ulps),
                                 index_column("first", &R::first),
                                 column("got", &R::got),
                                 column("lo", &R::lo),
                                 column("hi", &R::hi)};
  return s;
}

const RowSchema<ContractRow>& contract_row_schema() {
  using R = ContractRow;
  static const RowSchema<R> s = {
      column("graph", &R::graph, 32), column("group", &R::group),
      column("point", &R::point, 16), column("name", &R::name, kNameWidth),
      column("dtype", &R::dtype, 8),  column("rounding", &R::rounding, kNameWidth)};
  return s;
}

const RowSchema<PlanSummary>& plan_summary_schema() {
  using R = PlanSummary;
  static const RowSchema<R> s = {column("graph", &R::graph, 64), column("groups", &R::groups),
                                 column("arena_bytes", &R::arena_bytes),
                                 column("rounding_points", &R::rounding_points)};
  return s;
}

const RowSchema<CheckpointRecord>& checkpoint_schema() {
  static const RowSchema<CheckpointRecord> s = [] {
    using R = CheckpointRecord;
    RowSchema<R> s = {column("name", &R::name, kNameWidth), column("graph", &R::graph, 32),
                      column("group", &R::group), column("op_class", &R::op_class, 16),
                      column("dtype", &R::dtype, 8)};
    append_nested(s, "", &R::accumulated, metrics_schema());
    s.push_back(column("has_local", &R::has_local));
    append_nested(s, "local_", &R::local, metrics_schema());
    s.push_back(column("tol_rel_l2", &R::tolerance_rel_l2));
    s.push_back(column("tol_max_element", &R::tolerance_max_element));
    s.push_back(column("tol_basis", &R::tolerance_basis, 96));
    append_nested(s, "contract_", &R::contract, contract_metrics_schema());
    s.push_back(column("passed", &R::passed));
    return s;
  }();
  return s;
}

const RowSchema<WorstRow>& worst_schema() {
  using R = WorstRow;
  static const RowSchema<R> s = {column("checkpoint", &R::checkpoint, kNameWidth),
                                 column("local", &R::local),
                                 column("rank", &R::rank),
                                 index_column("index", &R::index),
                                 column("got", &R::got),
                                 column("want", &R::want),
                                 column("abs_error", &R::abs_error)};
  return s;
}

const RowSchema<OriginInput>& origin_input_schema() {
  static const RowSchema<OriginInput> s = {column("name", &OriginInput::name, kNameWidth),
                                           column("value", &OriginInput::value)};
  return s;
}

const RowSchema<StreamStep>& stream_schema() {
  using R = StreamStep;
  static const RowSchema<R> s = {column("resolution", &R::resolution, 16),
                                 column("input_shape", &R::input_shape, 48),
                                 column("compilations", &R::compilations),
                                 column("total_compilations", &R::total_compilations),
                                 column("compile_seconds", &R::compile_seconds),
                                 column("arena_bytes", &R::arena_bytes),
                                 column("peak_arena_bytes", &R::peak_arena_bytes),
                                 column("evictions", &R::evictions),
                                 column("need_bytes", &R::need_bytes),
                                 column("refused", &R::refused),
                                 column("exact_compilations", &R::exact_compilations),
                                 column("bucket_vs_exact_max_abs", &R::bucket_vs_exact_max_abs),
                                 column("note", &R::note, kNameWidth),
                                 column("compiled_graphs", &R::compiled_graphs, kNameWidth)};
  return s;
}

}  // namespace tp
