"""The site's references are generated from the code (docs_hooks.py, at every `mkdocs build`): every option
of every command is in its page, every job-file key is explained, and a page naming a reference that does
not exist fails the build. The links of the README (the front page) lead to pages that exist."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import docs_hooks
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
                missing.extend(o for o in action.option_strings if f"`{o}`" not in page)
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
    with pytest.raises(ValueError, match="unknown"):
        docs_hooks.on_page_markdown("<!-- reference: nothing -->\n")
    with pytest.raises(ValueError, match="no such command"):
        docs_hooks.on_page_markdown("<!-- reference: cli:nothing -->\n")


def test_the_readme_is_a_front_page_whose_links_lead_to_pages():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert text.splitlines()[3:5] == ["make demo   # start a local YARN + HDFS and run the example Airflow "
                                      "pipeline (training on YARN) on it",
                                      "make test   # the whole test suite, end-to-end tests on a real local "
                                      "YARN + HDFS"]
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links and not [link for link in links if not (ROOT / link).is_file()]
