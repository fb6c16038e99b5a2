"""Published nccl-tests/rccl-tests measurements against ccviz's prediction (issue 39): the error table.

Every row of ``ccviz/data/measured_nccl.csv`` (a real measurement with its source URL) is predicted by
simulating ``-a nccl`` on the matching system preset; per machine and size class the table prints how many
rows, the median and the worst error (|predicted busbw / measured - 1|; at <= 64 KiB the factor the time is
off by) and how many rows meet the issue's tolerance (busbw within 10 % at >= 64 MiB, 25 % at 1-16 MiB,
time within 2x at <= 64 KiB).

    .venv/bin/python bench/measured.py                    # every row, the error table
    .venv/bin/python bench/measured.py --rows             # and every row with its ratio
    .venv/bin/python bench/measured.py --markdown         # the table as the README shows it
    .venv/bin/python bench/measured.py --filter dgxh100 --algorithm ring
"""

from __future__ import annotations

import argparse
import sys
import time

from ccviz.runs import measured


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", default=measured.DEFAULT_ALGORITHM)
    p.add_argument("--filter", default="", help="only rows whose machine/collective/size has every word")
    p.add_argument("--rows", action="store_true", help="print every row too")
    p.add_argument("--markdown", action="store_true", help="the error table in Markdown")
    args = p.parse_args()
    rows = measured.select(measured.measured_rows(), args.filter)
    t0 = time.perf_counter()
    comps = measured.compare(rows, args.algorithm)
    wall = time.perf_counter() - t0
    if args.rows:
        print(measured.format_rows(comps))
        print()
    table = measured.error_table(comps)
    print(measured.error_markdown(table) if args.markdown else measured.format_error_table(table))
    missing = sorted({c.missing for c in comps if c.missing})
    interpolated = sum("interpolated" in c.notes for c in comps)
    print(f"\n{len(comps)} rows, {sum(c.ratio is not None for c in comps)} predicted with -a {args.algorithm} "
          f"in {wall:.1f} s ({interpolated} read off a schedule shape's line, see measured.Predictor)",
          file=sys.stderr)
    for why in missing:
        print(f"  not predicted: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
