"""The HDFS output mirror as TensorBoard reads it: event files only ever grow in place.

While the chief re-uploads a file, HDFS reports it at length 0 (WebHDFS CREATE with
overwrite); a reader that copied that would replace TensorBoard's open event file
with an empty one, and TensorBoard (which keeps the file open) never sees the rest.
"""

from __future__ import annotations

import os
from pathlib import Path

from tony_airflow.core.executor.staging import Mirror


class FakeHDFS:
    """remote path -> bytes; `find` reports sizes like WebHDFS's LISTSTATUS."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.reported: dict[str, int] = {}  # a size HDFS reports instead of the real one (an upload under way)

    def exists(self, path: str) -> bool:
        return any(p.startswith(path) for p in self.files)

    def find(self, path: str, detail: bool = False) -> dict:
        return {p: {"type": "file", "size": self.reported.get(p, len(b))} for p, b in self.files.items()
                if p.startswith(path)}

    def get_file(self, remote: str, local: str) -> None:
        Path(local).write_bytes(self.files[remote][: self.reported.get(remote, len(self.files[remote]))])

    def cat_file(self, remote: str, start: int = 0) -> bytes:
        return self.files[remote][start:]


def test_an_event_file_being_uploaded_is_not_replaced_by_an_empty_one(tmp_path):
    fs = FakeHDFS()
    name = "/out/tensorboard/hparams/events.out.tfevents.1.host.1.v2"
    fs.files[name] = b"version-record"
    mirror = Mirror("hdfs:///out", tmp_path / "mirror", fs=fs)
    mirror.pull()
    local = tmp_path / "mirror" / "tensorboard" / "hparams" / "events.out.tfevents.1.host.1.v2"
    inode = os.stat(local).st_ino
    fs.files[name] = b"version-record+hparams-summary"
    fs.reported[name] = 0  # the chief's upload of the grown file is under way
    mirror.pull()
    assert local.read_bytes() == b"version-record" and os.stat(local).st_ino == inode
    del fs.reported[name]  # the upload is done
    mirror.pull()
    assert local.read_bytes() == b"version-record+hparams-summary"
    assert os.stat(local).st_ino == inode  # grown in place: TensorBoard's open file sees the new records


def test_an_empty_remote_file_is_not_copied_yet(tmp_path):
    fs = FakeHDFS()
    fs.files["/out/metrics.json"] = b'{"a": 1}'
    fs.reported["/out/metrics.json"] = 0
    mirror = Mirror("hdfs:///out", tmp_path / "m", fs=fs)
    assert mirror.pull() == 0 and not (tmp_path / "m" / "metrics.json").exists()


def test_an_input_is_complete_so_its_empty_files_are_staged(tmp_path):
    fs = FakeHDFS()
    fs.files["/in/_SUCCESS"] = b""
    fs.files["/in/part-0"] = b"data"
    assert Mirror("hdfs:///in", tmp_path / "in", fs=fs).pull(while_written=False) == 2
    assert (tmp_path / "in" / "_SUCCESS").exists()
