#include "reports/margins.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "harness/core/format.h"

namespace tp {
namespace {

double ratio(double tolerance, double error) {
  if (!std::isfinite(error)) return 0;
  return error > 0 ? tolerance / error : std::numeric_limits<double>::infinity();
}

std::string margin_number(double margin) {
  return std::isinf(margin) ? "no error" : printf_numbers("margin x%.3g", margin);
}

}  // namespace

std::optional<CheckpointMargin> checkpoint_margin(const CheckpointRecord& record) {
  if (!(record.tolerance_rel_l2 > 0)) return std::nullopt;
  CheckpointMargin m;
  m.checkpoint = &record;
  m.local = record.has_local;
  const Metrics& judged = m.local ? record.local : record.accumulated;
  if (judged.non_finite_new > 0) {
    m.measure = "non-finite";
    m.error = std::numeric_limits<double>::infinity();
    m.tolerance = 0;
    return m;
  }
  const double element =
      judged.want_max_abs > 0 ? judged.max_abs / judged.want_max_abs : judged.max_abs;
  const double by_l2 = ratio(record.tolerance_rel_l2, judged.rel_l2);
  const double by_element = record.tolerance_max_element > 0
                                ? ratio(record.tolerance_max_element, element)
                                : std::numeric_limits<double>::infinity();
  const bool l2 = by_l2 <= by_element;
  m.measure = l2 ? "rel L2" : "max element";
  m.error = l2 ? judged.rel_l2 : element;
  m.tolerance = l2 ? record.tolerance_rel_l2 : record.tolerance_max_element;
  m.margin = l2 ? by_l2 : by_element;
  return m;
}

std::optional<CheckpointMargin> worst_checkpoint(const CaseResult& result) {
  std::optional<CheckpointMargin> worst;
  for (const CheckpointRecord& r : result.checkpoints)
    if (auto m = checkpoint_margin(r); m && (!worst || m->margin < worst->margin)) worst = m;
  return worst;
}

std::string margin_text(const CheckpointMargin& m) {
  const std::string name = m.checkpoint->name + (m.local ? " (local)" : " (accumulated)");
  if (m.measure == "non-finite")
    return name + ": " +
           std::to_string(
               (m.local ? m.checkpoint->local : m.checkpoint->accumulated).non_finite_new) +
           " non-finite values where the reference is finite";
  return name + ": " + m.measure + printf_numbers(" %.2e, tolerance %.2e, ", m.error, m.tolerance) +
         margin_number(m.margin);
}

std::string margin_table(const CaseResult& result) {
  std::string s;
  for (const CheckpointRecord& r : result.checkpoints) {
    const auto m = checkpoint_margin(r);
    s += "      " + (m ? margin_text(*m) : r.name + ": not compared") +
         (m && m->local ? printf_numbers("; accumulated rel L2 %.2e", r.accumulated.rel_l2) : "") +
         (r.passed ? "" : "  FAILED") + "\n";
  }
  return s;
}

}  // namespace tp
