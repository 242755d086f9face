// Test access to the committed fixture models (tests/fixtures/golden/<name>) and their inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "harness/core/safetensors.h"
#include "harness/models/model.h"

namespace tp::testing {

inline std::string fixture_dir(const std::string& model) {
  return std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden/" + model;
}

inline Model fixture_model(const std::string& name) {
  auto m = load_model(fixture_dir(name));
  if (!m.ok()) throw std::runtime_error(m.error().message());
  return std::move(m).value();
}

// "image" [1,3,H,W] or "latent" [1,L,h,w] from the fixture's io.safetensors.
inline Tensor fixture_input(const std::string& model, const std::string& name) {
  auto io = SafetensorsFile::open(fixture_dir(model) + "/io.safetensors");
  if (!io.ok()) throw std::runtime_error(io.error().message());
  auto t = io->read(name);
  if (!t.ok()) throw std::runtime_error(t.error().message());
  return std::move(t).value();
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace tp::testing
