// The compiled path's run options: dtype policies (parsing, the support matrix, keep-fp32 globs)
// and the CUDA kernel set and graphs switches, with the sentence each refusal says.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "compiled/backend.h"
#include "compiled/planner.h"

namespace tp::compiled {
namespace {

TEST(PolicyTest, ParsesAndPrintsCanonically) {
  auto p = parse_layer_policy("a=bf16,w=f8e4m3,acc=f32,scale=tensor");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->weight, DType::kF8E4M3);
  EXPECT_EQ(p->activation, DType::kBF16);
  EXPECT_EQ(p->scale, ScaleGranularity::kPerTensor);
  EXPECT_EQ(layer_policy_string(p.value()), "w=f8e4m3,a=bf16,acc=f32,scale=tensor,sat=satfinite");
  EXPECT_EQ(layer_policy_string(parse_layer_policy(layer_policy_string(p.value())).value()),
            layer_policy_string(p.value()));
  EXPECT_EQ(layer_policy_string(parse_layer_policy("w=f16,a=f16").value()), "w=f16,a=f16,acc=f32");
}

TEST(PolicyTest, RefusesMalformedPoliciesWithTheFix) {
  const std::pair<const char*, const char*> bad[] = {
      {"w=f16", "needs both w= and a="},
      {"w=f16,a=f8e4m3", "fp8 is a weight dtype"},
      {"w=f16,a=f16,acc=bf16",
       "acc=bf16 is not an accumulation dtype of the compiled path; use acc=f32"},
      {"w=f16,a=f16,scale=tensor", "fp8 weights only"},
      {"w=f16,a=f16,x=1", "unknown key 'x'"},
      {"w=f17,a=f16", "f17"},
      {"w=f64,a=f32", "reference:fp64"},
      {"w=f8e4m3,a=bf16,sat=maybe", "sat=satfinite or sat=nonsat"},
  };
  for (const auto& [text, want] : bad) {
    auto p = parse_layer_policy(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_NE(p.error().message().find(want), std::string::npos)
        << text << ": " << p.error().message();
  }
}

TEST(PolicyTest, SupportMatrixNamesLayerDtypesAndFix) {
  auto check = [](const char* policy) {
    return check_supported("decoder.conv_in", parse_layer_policy(policy).value());
  };
  for (const char* ok :
       {"w=f32,a=f32", "w=f16,a=f32", "w=f16,a=f16", "w=bf16,a=bf16", "w=f8e4m3,a=bf16",
        "w=f8e5m2,a=f16", "w=f8e4m3,a=f32", "w=f16,a=f16,acc=f16"})
    EXPECT_TRUE(check(ok).ok()) << ok;
  const Status mixed = check("w=bf16,a=f16");
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(
      mixed.error().message(),
      "decoder.conv_in: weights in bf16 with activations in f16 is not a combination the compiled "
      "path has kernels "
      "for; use w=f16 or a=bf16, or keep this layer in fp32 with --keep-fp32 'decoder.conv_in'");
  EXPECT_NE(check("w=f32,a=bf16").error().message().find("use w=bf16, or keep"), std::string::npos);
  EXPECT_NE(check("w=bf16,a=bf16,acc=f16").error().message().find("use acc=f32"),
            std::string::npos);
  EXPECT_NE(check("w=f8e4m3,a=f16,acc=f16").error().message().find("cannot accumulate in f16"),
            std::string::npos);
}

TEST(PolicyTest, KeepFp32GlobsSelectLayers) {
  EXPECT_TRUE(glob_match("decoder.up_blocks.*", "decoder.up_blocks.3.resnets.0.conv1"));
  EXPECT_TRUE(glob_match("*.conv?", "decoder.up_blocks.3.resnets.0.conv1"));
  EXPECT_FALSE(glob_match("decoder.mid_block.*", "decoder.up_blocks.0.resnets.0.conv1"));
  EXPECT_TRUE(glob_match("*", ""));
  DTypePolicy p{parse_layer_policy("w=f16,a=f16").value(),
                parse_keep_fp32("decoder.conv_out,*.attentions.*").value()};
  EXPECT_EQ(p.for_layer("decoder.conv_out").activation, DType::kF32);
  EXPECT_EQ(p.for_layer("decoder.mid_block.attentions.0.to_q").weight, DType::kF32);
  EXPECT_EQ(p.for_layer("decoder.conv_in").activation, DType::kF16);
  EXPECT_FALSE(parse_keep_fp32("a,,b").ok());
}

TEST(CudaKernelsTest, KernelSetNamesParseAndAnUnknownOneSaysWhatToUse) {
  EXPECT_EQ(parse_cuda_kernels("per-op").value(), CudaKernels::kPerOp);
  EXPECT_EQ(parse_cuda_kernels("fused").value(), CudaKernels::kFused);
  for (CudaKernels k : {CudaKernels::kPerOp, CudaKernels::kFused})
    EXPECT_EQ(parse_cuda_kernels(cuda_kernels_name(k)).value(), k);
  auto bad = parse_cuda_kernels("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message().rfind("TWINPATH_CUDA_KERNELS=fast is unknown; use per-op", 0), 0u)
      << bad.error().message();
}

TEST(CudaKernelsTest, TheGraphsSwitchIsOnUnlessZeroAndAnotherValueSaysWhatToUse) {
  const char* before = std::getenv("TWINPATH_CUDA_GRAPHS");
  const std::string kept = before ? before : "";
  unsetenv("TWINPATH_CUDA_GRAPHS");
  EXPECT_TRUE(cuda_graphs_from_environment().value());
  setenv("TWINPATH_CUDA_GRAPHS", "0", 1);
  EXPECT_FALSE(cuda_graphs_from_environment().value());
  setenv("TWINPATH_CUDA_GRAPHS", "1", 1);
  EXPECT_TRUE(cuda_graphs_from_environment().value());
  setenv("TWINPATH_CUDA_GRAPHS", "yes", 1);
  auto bad = cuda_graphs_from_environment();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message().rfind("TWINPATH_CUDA_GRAPHS=yes is unknown; use 1", 0), 0u)
      << bad.error().message();
  // make_backend(kCuda) refuses with the same sentence before it looks for a device.
  auto backend = make_backend(Device::kCuda);
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.error().message().find("TWINPATH_CUDA_GRAPHS=yes"), std::string::npos)
      << backend.error().message();
  if (before)
    setenv("TWINPATH_CUDA_GRAPHS", kept.c_str(), 1);
  else
    unsetenv("TWINPATH_CUDA_GRAPHS");
}

}  // namespace
}  // namespace tp::compiled
