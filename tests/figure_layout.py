"""Layout checks of the figures' text, for the tests: text that leaves a figure or overlaps.

Test-only, so it lives with the tests (``tests/`` is on the test path: ``from figure_layout import
layout_problems``).
"""

from __future__ import annotations


def layout_problems(fig, *, tolerance: float = 1.0) -> list[str]:
    """Text of a figure that leaves the canvas or overlaps other text, in words.

    Draws the figure once and compares the bounding boxes matplotlib computes for every visible,
    non-empty text artist (titles, axis labels, tick labels, legend entries, annotations): a box
    that reaches past the figure's edge by more than ``tolerance`` pixels, or two boxes that
    overlap by more than ``tolerance`` pixels each way, is a problem. Text of one legend is
    compared with text outside that legend only if the legend itself overlaps it.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure to check.
    tolerance : float, default 1.0
        Pixels of overlap ignored (anti-aliasing).

    Returns
    -------
    list of str
        One line per problem; empty when the layout is clean.
    """
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    # tick labels: only those of ticks inside the view (matplotlib keeps text for others)
    tick_texts, shown = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                tick_texts.update((id(tick.label1), id(tick.label2)))
            if not getattr(ax, "axison", True) or not axis.get_visible():
                continue  # axis("off"): no tick label is drawn
            lo, hi = sorted(axis.get_view_interval())
            slack = 1e-9 * (hi - lo)
            k = 0 if axis is ax.xaxis else 1
            shown += [
                t
                for t in axis.get_majorticklabels() + axis.get_minorticklabels()
                if lo - slack <= t.get_position()[k] <= hi + slack
            ]
    texts = [t for t in fig.findobj(Text) if id(t) not in tick_texts] + shown
    boxes = []
    for artist in texts:
        if not artist.get_visible() or not artist.get_text().strip():
            continue
        if artist.axes is not None and not artist.axes.get_visible():
            continue
        box = artist.get_window_extent(renderer)
        if box.width <= 0 or box.height <= 0:
            continue
        boxes.append((artist, box))
    problems = []
    for artist, box in boxes:
        if (
            box.x0 < canvas.x0 - tolerance
            or box.y0 < canvas.y0 - tolerance
            or box.x1 > canvas.x1 + tolerance
            or box.y1 > canvas.y1 + tolerance
        ):
            problems.append(f"text {_show(artist)} leaves the figure")
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            dx = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            dy = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if dx > tolerance and dy > tolerance:
                problems.append(f"text {_show(a)} overlaps {_show(b)}")
    return problems


def _show(artist) -> str:
    text = " ".join(artist.get_text().split())
    return repr(text if len(text) <= 40 else text[:37] + "...")
