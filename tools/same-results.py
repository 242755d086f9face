#!/usr/bin/python3
"""Compares two twinpath run reports field by field, exactly, leaving out what a rerun changes by
itself (timings, the command line, the commit, the tool version): every checkpoint's metrics,
contract rows, worst elements, outcomes and reasons must be equal. Use it around a refactoring
that must not change numerics:

    build/twinpath run --report before.h5   # on the old commit
    build/twinpath run --report after.h5    # on the new one
    /usr/bin/python3 tools/same-results.py before.h5 after.h5

Exit 0 when they are the same, 1 when any field differs (each is listed). Reads HDF5 with
Debian's python3-h5py."""
import re
import sys

import h5py
import numpy as np

# Field names (and attribute names) a rerun changes by itself.
IGNORED = ("second", "command", "git_commit", "utc_time", "tool_version", "host")
# Compile times inside the plan summary text.
TIMES = re.compile(r"(compiled in|,) [0-9.]+ s( compiling)?")


def fields(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[()]
            for key, value in obj.attrs.items():
                out[name + "@" + key] = value
        f.visititems(visit)
        for key, value in f.attrs.items():
            out["@" + key] = value
    return out


def same(x, y):
    if isinstance(x, bytes):
        x, y = x.decode(errors="replace"), y.decode(errors="replace")
    if isinstance(x, str):
        return TIMES.sub("", x) == TIMES.sub("", y)
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        return False
    return np.array_equal(x, y, equal_nan=x.dtype.kind == "f")


def main(before, after):
    a, b = fields(before), fields(after)
    compared = differing = 0
    for key in sorted(set(a) | set(b)):
        if any(word in key for word in IGNORED):
            continue
        if key not in a or key not in b:
            print("only in", before if key in a else after + ":", key)
            differing += 1
            continue
        x, y = a[key], b[key]
        names = getattr(getattr(x, "dtype", None), "names", None)
        for name in names or [None]:
            if name and any(word in name for word in IGNORED):
                continue
            compared += 1
            if not same(x[name] if name else x, y[name] if name else y):
                print("differs:", key, name or "")
                differing += 1
    print(f"{compared} fields compared, {differing} differ")
    return 1 if differing else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
