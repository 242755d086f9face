#!/usr/bin/env python3
"""Classifies every branch gcov saw untaken in compiled/ (tools/coverage.sh's uncovered.txt) by
the text of its line, and writes each line with its kind: the accounting docs/coverage.md sums.
  python3 tools/coverage_branches.py out/coverage/tests/uncovered.txt [--list OUT.txt]
The first rule that matches a line decides its kind; the rules are in order of how certain they
are (an error macro's edge is one whatever else the line holds)."""
import re
import sys

# (kind, regex over the source text, why no clean run or test takes the branch)
RULES = [
    ("error macro", r"\bTP_(CHECK|ASSIGN_OR_RETURN|RETURN_IF_ERROR|CUDA)\b",
     "the error edge of a check that never fails, and the message it would build"),
    ("refusal", r"return (Error|bad|fail)\(|\bfail\(|\bbad\(",
     "a refusal of an input no valid plan, plan file or case reaches"),
    ("fault injection", r"faults?\.has\(|Fault::k",
     "a fault test on a line that also runs clean: taken only with that fault injected"),
    ("exhaustive switch", r"^\s*switch \(",
     "the default edge of a switch over every enum value"),
    ("scope end", r"^\s*\}\)?;?\s*$|^\s*\};\s*$",
     "a closing brace: the exception-cleanup edges of the destructors run there (gcov marks "
     "only call edges '(throw)')"),
    ("allocation or accessor", r"Tensor::uninitialized|\.data<|\.dim\(|push_back|emplace|"
     r"std::vector<|std::map<|\{\"|make_shared|std::string\(",
     "edges inside an inlined allocation or accessor (a vector's growth, data<T>()'s dtype "
     "check): taken only when it throws or fails"),
    ("operand chain", r"&&|\|\|",
     "one operand of an && / || chain whose other outcome never decides the result"),
    ("conditional expression", r"\?",
     "one arm of a ?: that every clean run and test takes the same way"),
    ("loop", r"^\s*(for|while) \(",
     "a loop exit taken only one way (an empty range never met)"),
    ("one-sided condition", r"\bif \(",
     "an if that every run takes the same way (the other way is a shape or state no built-in "
     "model or test has)"),
]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: coverage_branches.py UNCOVERED.txt [--list OUT.txt]")
    out = sys.argv[sys.argv.index("--list") + 1] if "--list" in sys.argv else None
    counts = {kind: 0 for kind, _, _ in RULES}
    counts["other"] = 0
    listed = []
    current = ""
    line_re = re.compile(r"^\s*(\d+) (\d+) of (\d+) branches not taken \| ?(.*)$")
    for raw in open(sys.argv[1], encoding="utf-8"):
        if raw.startswith("== "):
            current = raw[3:].strip()
            continue
        m = line_re.match(raw.rstrip("\n"))
        if not m:
            continue
        number, untaken, text = m.group(1), int(m.group(2)), m.group(4)
        kind = next((k for k, rx, _ in RULES if re.search(rx, text)), "other")
        counts[kind] += untaken
        listed.append(f"{current}:{number}\t{untaken}\t{kind}\t{text.strip()}")
    total = sum(counts.values())
    print(f"{'kind':<24}{'untaken':>8}  why")
    for kind, _, why in RULES + [("other", "", "not matched by a rule: listed in the table")]:
        print(f"{kind:<24}{counts[kind]:>8}  {why}")
    print(f"{'total':<24}{total:>8}")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write("\n".join(listed) + "\n")


if __name__ == "__main__":
    main()
