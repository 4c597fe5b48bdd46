"""scalefit.plot.style: texts, colours, ticks and axes of every figure."""

import math
from types import SimpleNamespace

import pytest

pytest.importorskip("matplotlib")

from scalefit.plot import style  # noqa: E402
from scalefit.plot.style import axes, pyplot  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    pyplot().close("all")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (math.nan, "0"),
        (3.0, "3"),
        (0.02, "0.02"),
        (12345.0, "12345"),
        (123456.0, "1.23e5"),
        (2e9, "2e9"),
        (5.4e18, "5.4e18"),
        (1e21, "1e21"),
        (-2e9, "-2e9"),
    ],
)
def test_numbers_are_written_without_plus_signs_or_padding_zeros(value, text):
    assert style.flops_text(value) == text


def test_canonical_columns_are_labelled_in_words_with_units():
    assert style.label("flops") == "training compute (FLOP)"
    assert style.label("loss") == "loss"  # its unit is the table's: style.loss_label
    assert style.label("my_metric") == "my metric"  # any other column: its name, spaced


def test_a_short_series_takes_the_palette_and_a_long_one_the_ordered_map():
    assert style.ordered_colours(3) == ["#0072B2", "#D55E00", "#009E73"]
    many = style.ordered_colours(9)
    assert len(many) == 9 and all(len(c) == 4 for c in many)  # RGBA from cividis
    # ordered: cividis grows lighter, so the luminance rises along the series
    lum = [0.2126 * r + 0.7152 * g + 0.0722 * b for r, g, b, _ in many]
    assert lum == sorted(lum) and lum[0] < lum[-1]


def test_axes_are_styled_and_sized_per_panel():
    fig, ax = axes()
    assert tuple(fig.get_size_inches()) == (5.0, 4.0)
    assert not ax.spines["top"].get_visible() and not ax.spines["right"].get_visible()
    assert ax.xaxis.label.get_size() == 9
    fig, grid = axes(ncols=2, nrows=3, figsize=(4.0, 3.0))
    assert tuple(fig.get_size_inches()) == (8.0, 9.0) and grid.shape == (3, 2)
    # an axes given is drawn into, not replaced
    again, same = axes(ax=grid[0, 0])
    assert again is fig and same is grid[0, 0]


def _shown_ticks(axis, lo, hi):
    return [
        t.get_text()
        for t in axis.get_majorticklabels()
        if lo * (1 - 1e-9) <= t.get_position()[0 if axis.axis_name == "x" else 1] <= hi * (1 + 1e-9)
    ]


def test_log_ticks_are_powers_of_ten_over_many_decades_and_plain_over_few():
    fig, ax = axes()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1e18, 1e21)
    ax.set_ylim(2.0, 3.5)
    style.log_ticks(ax)
    fig.canvas.draw()
    assert _shown_ticks(ax.xaxis, 1e18, 1e21) == ["1e18", "1e19", "1e20", "1e21"]
    assert _shown_ticks(ax.yaxis, 2.0, 3.5) == ["2", "3"]
    assert all(not t.get_text() for t in ax.yaxis.get_minorticklabels())


def test_a_linear_axis_keeps_its_ticks():
    fig, ax = axes()
    before = type(ax.xaxis.get_major_formatter())
    style.log_ticks(ax)
    assert type(ax.xaxis.get_major_formatter()) is before


def test_titles_name_the_data_the_law_and_the_method():
    res = SimpleNamespace(
        conventions={"source": "/any/where/chinchilla_depth_width.csv"},
        n_rows=203,
        method="jax",
        draws=[0.0] * 3,
        law_name="chinchilla",
    )
    assert style.title(res, "Fit") == (
        "Fit\nChinchilla (Liu et al.), 203 rows; chinchilla law, least squares, 3 bootstrap draws"
    )
    assert style.title(None, "Fit") == "Fit"
    bayes = SimpleNamespace(method="bayes", draws=[0.0] * 8, law=SimpleNamespace(name="decomposed"))
    assert style.method_name(bayes) == "Bayesian (NUTS), 8 posterior draws"
    assert style.law_name(bayes) == "decomposed"
    assert style.data_name(bayes) == "data"
    named = SimpleNamespace(conventions={"dataset": "my sweep", "source": "x.csv"}, n_rows=None)
    assert style.data_name(named) == "my sweep"


def test_a_long_title_is_wrapped_to_the_figure_and_keeps_its_line_breaks():
    fig = pyplot().figure(figsize=(3.0, 2.0))
    text = style.suptitle(fig, "word " * 60 + "\nsecond line").get_text()
    lines = text.split("\n")
    assert lines[-1] == "second line" and len(lines) > 2
    per_line = int(0.92 * 3.0 * 72 / (0.6 * style.TITLE_SIZE))
    assert all(len(line) <= per_line for line in lines)
    assert " ".join(lines[:-1]).split() == ["word"] * 60  # nothing lost in the wrapping


def _legend_texts(fig):
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    return [t.get_text() for leg in legends if leg is not None for t in leg.get_texts()]


@pytest.mark.parametrize("along", ["y", "x"])
def test_an_estimate_outside_its_interval_is_drawn_open_beside_its_true_bar(along):
    """Bars span [lo, hi] exactly (never clipped at the estimate); the outside point is named."""
    import numpy as np

    fig, ax = axes()
    x, y = np.array([1.0, 2.0, 3.0]), np.array([5.0, 5.0, 5.0])
    lo, hi = np.array([4.0, 5.5, np.nan]), np.array([6.0, 6.5, np.nan])  # 2nd outside, 3rd none
    pos, val = (x, y) if along == "y" else (y, x)
    style.estimates(ax, pos, val, lo, hi, along=along, label="fits", why="a test says so")
    ax.legend()
    (bars,) = [c for c in ax.collections if len(c.get_segments()) == 2]
    k = 1 if along == "y" else 0
    spans = sorted(sorted(seg[:, k]) for seg in bars.get_segments())
    assert spans == [[4.0, 6.0], [5.5, 6.5]]
    open_ = [ln for ln in ax.lines if ln.get_markerfacecolor() == "white" and len(ln.get_xdata())]
    assert (
        len(open_) == 1
        and list(open_[0].get_xydata()[0]) == [2.0, 5.0][:: 1 if along == "y" else -1]
    )
    assert _legend_texts(fig) == ["fits", "estimate outside its interval:\na test says so"]


def test_estimates_inside_their_intervals_or_bands_carry_no_note():
    import numpy as np

    fig, (left, right) = axes(ncols=2)
    x = np.arange(1.0, 5.0)
    style.estimates(left, x, x, x - 1, x + 1, label="bars")
    style.estimates(right, x, x, x - 1, x + 1, fmt="-", band={}, label="band")
    style.estimates(right, x, x + 1, None, None, label="no interval")
    for ax in (left, right):
        ax.legend()
    assert not any(style.OUTSIDE in t for t in _legend_texts(fig))
    # a line leaving its band at one point: marked there, the note said once per axes
    style.estimates(right, x, x, x + 0.5 * (x == 3), x + 1, fmt="-", band={}, label="band 2")
    style.estimates(right, x, x, x + 0.5 * (x == 4), x + 1, fmt="-", band={}, label="band 3")
    right.legend()
    texts = _legend_texts(fig)
    assert texts.count("estimate outside its interval:\nthe draws sit to one side of it") == 1
    assert texts[-1].startswith(style.OUTSIDE)  # after the series
