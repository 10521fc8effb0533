"""MkDocs hook: the reference pages' tables, generated from the code at every build (never written by hand).

A page holds a line `<!-- reference: NAME -->`; the build replaces it with NAME's markdown:
- `cli:<command>`: every option of that command's argparse parser (and of its subcommands);
- `job-file`: the job file's keys (core.spec), each with the ytf-submit option that sets it;
- `azkaban`: the `.job` keys the jobtype reads (engines.azkaban), ours and TonY's;
- `refusals`: every one-line refusal (exit code 2) the code can raise, read from its `UsageError(...)` calls.
An unknown NAME, or a job-file key with neither an option nor a line below, fails the build.
The Airflow classes' arguments come from their docstrings through mkdocstrings (`::: module.Class`).
"""

from __future__ import annotations

import argparse
import ast
import html
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent / "tony_airflow"
# where a refusal comes from, by module path (the first prefix that matches), for the reader
AREAS = (("providers/", "Airflow"), ("engines/azkaban", "Azkaban"), ("cli/azkaban", "Azkaban"),
         ("engines/oozie", "Oozie"), ("cli/oozie", "Oozie"), ("local/cluster/", "the local cluster"),
         ("local/containers/", "images and container engines"), ("yarn/", "the Hadoop client: configuration, Kerberos"),
         ("core/history", "history"), ("cli/history", "history"), ("", "the job: options, job file, operator"))
# the marker, and the line below it that a reader on GitHub sees instead of the tables (the build drops it)
MARK = re.compile(r"^<!-- reference: (?P<name>[\w:-]+) -->$(?:\n(?P<note>> On GitHub: .*)$)?", re.MULTILINE)
GITHUB_NOTE = ("> On GitHub: the table here is generated from the code when the site is built "
               "(`make docs`, then open `site/{page}/index.html`).")

# job-file keys that no ytf-submit option of the same name sets: what they hold
JOB_FILE_ONLY = {
    "tasks": "a mapping of task type to its own fields (listed below the table), instead of "
             "`cluster_requirement`",
    "command": "the command every task runs (ytf-submit's positional `task_command`)",
    "env": "a mapping of environment variables for every task (ytf-submit's `--env K=V`)",
    "timeouts": "a mapping: `application`, `allocation`, `registration`, `heartbeat` seconds "
                "(ytf-submit's `--timeout`, `--allocation-timeout`, ...)",
    "heartbeat_interval": "seconds between an executor's heartbeats to the AM",
    "stop_grace": "seconds a stopped task's command gets between SIGTERM and SIGKILL",
    "am_memory": "the AM container's memory",
    "am_vcores": "the AM container's vcores",
    "principal": "Kerberos: the principal to log in as (read by the front end, never in the job's spec)",
    "keytab": "Kerberos: its keytab (handed to the AM alone, for token renewal)",
}


def _cell(text: str) -> str:
    """One table cell of prose: one line, `|` escaped, and `<`, `>`, `&` outside code spans as entities, or the
    browser takes `<n>` for a tag and shows `GPUs: '' or ':'` (issue #53 item 1)."""
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    return "`".join(html.escape(p, quote=False) if i % 2 == 0 else p for i, p in enumerate(parts))


def _code_cell(text: str) -> str:
    """One table cell shown as code: markdown escapes a code span's `<` itself."""
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    """A code span that may itself hold backticks."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    try:
        text = text % {"default": action.default, "prog": ""}
    except (KeyError, TypeError, ValueError):
        pass
    if action.choices is not None and not isinstance(action.choices, range) and not isinstance(
            action, argparse._SubParsersAction):
        text += f" (one of: {', '.join(f'`{c}`' for c in action.choices)})"
    return _cell(text)


def parser_markdown(parser: argparse.ArgumentParser, level: int = 2) -> str:
    """A parser's options as a table, then each subcommand's under its own heading."""
    out = [f"{'#' * level} `{parser.prog}`", ""]
    if parser.description:
        out += [_cell(parser.description), ""]
    rows, subs = [], []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            subs += [(sub, helps.get(name, "")) for name, sub in action.choices.items()]
            continue
        if action.option_strings:
            names = ", ".join(f"`{o}`" for o in shown_options(action))
            value = "" if action.nargs == 0 else f"`{action.metavar or action.dest.upper()}`"
        else:
            names, value = f"`{action.metavar or action.dest}` (positional)", ""
        rows.append(f"| {names} | {value} | {_help(action)} |")
    if rows:
        out += ["| option | value | what it does |", "|---|---|---|", *rows, ""]
    if parser.epilog:
        out += [_cell(parser.epilog), ""]
    for sub, text in subs:
        if text:
            sub.description = sub.description or text
        out.append(parser_markdown(sub, level + 1))
    return "\n".join(out)


def shown_options(action: argparse.Action) -> list[str]:
    from tony_airflow.cli.common import shown_options as shown

    return shown(action)


def _parsers() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    from tony_airflow.cli import azkaban, oozie, submit, tony

    return {"ytf-submit": submit.build_parser, "tony": tony.build_parser, "tony-azkaban": azkaban.build_parser,
            "tony-oozie": oozie.build_parser, "tony-oozie-workflow": oozie.workflow_parser}


def job_file_markdown() -> str:
    from tony_airflow.cli.submit import build_parser
    from tony_airflow.core.spec import CREDENTIAL_KEYS, JOB_FILE_KEYS, TASK_KEYS, TIMEOUT_KEYS

    options = {a.dest: a for a in build_parser()._actions if a.option_strings}
    rows = []
    for key in sorted(JOB_FILE_KEYS | CREDENTIAL_KEYS):
        action = options.get(key)
        if action is not None:
            rows.append(f"| `{key}` | {', '.join(f'`{o}`' for o in shown_options(action))} | {_help(action)} |")
        elif key in JOB_FILE_ONLY:
            rows.append(f"| `{key}` | | {_cell(JOB_FILE_ONLY[key])} |")
        else:
            raise ValueError(f"job-file key {key!r}: no ytf-submit option sets it and docs_hooks.JOB_FILE_ONLY "
                             "does not say what it holds")
    return "\n".join(["| key | ytf-submit option | what it holds |", "|---|---|---|", *rows, "",
                      f"Keys of one entry of `tasks`: {', '.join(f'`{k}`' for k in sorted(TASK_KEYS))}.", "",
                      f"Keys of `timeouts`: {', '.join(f'`{k}`' for k in sorted(TIMEOUT_KEYS))}.", ""])


def azkaban_markdown() -> str:
    from tony_airflow.engines import azkaban as az

    rows = [f"| `{k}` | `{'command' if k == 'task_command' else k}` |"
            for k in az.SEED_KEYS]
    rows += [f"| `{k}` (TonY) | `{k}` |" for k in az.TONY_KEYS]
    rows += [f"| `{k}` (TonY) | `{v}` |" for k, v in az.TONY_APPLICATION_KEYS.items()]
    rows += [f"| `tony.<type>.{k}` (TonY) | `tasks.<type>.{v}` |" for k, v in az.TONY_TASK_FIELDS.items()]
    rows += [f"| `{k}` (TonY) | Docker: the image and mounts of every task |" for k in az.TONY_DOCKER_KEYS]
    rows += ["| `tony.docker.<type>.image` (TonY) | `docker_image` of one type |",
             f"| `{az.ENV_PREFIX}<NAME>` | `env.<NAME>` |"]
    rows += [f"| `{k}` (Azkaban's own) | the application tag `{v}:…` |" for k, v in az.AZKABAN_TAG_KEYS.items()]
    return "\n".join(["| `.job` key | job-file key it sets |", "|---|---|", *rows, ""])


def _texts(node: ast.AST, constants: dict[str, ast.AST]) -> list[str]:
    """What a message expression can print, `…` for each value filled in (an `if/else` gives both)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [a + b for a in _texts(node.left, constants) for b in _texts(node.right, constants)]
    if isinstance(node, ast.IfExp):
        return _texts(node.body, constants) + _texts(node.orelse, constants)
    if isinstance(node, ast.Name) and node.id in constants:
        return _texts(constants[node.id], constants)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return [re.sub(r"\{[^}]*\}", "…", t) for t in _texts(node.func.value, constants)]
    return []


def refusals() -> list[tuple[str, str, str]]:
    """(area, module, line) of every `UsageError(<message>)` in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        constants = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                     if isinstance(t, ast.Name)}
        module = path.relative_to(PACKAGE).as_posix()
        area = next(name for prefix, name in AREAS if module.startswith(prefix))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "UsageError"
                    and node.args):
                texts = _texts(node.args[0], constants)
                if not texts:
                    raise ValueError(f"{module}:{node.lineno}: a refusal whose words docs_hooks cannot read")
                found += [(area, module, " ".join(t.split())) for t in texts]
    return sorted(set(found))


def refusals_markdown() -> str:
    rows = [f"| {area} | {_code(_code_cell(line))} | `{module}` |" for area, module, line in refusals()]
    return "\n".join(["| where | the line (after `error: `; … is a value of yours) | module |", "|---|---|---|",
                      *rows, ""])


def render(name: str) -> str:
    if name.startswith("cli:"):
        factory = _parsers().get(name[4:])
        if factory is None:
            raise ValueError(f"reference {name!r}: no such command; known: {', '.join(_parsers())}")
        return parser_markdown(factory())
    makers = {"job-file": job_file_markdown, "azkaban": azkaban_markdown, "refusals": refusals_markdown}
    if name not in makers:
        raise ValueError(f"reference {name!r}: unknown; known: cli:<command>, {', '.join(makers)}")
    return makers[name]()


def github_note(src_uri: str) -> str:
    """The line under a marker that tells a reader of the markdown (on GitHub) where the tables are."""
    return GITHUB_NOTE.format(page=src_uri.removesuffix(".md"))


def expand(markdown: str, src_uri: str) -> str:
    """Every marker replaced by its tables; a marker without the GitHub line under it fails the build."""
    def one(match: re.Match[str]) -> str:
        if match.group("note") != github_note(src_uri):
            raise ValueError(f"{src_uri}: the line under <!-- reference: {match.group('name')} --> must be "
                             f"{github_note(src_uri)!r} (what a reader on GitHub sees instead of the tables)")
        return render(match.group("name"))
    return MARK.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any = None, **kwargs: Any) -> str:
    return expand(markdown, page.file.src_uri if page is not None else "")
