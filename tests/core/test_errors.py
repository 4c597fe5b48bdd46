"""The one-line message of an exception that scalefit's errors quote."""

from scalefit.core.errors import one_line


def test_one_line_takes_the_first_line_or_every_line_joined():
    exc = ValueError("  bad header\n  at line 3\n")
    assert one_line(exc) == "bad header"
    assert one_line(exc, whole=True) == "bad header at line 3"
    assert one_line(exc, 3) == "bad"
    assert one_line(exc, 8, whole=True) == "bad head"


def test_one_line_of_an_empty_message_is_the_type_name():
    assert one_line(KeyError()) == "KeyError"
    assert one_line(OSError(" \n "), whole=True) == "OSError"
    assert one_line(RuntimeError(""), 3) == "RuntimeError"
