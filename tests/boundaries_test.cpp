// The shared layers know no family by name: no string literal in harness/{core,runner,cli},
// cases/, reports/, compiled/ or reference/ names a pipeline, a family's graph or a pipeline's
// family prefix ("vae.", "sdxl."), whatever the registry holds; and tools/check-layers.py refuses
// an include of a family's folder from a shared layer. (Comments may name them: they explain.)
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/models/family.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// The string literals of C++ source `text` with their line numbers, comments and character
// literals skipped (raw strings read to their delimiter).
std::vector<std::pair<int, std::string>> string_literals(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      --i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const std::size_t end = text.find("*/", i + 2);
      for (std::size_t k = i; k < std::min(end, text.size()); ++k) line += text[k] == '\n';
      i = end == std::string::npos ? text.size() : end + 1;
    } else if (c == '\'') {
      for (++i; i < text.size() && text[i] != '\''; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == 'R' && i + 1 < text.size() && text[i + 1] == '"') {
      const std::size_t open = text.find('(', i);
      const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
      const std::size_t end = text.find(close, open);
      out.emplace_back(line, text.substr(open + 1, end - open - 1));
      for (std::size_t k = i; k < end; ++k) line += text[k] == '\n';
      i = end + close.size() - 1;
    } else if (c == '"') {
      std::string s;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
        s += text[i];
      }
      out.emplace_back(line, s);
    }
  }
  return out;
}

// What a shared layer must not spell: every pipeline's name and its family prefix ("vae."),
// and the built-in families' graph names that are not plain words ("vae.decoder").
std::set<std::string> family_words() {
  std::set<std::string> words;
  for (const std::string& name : pipeline_names()) {
    words.insert(name);
    words.insert(name.substr(0, name.find('.') + 1));
  }
  for (const std::string& builtin : builtin_config_names()) {
    auto config = parse_model_config(nlohmann::json::parse(*builtin_config_text(builtin)), builtin);
    if (!config.ok()) continue;
    for (const Graph& g : (*config)->family().graphs(**config))
      if (g.name.find('.') != std::string::npos) words.insert(g.name);
  }
  return words;
}

TEST(Boundaries, NoSharedLayerNamesAPipelineOrAFamilysGraph) {
  const fs::path root = TWINPATH_SOURCE_DIR;
  const std::set<std::string> words = family_words();
  ASSERT_TRUE(words.count("vae.decode") && words.count("sdxl.") && words.count("vae.decoder"));
  int files = 0;
  for (const char* layer : {"harness/core", "harness/runner", "harness/cli", "cases", "reports",
                            "compiled", "reference"})
    for (const auto& entry : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
      ++files;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      for (const auto& [line, literal] : string_literals(text.str()))
        for (const std::string& word : words)
          EXPECT_EQ(literal.find(word), std::string::npos)
              << fs::relative(entry.path(), root).string() << ":" << line << ": \"" << literal
              << "\" names '" << word
              << "'; ask the family's descriptors (harness/models/family.h) instead";
    }
  EXPECT_GT(files, 100);
}

TEST(Boundaries, TheLiteralScannerSeesStringsAndSkipsComments) {
  const auto found = string_literals(
      "// \"vae.decode\" in a comment\nauto a = \"sdxl.txt2img\"; char q = '\"';\n"
      "/* \"x\" */ auto r = R\"x(raw \"vae.\")x\";\n");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], (std::pair<int, std::string>{2, "sdxl.txt2img"}));
  EXPECT_EQ(found[1], (std::pair<int, std::string>{3, "raw \"vae.\""}));
}

TEST(Boundaries, TheLayerCheckRefusesAFamilyFolderIncludedFromASharedLayer) {
  const fs::path tree = fs::path(::testing::TempDir()) / "layers";
  fs::create_directories(tree / "harness/runner");
  std::ofstream(tree / "harness/runner/bad.cpp") << "#include \"harness/models/vae/tiling.h\"\n";
  const std::string command = "python3 " + std::string(TWINPATH_SOURCE_DIR) +
                              "/tools/check-layers.py " + tree.string() + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[256];
  while (fgets(buf, sizeof buf, pipe)) output += buf;
  const int status = pclose(pipe);
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(output.find("harness/runner/bad.cpp:1: runner includes harness/models/vae/tiling.h, "
                        "inside a family's folder"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace tp
