"""What the plots of bench/results/*.json share: the command line (rows
in, PNG out), matplotlib without a display, and the figure's saving.
matplotlib: Debian's python3-matplotlib, imported only to draw, so that
the row handling works (and is tested) without it."""
import json
import sys


def pyplot():
    """matplotlib.pyplot, drawing into files (no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def panels(data):
    """A summary for plots with one panel per key of `data`."""
    return "%d panels" % len(data)


def main(argv, doc, load, draw, empty, summary):
    """`argv`: IN.json OUT.png, else exits with `doc`.  load(rows) gives
    the plot's data, draw(data, OUT.png) draws it; no data exits with
    "IN.json: `empty`", else prints "OUT.png: summary(data)"."""
    if len(argv) != 2:
        sys.exit(doc)
    with open(argv[0]) as f:
        data = load(json.load(f))
    if not data:
        sys.exit(f"{argv[0]}: {empty}")
    draw(data, argv[1])
    print(f"{argv[1]}: {summary(data)}")
