#!/usr/bin/env python3
"""Fails when text is parsed in a way that can crash on what a user or a file gives.

JSON is printed through harness/core/untrusted_json.h (json_text: invalid UTF-8 replaced, not
thrown; json_excerpt in errors). Numbers go through harness/core/numbers.h (std::from_chars: no exception, no locale);
std::sto*, atoi/atol/atof and strtol/strtod are gone from the sources, and std::regex is
used only where the pattern is the user's own request over twinpath's short names (listed
below with the reason). A regex over file contents recursed past the stack on a .npy header of
60 KB of padding (issue 42).
    python3 tools/check-parsing.py ROOT
"""
import pathlib
import re
import sys

FORBIDDEN = [
    (re.compile(r"\bstd::sto(i|l|ll|ul|ull|f|d|ld)\s*\("), "std::sto*: use parse_number (harness/core/numbers.h)"),
    (re.compile(r"(?<![\w:.])(atoi|atol|atoll|atof)\s*\("), "ato*: use parse_number"),
    (re.compile(r"\b(std::)?strto(l|ll|ul|ull|d|f|ld)\s*\("), "strto*: use parse_number"),
    (re.compile(r"\bstd::regex\b|#include <regex>"), "std::regex over untrusted text: scan it"),
    (re.compile(r"\.dump\("), "json.dump(): use json_text or json_excerpt (harness/core/untrusted_json.h)"),
]
# Where a regex is the point: the user's own pattern over case ids (run --filter) and diffusers'
# skip_modules_pattern over module paths (layerwise casting does re.search): both subjects are
# names twinpath made, a few hundred characters at most.
ALLOWED_REGEX = {"harness/cli/run_command.cpp", "harness/core/layerwise_casting.cpp"}
DIRS = ["harness", "reference", "compiled", "cases", "reports"]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def main(root):
    root = pathlib.Path(root)
    bad = []
    files = 0
    for d in DIRS:
        for path in sorted((root / d).rglob("*")):
            if path.suffix not in {".h", ".cpp", ".cu", ".cuh"}:
                continue
            files += 1
            rel = path.relative_to(root).as_posix()
            code = strip_comments(path.read_text(errors="replace"))
            for number, line in enumerate(code.splitlines(), 1):
                for pattern, why in FORBIDDEN:
                    if "regex" in why and rel in ALLOWED_REGEX:
                        continue
                    if "dump" in why and rel.startswith("harness/core/untrusted_json."):
                        continue
                    if pattern.search(line):
                        bad.append(f"{rel}:{number}: {line.strip()} -- {why}")
    for b in bad:
        print(b)
    print(f"check-parsing: {files} files, {len(bad)} unsafe parses")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
