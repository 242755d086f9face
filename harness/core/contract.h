// The compiled path's numerics contract as data: for every fused group, where it rounds. The
// CUDA kernels and the CPU emulation both promise it; an implementation of its own (the torch
// path's contract mode, reference/torch/contract_check.h) computes what it admits, so the
// promise is checked element by element by something other than the emulation.
//
// The parts every group shares: operands are read exactly from their storage (activations in
// their stored dtype, weights as stored, fp8 ones times an fp32 scale), everything inside the
// group is fp32, products accumulate in the accumulator dtype, norm statistics are taken in
// fp64 (two passes) and reach the fp32 arithmetic rounded once, softmax subtracts the row max,
// and each output is rounded once, to nearest even, overflowing to inf, into its storage dtype.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/core/checkpoint.h"
#include "harness/core/dtype_policy.h"
#include "harness/core/graph.h"
#include "harness/core/status.h"
#include "harness/core/tensor.h"

namespace tp {

// A parameter as the contract stores it: conv and linear matrices in the weight dtype (fp8 with
// an fp32 scale max|w| (or the clip= quantile of |w|) / the dtype's largest finite value, per
// output channel or per tensor,
// rounded to nearest even, saturating or not), biases and norm affines in the weight dtype, or
// in f32 under fp8 weights.
struct ContractParam {
  std::string key;
  bool matrix = false;  // a conv or linear weight matrix (the only parameters stored in fp8)
  bool bias = false;    // the op's bias (else its weight, or a norm's scale)
  DType dtype = DType::kF32;
  ScaleGranularity scale = ScaleGranularity::kPerChannel;  // fp8 only
  Saturation saturation = Saturation::kSaturate;           // fp8 only
  double clip = 1;            // fp8 only: the quantile of |w| the scale maps to the largest value
  bool unscaled = false;      // fp8 by a plain cast, without a scale (cast=layerwise)
  bool kept_in_fp32 = false;  // f32 because the model keeps it so (_keep_in_fp32_modules)
};

struct ContractValue {
  int value = -1;  // graph value id
  DType dtype = DType::kF32;
};

struct GroupContract {
  int group = 0;
  std::string label;                  // the group's ops ("conv+add+silu")
  std::vector<int> ops;               // graph op indices, in the order they run
  std::vector<ContractValue> inputs;  // read exactly from their storage dtype
  std::vector<ContractParam> params;
  DType accumulation = DType::kF32;  // f16: every multiply-add rounded to f16, in k order
  // attn=act (f16/bf16): attention's q, k, v and softmax weights rounded to nearest even in it
  // before the two products; f32: not rounded.
  DType attention_operands = DType::kF32;
  std::vector<ContractValue> outputs;  // rounded to nearest even into their storage dtype
};

// One line of a group's contract, as `twinpath plan show` prints it and reports store it.
struct ContractRow {
  std::string graph;
  int group = 0;
  std::string point;     // input, weight, bias, accumulator, statistics, softmax, attention, output
  std::string name;      // value name, parameter key, or op name
  std::string dtype;     // what it is held in there
  std::string rounding;  // how it got there
};
std::vector<ContractRow> contract_rows(const Graph& graph, const GroupContract& c);

// The stored values the contract admits for one group output, element by element: [lo, hi] in
// the output's storage dtype. lo == hi where the exact value is farther from a rounding boundary
// than a correct fp32 implementation can err (the output must then be that value bit for bit);
// elsewhere any stored value in between is right.
struct ContractInterval {
  Tensor lo, hi;
};

// An implementation of the contract: the admitted intervals of group `c`'s outputs, computed
// from the group's inputs as the compiled run stored them (value id -> tensor in its storage
// dtype, logical layout: NCHW for images) and the model's own weights (quantized by the checker
// itself, as the contract says).
using ContractChecker = std::function<Expected<std::vector<ContractInterval>>(
    const Graph& graph, const GroupContract& c, const Weights& weights,
    const std::map<int, Tensor>& inputs)>;

// Groups whose inputs and outputs hold more elements than this are left unchecked (reported with
// checked = false): the check holds several fp64 copies of each.
constexpr int64_t kContractMaxElements = int64_t(1) << 24;

struct ContractMetrics {
  bool checked = false;
  int64_t decided = 0;      // elements with one admitted value
  int64_t ambiguous = 0;    // elements within the bound of a rounding boundary
  int64_t violations = 0;   // stored values outside [lo, hi]
  int64_t toward_zero = 0;  // violations of smaller magnitude than the interval (rounded down)
  double worst_ulps = 0;    // the largest distance past the interval, in ulps of the dtype
  Shape first;              // the first violation's element
  double got = 0, lo = 0, hi = 0;
};
// Checks `got` (the compiled run's stored output) against its admitted interval.
Expected<ContractMetrics> check_contract(const Tensor& got, const ContractInterval& admitted);
// Whether the violations are one-sided rounding (a store that truncates, or rounds away from
// zero): at least 10 of them, 95% on one side.
bool biased_rounding(const ContractMetrics& m);

}  // namespace tp
