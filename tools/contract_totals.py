#!/usr/bin/env python3
"""Totals of the numerics-contract check over every checkpoint of twinpath reports (h5py).

    python3 tools/contract_totals.py REPORT.h5 [...]

Prints, per report: the checkpoints checked, the elements decided (one admitted value),
ambiguous (within the bound of a rounding boundary) and in violation, and the worst distance
past an interval in ulps. Used on the GPU machine, where `twinpath run --device cuda` holds the
CUDA kernels' stored values to the contract.
"""
import sys

import h5py


def totals(path):
    t = dict(cases=0, checked=0, decided=0, ambiguous=0, violations=0, worst_ulps=0.0)
    with h5py.File(path, "r") as f:
        for case in f["cases"].values():
            t["cases"] += 1
            if "checkpoints" not in case:
                continue
            rows = case["checkpoints"][()]
            names = rows.dtype.names
            if "contract_checked" not in names:
                continue
            checked = rows["contract_checked"] != 0
            t["checked"] += int(checked.sum())
            for k in ("decided", "ambiguous", "violations"):
                t[k] += int(rows["contract_" + k][checked].sum())
            if checked.any():
                t["worst_ulps"] = max(t["worst_ulps"], float(rows["contract_worst_ulps"][checked].max()))
    return t


for path in sys.argv[1:]:
    t = totals(path)
    print(f"{path}: {t['cases']} cases, {t['checked']} checkpoints checked against the contract: "
          f"{t['decided']} elements decided, {t['ambiguous']} ambiguous, {t['violations']} violations "
          f"(worst {t['worst_ulps']:.3g} ulps past)")
