"""``summary.png``: accuracy against mean tokens per sample, one point per configuration.

Made to stay readable at a grid's worth of configurations (20 and more): each
point carries a number and a colour and marker of its own, the key that names
them sits beside the axes (never over a point), and each number is placed where
it covers no other number and no marker, with a leader line when it had to move
away from its point (configurations often land on the same spot).
"""

from __future__ import annotations

import importlib
import itertools
import math
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from covey.sweeps.report import ConfigSummary

# Kelly's colours of maximum contrast, without white and black: twenty that a
# reader tells apart, in an order where neighbours differ most. Past twenty the
# markers still tell configurations apart, and so do their numbers.
COLORS = [
    "#F3C300",
    "#875692",
    "#F38400",
    "#A1CAF1",
    "#BE0032",
    "#C2B280",
    "#848482",
    "#008856",
    "#E68FAC",
    "#0067A5",
    "#F99379",
    "#604E97",
    "#F6A600",
    "#B3446C",
    "#DCD300",
    "#882D17",
    "#8DB600",
    "#654522",
    "#E25822",
    "#2B3D26",
]
MARKERS = ["o", "s", "D", "^", "v", "P", "X", "*"]
MARKER_POINTS = 9  # marker size, in points
NAME_CHARS = 48  # a configuration name longer than this is cut in the key (the table has it whole)

# Where a point's number may go, tried nearest first: rings around the point, in points.
_RINGS = (13, 24, 36, 50, 66, 84, 104)
_ANGLES = (45, 135, -45, -135, 0, 180, 90, -90, 22, 158, -22, -158, 68, 112, -68, -112)


def figure(rows: list[ConfigSummary], title: str = "") -> Figure:
    """The chart as a matplotlib Figure, laid out and its numbers placed (so its
    text extents are final); saving it draws it once more, with its numbers."""
    # A figure on its own canvas, not pyplot's: pyplot (a third of matplotlib's
    # import) manages windows that a file never needs.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    # (number, row, accuracy %, mean tokens) of the rows that have both
    shown = [
        (i + 1, r, 100 * r.accuracy, r.mean_tokens)
        for i, r in enumerate(rows)
        if r.accuracy is not None and r.mean_tokens is not None
    ]
    width = max((len(_cut(r.config)) for _, r, *_ in shown), default=0)
    fig = Figure(figsize=(13, 6.5), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    handles = []
    for number, r, accuracy, tokens in shown:
        color, marker = style(number - 1)
        ax.errorbar(
            tokens,
            accuracy,
            yerr=100 * (r.stderr or 0),
            fmt=marker,
            markersize=MARKER_POINTS,
            markeredgecolor="black",
            markeredgewidth=0.6,
            capsize=5,
            color=color,
            zorder=3,
        )
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker=marker,
                markersize=MARKER_POINTS,
                color=color,
                markeredgecolor="black",
                markeredgewidth=0.6,
                label=f"{number:>2}  {_cut(r.config):<{width}}  {accuracy:5.1f}% of {r.ran:<4} {tokens:>8.0f}",
            )
        )
    most = max((tokens for *_, tokens in shown), default=1.0) or 1.0
    ax.set_xlim(-0.05 * most, most * 1.12)
    ax.set_ylim(-5, 110)
    ax.set_yticks(range(0, 101, 20))
    ax.set_xlabel("mean tokens per sample (lower is cheaper)", fontsize=11)
    ax.set_ylabel("accuracy, % (± standard error)", fontsize=11)
    ax.set_title(title or "Accuracy against tokens per configuration", fontsize=13)
    ax.grid(True, alpha=0.3)
    if handles:
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            title=f"    {'configuration':<{width}}  accuracy  samples  tokens",
            title_fontproperties={"family": "monospace", "size": 8.5, "weight": "bold"},
            alignment="left",
            prop={"family": "monospace", "size": 8.5},
        )
    fig.draw_without_rendering()  # the layout settled, nothing rasterised: numbers go where it put things
    _number_points(ax, [(n, tokens, accuracy, 100 * (r.stderr or 0)) for n, r, accuracy, tokens in shown])
    return fig


def style(index: int) -> tuple[str, str]:
    """The colour and marker of the configuration at ``index``: twenty colours, then
    the colours again with the next marker."""
    return COLORS[index % len(COLORS)], MARKERS[(index // len(COLORS) + index) % len(MARKERS)]


def preload() -> None:
    """Import what drawing takes (matplotlib, a quarter of a second) in the background,
    while a sweep waits on its jobs, instead of after its last result."""
    modules = ("matplotlib.backends.backend_agg", "matplotlib.figure", "matplotlib.lines", "matplotlib.transforms")
    threading.Thread(target=_import, args=modules, name="chart-preload", daemon=True).start()


def _import(*modules: str) -> None:
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError:  # write_chart says so
        pass


def write_chart(rows: list[ConfigSummary], path: Path, title: str = "") -> bool:
    """Draw the chart into ``path``; False when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    figure(rows, title).savefig(path)
    return True


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _number_points(ax, points: list[tuple[int, float, float, float]]) -> None:
    """Write each point's number at the nearest spot that overlaps no number placed
    before it, no marker and no error bar, inside the axes; far from its point, a
    line leads to it."""
    from matplotlib.transforms import Bbox

    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    half = MARKER_POINTS * ax.figure.dpi / 72 * 0.6  # a marker's half-width in pixels, with a margin
    obstacles = []
    for _, x, y, err in points:
        (px, low), (_, high) = ax.transData.transform([(x, y - err), (x, y + err)])
        obstacles.append(Bbox([[px - half, min(low, high) - half], [px + half, max(low, high) + half]]))
    for number, x, y, _ in points:
        label = None
        for radius, angle in itertools.product(_RINGS, _ANGLES):
            if label is not None:
                label.remove()
            label = ax.annotate(
                str(number),
                (x, y),
                textcoords="offset points",
                xytext=(radius * math.cos(math.radians(angle)), radius * math.sin(math.radians(angle))),
                ha="center",
                va="center",
                fontsize=9,
                fontweight="bold",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "0.6", "lw": 0.5, "alpha": 0.9},
                arrowprops=None if radius <= _RINGS[0] else {"arrowstyle": "-", "color": "0.4", "lw": 0.6},
                zorder=4,
            )
            box = extent(label, renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in obstacles):
                break
        if label is not None:
            obstacles.append(extent(label, renderer))


def extent(label, renderer):
    """Where a number's box lands on the canvas, before it is drawn."""
    label.update_positions(renderer)
    label.update_bbox_position_size(renderer)
    return label.get_bbox_patch().get_window_extent(renderer)
