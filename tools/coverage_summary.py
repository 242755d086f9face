#!/usr/bin/env python3
"""Summarizes gcov's output for compiled/'s sources (tools/coverage.sh).

Reads the .gcov files gcov wrote (with branch counts) and writes:
  summary.txt    per source file: lines executed / executable, branches taken / branches
  uncovered.txt  every executable line never run, and every line with a branch never taken,
                 with the source text, grouped by file
Branches gcov marks "(throw)" (the edge a call takes when it throws) are left out: twinpath's
compiled path reports errors as values, and those edges are the C++ runtime's, not the code's.
"""
import pathlib
import re
import sys

root, gcov_dir, out = (pathlib.Path(a) for a in sys.argv[1:4])
compiled = (root / "compiled").resolve()

LINE = re.compile(r"^\s*([^:]+):\s*(\d+):(.*)$")
BRANCH = re.compile(r"^branch\s+\d+\s+(never executed|taken (\d+))(.*)$")


class File:
    def __init__(self, path):
        self.path = path
        self.lines = {}  # line number -> (count or None for unexecuted, text)
        self.branches = {}  # line number -> [taken count, ...]


files = {}
for g in sorted(gcov_dir.glob("*.gcov")):
    current = None
    line_no = 0
    for raw in g.read_text(errors="replace").splitlines():
        if raw.startswith("branch"):
            m = BRANCH.match(raw)
            if current is None or not m or "(throw)" in m.group(3):
                continue
            taken = 0 if m.group(1) == "never executed" else int(m.group(2))
            current.branches.setdefault(line_no, []).append(taken)
            continue
        m = LINE.match(raw)
        if not m:
            continue
        count, number, text = m.group(1).strip(), int(m.group(2)), m.group(3)
        if number == 0:
            if text.startswith("Source:"):
                src = pathlib.Path(text[len("Source:"):]).resolve()
                inside = src.suffix == ".cpp" and compiled in src.parents
                current = files.setdefault(src, File(src)) if inside else None
            continue
        if current is None:
            continue
        line_no = number
        if count == "-":
            continue
        executed = count.rstrip("*")
        n = 0 if executed in ("#####", "=====") else int(executed)
        old = current.lines.get(number)
        current.lines[number] = ((old[0] if old else 0) + n, text)

rows = []
uncovered = []
total = [0, 0, 0, 0]
for path in sorted(files):
    f = files[path]
    rel = path.relative_to(root.resolve())
    lines = len(f.lines)
    run = sum(1 for c, _ in f.lines.values() if c > 0)
    branches = sum(len(b) for b in f.branches.values())
    taken = sum(1 for b in f.branches.values() for t in b if t > 0)
    rows.append((str(rel), run, lines, taken, branches))
    for i, v in enumerate((run, lines, taken, branches)):
        total[i] += v
    missed = []
    for number in sorted(set(f.lines) | set(f.branches)):
        count, text = f.lines.get(number, (1, ""))
        b = f.branches.get(number, [])
        never = sum(1 for t in b if t == 0)
        if count == 0:
            missed.append(f"{number:5d} line never run       | {text}")
        elif never:
            missed.append(f"{number:5d} {never} of {len(b)} branches not taken | {text}")
    if missed:
        uncovered.append(f"== {rel}")
        uncovered.extend(missed)


def pct(a, b):
    return f"{100.0 * a / b:5.1f}%" if b else "    -"


summary = [f"{'file':48s} {'lines':>15s} {'branches':>17s}"]
for name, run, lines, taken, branches in rows:
    summary.append(f"{name:48s} {run:5d}/{lines:<5d} {pct(run, lines)} "
                   f"{taken:5d}/{branches:<5d} {pct(taken, branches)}")
summary.append(f"{'total':48s} {total[0]:5d}/{total[1]:<5d} {pct(total[0], total[1])} "
               f"{total[2]:5d}/{total[3]:<5d} {pct(total[2], total[3])}")
(out / "summary.txt").write_text("\n".join(summary) + "\n")
(out / "uncovered.txt").write_text("\n".join(uncovered) + "\n")
