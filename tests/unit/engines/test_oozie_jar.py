"""The java action's main class, compiled by `tony oozie jar` and run as Oozie's launcher runs a java action's
main (a JVM that calls main(), the output file named by a system property): its captured output, its
one-line failure and the environment it gives the command."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tony_airflow.engines.oozie_jar import JAR_NAME, MAIN_CLASS, build_jar
from tony_airflow.errors import UsageError

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")

# Calls the main as Oozie's launcher does (JavaMain: reflection), and prints its exception's message as the
# launcher makes it the action's error message (LauncherAM: cause.getMessage()).
LAUNCHER = """
public class Launcher {
    public static void main(String[] args) throws Exception {
        try {
            Class.forName(args[0]).getMethod("main", String[].class)
                .invoke(null, (Object) java.util.Arrays.copyOfRange(args, 1, args.length));
            System.out.println("OK");
        } catch (java.lang.reflect.InvocationTargetException e) {
            System.out.println("ERROR " + e.getCause().getMessage());
        }
    }
}
"""


@pytest.fixture(scope="module")
def launcher(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("launcher")
    build_jar(d)
    (d / "Launcher.java").write_text(LAUNCHER)
    subprocess.run(["javac", "-d", str(d), str(d / "Launcher.java")], check=True)
    return d


def _launch(launcher: Path, work: Path, *command: str) -> tuple[str, str, Path]:
    output = work / "output.properties"
    proc = subprocess.run(["java", f"-Doozie.action.output.properties={output}",
                           f"-Doozie.action.conf.xml={work / 'action.xml'}",
                           "-cp", f"{launcher}:{launcher / JAR_NAME}", "Launcher", MAIN_CLASS, *command],
                          capture_output=True, text=True, cwd=work, timeout=60)
    return proc.stdout.splitlines()[-1], proc.stderr, output


def test_the_jar_holds_the_main_class_and_is_written_whole(tmp_path):
    jar = build_jar(tmp_path / "lib")
    assert jar == tmp_path / "lib" / JAR_NAME and [p.name for p in (tmp_path / "lib").iterdir()] == [JAR_NAME]
    with zipfile.ZipFile(jar) as z:
        assert "tony/oozie/ActionMain.class" in z.namelist() and z.namelist()[0] == "META-INF/MANIFEST.MF"
        major = int.from_bytes(z.read("tony/oozie/ActionMain.class")[6:8], "big")
    assert major == 52  # Java 8: any Oozie 5's JVM loads it


def test_stdout_is_the_actions_data_and_the_command_gets_the_action_conf(launcher, tmp_path):
    script = "import os; print('application_id=application_1_0001'); print('conf=' + os.environ['OOZIE_ACTION_CONF_XML'])"
    last, _, output = _launch(launcher, tmp_path, sys.executable, "-c", script)
    assert last == "OK"
    assert output.read_text() == f"application_id=application_1_0001\nconf={tmp_path / 'action.xml'}\n"


def test_a_failing_command_fails_the_main_with_its_last_line_on_stderr(launcher, tmp_path):
    script = "import sys; print('a=1'); print('progress', file=sys.stderr); sys.exit('application_1_0001 FAILED: loss is NaN')"
    last, stderr, output = _launch(launcher, tmp_path, sys.executable, "-c", script)
    assert last == "ERROR application_1_0001 FAILED: loss is NaN"
    assert "progress" in stderr  # the command's stderr is passed through to the launcher's log
    assert output.read_text() == "a=1\n"


def test_a_relative_executable_puts_its_directory_first_on_path(launcher, tmp_path):
    """A shipped environment (`<archive>env.tar.gz#tonyenv</archive>`, run as tonyenv/bin/python): its bin/ is
    on PATH for what the command starts, as the shell action's `<env-var>PATH=...` did."""
    (tmp_path / "tonyenv" / "bin").mkdir(parents=True)
    (tmp_path / "tonyenv" / "bin" / "python").symlink_to(sys.executable)
    last, _, output = _launch(launcher, tmp_path, "tonyenv/bin/python", "-c",
                              "import os; print('first=' + os.environ['PATH'].split(':')[0])")
    assert (last, output.read_text()) == ("OK", f"first={tmp_path / 'tonyenv' / 'bin'}\n")


def test_a_command_that_cannot_start_or_says_nothing_is_still_one_line(launcher, tmp_path):
    assert _launch(launcher, tmp_path, "no-such-program")[0].startswith("ERROR cannot run no-such-program: ")
    assert _launch(launcher, tmp_path, "false")[0] == "ERROR false exited with code 1 and wrote nothing on stderr"
    assert _launch(launcher, tmp_path)[0].startswith("ERROR arg: none given; allowed: the command to run")


def test_a_file_in_place_of_the_directory_is_one_line(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="^DIR: .* is a file; allowed: a directory"):
        build_jar(tmp_path / "f")


def test_a_source_that_does_not_compile_is_one_line_and_leaves_no_jar(tmp_path, monkeypatch):
    from tony_airflow.engines import oozie_jar

    broken = tmp_path / "ActionMain.java"
    broken.write_text("package tony.oozie; public final class ActionMain { oops }\n")
    monkeypatch.setattr(oozie_jar, "SOURCE", broken)
    with pytest.raises(UsageError) as raised:
        build_jar(tmp_path / "lib")
    assert str(raised.value).startswith("javac: ActionMain.java did not compile: ") and "\n" not in str(raised.value)
    assert list((tmp_path / "lib").iterdir()) == []
