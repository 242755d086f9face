// Comparing one checkpoint of a compiled run against the reference's value: the metrics every
// verdict, report and triage line is computed from. Shapes are checked first; non-finite
// elements are counted per side and left out of the numeric metrics, so one NaN cannot hide
// (or fake) the error of the rest.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/core/status.h"
#include "harness/core/tensor.h"

namespace tp {

struct WorstElement {
  Shape index;  // per dimension
  double got = 0, want = 0, abs_error = 0;
};

struct Metrics {
  int64_t count = 0;   // elements compared (both finite)
  double max_abs = 0;  // max |got - want|
  double max_rel = 0;  // max |got - want| / max(|want|, floor), floor = rel_floor * max|want|
  double rel_l2 = 0;   // ||got - want|| / ||want|| (0 when both are zero)
  double cosine = 1;   // <got, want> / (||got|| ||want||) (1 when both are zero)
  double ulp_median = 0, ulp_p99 = 0,
         ulp_max = 0;  // |got - want| in units of the last place of `compared` at want
  int64_t non_finite_got = 0, non_finite_want = 0;
  int64_t non_finite_new =
      0;  // non-finite in got where want is finite, or a different non-finite value
  // Rounding bias: each element's error in units of the last place of `compared` at want (at
  // want's rms for smaller elements), signed toward want's magnitude, s = (got - want) *
  // sign(want) / ulp (negative: toward zero). Round-to-nearest leaves its mean near zero; a store
  // that truncates pulls it toward zero. Reported, not judged (docs/tolerances.md).
  double bias_ulp = 0;        // mean of s
  double bias_se = 0;         // its standard error, sd(s) / sqrt(count)
  double ulp_rms = 0;         // root mean square of s
  double toward_zero = 0;     // fraction of elements with s < 0
  double away_from_zero = 0;  // fraction with s > 0
  // Over every compared element, in absolute terms: mean((got - want) * sign(want)) /
  // rms(got - want), in [-1, 1].
  double bias_ratio = 0;
  double want_max_abs = 0;  // max |want| over finite elements
  double headroom =
      0;  // largest finite value of `compared` / want_max_abs (inf for an all-zero want)
  std::vector<WorstElement> worst;  // up to five, largest abs error first
};

// `compared` is the dtype the compiled side stored (ULPs and headroom are in it); `rel_floor`
// keeps near-zero reference values from dominating max_rel.
Expected<Metrics> compare_tensors(const Tensor& got, const Tensor& want, DType compared,
                                  double rel_floor = 1e-3);

// The index (per dimension) of element `flat` of a row-major tensor of `shape`.
Shape unflatten_index(int64_t flat, const Shape& shape);

// The spacing of `dt`'s values at |x| (subnormal spacing below its smallest normal).
double ulp_at(double x, DType dt);

}  // namespace tp
