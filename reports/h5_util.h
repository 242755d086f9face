// Small pieces of the HDF5 C API in RAII form, shared by the run report and the tradeoff
// report: handles, scalar attributes and fixed-length strings (tables: h5_rows.h). Failures throw
// H5Failure, which the writers turn into one sentence.
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "harness/core/numbers.h"
#include "harness/core/utf8.h"

namespace tp::h5 {

// An HDF5 handle closed by its own close function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      if (id_ >= 0) close_(id_);
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

struct H5Failure {
  std::string what;
};
inline void check(herr_t status, const char* what) {
  if (status < 0) throw H5Failure{what};
}
// A whole number written as text in a report (an element index); anything else is damage.
inline int64_t parse_whole(const std::string& text, const char* what) {
  if (const auto v = parse_number<int64_t>(text)) return *v;
  throw H5Failure{what};
}
inline hid_t check_id(hid_t id, const char* what) {
  if (id < 0) throw H5Failure{what};
  return id;
}

// --- attributes --------------------------------------------------------------------------

inline void put_string(hid_t obj, const char* name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  check(H5Tset_size(type.get(), H5T_VARIABLE), "string type");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "string charset");
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(
      check_id(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), name),
      H5Aclose);
  const char* p = value.c_str();
  check(H5Awrite(attr.get(), type.get(), &p), name);
}

template <class T>
void put_number(hid_t obj, const char* name, T value, hid_t type) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(check_id(H5Acreate2(obj, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), name),
              H5Aclose);
  check(H5Awrite(attr.get(), type, &value), name);
}
inline void put_double(hid_t obj, const char* name, double v) {
  put_number(obj, name, v, H5T_NATIVE_DOUBLE);
}
inline void put_int(hid_t obj, const char* name, int64_t v) {
  put_number(obj, name, v, H5T_NATIVE_INT64);
}

// An attribute twinpath reads is one value: a damaged file's array attribute must not be read
// into one variable.
inline void check_scalar(hid_t attr, const char* name) {
  Handle space(check_id(H5Aget_space(attr), name), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) throw H5Failure{name};
}

inline std::string get_string(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return "";
  Handle attr(check_id(H5Aopen(obj, name, H5P_DEFAULT), name), H5Aclose);
  check_scalar(attr.get(), name);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  check(H5Tset_size(type.get(), H5T_VARIABLE), "string type");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "string charset");
  char* p = nullptr;
  check(H5Aread(attr.get(), type.get(), &p), name);
  std::string s = valid_utf8(p ? p : "");  // a damaged or hand-made file's bytes, printable
  H5free_memory(p);
  return s;
}

template <class T>
T get_number(hid_t obj, const char* name, hid_t type) {
  T v{};
  if (H5Aexists(obj, name) <= 0) return v;
  Handle attr(check_id(H5Aopen(obj, name, H5P_DEFAULT), name), H5Aclose);
  check_scalar(attr.get(), name);
  check(H5Aread(attr.get(), type, &v), name);
  return v;
}
inline double get_double(hid_t obj, const char* name) {
  return get_number<double>(obj, name, H5T_NATIVE_DOUBLE);
}
inline int64_t get_int(hid_t obj, const char* name) {
  return get_number<int64_t>(obj, name, H5T_NATIVE_INT64);
}

inline hid_t string_type(std::size_t n) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, n);
  H5Tset_strpad(t, H5T_STR_NULLTERM);
  return t;
}

inline void copy_string(char* dst, std::size_t n, const std::string& s) {
  std::memset(dst, 0, n);
  s.copy(dst, std::min(s.size(), n - 1));  // the memset left the terminator
}

}  // namespace tp::h5
