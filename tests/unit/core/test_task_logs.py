"""Issue #53 item 2: `tony logs APP` shows the tasks' own output, labelled, in task order, attempt by attempt,
from the output of `yarn logs` (its format as Hadoop 3.4's LogsCLI prints it)."""

from __future__ import annotations

from tony_airflow.core.task_logs import labelled, spool


def _file(name: str, body: str, length: bool = True) -> list[str]:
    head = [f"LogType:{name}\n", "LogLastModifiedTime:Sat Nov 28 19:00:00 +0000 2026\n"]
    if length:
        head.append(f"LogLength:{len(body.encode())}\n")
    return [*head, "LogContents:\n", *body.splitlines(keepends=True), "\n", f"End of LogType:{name}\n",
            "*" * 40 + "\n", "\n"]


def _container(cid: str, *files: list[str]) -> list[str]:
    return [f"Container: {cid} on host:8041\n", "LogAggregationType: AGGREGATED\n", "=" * 40 + "\n",
            *[line for f in files for line in f]]


def test_the_tasks_output_in_task_order_labelled_attempt_by_attempt(tmp_path):
    lines = [
        *_container("container_1_0001_01_000003",
                    _file("directory.info", "ls -l\ntotal 12\n"),
                    _file("tony-output-worker-1-a1.txt", "w1 starts\nw1 breaks\n"),
                    _file("launch_container.sh", "#!/bin/bash\nexport X=1\n")),
        *_container("container_1_0001_01_000002", _file("tony-output-worker-0-a1.txt", "w0 starts\n")),
        *_container("container_1_0001_01_000004", _file("tony-output-ps-0-a1.txt", "ps up\n")),
        *_container("container_1_0001_01_000006", _file("tony-output-worker-0-a2.txt", "again\nno newline",
                                                        length=False)),
        *_container("container_1_0001_01_000005", _file("tony-output-chief-0-a1.txt", "chief\n"),
                    _file("worker.log", "executor log\n")),
    ]
    outputs = spool(lines, tmp_path)
    assert [(o.task, o.attempt) for o in outputs] == [("chief:0", 1), ("worker:0", 1), ("worker:1", 1),
                                                     ("ps:0", 1), ("worker:0", 2)]
    assert list(labelled(outputs)) == [
        "==> attempt 1 <==", "[chief:0] chief", "[worker:0] w0 starts", "[worker:1] w1 starts",
        "[worker:1] w1 breaks", "[ps:0] ps up", "==> attempt 2 <==", "[worker:0] again", "[worker:0] no newline"]


def test_a_body_that_looks_like_a_header_is_output(tmp_path):
    body = "LogType:tony-output-worker-9-a1.txt\nEnd of LogType:x\n"
    outputs = spool(_container("c", _file("tony-output-worker-0-a1.txt", body)), tmp_path)
    assert [o.task for o in outputs] == ["worker:0"]
    assert list(labelled(outputs))[1:] == ["[worker:0] LogType:tony-output-worker-9-a1.txt",
                                           "[worker:0] End of LogType:x"]


def test_nothing_found_is_an_empty_list(tmp_path):
    assert spool(_container("c", _file("stdout", "x\n")), tmp_path) == []
