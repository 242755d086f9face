#include "harness/core/names.h"

#include <algorithm>
#include <cctype>

namespace tp {
namespace {

std::string folded(std::string_view s) {
  std::string out;
  for (char c : s) out += c == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Edits (insert, delete, substitute, swap two neighbours) from a to b (optimal string alignment).
std::size_t edits(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(std::string_view typed, const std::vector<std::string>& names) {
  if (typed.empty() || typed.size() > 200) return "";
  const std::string want = folded(typed);
  for (const std::string& n : names)
    if (folded(n) == want) return n;
  const std::size_t allowed = want.size() <= 4 ? 1 : want.size() <= 8 ? 2 : 3;
  std::string best;
  std::size_t best_edits = allowed + 1;
  for (const std::string& n : names) {
    if (n.size() > 200) continue;
    const std::size_t e = edits(want, folded(n));
    if (e < best_edits) best = n, best_edits = e;
  }
  return best;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& names) {
  const std::string name = closest_name(typed, names);
  return name.empty() ? "" : "; did you mean " + name + "?";
}

bool glob_match(std::string_view p, std::string_view s) {
  // Iterative matcher with one backtrack point for the last `*`.
  std::size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi;
      ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace tp
