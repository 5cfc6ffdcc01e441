#!/usr/bin/env python3
"""Native / plugin time ratios of a gpu_check.sh sweep, one column per run.

The sweep's first run (sweep-def) has native and plugin phases; the variants
(sweep-1, sweep-2, ...) run the plugin only.  Every plugin run is set against
the native time of sweep-def at the same op and size, so all columns share
one baseline measured in the same call.

With FIRST, the columns start at that run, whose native times are the
baseline (a later group of runs in the same file).

Usage: scripts/sweep_ratios.py OUT/tables.txt [FIRST]
"""
import re
import sys


def parse(path):
    """{run: {op: {size: (native_us, plugin_us)}}} and the runs in file order."""
    runs, order = {}, []
    run = op = None
    with open(path) as f:
        for line in f:
            m = re.match(r'## (\S+):', line)
            if m:
                run, op = m.group(1), None
                order.append(run)
                runs[run] = {}
                continue
            m = re.match(r'# (\w+), ', line)
            if m and run:
                op = m.group(1)
                continue
            fields = line.split()
            if run and op and len(fields) >= 5 and fields[0].isdigit():
                native = float(fields[1])
                plugin = float(fields[3])
                runs[run].setdefault(op, {})[int(fields[0])] = (native, plugin)
    return runs, order


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    runs, order = parse(sys.argv[1])
    if len(sys.argv) == 3:
        if sys.argv[2] not in order:
            sys.exit('no run %s in %s' % (sys.argv[2], sys.argv[1]))
        order = order[order.index(sys.argv[2]):]
    if not order:
        sys.exit('no runs in ' + sys.argv[1])
    base = runs[order[0]]
    for op, rows in base.items():
        print('# %s: native / plugin time, native from %s' % (op, order[0]))
        print('%12s %10s  %s' % ('size(B)', 'native_us', ' '.join('%9s' % r for r in order)))
        for size, (native, _) in sorted(rows.items()):
            cols = []
            for r in order:
                cell = runs[r].get(op, {}).get(size)
                cols.append('%9.3f' % (native / cell[1]) if cell and cell[1] > 0 and native > 0
                            else '%9s' % '-')
            print('%12d %10.1f  %s' % (size, native, ' '.join(cols)))
        print()


if __name__ == '__main__':
    main()
