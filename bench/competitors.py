"""Whether the tools we compare with can run here, found out live on every bench run.

The issue asks for TonY 0.5.3 from Maven Central and for tf-yarn "if it installs
next to our dependencies". Each check returns a short reason for the table and
one line for docs/BENCHMARKS.md with the command and what it answered, so a
missing row always says why.
"""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

TONY_METADATA = "https://repo1.maven.org/maven2/com/linkedin/tony/tony-cli/maven-metadata.xml"
TF_YARN = "tf-yarn==0.7.0"  # the `tfyarn` extra
_VERSIONS = "import importlib.metadata as m; print(m.version('tf-yarn'), m.version('tensorflow-cpu'))"


def tony() -> tuple[str, str]:
    """(short reason, evidence): TonY's CLI jar on Maven Central, the only Java repository this
    machine reaches."""
    try:
        code = httpx.get(TONY_METADATA, timeout=20, follow_redirects=True).status_code
    except httpx.HTTPError as exc:
        return "Maven Central unreachable", f"TonY 0.5.3: Maven Central unreachable ({exc})"
    if code == 200:
        return "published, not wired", f"TonY: {TONY_METADATA} answers 200; no runner is written for it"
    return "not on Maven Central", (
        "TonY 0.5.3 cannot be fetched: com.linkedin.tony:tony-cli is not on Maven Central "
        f"(curl -s -o /dev/null -w '%{{http_code}}' {TONY_METADATA} -> {code}; TonY was published "
        "to LinkedIn's own repository), so it has no figures and there is no ratio to TonY")


def tf_yarn() -> tuple[str, str]:
    """(short reason, evidence): tf-yarn installed beside our dependencies, and whether its
    TensorFlow API imports. `make bench` installs it with our TensorFlow extra into a venv of
    its own (it would downgrade python-dateutil in ours) and names that venv's Python in
    TONY_BENCH_TFYARN_PYTHON."""
    python = os.environ.get("TONY_BENCH_TFYARN_PYTHON") or sys.executable
    versions = subprocess.run([python, "-c", _VERSIONS], capture_output=True, text=True, timeout=120)
    if versions.returncode != 0:
        return "not installed", (
            f"tf-yarn is not installed for {python}; `make bench` installs {TF_YARN} (the `tfyarn` extra) "
            "with our dependencies into .venv-tfyarn to find out whether it runs")
    version, tensorflow = versions.stdout.split()
    proc = subprocess.run([python, "-c", "import tf_yarn.tensorflow"], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        error = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return "does not run with our TensorFlow", (
            f"tf-yarn {version} installs beside our dependencies (`pip install -e '.[tensorflow,tfyarn]'`) "
            f"but does not run with our TensorFlow {tensorflow}: `python -c 'import tf_yarn.tensorflow'` -> "
            f"{error} (its TensorFlow API is built on tf.estimator, which TensorFlow removed in 2.16; "
            "tf-yarn's README names TensorFlow 1.15 to 2.2), so it has no row")
    return "imports, not wired", (
        f"tf-yarn {version} imports with TensorFlow {tensorflow}; no runner is written for it "
        "(its jobs are experiment functions, not commands)")
