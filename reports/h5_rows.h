// Tables of rows in HDF5, from a row schema (reports/row_schema.h): the compound type is laid
// out from the columns, rows are packed into it, and tables of more than a few rows are chunked
// and deflate-compressed (readers see no difference). Reading matches columns by name, so a
// file written with another layout of the same columns reads back the same.
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "reports/h5_util.h"
#include "reports/row_schema.h"

namespace tp::h5 {

struct RowLayout {
  Handle type{-1, H5Tclose};
  std::vector<std::size_t> offsets;
  std::size_t size = 0;
};

inline std::size_t column_bytes(ColumnType t, std::size_t width) {
  switch (t) {
    case ColumnType::kInt32:
      return 4;
    case ColumnType::kInt64:
    case ColumnType::kDouble:
      return 8;
    case ColumnType::kBool:
      return 1;
    case ColumnType::kString:
      return width;
  }
  return 0;
}

template <class Row>
RowLayout row_layout(const RowSchema<Row>& schema) {
  RowLayout l;
  for (const Column<Row>& c : schema) {
    const std::size_t bytes = column_bytes(c.type, c.width);
    const std::size_t align = c.type == ColumnType::kString ? 1 : bytes;
    l.size = (l.size + align - 1) / align * align;
    l.offsets.push_back(l.size);
    l.size += bytes;
  }
  l.size = (l.size + 7) / 8 * 8;
  l.type = Handle(H5Tcreate(H5T_COMPOUND, l.size), H5Tclose);
  std::vector<Handle> strings;
  for (std::size_t i = 0; i < schema.size(); ++i) {
    hid_t t = H5T_NATIVE_INT64;
    switch (schema[i].type) {
      case ColumnType::kInt32:
        t = H5T_NATIVE_INT32;
        break;
      case ColumnType::kInt64:
        t = H5T_NATIVE_INT64;
        break;
      case ColumnType::kBool:
        t = H5T_NATIVE_UINT8;
        break;
      case ColumnType::kDouble:
        t = H5T_NATIVE_DOUBLE;
        break;
      case ColumnType::kString:
        strings.emplace_back(string_type(schema[i].width), H5Tclose);
        t = strings.back().get();
        break;
    }
    check(H5Tinsert(l.type.get(), schema[i].name.c_str(), l.offsets[i], t), "row type");
  }
  return l;
}

// Rows from this many on are chunked and compressed; smaller tables are not worth the overhead.
constexpr hsize_t kCompressFromRows = 8;

template <class Row>
void write_rows(hid_t parent, const char* name, const RowSchema<Row>& schema,
                const std::vector<Row>& rows) {
  const RowLayout l = row_layout(schema);
  std::vector<unsigned char> buffer(l.size * rows.size(), 0);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    unsigned char* row = buffer.data() + r * l.size;
    for (std::size_t i = 0; i < schema.size(); ++i) {
      const ColumnValue v = schema[i].get(rows[r]);
      unsigned char* at = row + l.offsets[i];
      switch (schema[i].type) {
        case ColumnType::kInt32: {
          const int32_t x = int32_t(std::get<int64_t>(v));
          std::memcpy(at, &x, 4);
          break;
        }
        case ColumnType::kInt64:
          std::memcpy(at, &std::get<int64_t>(v), 8);
          break;
        case ColumnType::kBool:
          *at = std::get<int64_t>(v) != 0;
          break;
        case ColumnType::kDouble:
          std::memcpy(at, &std::get<double>(v), 8);
          break;
        case ColumnType::kString:
          copy_string(reinterpret_cast<char*>(at), schema[i].width, std::get<std::string>(v));
          break;
      }
    }
  }
  const hsize_t n = rows.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle create(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (n >= kCompressFromRows && H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
    const hsize_t chunk = std::min<hsize_t>(n, 4096);
    check(H5Pset_chunk(create.get(), 1, &chunk), name);
    check(H5Pset_shuffle(create.get()), name);
    check(H5Pset_deflate(create.get(), 4), name);
  }
  Handle ds(check_id(H5Dcreate2(parent, name, l.type.get(), space.get(), H5P_DEFAULT, create.get(),
                                H5P_DEFAULT),
                     name),
            H5Dclose);
  if (n)
    check(H5Dwrite(ds.get(), l.type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), name);
}

// More rows than any table of a report holds (a case's checkpoints over a 50-step SDXL loop are
// about 50,000).
constexpr hsize_t kMaxTableRows = hsize_t(1) << 20;

// The rows' fields from the buffer H5Dread filled, column by column through the schema's setters.
template <class Row, class Layout>
void read_fields(const std::vector<unsigned char>& buffer, const Layout& l,
                 const RowSchema<Row>& schema, std::vector<Row>& rows) {
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const unsigned char* row = buffer.data() + r * l.size;
    for (std::size_t i = 0; i < schema.size(); ++i) {
      const unsigned char* at = row + l.offsets[i];
      switch (schema[i].type) {
        case ColumnType::kInt32: {
          int32_t x = 0;
          std::memcpy(&x, at, 4);
          schema[i].set(rows[r], int64_t(x));
          break;
        }
        case ColumnType::kInt64: {
          int64_t x = 0;
          std::memcpy(&x, at, 8);
          schema[i].set(rows[r], x);
          break;
        }
        case ColumnType::kBool:
          schema[i].set(rows[r], int64_t(*at));
          break;
        case ColumnType::kDouble: {
          double x = 0;
          std::memcpy(&x, at, 8);
          schema[i].set(rows[r], x);
          break;
        }
        case ColumnType::kString: {
          const char* s = reinterpret_cast<const char*>(at);
          schema[i].set(rows[r], valid_utf8(std::string_view(s, strnlen(s, schema[i].width))));
          break;
        }
      }
    }
  }
}

// The table's rows; none when it is absent.
template <class Row>
std::vector<Row> read_rows(hid_t parent, const char* name, const RowSchema<Row>& schema) {
  if (H5Lexists(parent, name, H5P_DEFAULT) <= 0) return {};
  const RowLayout l = row_layout(schema);
  Handle ds(check_id(H5Dopen2(parent, name, H5P_DEFAULT), name), H5Dclose);
  Handle space(check_id(H5Dget_space(ds.get()), name), H5Sclose);
  // A table is one dimension of rows, no more than a report holds (a damaged file's extent must
  // neither overrun n nor size the allocation).
  if (H5Sget_simple_extent_ndims(space.get()) != 1) throw H5Failure{name};
  hsize_t n = 0;
  check(H5Sget_simple_extent_dims(space.get(), &n, nullptr), name);
  if (n > kMaxTableRows) throw H5Failure{name};
  std::vector<unsigned char> buffer(l.size * n, 0);
  if (n) check(H5Dread(ds.get(), l.type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), name);
  std::vector<Row> rows(n);
  try {
    read_fields(buffer, l, schema, rows);
  } catch (const std::exception&) {  // a field that does not parse (a column's own text format)
    throw H5Failure{name};
  }
  return rows;
}

}  // namespace tp::h5
