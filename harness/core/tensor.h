// A dense, row-major (C order) n-d array in one dtype that owns its bytes. Reference ops
// compute on f32/f64 tensors directly; narrower dtypes are storage (weights, files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/core/dtype.h"

namespace tp {

using Shape = std::vector<int64_t>;

// Inline: loops test `i < t.numel()` per element, which a call the compiler cannot see into
// keeps from hoisting (the contract check's loop spent 3% of a ci run there).
inline int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
std::string shape_string(const Shape& shape);  // "[1, 4, 32, 32]"

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  static Tensor uninitialized(DType dtype, Shape shape);
  // A tensor over bytes someone else owns (a mapped file's pages), which `keeper` keeps alive
  // until the tensor is dropped; copies of it own their bytes.
  static Tensor over(DType dtype, Shape shape, std::byte* bytes, std::shared_ptr<void> keeper);

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(std::size_t(i)); }
  int rank() const { return int(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  std::size_t nbytes() const { return std::size_t(numel()) * dtype_size(dtype_); }

  std::byte* raw() { return bytes_.get(); }
  const std::byte* raw() const { return bytes_.get(); }
  // Typed access; checks that T matches the dtype (f32 -> float, f64 -> double,
  // f16/bf16 -> uint16_t, fp8 -> uint8_t).
  template <class T>
  T* data();
  template <class T>
  const T* data() const;

  Tensor to(DType dtype, Saturation sat = Saturation::kNonSaturating) const;
  // Same bytes, new shape of equal element count: a copy of them, or this tensor's own bytes
  // when it is an rvalue (`std::move(t).reshaped(s)` copies nothing).
  Tensor reshaped(Shape shape) const&;
  Tensor reshaped(Shape shape) &&;

 private:
  // Gives the bytes back: to the allocator (large blocks to a size-keyed cache), or, for bytes
  // owned elsewhere (Tensor::over), by dropping this tensor's share of their keeper.
  struct Release {
    std::size_t nbytes;  // what was allocated
    std::shared_ptr<void> keeper;
    void operator()(std::byte* p) const;
  };
  // A tensor of `shape` (checked) over `bytes`, or over a new allocation when `bytes` is null.
  static Tensor holding(DType dtype, Shape shape, std::byte* bytes, std::shared_ptr<void> keeper);
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::unique_ptr<std::byte[], Release> bytes_;
};

template <class T>
constexpr bool dtype_holds(DType dt) {
  if constexpr (std::is_same_v<T, double>) return dt == DType::kF64;
  if constexpr (std::is_same_v<T, float>) return dt == DType::kF32;
  if constexpr (std::is_same_v<T, uint16_t>) return dt == DType::kF16 || dt == DType::kBF16;
  if constexpr (std::is_same_v<T, uint8_t>) return dt == DType::kF8E4M3 || dt == DType::kF8E5M2;
  return false;
}

template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return std::is_same_v<T, float> ? DType::kF32 : DType::kF64;
}

template <class T>
T* Tensor::data() {
  TP_CHECK(dtype_holds<T>(dtype_), std::string("tensor holds ") + dtype_name(dtype_));
  return reinterpret_cast<T*>(bytes_.get());
}
template <class T>
const T* Tensor::data() const {
  TP_CHECK(dtype_holds<T>(dtype_), std::string("tensor holds ") + dtype_name(dtype_));
  return reinterpret_cast<const T*>(bytes_.get());
}

}  // namespace tp
