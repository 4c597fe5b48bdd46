"""The ``scalefit`` command line.

Each command module of :mod:`scalefit.cli` defines ``register(subparsers)``; :data:`COMMANDS`
names the module of every command, and only the command that runs has its parser built.
Errors of type :class:`~scalefit.core.errors.ScaleFitError` become one line on stderr and exit code
2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from ..core._validation import did_you_mean
from ..core.errors import MissingExtraError, ScaleFitError, SweepError, one_line

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NOT_CONVERGED = 3

#: The exit-code rule of every command, shown by ``scalefit --help`` (and the README).
EXIT_CODES = (
    "exit codes: 0 done; 2 bad input or a usage mistake (one line on stderr, nothing written); "
    "3 the results were printed and written but a fit behind them did not converge (fit: no "
    "verified local minimum; bayes and compare: a law's chains have R-hat above 1.01 or "
    "divergent transitions; toy fit: a group's fit did not converge); 130 interrupted."
)

#: True only while :func:`run` (the console script, ``python -m scalefit``) owns the process:
#: settings that outlive a command, such as JAX's CPU device count, are changed only then.
OWNS_PROCESS = False


# A token such as -1e21 or -.5 is a (negative) number, not an option; argparse's own pattern only
# knows -5 and -0.5, so `--budget -1e21` used to fail with "expected one argument".
_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^-(inf|nan)$", re.IGNORECASE)
_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


class _Group:
    """An argparse argument group whose options are recorded by the parser that owns it."""

    def __init__(self, owner: Parser, group: Any) -> None:
        self._owner = owner
        self._group = group
        self._members: list[tuple[argparse.Action, str | None]] = []

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """``add_argument`` of the group, recorded in the owner's :attr:`Parser.options`.

        In a required mutually exclusive group each option's help says "(required: this or
        --other)" instead of a default.
        """
        if not getattr(self._group, "required", False):
            return self._owner._add(self._group.add_argument, args, kwargs)
        kwargs["shown"] = _NO_SUFFIX
        action = self._owner._add(self._group.add_argument, args, kwargs)
        self._members.append((action, action.help))
        for member, text in self._members:
            others = [m.option_strings[0] for m, _ in self._members if m is not member]
            if others:
                member.help = _join(text, f"(required: this or {' or '.join(others)})")
        return action

    def add_mutually_exclusive_group(self, **kwargs: Any) -> _Group:
        """A nested mutually exclusive group, recorded the same way."""
        return _Group(self._owner, self._group.add_mutually_exclusive_group(**kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group, name)


class Subcommands:
    """The sub-command action of a parser; the parsers it adds go to ``Parser.commands``.

    A command module's ``register`` receives one. While :attr:`only` names a command of
    :data:`COMMANDS`, only that sub-command is really added (with its help from the table);
    the module's other sub-commands get a scratch parser.
    """

    def __init__(self, owner: Parser, action: Any) -> None:
        self._owner = owner
        self._action = action
        self.only: str | None = None

    def add_parser(self, name: str, **kwargs: Any) -> Parser:
        """Add the sub-command ``name`` (argparse's ``add_parser``) and remember it."""
        if self.only is not None:
            if name != self.only:
                return Parser(prog=name)
            kwargs["help"] = COMMANDS[name][1]
        parser = self._action.add_parser(name, **kwargs)
        self._owner.commands[name] = parser
        return parser

    def __getattr__(self, name: str) -> Any:
        return getattr(self._action, name)


class Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are ONE line on stderr and exit code 2.

    Sub-command parsers inherit the class (``add_subparsers`` uses the parent's class), so a
    command module needs nothing special. Misspelt options and choices get a "did you mean"
    suggestion; every option's help shows its default; a negative number in exponent form
    (``--budget -1e21``) is a value, not an option. Only argparse's public interface is used:
    the parser records the options and sub-commands it is given (:attr:`options`,
    :attr:`commands`) instead of reading argparse's internals.

    Attributes
    ----------
    options : list of argparse.Action
        Every option and positional added to this parser (its groups included).
    commands : dict
        Sub-command name -> its parser.
    default_command : str or None
        A sub-command assumed when the first word is none of :attr:`commands` (and not an
        option): ``scalefit probe STATE`` is ``scalefit probe toy STATE``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # a removed --plot is not read as --plots
        self.options: list[argparse.Action] = []
        self.fallbacks: dict[str, Any] = {}
        self.commands: dict[str, Parser] = {}
        self.default_command: str | None = None
        super().__init__(*args, **kwargs)

    def _record(self, action: argparse.Action) -> argparse.Action:
        self.options.append(action)
        return action

    def _add(self, add: Any, args: tuple, kwargs: dict) -> argparse.Action:
        """Add one option with ``add`` and write its default into its help (see :func:`_suffix`)."""
        shown = kwargs.pop("shown", None)
        fallback = kwargs.pop("fallback", _UNSET)
        action = add(*args, **kwargs)
        if fallback is not _UNSET:
            self.fallbacks[action.option_strings[0]] = fallback
        if shown is not _NO_SUFFIX:
            action.help = _join(action.help, _suffix(action, shown, fallback))
        return self._record(action)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """``add_argument`` with two keywords of scalefit's own.

        ``shown`` is the text of the default in the help (for a default that is described, not
        a value: "runs/NAME"); ``fallback`` is the value a command applies when an option whose
        argparse default is None is not given (``--vocab`` 32000), shown in the help and
        recorded in :attr:`fallbacks` so a test can compare it with the behaviour.
        """
        return self._add(super().add_argument, args, kwargs)

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        return _Group(self, super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:  # noqa: D102
        return _Group(self, super().add_mutually_exclusive_group(**kwargs))

    def add_subparsers(self, **kwargs: Any) -> Any:  # noqa: D102
        return Subcommands(self, super().add_subparsers(**kwargs))

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102 - argparse's own
        _ACTIVE.append(self)  # the deepest sub-command parser is the last one entered
        given = list(sys.argv[1:] if args is None else args)
        if (
            self.default_command is not None
            and given
            and given[0] not in self.commands
            and not given[0].startswith("-")
        ):
            given.insert(0, self.default_command)
        self._given = given
        return super().parse_known_args(self._numbers_as_values(given), namespace)

    def _numbers_as_values(self, args: list[str]) -> list[str]:
        """``--opt -1e21`` as ``--opt=-1e21`` when ``--opt`` takes a value.

        argparse would read the number as an option: its own pattern knows only ``-5``, ``-0.5``.
        """
        out: list[str] = []
        for token in args:
            prev = out[-1] if out else ""
            if (
                _NUMBER.match(token)
                and prev.startswith("-")
                and "=" not in prev
                and prev != "--"
                and "--" not in out
                and self._takes_value(prev)
            ):
                out[-1] = f"{prev}={token}"
            else:
                out.append(token)
        return out

    def _takes_value(self, flag: str) -> bool:
        return any(flag in a.option_strings and a.nargs != 0 for a in self.options)

    def error(self, message: str):
        """Print ``PROG: error: MESSAGE[ Did you mean ...?]`` as one line and exit with 2."""
        parser = _ACTIVE[-1] if _ACTIVE and message.startswith("unrecognized") else self
        if message.startswith(("the following arguments are required", "one of the arguments")):
            # a misspelt option is the likelier mistake: `--budgt 1e21` leaves --budget missing
            unknown = _unknown_options(self)
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        text = " ".join(message.split())
        hint = _suggestion(parser, message)
        if hint:
            text = text.rstrip(".") + "." + hint
        print(f"{parser.prog}: error: {text} (see '{parser.prog} --help')", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


_UNSET = object()
_NO_SUFFIX = object()


def _join(text: str | None, suffix: str) -> str | None:
    if text is argparse.SUPPRESS or not suffix:
        return text
    return f"{text or ''} {suffix}".strip()


def _suffix(action: argparse.Action, shown: str | None, fallback: Any) -> str:
    """The ``(default: ...)`` or ``(required)`` an option's help ends with.

    Required options say so; flags and positionals say nothing; an option whose default is
    applied later by the command shows that value (``fallback``) or a description
    (``shown``); other options show argparse's default, ``not set`` for None.
    """
    if action.help is argparse.SUPPRESS or action.default is argparse.SUPPRESS:
        return ""
    if not action.option_strings:
        return f"(default: {shown})" if shown else ""
    if action.required:
        return "(required)"
    if action.nargs == 0:
        return ""
    if fallback is not _UNSET:
        text = f"{_value(fallback)}{', ' + shown if shown else ''}"
    elif shown:
        text = shown
    elif action.default is None:
        text = "not set"
    elif action.default == []:  # a repeatable option (--set, --with) not given
        text = "none"
    else:
        text = _value(action.default)
    return f"(default: {text.replace('%', '%%')})"


def _value(value: Any) -> str:
    """A default as the help shows it: ``0.001``, ``1e+21`` as ``1e21``, ``4``, ``mse``."""
    if isinstance(value, float):
        mant, _, exp = f"{value:g}".partition("e")
        return f"{mant}e{int(exp)}" if exp else mant
    return str(value)


_ACTIVE: list[Parser] = []


def _options(parser: argparse.ArgumentParser) -> list[str]:
    actions = parser.options if isinstance(parser, Parser) else []
    return [s for a in actions for s in a.option_strings]


def _unknown_options(parser: argparse.ArgumentParser) -> list[str]:
    """The ``--options`` the user gave that are neither an option of PARSER nor a prefix of one."""
    known = _options(parser)
    unknown = []
    for token in getattr(parser, "_given", []):
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if token.startswith("--") and not any(k.startswith(name) for k in known):
            unknown.append(name)
    return unknown


#: Options a command lacks because another command does that job: (prog, option) -> pointer.
ELSEWHERE = {
    ("scalefit fit", "--budget"): "A budget is the allocation's: fit with --out FIT.json, then "
    "run 'scalefit allocate FIT.json --budget FLOPS' (or 'scalefit demo --budget FLOPS').",
}


def _suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """A "did you mean" for an unknown option or an invalid choice, else ``""``."""
    if message.startswith("unrecognized arguments:"):
        for token in message.split(":", 1)[1].split():
            elsewhere = ELSEWHERE.get((parser.prog, token.split("=", 1)[0]))
            if elsewhere:
                return f" {elsewhere}"
            if token.startswith("--"):
                hint = did_you_mean(token.split("=", 1)[0], _options(parser))
                if hint:
                    return hint
        return ""
    match = _CHOICE.search(message)
    if match:
        return did_you_mean(match.group(1), re.findall(r"'([^']*)'", match.group(2)))
    return ""


#: Every command: its module in :mod:`scalefit.cli` and its one-line help. The parser of a
#: command is built only when that command runs (``scalefit fit`` imports no other command's
#: module); the others are listed by name and help alone.
COMMANDS: dict[str, tuple[str, str]] = {
    "allocate": ("allocate", "compute-optimal depth, width and tokens for FLOP budgets"),
    "bayes": ("bayes", "fit a scaling law by Bayesian inference (NUTS)"),
    "compare": ("bayes", "compare laws on one table by PSIS-LOO"),
    "curves": (
        "curves",
        "fit schedule-aware laws to loss curves (every checkpoint, not only the last)",
    ),
    "data": ("train", "offline corpora for the trainer"),
    "demo": (
        "demo",
        "fit the Chinchilla depth/width table (else a bundled one) and recommend shapes",
    ),
    "design": (
        "design",
        "choose the next runs that most shrink the uncertainty at a target budget",
    ),
    "fit": ("fit", "fit a scaling law by robust least squares"),
    "isoflop": (
        "isoflop",
        "IsoFLOP approaches 1, 2 (parabola, weighted parabola, profile) and 3 side by side",
    ),
    "laws": ("fit", "list the registered laws with their formulas"),
    "multiplier": (
        "multiplier",
        "compare two recipes: the compute multiplier at a target loss, with an interval",
    ),
    "plan": (
        "plan",
        "ask for runs, tell their losses, stop when the decision at a budget is pinned",
    ),
    "probe": (
        "probe",
        "hidden-state probes: a saved toy model, or a Hugging Face language model (hf)",
    ),
    "tasks": ("tasks", "downstream task accuracy from a model ladder, in two steps"),
    "toy": ("toy", "teacher–student toy: run sweeps, fit α_ℓ"),
    "train": ("train", "train reference transformers (one run, a grid, diagnostics)"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Build the top-level parser, each command's own parser only where it is needed.

    Parameters
    ----------
    command : str, optional
        Build only this command's parser; the others are listed by name and help (an unknown
        name or ``""``: none is built). ``None`` builds every command (the help tests walk them).
    """
    from .. import __version__

    parser = Parser(
        prog="scalefit",
        description="Fit, understand and act on neural scaling laws (width, depth and data).",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"scalefit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, text) in COMMANDS.items():
        if command is None or name == command:
            sub.only = name
            importlib.import_module(f"{__name__}.{module}").register(sub)
            sub.only = None
        else:
            sub.add_parser(name, help=text)
    return parser


def _command_word(argv: Sequence[str] | None) -> str:
    """The command a command line names: its first word that is not an option."""
    given = sys.argv[1:] if argv is None else argv
    return next((word for word in given if not word.startswith("-")), "")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Print warnings as one line (``scalefit: warning: ...``), not with source context."""
    print(f"scalefit: warning: {message}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used by the console script)."""
    # warnings print as one line while the command runs; the caller's hooks and filters are
    # restored afterwards (main may be called in-process: tests, notebooks)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _main(argv)


#: Commands whose files are all written or none (:func:`scalefit.core._io.all_or_nothing`): they
#: write their outputs at the end and read none of them back. The producers (``train``, ``data``,
#: ``toy run``, ``probe hf``) keep checkpoints that must survive a kill, so they write at once.
_REPORT_COMMANDS = frozenset(
    {"allocate", "bayes", "compare", "curves", "demo", "design", "fit", "isoflop", "tasks"}
    | {"multiplier"}
    | {"toy fit", "probe toy"}
)


class _HeldBack(io.TextIOBase):
    """Standard output of a command whose files are all written or none.

    From the first ``wrote PATH`` line on, what the command prints is held until its files are
    in place (:func:`scalefit.core._io.all_or_nothing`): a command that fails after writing one file
    (``--out r.json --plots DIR`` with a figure's name taken by a folder) removes it and does
    not say it wrote it.
    """

    def __init__(self, out: Any) -> None:
        self._out = out
        self._held: list[str] | None = None

    def write(self, text: str) -> int:  # noqa: D102 - io's own
        if self._held is None and text.lstrip("\n").startswith("wrote "):
            self._held = []
        if self._held is None:
            return self._out.write(text)
        self._held.append(text)
        return len(text)

    def flush(self) -> None:  # noqa: D102 - io's own
        self._out.flush()

    def isatty(self) -> bool:  # noqa: D102 - io's own
        return self._out.isatty()

    def release(self) -> None:
        """Print what was held."""
        self._out.write("".join(self._held or ()))


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser(_command_word(argv))
    _ACTIVE.clear()
    args = parser.parse_args(argv)
    command = _ACTIVE[-1]  # the parser of the (sub-)command that runs: the last one entered
    if getattr(args, "func", None) is None:  # a command group without its sub-command
        command.print_help()
        return EXIT_BAD_INPUT
    from ..core._io import all_or_nothing

    name = command.prog.removeprefix("scalefit ")  # "fit", "toy fit", ...
    staged = name in _REPORT_COMMANDS or name.split()[0] in _REPORT_COMMANDS
    held = _HeldBack(sys.stdout) if staged else None
    try:
        with all_or_nothing() if staged else contextlib.nullcontext():
            with contextlib.redirect_stdout(held) if held else contextlib.nullcontext():
                code = args.func(args)
        if held:  # the files are in place: now say so
            held.release()
    except ModuleNotFoundError as exc:  # an optional dependency imported deep in a command
        from ..core.errors import missing_extra

        err = missing_extra(exc)
        if err is None:
            raise
        print(f"scalefit: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ScaleFitError, MissingExtraError, FileNotFoundError, SweepError) as exc:
        print(f"scalefit: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UnicodeDecodeError as exc:
        print(
            f"scalefit: error: an input file is not UTF-8 text ({exc.reason} at byte "
            f"{exc.start}); expected UTF-8.",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return EXIT_OK
    except OSError as exc:  # a path of the wrong kind (a folder for a file), a name too long, ...
        if exc.filename is None and not exc.strerror:
            raise
        where = exc.filename if exc.filename is not None else "a path"
        where = str(where) if len(str(where)) <= 200 else str(where)[:200] + "..."
        print(f"scalefit: error: {where}: {exc.strerror or exc}.", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("scalefit: interrupted", file=sys.stderr)
        return 130
    return EXIT_OK if code is None else int(code)


def run(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``scalefit`` console script and of ``python -m scalefit``.

    Runs :func:`main` and then freezes Python's garbage collector (:func:`gc.freeze`) before
    the interpreter exits. Python's finalisation runs several full collections over every
    object still alive; after JAX and pandas are imported that is about 0.2 s per command on
    the 2-core development machine (one full collection 0.055 s), spent after the command's
    work is done and its output written (see "Fresh-process latency" in
    docs/performance.md). Frozen objects are left to the operating system instead. Nothing in
    scalefit depends on a finaliser running at exit: files are written atomically and closed
    before the command returns, and ``atexit`` handlers (logging, multiprocessing, temporary
    folders) still run. :func:`main` itself leaves the collector alone, so calling it
    in-process (tests, notebooks) changes nothing.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code.
    """
    import gc

    global OWNS_PROCESS
    OWNS_PROCESS = True
    code = main(argv)
    gc.freeze()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
