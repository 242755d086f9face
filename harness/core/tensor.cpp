#include "harness/core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <sstream>

namespace tp {
namespace {
constexpr std::size_t kAlignment = 64;  // one cache line; enough for any SIMD load

// Freed large buffers kept for the next tensor of the same size. An executor frees and
// allocates the same activation sizes op after op; glibc hands blocks above 32 MiB back to the
// kernel and maps them again, so each new tensor would pay a page fault and a zeroed page per
// 4 KiB (about 4% of an SD decode). At most kCachedBytes are kept, the least recently freed
// handed back first (a tiled decode's next tile shape needs other sizes than the last one's);
// a block is never split.
constexpr std::size_t kCachedMin = std::size_t(1) << 20;
constexpr std::size_t kCachedBytes = std::size_t(1) << 29;

struct BlockCache {
  struct Block {
    std::size_t size;
    void* data;
  };
  std::mutex mutex;
  std::list<Block> blocks;  // least recently freed first
  std::multimap<std::size_t, std::list<Block>::iterator> by_size;
  std::size_t bytes = 0;

  void* take(std::size_t size) {
    auto it = by_size.find(size);
    if (it == by_size.end()) return nullptr;
    void* p = it->second->data;
    blocks.erase(it->second);
    by_size.erase(it);
    bytes -= size;
    return p;
  }
  bool keep(std::size_t size, void* p) {
    if (size > kCachedBytes) return false;
    while (bytes + size > kCachedBytes) {
      const Block oldest = blocks.front();
      auto range = by_size.equal_range(oldest.size);
      for (auto it = range.first; it != range.second; ++it)
        if (it->second == blocks.begin()) {
          by_size.erase(it);
          break;
        }
      blocks.pop_front();
      bytes -= oldest.size;
      std::free(oldest.data);
    }
    by_size.emplace(size, blocks.insert(blocks.end(), {size, p}));
    bytes += size;
    return true;
  }
};

BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;  // never destroyed: tensors may outlive statics
  return *cache;
}

std::size_t rounded_size(std::size_t nbytes) {
  return (nbytes + kAlignment - 1) / kAlignment * kAlignment;
}

std::byte* allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const std::size_t rounded = rounded_size(nbytes);
  if (rounded >= kCachedMin) {
    BlockCache& cache = block_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (void* p = cache.take(rounded)) return static_cast<std::byte*>(p);
  }
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<std::byte*>(p);
}

void release(std::byte* p, std::size_t nbytes) {
  const std::size_t rounded = rounded_size(nbytes);
  if (rounded >= kCachedMin) {
    BlockCache& cache = block_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.keep(rounded, p)) return;
  }
  std::free(p);
}
}  // namespace

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

void Tensor::Release::operator()(std::byte* p) const {
  if (keeper == nullptr) release(p, nbytes);
}

Tensor Tensor::holding(DType dtype, Shape shape, std::byte* bytes, std::shared_ptr<void> keeper) {
  for (int64_t d : shape) TP_CHECK(d >= 0, "negative dimension in " + shape_string(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  if (bytes == nullptr) bytes = allocate(t.nbytes());
  t.bytes_ = {bytes, Release{t.nbytes(), std::move(keeper)}};
  return t;
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  return holding(dtype, std::move(shape), nullptr, nullptr);
}

Tensor Tensor::over(DType dtype, Shape shape, std::byte* bytes, std::shared_ptr<void> keeper) {
  TP_CHECK(bytes != nullptr && keeper != nullptr, "Tensor::over needs bytes and their owner");
  return holding(dtype, std::move(shape), bytes, std::move(keeper));
}

Tensor::Tensor(DType dtype, Shape shape) {
  *this = uninitialized(dtype, std::move(shape));
  if (nbytes() > 0) std::memset(bytes_.get(), 0, nbytes());
}

Tensor::Tensor(const Tensor& other) : dtype_(other.dtype_), shape_(other.shape_) {
  if (!other.bytes_) return;  // a default-constructed (empty) tensor copies as empty
  bytes_ = {allocate(other.nbytes()), Release{other.nbytes(), nullptr}};
  if (other.nbytes() > 0) std::memcpy(bytes_.get(), other.bytes_.get(), other.nbytes());
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor Tensor::to(DType dtype, Saturation sat) const {
  Tensor out = uninitialized(dtype, shape_);
  convert_elements(raw(), dtype_, out.raw(), dtype, std::size_t(numel()), sat);
  return out;
}

Tensor Tensor::reshaped(Shape shape) const& { return Tensor(*this).reshaped(std::move(shape)); }

Tensor Tensor::reshaped(Shape shape) && {
  TP_CHECK(shape_numel(shape) == numel(),
           "reshape " + shape_string(shape_) + " to " + shape_string(shape));
  Tensor out(std::move(*this));
  out.shape_ = std::move(shape);
  return out;
}

}  // namespace tp
