// The row types of a run report, each declared once (reports/row_schema.h): what the HDF5
// tables (docs/report-schema.md) and the JSON are made from.
#pragma once

#include <string>

#include "reports/result.h"
#include "reports/row_schema.h"

namespace tp {

// One of a checkpoint's worst elements, as a row of the `worst` table.
struct WorstRow {
  std::string checkpoint;
  bool local = false;  // local error (else accumulated)
  int32_t rank = 0;    // 0 = largest abs error
  Shape index;
  double got = 0, want = 0, abs_error = 0;
};

// One input value of the NaN origin's op.
struct OriginInput {
  std::string name;
  double value = 0;
};

constexpr std::size_t kNameWidth = 192;  // bytes for module paths and notes in HDF5

const RowSchema<Metrics>& metrics_schema();
const RowSchema<ContractMetrics>& contract_metrics_schema();
const RowSchema<ContractRow>& contract_row_schema();
const RowSchema<PlanSummary>& plan_summary_schema();
const RowSchema<CheckpointRecord>& checkpoint_schema();  // metrics, then "local_" metrics
const RowSchema<WorstRow>& worst_schema();
const RowSchema<OriginInput>& origin_input_schema();
const RowSchema<StreamStep>& stream_schema();

}  // namespace tp
