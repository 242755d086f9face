#include "reports/gzip_text.h"

#include <zlib.h>

#include <stdexcept>

namespace tp {
namespace {

constexpr int kGzipWindow = 15 + 16;  // zlib's window bits plus 16: a gzip header and trailer

}  // namespace

std::string gzip_text(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib could not start a deflate stream");
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib could not finish a deflate stream");
  return out;
}

Expected<std::string> gunzip_text(const std::string& bytes, std::size_t limit) {
  z_stream z{};
  if (inflateInit2(&z, kGzipWindow) != Z_OK) return Error("zlib could not start an inflate");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char chunk[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(chunk, sizeof chunk - z.avail_out);
    if (out.size() > limit) rc = Z_MEM_ERROR;
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) rc = Z_BUF_ERROR;
  }
  inflateEnd(&z);
  if (out.size() > limit)
    return Error("its text is larger than " + std::to_string(limit >> 20) + " MiB");
  if (rc != Z_STREAM_END) return Error("its gzip stream is damaged or cut short");
  return out;
}

bool looks_gzipped(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

}  // namespace tp
