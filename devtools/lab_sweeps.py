"""Write the lab's sweep for every number of keys it allows: attention_viz/data/lab_sweeps.json.gz.

    python -m devtools.lab_sweeps            # ~1 minute on two cores

The lab's sweep (attention_viz.lab.sweep: softmax saturation over d_k = 1 .. 4096, unscaled and scaled) depends
on the number of keys only, and costs ~40-55 ms to compute: in a class where each student sets a number of keys
of their own, computing it on the server was a fifth of the server's CPU. The app reads this table instead
(service.lab_view.LabData) and computes only what it lacks; tests/service/test_lab_view.py recomputes a sample
of it and fails, naming this command, when the table and the code disagree. Each entry also keeps, at each of the
sweep's d_k, the saturation the lab's numbers table shows and the index of the query it draws (the same sweep's
medians: ~15 ms a new number of keys cost the server when it computed them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from attention_viz.service.lab_view import SWEEP_TABLE, LabData
from attention_viz.service.limits import LAB_KEYS_RANGE


def build() -> dict:
    """{"n_keys": {n: entry}}, entry as service.lab_view.LabData.table_entry gives it, for every n in LAB_KEYS_RANGE."""
    data = LabData(table=None)
    low, high = LAB_KEYS_RANGE
    return {"n_keys": {str(n): data.table_entry(n) for n in range(low, high + 1)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(str(SWEEP_TABLE)), help="where to write the table")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    table = build()
    text = json.dumps(table, separators=(",", ":"), allow_nan=False).encode()
    args.out.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))  # mtime 0: the same table, the same bytes
    print(f"{len(table['n_keys'])} numbers of keys in {time.perf_counter() - t0:.0f} s: {args.out} "
          f"({args.out.stat().st_size / 1024:.0f} kB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
