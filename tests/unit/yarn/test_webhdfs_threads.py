"""One WebHDFS filesystem is shared by the threads of a process (fsspec caches instances): the output
mirror's rounds, the history's flush. Failing over in one thread must not send another thread's request
to the NameNode it was not meant for (#44 item 7)."""

from __future__ import annotations

import threading

from fsspec.implementations.webhdfs import WebHDFS

from tony_airflow.yarn import hdfs

NAMENODES = ("http://nn1:9870", "http://nn2:9870")


def test_two_threads_failing_over_at_once_each_send_to_the_namenode_they_chose(monkeypatch):
    fs = hdfs._webhdfs_class()(host="nn1", port=9870, namenodes=NAMENODES, user="u", use_listings_cache=False,
                               skip_instance_cache=True)
    inside = threading.Event()
    moved = threading.Event()
    sent: dict[str, tuple[str, str]] = {}

    def fake_call(self, op, method="get", path=None, data=None, redirect=True, **kwargs):
        chosen = self.url
        if path == "/b" and chosen.startswith("http://nn1"):
            raise hdfs.NameNodeStandby(chosen)  # thread b fails over to nn2 ...
        if path == "/b":
            moved.set()
        if path == "/a":
            inside.set()
            moved.wait(5)  # ... while thread a's request to nn1 is under way
        sent[path] = (chosen, self.url)
        return "ok"

    monkeypatch.setattr(WebHDFS, "_call", fake_call)
    a = threading.Thread(target=fs._call, args=("LISTSTATUS", "get", "/a"))
    a.start()
    inside.wait(5)
    fs._call("LISTSTATUS", "get", "/b")
    a.join(5)
    assert sent["/a"] == ("http://nn1:9870/webhdfs/v1", "http://nn1:9870/webhdfs/v1"), sent
    assert sent["/b"][0].startswith("http://nn2"), sent
