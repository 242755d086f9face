#!/usr/bin/env python3
"""Checks that the parts include one another in one direction only (docs/design.md, "Parts").

    core <- models, reference, compiled <- runner <- cli;  cases beside the runner (core,
    models);  reports on the core only.

Every `#include "part/..."` in a part's sources must name a part that part may use, and no part
outside harness/models/ (tests aside) may include a family's folder (harness/models/FAMILY/...):
the shared layers reach a family through harness/models/family.h and the registry only; and
inside harness/models/ no folder includes a family's folder but its own (what families share
lives in helper folders, such as vae/, that include no family). Prints
each include against the direction as FILE:LINE and exits 1 if there is one; run by ctest
(`layering`) and so by CI.
    tools/check-layers.py [source-root]
"""
import pathlib
import re
import sys

# Longest prefix first: a file belongs to the first part whose folder holds it.
PARTS = [
    ("harness/core", "core"),
    ("harness/models", "models"),
    ("harness/runner", "runner"),
    ("harness/cli", "cli"),
    ("reference", "reference"),
    ("compiled", "compiled"),
    ("cases", "cases"),
    ("reports", "reports"),
    ("tests", "tests"),
]

MAY_USE = {
    "core": {"core"},
    "models": {"core", "models"},
    "reference": {"core", "reference"},
    "compiled": {"core", "compiled"},
    "cases": {"core", "models", "cases"},
    "reports": {"core", "reports"},
    "runner": {"core", "models", "reference", "compiled", "cases", "reports", "runner"},
    "cli": {"core", "models", "reference", "compiled", "cases", "reports", "runner", "cli"},
    "tests": {p for _, p in PARTS},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
FAMILY_FOLDER = re.compile(r"^harness/models/[^/]+/")
SOURCES = {".h", ".hpp", ".cpp", ".cu", ".cuh", ".in"}


def part_of(rel: str):
    for folder, part in PARTS:
        if rel == folder or rel.startswith(folder + "/"):
            return part
    return None


def family_folder_includes(root: pathlib.Path):
    """Inside harness/models/, a family's folder (one registry.cpp includes) is included by no
    other folder: what families share lives in helper folders that include no family."""
    registry = root / "harness/models/registry.cpp"
    if not registry.exists():
        return []
    families = set()
    for line in registry.read_text(errors="replace").splitlines():
        m = INCLUDE.match(line)
        if m and FAMILY_FOLDER.match(m.group(1)):
            families.add(m.group(1).split("/")[2])
    bad = []
    for path in sorted((root / "harness/models").rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in SOURCES or rel.count("/") < 3:
            continue
        folder = rel.split("/")[2]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or not FAMILY_FOLDER.match(m.group(1)):
                continue
            target = m.group(1).split("/")[2]
            if target in families and target != folder:
                bad.append(f"{rel}:{number}: harness/models/{folder}/ includes {m.group(1)}, "
                           f"inside the family folder {target}/; move what they share to a "
                           "helper folder that includes no family")
    return bad


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    bad, checked = [], 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in SOURCES or rel.startswith(("build", ".")) or "/." in rel:
            continue
        part = part_of(rel)
        if part is None:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = part_of(m.group(1))
            if target is None:
                continue  # a sibling header ("kernels.h") or a generated file
            checked += 1
            if target not in MAY_USE[part]:
                bad.append(f"{rel}:{number}: {part} includes {m.group(1)} ({target}); "
                           f"{part} may use only {', '.join(sorted(MAY_USE[part]))}")
            elif target == "models" and part not in ("models", "tests") and \
                    FAMILY_FOLDER.match(m.group(1)):
                bad.append(f"{rel}:{number}: {part} includes {m.group(1)}, inside a family's "
                           "folder; reach families through harness/models/family.h (the "
                           "descriptors, options and hooks) instead")
    bad += family_folder_includes(root)
    for line in bad:
        print(line)
    print(f"check-layers: {checked} includes checked, {len(bad)} against the direction")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
