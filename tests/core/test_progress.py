"""The one progress bar: shown when asked, hidden when told, by default only on a terminal."""

from __future__ import annotations

from scalefit.core._progress import progress_bar, wanted


def test_an_explicit_choice_wins_and_none_follows_the_terminal(capsys):
    assert wanted(True) is True
    assert wanted(False) is False
    # under capsys stderr is a capture buffer, not a terminal
    assert wanted(None) is False


def test_a_hidden_bar_writes_nothing_and_a_wanted_one_writes_to_stderr(capsys):
    for progress in (None, False):
        with progress_bar(progress, total=3, desc="quiet", unit="fit") as bar:
            bar.update(2)
            bar.set_postfix(loss="1.0")
        bar.close()
    assert capsys.readouterr().err == ""
    with progress_bar(True, total=3, desc="shown", unit="fit") as bar:
        bar.update(3)
    err = capsys.readouterr().err
    assert "shown" in err and "3/3" in err
