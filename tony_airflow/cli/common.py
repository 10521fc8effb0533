"""What every command line shares: argparse that refuses in one line (with the closest spelling when a name
is mistyped), help in groups with each option's seed spelling hidden behind its dashed one, and one mapping
of errors onto exit codes (0 success, 1 failure, 2 bad input, 69 no cluster reached;
docs/submitting.md, "exit codes")."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence

from tony_airflow import __version__
from tony_airflow.core.spec_values import closest
from tony_airflow.errors import TonyError, UsageError, is_boundary_error, one_line
from tony_airflow.yarn.rest import is_application_id

VERSION = f"%(prog)s {__version__}"
# the seed's spellings (--task_vcores) are kept beside the dashed ones (--task-vcores): said once, in the epilog
ALIASES_NOTE = "Every --dashed-option also takes the seed's underscores: --task_vcores."


def spellings(*names: str) -> list[str]:
    """`names` and, for each `--long-name`, its seed alias `--long_name`: one option, both spellings accepted,
    the dashed one shown (HelpFormatter below)."""
    out = list(names)
    out += [n.replace("-", "_").replace("__", "--", 1) for n in names
            if n.startswith("--") and "-" in n[2:]]
    return out


def is_alias(option: str, all_options: Sequence[str]) -> bool:
    """An underscore spelling whose dashed twin is also an option string of the same action."""
    return option.startswith("--") and "_" in option and "--" + option[2:].replace("_", "-") in all_options


def shown_options(action: argparse.Action) -> list[str]:
    """The option strings a reader sees: the aliases of `spellings` left out."""
    return [o for o in action.option_strings if not is_alias(o, action.option_strings)]


class HelpFormatter(argparse.HelpFormatter):
    """`-c, --task-vcores N`: every spelling once, the value once, the underscore alias hidden."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 30,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, width)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings:
            return super()._format_action_invocation(action)
        names = ", ".join(shown_options(action))
        if action.nargs == 0:
            return names
        return f"{names} {self._format_args(action, self._get_default_metavar_for_optional(action))}"


def _all_options(parser: argparse.ArgumentParser) -> Iterator[str]:
    """Every option string of a parser and of its subcommands."""
    for action in parser._actions:
        yield from action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_options(sub)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """'; did you mean X?' for a close match, else ''."""
    match = closest(word, known)
    return f"; did you mean {match}?" if match else ""


UNRECOGNIZED = "unrecognized arguments: "
ARGUMENT = re.compile(r"argument ([-\w]+(?:/[-\w]+)+)")  # argparse's name of an option: all its spellings
INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)")


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad input as one line and exit code 2, naming the closest option or command."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        message = ARGUMENT.sub(lambda m: "argument " + "/".join(
            o for o in m[1].split("/") if not is_alias(o, m[1].split("/"))), message)
        raise UsageError(f"{self.prog}: {message}{self._suggestion(message)}")

    def _suggestion(self, message: str) -> str:
        if message.startswith(UNRECOGNIZED):
            word = next((w for w in message[len(UNRECOGNIZED):].split() if w.startswith("--")), "")
            return did_you_mean(word.partition("=")[0], set(_all_options(self))) if word else ""
        choice = INVALID_CHOICE.search(message)
        if choice:
            return did_you_mean(choice["word"], re.findall(r"'([^']*)'", choice["choices"]))
        return ""


def err(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def check_app_id(app_id: str) -> str:
    if not is_application_id(app_id):
        raise UsageError(f"application_id: {app_id!r} is malformed; allowed: application_<cluster ts>_<seq>")
    return app_id


def known_report(client, app_id: str):
    """The RM's report of `app_id`; an id it does not know is bad input in one line, not the RM's Java
    exception (`java.lang.Exception: app with id: … not found`)."""
    from tony_airflow.yarn.rest import ResourceManagerError

    try:
        return client.rm.application(app_id)
    except ResourceManagerError as exc:
        if exc.status != 404:
            raise
        raise UsageError(f"application_id: {app_id} is not known to the ResourceManager; allowed: an application "
                         "of this cluster (`tony history`, `yarn application -list -appStates ALL`)") from None


def run(argv: Sequence[str] | None, parser_factory: Callable[[], argparse.ArgumentParser],
        usage_when_bare: bool = False) -> int:
    """Parse and dispatch; map errors onto exit codes with one line on stderr. A command that needs arguments
    (`usage_when_bare`) and got none prints its usage and where the help is, exit 2."""
    try:
        parser = parser_factory()
        given = sys.argv[1:] if argv is None else list(argv)
        if usage_when_bare and not given:
            parser.print_usage(sys.stderr)
            err(f"{parser.prog}: no arguments; `{parser.prog} --help` lists the options")
            return 2
        args = parser.parse_args(given)
        return args.func(args)
    except TonyError as exc:
        err(f"error: {one_line(exc)}")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tony history show APP | head`: the reader left, which is no failure of ours
        _quiet_stdout()
        return 0
    except Exception as exc:  # a library failing at our boundary (skein's driver, httpx): one line, exit 1
        if not is_boundary_error(exc):
            raise
        err(f"error: {one_line(exc)}")
        return 1


def _quiet_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's exit flush does not raise again
    (Python's documented recipe, docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
