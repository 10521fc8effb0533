"""The site's references are generated from the code (docs_hooks.py, at every `mkdocs build`): every option
of every command is in its page, every job-file key is explained, and a page naming a reference that does
not exist fails the build. The links of the README (the front page) lead to pages that exist."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import docs_hooks
from tony_airflow.cli.common import shown_options
from tony_airflow.core import spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", sorted(docs_hooks._parsers()))
def test_every_option_of_every_command_is_in_its_reference(command):
    page = docs_hooks.render(f"cli:{command}")
    missing = []

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)
            elif not isinstance(action, argparse._HelpAction):
                missing.extend(o for o in shown_options(action) if f"`{o}`" not in page)
    walk(docs_hooks._parsers()[command]())
    assert not missing


def test_every_job_file_key_is_in_the_reference_and_a_new_one_without_words_fails(monkeypatch):
    page = docs_hooks.render("job-file")
    assert not [k for k in spec.JOB_FILE_KEYS | spec.CREDENTIAL_KEYS if f"| `{k}` |" not in page]
    monkeypatch.setattr(spec, "JOB_FILE_KEYS", spec.JOB_FILE_KEYS | {"brand_new"})
    with pytest.raises(ValueError, match="job-file key 'brand_new'"):
        docs_hooks.render("job-file")


def test_the_azkaban_reference_names_every_key_the_jobtype_reads():
    from tony_airflow.engines import azkaban

    page = docs_hooks.render("azkaban")
    assert not [k for k in azkaban.OURS if f"`{k}`" not in page]


def test_every_refusal_in_the_code_is_on_the_troubleshooting_page():
    """Each `UsageError(...)` call's words, read from the source (a call whose words cannot be read fails the
    build); a new one appears without anyone writing it."""
    modules = {module for _, module, _ in docs_hooks.refusals()}
    assert {"core/spec.py", "engines/azkaban.py", "providers/yarn/connection.py", "yarn/kerberos.py"} <= modules
    page = docs_hooks.render("refusals")
    assert "elastic: … — MIN must be at least 1 and at most MAX; allowed: MIN:MAX with 1 <= MIN <= MAX workers" in page
    assert "| Azkaban |" in page and "| Airflow |" in page


def test_a_page_naming_an_unknown_reference_fails_the_build():
    note = docs_hooks.github_note("x.md")
    with pytest.raises(ValueError, match="unknown"):
        docs_hooks.expand(f"<!-- reference: nothing -->\n{note}\n", "x.md")
    with pytest.raises(ValueError, match="no such command"):
        docs_hooks.expand(f"<!-- reference: cli:nothing -->\n{note}\n", "x.md")


def test_a_marker_without_the_line_a_github_reader_sees_fails_the_build():
    """On GitHub a page shows its markdown, where the marker is an invisible comment: the line under it says
    where the tables are; the build checks it is there and drops it."""
    with pytest.raises(ValueError, match="must be '> On GitHub: "):
        docs_hooks.expand("<!-- reference: job-file -->\n", "reference/job-file.md")
    page = docs_hooks.expand(f"<!-- reference: job-file -->\n{docs_hooks.github_note('reference/job-file.md')}\n",
                             "reference/job-file.md")
    assert "On GitHub" not in page and "| `task_gpus` |" in page
    for path in sorted((ROOT / "docs").rglob("*.md")):
        src = path.relative_to(ROOT / "docs").as_posix()
        for match in docs_hooks.MARK.finditer(path.read_text()):
            assert match.group("note") == docs_hooks.github_note(src), (src, match.group("name"))


@pytest.mark.parametrize("name", ["cli:ytf-submit", "cli:tony", "cli:tony-oozie", "cli:tony-oozie-workflow",
                                  "job-file", "refusals"])
def test_placeholders_reach_the_html_as_text(name):
    """Issue #53 item 1: `<n>` in a help text is text, not a tag the browser drops ('' or ':')."""
    import markdown

    body = markdown.markdown(docs_hooks.render(name), extensions=["tables"])
    assert "<n>" not in body and "<type>" not in body
    assert "&lt;n&gt;" in body or "&lt;type&gt;" in body or "&lt;" in body, name


def test_the_readme_is_a_front_page_whose_links_lead_to_pages():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert text.splitlines()[3:5] == ["make demo   # start a local YARN + HDFS and run the example Airflow "
                                      "pipeline (training on YARN) on it",
                                      "make test   # the whole test suite, end-to-end tests on a real local "
                                      "YARN + HDFS"]
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links and not [link for link in links if not (ROOT / link).is_file()]
