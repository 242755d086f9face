#include "cases/suite.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "cases/tiling_points.h"
#include "harness/core/numbers.h"
#include "harness/models/config_space.h"
#include "harness/models/family.h"

namespace tp {
namespace {

// A typo like res=1:100000:1x64 must be refused before anything runs (or is allocated).
constexpr std::size_t kMaxCases = kMaxSuiteCases;

const std::string kSplitAdvice =
    "; split it into several lines or suites (or runs with --shard K/N), or narrow its comma "
    "lists and ranges";

std::string too_many(std::size_t n) {
  return std::to_string(n) + " cases, more than the limit of " + std::to_string(kMaxCases) +
         kSplitAdvice;
}

std::vector<std::pair<std::string, std::size_t>> split_at(std::string_view s, char sep) {
  std::vector<std::pair<std::string, std::size_t>> out;  // piece, offset
  std::size_t start = 0;
  while (true) {
    const std::size_t end = s.find(sep, start);
    out.emplace_back(
        std::string(
            s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)),
        start);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

bool to_int(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  out = parse_number<int64_t>(s).value_or(0);
  return true;
}

// One dimension of res: N or A:B:STEP.
Expected<std::vector<std::string>> expand_dimension(const std::string& spec) {
  const auto parts = split_at(spec, ':');
  int64_t a = 0, b = 0, step = 0;
  if (parts.size() == 1) {
    if (!to_int(spec, a)) return Error("'" + spec + "' is not a size in pixels");
    return std::vector<std::string>{spec};
  }
  if (parts.size() != 3 || !to_int(parts[0].first, a) || !to_int(parts[1].first, b) ||
      !to_int(parts[2].first, step) || step <= 0 || b < a)
    return Error("'" + spec + "' is not a range A:B:STEP with A <= B and STEP > 0");
  if ((b - a) / step + 1 > int64_t(kMaxCases))
    return Error("'" + spec + "' expands to " + too_many(std::size_t((b - a) / step + 1)));
  std::vector<std::string> out;
  for (int64_t v = a; v <= b; v += step) out.push_back(std::to_string(v));
  return out;
}

// model=random:FAMILY:A..B[@W]: the draws A to B (harness/models/config_space.h), each as its
// own model; any other model name as it is.
Expected<std::vector<std::string>> expand_draws(const std::string& model) {
  const std::size_t dots = model.find("..");
  if (!is_random_config_name(model) || dots == std::string::npos)
    return std::vector<std::string>{model};
  const std::size_t colon = model.rfind(':', dots), at = model.find('@', dots);
  const std::string suffix = at == std::string::npos ? "" : model.substr(at);
  int64_t a = 0, b = 0;
  if (!to_int(model.substr(colon + 1, dots - colon - 1), a) ||
      !to_int(model.substr(dots + 2, at == std::string::npos ? std::string::npos : at - dots - 2),
              b) ||
      b < a)
    return Error("'" + model +
                 "' is not a range of draws; write random:FAMILY:A..B with A <= B, e.g. "
                 "random:autoencoder_kl:1..20");
  if (b - a + 1 > int64_t(kMaxCases))
    return Error("'" + model + "' expands to " + too_many(std::size_t(b - a + 1)));
  std::vector<std::string> out;
  for (int64_t v = a; v <= b; ++v)
    out.push_back(model.substr(0, colon + 1) + std::to_string(v) + suffix);
  return out;
}

// The alternatives one token stands for, each checked as an option of each of the line's
// `pipelines` (the first token's alternatives).
Expected<std::vector<std::string>> expand_token(const std::string& token, bool first,
                                                const std::vector<std::string>& pipelines) {
  std::vector<std::string> alternatives;
  if (first) {
    for (const auto& [p, off] : split_at(token, ','))
      if (!is_pipeline_name(p))
        return Error("'" + p + "': a case starts with its pipeline: " + pipeline_choices());
      else
        alternatives.push_back(p);
    return alternatives;
  }
  const std::size_t eq = token.find('=');
  if (eq == std::string::npos || eq == 0) return Error("expected key=value");
  const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
  for (const auto& [alt, off] : split_at(value, ',')) {
    if (key == "res" && alt == "tiling") {
      alternatives.push_back(
          "res=tiling");  // the generator: points from the model config, per case
      continue;
    }
    if (key == "res") {
      const std::size_t x = alt.find('x');
      if (x == std::string::npos)
        return Error("'" + alt + "': expected res=HEIGHTxWIDTH, each a size or a range A:B:STEP");
      TP_ASSIGN_OR_RETURN(std::vector<std::string> hs, expand_dimension(alt.substr(0, x)));
      TP_ASSIGN_OR_RETURN(std::vector<std::string> ws, expand_dimension(alt.substr(x + 1)));
      if (hs.size() * ws.size() + alternatives.size() > kMaxCases)
        return Error("'" + alt + "' expands to " +
                     too_many(hs.size() * ws.size() + alternatives.size()));
      for (const auto& h : hs)
        for (const auto& w : ws) alternatives.push_back("res=" + h + "x" + w);
    } else if (key == "model") {
      TP_ASSIGN_OR_RETURN(std::vector<std::string> models, expand_draws(alt));
      if (models.size() + alternatives.size() > kMaxCases)
        return Error("'" + alt + "' expands to " + too_many(models.size() + alternatives.size()));
      for (const std::string& m : models) alternatives.push_back("model=" + m);
    } else {
      alternatives.push_back(key + "=" + alt);
    }
  }
  for (const std::string& pipeline : pipelines) {
    Case scratch;
    scratch.pipeline = pipeline;
    for (const std::string& a : alternatives)
      if (a == "res=tiling")
        continue;
      else if (Status s = apply_case_option(scratch, a); !s.ok())
        return Error("'" + a + "': " + s.error().message());
  }
  return alternatives;
}

}  // namespace

Expected<std::vector<Case>> expand_suite(std::string_view text, const std::string& source) {
  std::vector<Case> cases;
  std::set<std::string> seen;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const std::string where = source + ":" + std::to_string(number);
    // Tokens with their columns.
    std::vector<std::pair<std::string, std::size_t>> tokens;
    for (std::size_t i = 0; i < line.size();) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
      if (i > start) tokens.emplace_back(line.substr(start, i - start), start + 1);
    }
    if (tokens.empty()) continue;
    std::vector<std::vector<std::string>> choices;
    std::size_t total = 1;
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      auto alts = expand_token(tokens[t].first, t == 0,
                               choices.empty() ? std::vector<std::string>{} : choices.front());
      if (!alts.ok())
        return Error(where + ":" + std::to_string(tokens[t].second) + ": " +
                     alts.error().message() + (t == 0 ? "" : " (in '" + tokens[t].first + "')"));
      choices.push_back(std::move(alts).value());
    }
    // The line's count before expanding it (each factor is at most kMaxCases, so a product
    // that passes the limit is seen before it can overflow).
    for (const auto& c : choices) {
      total *= c.size();
      if (total > kMaxCases) break;
    }
    if (total > kMaxCases) {
      double count = 1;
      for (const auto& c : choices) count *= double(c.size());
      char n[32];
      std::snprintf(n, sizeof n, "%.0f", count);
      return Error(where + ": this line expands to " + n + " cases, more than the limit of " +
                   std::to_string(kMaxCases) + kSplitAdvice);
    }

    // Cross product, first token slowest.
    std::vector<std::size_t> pick(choices.size(), 0);
    for (std::size_t n = 0; n < total; ++n) {
      std::size_t rest = n;
      for (std::size_t t = choices.size(); t-- > 0;) {
        pick[t] = rest % choices[t].size();
        rest /= choices[t].size();
      }
      std::string expanded;
      for (std::size_t t = 0; t < choices.size(); ++t)
        expanded += (t ? " " : "") + choices[t][pick[t]];
      const std::size_t generator = expanded.find(" res=tiling");
      if (generator != std::string::npos) expanded.erase(generator, 11);
      auto c = parse_case(expanded);
      if (!c.ok())
        return Error(where + ": " + c.error().message() + " (expanded: " + expanded + ")");
      std::vector<Case> generated{*c};
      if (generator != std::string::npos) {
        auto points = tiling_points(*c);
        if (!points.ok())
          return Error(where + ": res=tiling: " + points.error().message() +
                       " (expanded: " + expanded + ")");
        generated.clear();
        for (const auto& [h, w] : *points) {
          Case g = *c;
          g.height = h;
          g.width = w;
          generated.push_back(std::move(g));
        }
      }
      for (Case& g : generated)
        if (seen.insert(g.id()).second) cases.push_back(std::move(g));
      if (cases.size() > kMaxCases)
        return Error(where + ": with this line the suite passes the limit of " +
                     std::to_string(kMaxCases) + " cases" + kSplitAdvice);
    }
  }
  return cases;
}

Expected<std::vector<Case>> load_suite(const std::string& name_or_path) {
  if (const char* text = builtin_suite_text(name_or_path)) return expand_suite(text, name_or_path);
  std::ifstream in(name_or_path);
  if (!in) {
    std::string names;
    for (const auto& n : builtin_suite_names()) names += (names.empty() ? "" : ", ") + n;
    return Error("'" + name_or_path + "' is neither a built-in suite (" + names +
                 ") nor a readable suite file");
  }
  std::stringstream s;
  s << in.rdbuf();
  return expand_suite(s.str(), name_or_path);
}

}  // namespace tp
