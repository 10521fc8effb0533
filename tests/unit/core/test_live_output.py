"""A task's live output: the executor's tee, the AM's store, the reader's cursor, the aggregated file."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from tony_airflow.core import protocol
from tony_airflow.core.am.outputs import Outputs, default_task
from tony_airflow.core.executor.child import UserProcess
from tony_airflow.core.executor.output_tee import OutputTee
from tony_airflow.core.output import OutputCursor, OutputLog, aggregated_text, failed_task, output_file_name
from tony_airflow.core.output_follow import FollowState, LiveOutput, OutputFollower

TRACKING = "http://rm:8088/proxy/application_1_0001/"


def test_output_log_keeps_the_last_characters_with_absolute_offsets():
    log = OutputLog(keep=10)
    log.append("0123456789abcdef")
    assert (log.start, log.end) == (6, 16)
    assert log.read(0) == (6, "6789abcdef")   # fell behind: the oldest held, and where it starts
    assert log.read(12, limit=2) == (12, "cd")
    log.write_at(14, "efgh")                   # a re-sent piece: only what is new is taken
    assert log.read(14) == (14, "efgh")
    log.write_at(30, "xyz")                    # the sender dropped 12 characters: a gap
    assert log.read(0) == (30, "xyz") and log.end == 33


def test_cursor_yields_whole_lines_and_says_what_it_skipped():
    cur = OutputCursor(task="worker:0")
    assert cur.take({"attempt": 1, "offset": 0, "end": 9, "text": "epoch 1\nep"}) == ["epoch 1"]
    assert cur.take({"attempt": 1, "offset": 10, "end": 20, "text": "och 2\r\nloss"}) == ["epoch 2"]
    skipped = cur.take({"attempt": 1, "offset": 40, "end": 45, "text": "x\n"})
    assert skipped == ["loss", "[19 characters of output skipped]", "x"]
    # a new attempt starts from 0 and is announced, and what this reader missed of the last one is said
    assert cur.take({"attempt": 2, "offset": 0, "end": 3, "text": "a\nb"}) == [
        "[the end of attempt 1's output (3 characters or more) was not read before attempt 2 began: "
        "`tony logs` has it]", "--- attempt 2 ---", "a"]
    assert cur.rest("c\nd") == ["bc", "d"]  # the aggregated file from the cursor's offset (3) on


def test_an_attempt_read_to_its_end_is_followed_by_the_next_without_a_marker():
    cur = OutputCursor(task="worker:0")
    cur.take({"attempt": 1, "offset": 0, "end": 5, "text": "done\n", "finished": True})
    assert cur.take({"attempt": 2, "offset": 0, "end": 2, "text": "a\n"}) == ["--- attempt 2 ---", "a"]


def test_a_crlf_cut_between_two_pieces_is_one_line_end():
    cur = OutputCursor(task="worker:0")
    assert cur.take({"attempt": 1, "offset": 0, "end": 9, "text": "epoch 1\r"}) == []
    assert cur.take({"attempt": 1, "offset": 8, "end": 18, "text": "\nepoch 2\r\n"}) == ["epoch 1", "epoch 2"]
    assert cur.take({"attempt": 1, "offset": 18, "end": 30, "text": "50%\r"}) == []
    assert cur.take({"attempt": 1, "offset": 22, "end": 30, "text": "100%\n"}) == ["50%", "100%"]  # a bare \r
    assert cur.take({"attempt": 1, "offset": 27, "end": 30, "text": "x\r"}) == [] and cur.flush() == ["x"]


def test_the_partial_line_a_reader_holds_is_bounded():
    """It travels in the Airflow trigger's event: a command printing without newlines must not grow it."""
    from tony_airflow.core.output import MAX_PARTIAL_CHARS

    cur = OutputCursor(task="worker:0")
    lines = cur.take({"attempt": 1, "offset": 0, "end": 10 ** 6, "text": "." * (3 * MAX_PARTIAL_CHARS + 5)})
    assert lines == ["." * MAX_PARTIAL_CHARS] * 3 and cur.partial == "." * 5


def test_the_am_keeps_the_current_attempt_of_each_task_and_answers_by_offset():
    outs = Outputs(["ps:0", "worker:0", "worker:1"])
    assert outs.default == "worker:0" and default_task(["ps", "chief", "worker"]) == "chief:0"
    assert outs.receive(protocol.Output("worker", 0, 1, 0, "hello\n", "c_1"), current_attempt=1) is None
    assert outs.receive(protocol.Output("worker", 0, 1, 6, "world\n"), current_attempt=1) is None
    assert "over" in outs.receive(protocol.Output("worker", 0, 0, 0, "old"), current_attempt=1)
    assert "no task" in outs.receive(protocol.Output("evaluator", 0, 1, 0, "x"), current_attempt=1)
    answer = outs.answer(None, 1, 6, finished=False)
    assert answer == {"task": "worker:0", "attempt": 1, "container_id": "c_1", "offset": 6, "end": 12,
                      "text": "world\n", "finished": False}
    outs.receive(protocol.Output("worker", 0, 2, 0, "again\n"), current_attempt=2)
    assert outs.answer("worker:0", 1, 12, finished=True)["text"] == "again\n"  # older attempt asked: from 0
    assert outs.answer("worker:1", 1, 0, finished=False)["attempt"] == 0       # nothing shipped yet


def test_the_tee_keeps_both_streams_in_a_file_and_ships_them_in_order(tmp_path):
    shipped: list[tuple[int, str]] = []
    tee = OutputTee("worker", 0, 1, lambda o, t: shipped.append((o, t)), tmp_path, every=0.05).start()
    code = ("import sys,time\nprint('out 1', flush=True)\ntime.sleep(0.2)\n"
            "print('err é', file=sys.stderr, flush=True)\ntime.sleep(0.2)\nprint('out 2', end='')")
    proc = UserProcess(f"{sys.executable} -c \"{code}\"", {"PATH": "/usr/bin:/bin"}, on_output=tee.write,
                       stdout_sink=open("/dev/null", "wb"), stderr_sink=open("/dev/null", "wb"))
    assert proc.wait() == 0
    tee.close()
    whole = "out 1\nerr é\nout 2"
    assert (tmp_path / output_file_name("worker", 0, 1)).read_text() == whole
    assert "".join(t for _, t in shipped) == whole and shipped[0][0] == 0
    assert all(o == sum(len(t) for _, t in shipped[:i]) for i, (o, _) in enumerate(shipped))
    assert len(shipped) <= 6  # about one piece per ship round, not one per write


def test_the_tee_retries_what_the_am_refused_and_never_blocks_the_command(tmp_path):
    calls: list[int] = []

    def flaky(offset: int, text: str) -> None:
        calls.append(offset)
        if len(calls) == 1:
            raise OSError("AM busy")

    tee = OutputTee("worker", 0, 1, flaky, None, every=0.02).start()
    tee.write("stdout", b"line\n")
    deadline = time.monotonic() + 5
    while tee.shipped < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    tee.close()
    assert tee.shipped == 5 and calls[:2] == [0, 0]


LOGS_OUTPUT = """Container: container_1_0001_01_000003 on host_1
LogAggregationType: AGGREGATED
====================================================================
LogType:tony-output-worker-1-a1.txt
LogLastModifiedTime:Mon Nov 23 22:35:48 +0000 2026
LogLength:21
LogContents:
epoch 1
boom é
last
End of LogType:tony-output-worker-1-a1.txt
********************************************************************
"""


def test_aggregated_text_and_the_failed_task_are_read_from_hadoops_words():
    lines = LOGS_OUTPUT.splitlines(keepends=True)
    assert aggregated_text(lines, "tony-output-worker-1-a1.txt") == "epoch 1\nboom é\nlast\n"
    assert aggregated_text(lines, "tony-output-worker-1-a1.txt", skip=8) == "boom é\nlast\n"
    assert aggregated_text(lines, "tony-output-worker-1-a1.txt", tail=1) == "last\n"
    assert aggregated_text(lines, "tony-output-worker-0-a1.txt") is None
    diag = ("tony-airflow: FAILED: attempt 1/2: worker:0 exited with code 1 on h (container c); "
            "attempt 2/2: worker:1 exited with code 3 on h (container c2); stderr: boom")
    assert failed_task(diag) == ("worker:1", 2)
    assert failed_task("Application killed by user.") is None


def _response(answer: dict) -> httpx.Response:
    return httpx.Response(200, json=answer, request=httpx.Request("GET", TRACKING))


def test_follower_reads_through_the_tracking_url_then_the_rest_from_the_aggregated_file():
    asked: list[str] = []
    pieces = iter([{"task": "worker:1", "attempt": 1, "container_id": "container_1_0001_01_000003",
                    "offset": 0, "end": 8, "text": "epoch 1\n", "finished": False}])

    def get(url: str) -> httpx.Response:
        asked.append(url)
        answer = next(pieces, None)
        return _response(answer) if answer else httpx.Response(404, request=httpx.Request("GET", url))

    follower = OutputFollower(FollowState(task="worker:1"), max_lines=10)
    assert follower.poll("http://rm:8088/cluster/app/application_1_0001", get) == []  # no AM yet: nothing asked
    assert follower.poll(TRACKING, get) == ["[worker:1] epoch 1"]
    assert asked[0].startswith(TRACKING + "pages/tony/output.json?") and "task=worker%3A1" in asked[0]
    state = FollowState.from_dict(json.loads(json.dumps(follower.snapshot().to_dict())))  # through a trigger event
    later = OutputFollower(state)
    read = []

    def read_lines(app_id, container_id, pattern):
        read.append((app_id, container_id, pattern))
        return iter(LOGS_OUTPUT.splitlines(keepends=True))
    assert later.finish("application_1_0001", read_lines) == ["[worker:1] boom é", "[worker:1] last"]
    # every attempt of the task followed: a later one may have run unseen (issue #51)
    assert read == [("application_1_0001", None, r"tony-output-worker-1-a\d+\.txt")]


def test_follower_caps_the_lines_of_one_poll():
    follower = OutputFollower(max_lines=2)
    text = "".join(f"l{i}\n" for i in range(5))
    lines = follower.poll(TRACKING, lambda url: _response({"task": "worker:0", "attempt": 1, "offset": 0,
                                                           "end": len(text), "text": text}))
    assert lines == ["[worker:0] [3 lines not shown]", "[worker:0] l3", "[worker:0] l4"]


def test_live_output_shows_the_failing_tasks_last_lines_when_another_task_failed():
    emitted: list[str] = []
    live = LiveOutput(emitted.append, read_lines=lambda *a: iter(LOGS_OUTPUT.splitlines(keepends=True)),
                      state=FollowState(task="worker:0", attempt=1, finished=True))
    diag = "tony-airflow: FAILED: attempt 1/1: worker:1 exited with code 3 on h (container c)"
    live.finish("application_1_0001", "FAILED", diag, tail_lines=2)
    assert emitted == ["last lines of worker:1, which failed:", "[worker:1] boom é", "[worker:1] last"]


@pytest.mark.parametrize("error", [FileNotFoundError(2, "No such file or directory", "yarn"),
                                   subprocess.TimeoutExpired(["yarn", "logs"], 60)])
def test_the_end_of_the_live_output_never_changes_how_the_job_ended(error):
    """Issue #30 item 6: `ytf-submit --follow` exited 1 after SUCCEEDED when `yarn` was missing or slow."""
    emitted: list[str] = []

    def read_lines(*args):
        raise error

    live = LiveOutput(emitted.append, read_lines=read_lines, state=FollowState(task="worker:0", attempt=1))
    live.finish("application_1_0001", "SUCCEEDED", "tony-airflow: SUCCEEDED on attempt 1/1")
    assert len(emitted) == 1 and emitted[0].startswith("(the rest of the output could not be read:"), emitted


def test_reading_logs_without_a_yarn_command_is_an_answer_not_an_exception(monkeypatch, tmp_path):
    from tony_airflow.yarn import logs

    monkeypatch.setenv("PATH", str(tmp_path))  # no `yarn` anywhere
    monkeypatch.setattr(logs, "logs_command", lambda *a: [str(tmp_path / "yarn"), "logs"])
    monkeypatch.setattr(logs, "hadoop_env", lambda conf_dir=None: {"PATH": str(tmp_path)})
    code, text = logs.read_logs("application_1_0001")
    assert code != 0 and "yarn" in text
    assert list(logs.log_lines("application_1_0001")) == []  # streamed: nothing, and no exception


def test_the_aggregated_file_is_read_as_it_comes_and_only_what_is_kept_is_held():
    """Issue #30 item 7: `yarn logs` output was loaded whole into memory (a task may print gigabytes)."""
    from tony_airflow.core.output import AggregatedFile

    name = "tony-output-worker-0-a1.txt"
    body_lines = 200_000

    def stream():
        body = sum(len(f"line {i}\n") for i in range(body_lines))
        yield from ("Container: container_1 on h_8041\n", f"LogType:{name}\n", "LogLastModifiedTime:x\n",
                    f"LogLength:{body}\n", "LogContents:\n")
        yield from (f"line {i}\n" for i in range(body_lines))
        yield f"End of LogType:{name}\n"

    tail = AggregatedFile(name, tail=3)
    most_held = 0
    for line in stream():
        tail.feed(line)
        most_held = max(most_held, len(tail._kept))
    assert tail.text() == "line 199997\nline 199998\nline 199999\n" and most_held <= 4
    skip = sum(len(f"line {i}\n") for i in range(body_lines - 2))
    assert aggregated_text(stream(), name, skip=skip) == "line 199998\nline 199999\n"


# ------------------------------------------ issue #51 item 9: the output of a job that ended at once
def _aggregated(*files: tuple[str, str, str]) -> str:
    """`yarn logs` output holding (container, file name, content) in turn, in Hadoop's words."""
    out = []
    for container, name, text in files:
        out += [f"Container: {container} on host_1\n", "LogAggregationType: AGGREGATED\n", "=" * 68 + "\n",
                f"LogType:{name}\n", "LogLastModifiedTime:Mon Nov 23 22:35:48 +0000 2026\n",
                f"LogLength:{len(text.encode())}\n", "LogContents:\n", text, f"End of LogType:{name}\n",
                "*" * 68 + "\n", "\n"]
    return "".join(out)


SHORT_JOB = _aggregated(("container_1_0001_01_000002", "tony-output-ps-0-a1.txt", "ps says\n"),
                        ("container_1_0001_01_000003", "tony-output-worker-0-a1.txt", "hello\nLogType:not a file\n"),
                        ("container_1_0001_01_000004", "tony-output-worker-1-a1.txt", "other worker\n"),
                        ("container_1_0001_01_000003", "executor.log", "the executor's own log\n"))


def _reader(text: str, asked: list | None = None):
    def read_lines(app_id, container_id, pattern):
        if asked is not None:
            asked.append((container_id, pattern))
        return iter(text.splitlines(keepends=True))
    return read_lines


def test_a_job_that_ended_before_the_follower_heard_of_any_output_is_read_whole_from_the_aggregated_file():
    """`ytf-submit --follow "python3 -c \"print('hello')\""` printed no line of it: the task's output reached
    the AM and the job ended between two polls, so the follower knew no attempt and `finish` read nothing."""
    asked: list = []
    follower = OutputFollower()  # never answered: the AM's choice of task is not known either
    assert follower.finish("application_1_0001", _reader(SHORT_JOB, asked), wait=0) == [
        "[worker:0] hello", "[worker:0] LogType:not a file"]
    assert asked == [(None, r"tony-output-.*\.txt")]
    assert follower.cursor.task == "worker:0" and follower.cursor.finished


def test_a_follower_told_the_task_but_no_output_yet_reads_that_task_whole():
    """The AM answers attempt 0 until the task's first output arrives."""
    follower = OutputFollower()
    follower.poll(TRACKING, lambda url: _response({"task": "worker:1", "attempt": 0, "container_id": "",
                                                   "offset": 0, "end": 0, "text": "", "finished": False}))
    asked: list = []
    assert follower.finish("application_1_0001", _reader(SHORT_JOB, asked), wait=0) == ["[worker:1] other worker"]
    assert asked == [(None, r"tony-output-worker-1-a\d+\.txt")]


def test_the_chief_is_followed_by_default_as_the_am_does():
    logs = SHORT_JOB + _aggregated(("container_1_0001_01_000005", "tony-output-chief-0-a1.txt", "chief line\n"))
    assert OutputFollower().finish("application_1_0001", _reader(logs), wait=0) == ["[chief:0] chief line"]


def test_the_rest_of_the_attempt_followed_and_the_attempts_after_it_are_read_after_the_end():
    logs = _aggregated(("c1", "tony-output-worker-0-a1.txt", "one\ntwo\n"),
                       ("c2", "tony-output-worker-0-a2.txt", "again\n"),
                       ("c3", "tony-output-worker-0-a3.txt", "last\n"))
    follower = OutputFollower(FollowState(task="worker:0", attempt=2, offset=0))
    assert follower.finish("application_1_0001", _reader(logs), wait=0) == [
        "[worker:0] again", "[worker:0] --- attempt 3 ---", "[worker:0] last"]
    follower = OutputFollower(FollowState(task="worker:0", attempt=1, offset=4, partial=""))
    assert follower.finish("application_1_0001", _reader(logs), wait=0) == [
        "[worker:0] two", "[worker:0] --- attempt 2 ---", "[worker:0] again", "[worker:0] --- attempt 3 ---",
        "[worker:0] last"]


def test_no_aggregated_file_says_where_the_output_is():
    follower = OutputFollower()
    assert follower.finish("application_1_0001", _reader(""), wait=0) == [
        "(the output is in `yarn logs -applicationId application_1_0001`)"]
