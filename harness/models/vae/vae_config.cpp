#include "harness/models/vae/vae_config.h"

namespace tp {

const Family& VaeConfig::family() const {
  TP_CHECK(owner != nullptr, "a VaeConfig parsed outside its family has no family");
  return *owner;
}

const VaeConfig& vae_config(const Model& model) {
  return dynamic_cast<const VaeConfig&>(*model.config);
}

}  // namespace tp
