"""Local files whole or absent when two writers write one target at once (#44 item 9): the truststore's
PEM, the Oozie jar, the image tarball, Azkaban's output properties. A fixed `<target>.part` shared by both
was truncated by one while the other renamed it."""

from __future__ import annotations

import threading

import pytest

from tony_airflow.files import whole_file, write_whole


def test_two_writers_of_one_target_leave_one_whole_version(tmp_path):
    target = tmp_path / "truststore.pem"
    versions = {bytes([n]) * (8 << 20) for n in (1, 2)}
    start = threading.Barrier(2)

    def write(data: bytes) -> None:
        start.wait()
        for _ in range(5):
            write_whole(target, data)

    threads = [threading.Thread(target=write, args=(v,)) for v in versions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert target.read_bytes() in versions
    assert [p.name for p in tmp_path.iterdir()] == ["truststore.pem"]  # no temporary file left


def test_a_write_that_fails_leaves_the_target_as_it_was_and_nothing_beside_it(tmp_path):
    target = tmp_path / "tony-oozie.jar"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), whole_file(target) as partial:
        partial.write_bytes(b"half")
        raise RuntimeError("javac failed")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["tony-oozie.jar"]


def test_what_is_written_whole_gets_the_mode_open_and_mkdir_would_give(tmp_path):
    """mkstemp's 0600 and mkdtemp's 0700 would hide the Oozie jar and the Maven jars from the processes that
    read them as other users."""
    import os

    from tony_airflow.files import whole_dir

    old = os.umask(0o022)
    try:
        write_whole(tmp_path / "f", b"x")
        made = whole_dir(tmp_path / "d")
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644
    assert made.stat().st_mode & 0o777 == 0o755
