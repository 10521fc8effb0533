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


class CutOffHDFS(FakeHDFS):
    """An HDFS whose link goes down after `uploads` files (the host was cut off mid-push)."""

    def __init__(self, uploads: int) -> None:
        super().__init__()
        self.left = uploads

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        pass

    def put_file(self, local: str, remote: str) -> None:
        if self.left == 0:
            self.files[remote] = b""  # WebHDFS CREATE (overwrite) happened; the data never came
            raise OSError(113, "No route to host")
        self.left -= 1
        self.files[remote] = Path(local).read_bytes()

    def pipe_file(self, remote: str, data: bytes) -> None:
        if self.left == 0:
            self.files[remote] = b""
            raise OSError(113, "No route to host")
        self.left -= 1
        self.files[remote] = data

    def _call(self, op: str, method: str = "get", path: str | None = None, **params: str):
        assert op == "RENAME" and params.get("renameoptions") == "OVERWRITE", (op, params)
        self.files[params["destination"]] = self.files.pop(path)


def test_a_push_cut_short_never_leaves_a_checkpoint_index_naming_files_not_uploaded(tmp_path):
    """Seen on the multi-host cluster: attempt 2 found `checkpoint` naming ckpt-2, whose data never arrived."""
    backup = tmp_path / "out" / "backup" / "chief"
    backup.mkdir(parents=True)
    (backup / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    (backup / "ckpt-2.index").write_bytes(b"i")
    (backup / "ckpt-2.data-00000-of-00001").write_bytes(b"d")
    fs = CutOffHDFS(uploads=2)
    mirror = Mirror("hdfs:///out", tmp_path / "out", fs=fs)
    try:
        mirror.push()
    except OSError:
        pass
    assert "/out/backup/chief/checkpoint" not in fs.files, sorted(fs.files)


class SavingHDFS(CutOffHDFS):
    """TensorFlow saves the next checkpoint (and drops the old one) while a push is under way."""

    def __init__(self, backup: Path, uploads: int = 1000) -> None:
        super().__init__(uploads)
        self.backup = backup
        self.saved = False

    def put_file(self, local: str, remote: str) -> None:
        if not self.saved:  # the first upload: meanwhile BackupAndRestore writes ckpt-3 (max_to_keep=1)
            self.saved = True
            (self.backup / "ckpt-3.index").write_bytes(b"i3")
            (self.backup / "ckpt-3.data-00000-of-00001").write_bytes(b"d3")
            (self.backup / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n')
            (self.backup / "ckpt-2.index").unlink()
            (self.backup / "ckpt-2.data-00000-of-00001").unlink()
        if not Path(local).exists():
            raise FileNotFoundError(local)
        super().put_file(local, remote)


def _named_checkpoint(fs: FakeHDFS, directory: str) -> str:
    text = fs.files[f"{directory}/checkpoint"].decode()
    return text.split('"')[1]


def test_a_checkpoint_saved_during_a_push_is_not_published_before_its_files(tmp_path):
    """Seen on the multi-host cluster (CI of 366ff55): attempt 2 found `checkpoint` naming ckpt-3,
    whose files were written after the push had listed the directory and were never uploaded."""
    backup = tmp_path / "out" / "backup" / "chief"
    backup.mkdir(parents=True)
    (backup / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    (backup / "ckpt-2.index").write_bytes(b"i2")
    (backup / "ckpt-2.data-00000-of-00001").write_bytes(b"d2")
    fs = SavingHDFS(backup)
    mirror = Mirror("hdfs:///out", tmp_path / "out", fs=fs)
    mirror.push()
    remote = "/out/backup/chief"
    if f"{remote}/checkpoint" in fs.files:
        named = _named_checkpoint(fs, remote)
        assert {f"{remote}/{named}.index", f"{remote}/{named}.data-00000-of-00001"} <= set(fs.files), sorted(fs.files)
    mirror.push()  # the next round publishes the newer checkpoint with its files
    assert _named_checkpoint(fs, remote) == "ckpt-3"
    assert {f"{remote}/ckpt-3.index", f"{remote}/ckpt-3.data-00000-of-00001"} <= set(fs.files), sorted(fs.files)


def test_a_checkpoint_index_is_replaced_whole_or_not_at_all(tmp_path):
    """Written in place, a cut upload would leave HDFS an empty `checkpoint` (a later attempt starts over)."""
    backup = tmp_path / "out" / "backup" / "chief"
    backup.mkdir(parents=True)
    for name, data in (("ckpt-2.index", b"i2"), ("ckpt-2.data-00000-of-00001", b"d2")):
        (backup / name).write_bytes(data)
    (backup / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    fs = SavingHDFS(backup)
    fs.saved = True  # no save during these pushes
    mirror = Mirror("hdfs:///out", tmp_path / "out", fs=fs)
    mirror.push()
    (backup / "ckpt-3.index").write_bytes(b"i3")
    (backup / "ckpt-3.data-00000-of-00001").write_bytes(b"d3")
    (backup / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n')
    fs.left = 2  # the two ckpt-3 files arrive, then the link goes down while `checkpoint` is written
    try:
        mirror.push()
    except OSError:
        pass
    assert _named_checkpoint(fs, "/out/backup/chief") == "ckpt-2"
    reader = Mirror("hdfs:///out", tmp_path / "attempt-2", fs=fs)  # the next attempt restores from ckpt-2
    reader.pull()
    assert (tmp_path / "attempt-2" / "backup" / "chief" / "checkpoint").read_text() == 'model_checkpoint_path: "ckpt-2"\n'


def test_a_reader_never_copies_a_replacement_under_way(tmp_path):
    fs = FakeHDFS()
    fs.files["/out/backup/chief/checkpoint.tony-part"] = b'model_checkpoint_path: "ckpt-9"\n'
    fs.files["/out/backup/chief/checkpoint"] = b'model_checkpoint_path: "ckpt-8"\n'
    mirror = Mirror("hdfs:///out", tmp_path / "m", fs=fs)
    assert mirror.pull() == 1
    assert not (tmp_path / "m" / "backup" / "chief" / "checkpoint.tony-part").exists()
