"""The layout check (tests/figure_layout.py) as such: what is a problem and what is left out.

tests/plot/test_figures.py shows it finds a planted overlap and a cut title; these tests pin the
rules that keep it from crying wolf (hidden text, tick labels outside the view, the tolerance).
"""

import pytest

pytest.importorskip("matplotlib")

from figure_layout import layout_problems  # noqa: E402

from scalefit.plot.style import axes, pyplot  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    pyplot().close("all")


def test_a_plain_styled_figure_is_clean():
    fig, ax = axes()
    ax.plot([1, 2, 3], [3, 1, 2], label="runs")
    ax.set_xlabel("depth (blocks)")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title("a short title")
    ax.legend()
    assert layout_problems(fig) == []


def test_each_problem_names_the_texts_once():
    fig, ax = axes()
    ax.text(0.5, 0.5, "first", transform=ax.transAxes)
    ax.text(0.5, 0.5, "second", transform=ax.transAxes)
    assert layout_problems(fig) == ["text 'first' overlaps 'second'"]


def test_hidden_and_empty_texts_are_not_checked():
    fig, ax = axes()
    ax.text(0.5, 0.5, "shown", transform=ax.transAxes)
    ax.text(0.5, 0.5, "hidden", transform=ax.transAxes).set_visible(False)
    ax.text(0.5, 0.5, "   ", transform=ax.transAxes)
    assert layout_problems(fig) == []


def test_text_past_the_edge_is_reported_and_a_long_text_is_shortened():
    fig, ax = axes()
    long = "a label long enough to be shortened in the report"
    ax.text(1.2, 0.5, long, transform=ax.transAxes)
    assert layout_problems(fig) == [f"text {long[:37] + '...'!r} leaves the figure"]


def test_tick_labels_outside_the_view_are_ignored():
    fig, ax = axes()
    ax.set_xticks([-100.0, 0.0, 0.5, 1.0, 100.0])  # matplotlib keeps text for ticks out of view
    ax.set_xticklabels(["far left", "0", "0.5", "1", "far right"])
    ax.set_xlim(0.0, 1.0)
    assert layout_problems(fig) == []
    ax.axis("off")  # no tick label is drawn at all
    assert layout_problems(fig) == []


def test_overlaps_within_the_tolerance_are_anti_aliasing():
    fig, ax = axes()
    one = ax.text(0.2, 0.5, "left", transform=ax.transAxes)
    fig.canvas.draw()
    box = one.get_window_extent(fig.canvas.get_renderer())
    # the second text starts 0.5 pixels before the first one ends
    x = ax.transAxes.inverted().transform((box.x1 - 0.5, box.y0))[0]
    ax.text(x, 0.5, "right", transform=ax.transAxes)
    assert layout_problems(fig) == []
    assert layout_problems(fig, tolerance=0.1) == ["text 'left' overlaps 'right'"]
