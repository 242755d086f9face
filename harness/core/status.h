// Errors as values: library code returns Status / Expected<T> with a message that says what is
// wrong and what to do; only main() turns an error into an exit code.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace tp {

// Kind decides the exit code at the top: a user's input problem (2) or a bug in twinpath (3).
enum class ErrorKind { kInput, kInternal };

class Error {
 public:
  explicit Error(std::string message, ErrorKind kind = ErrorKind::kInput)
      : message_(std::move(message)), kind_(kind) {}
  const std::string& message() const { return message_; }
  ErrorKind kind() const { return kind_; }
  // Prefixes context, e.g. the file or layer: "model.safetensors: tensor 'x': ...".
  Error with_context(const std::string& context) const {
    return Error(context + ": " + message_, kind_);
  }

 private:
  std::string message_;
  ErrorKind kind_;
};

class Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  bool ok() const { return !error_.has_value(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Error& error() const { return std::get<Error>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Error> v_;
};

// A broken invariant is a twinpath bug, not a user error: it carries file and line.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace tp

#define TP_CONCAT_INNER(a, b) a##b
#define TP_CONCAT(a, b) TP_CONCAT_INNER(a, b)

#define TP_RETURN_IF_ERROR(expr)                     \
  do {                                               \
    auto tp_status_ = (expr);                        \
    if (!tp_status_.ok()) return tp_status_.error(); \
  } while (0)

#define TP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.error();             \
  lhs = std::move(tmp).value()

#define TP_ASSIGN_OR_RETURN(lhs, expr) \
  TP_ASSIGN_OR_RETURN_IMPL(TP_CONCAT(tp_expected_, __LINE__), lhs, expr)

#define TP_CHECK(cond, msg)                                                              \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::tp::InternalError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                ": check failed: " #cond ": " + (msg));                  \
  } while (0)
