// Report rows declared once: a row type's columns (name, type, how to read and set it) are one
// list, and the HDF5 compound type, the writer, the reader and the JSON are all made from it
// (reports/h5_rows.h, row_json below). A new field is one line in its schema.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace tp {

enum class ColumnType : uint8_t { kInt32, kInt64, kBool, kDouble, kString };
using ColumnValue = std::variant<int64_t, double, std::string>;

template <class Row>
struct Column {
  std::string name;
  ColumnType type;
  std::size_t width = 0;  // kString: bytes stored in HDF5, terminator included (longer is cut)
  std::function<ColumnValue(const Row&)> get;
  std::function<void(Row&, const ColumnValue&)> set;
};

template <class Row>
using RowSchema = std::vector<Column<Row>>;

// A column over a data member: integers, bools, doubles and strings.
template <class Row, class M>
Column<Row> column(std::string name, M Row::*member, std::size_t string_width = 0) {
  Column<Row> c;
  c.name = std::move(name);
  if constexpr (std::is_same_v<M, bool>) {
    c.type = ColumnType::kBool;
  } else if constexpr (std::is_same_v<M, double>) {
    c.type = ColumnType::kDouble;
  } else if constexpr (std::is_same_v<M, std::string>) {
    c.type = ColumnType::kString;
    c.width = string_width;
  } else {
    static_assert(std::is_integral_v<M>, "a column holds an integer, bool, double or string");
    c.type = sizeof(M) <= 4 ? ColumnType::kInt32 : ColumnType::kInt64;
  }
  c.get = [member](const Row& r) -> ColumnValue {
    if constexpr (std::is_same_v<M, double> || std::is_same_v<M, std::string>)
      return r.*member;
    else
      return int64_t(r.*member);
  };
  c.set = [member](Row& r, const ColumnValue& v) {
    if constexpr (std::is_same_v<M, double> || std::is_same_v<M, std::string>)
      r.*member = std::get<M>(v);
    else
      r.*member = M(std::get<int64_t>(v));
  };
  return c;
}

// The columns of `inner` (a row type nested in Row at `member`), named prefix + their name.
template <class Row, class Inner>
void append_nested(RowSchema<Row>& schema, const std::string& prefix, Inner Row::*member,
                   const RowSchema<Inner>& inner) {
  for (const Column<Inner>& ic : inner) {
    Column<Row> c{prefix + ic.name, ic.type, ic.width, {}, {}};
    c.get = [member, get = ic.get](const Row& r) { return get(r.*member); };
    c.set = [member, set = ic.set](Row& r, const ColumnValue& v) { set(r.*member, v); };
    schema.push_back(std::move(c));
  }
}

// One row as a JSON object, in schema order. JSON has no inf/NaN: they are written as strings.
template <class Row>
nlohmann::json row_json(const RowSchema<Row>& schema, const Row& row) {
  nlohmann::json j = nlohmann::json::object();
  for (const Column<Row>& c : schema) {
    const ColumnValue v = c.get(row);
    switch (c.type) {
      case ColumnType::kBool:
        j[c.name] = std::get<int64_t>(v) != 0;
        break;
      case ColumnType::kInt32:
      case ColumnType::kInt64:
        j[c.name] = std::get<int64_t>(v);
        break;
      case ColumnType::kDouble: {
        const double d = std::get<double>(v);
        if (std::isfinite(d))
          j[c.name] = d;
        else
          j[c.name] = std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
        break;
      }
      case ColumnType::kString:
        j[c.name] = std::get<std::string>(v);
        break;
    }
  }
  return j;
}

}  // namespace tp
