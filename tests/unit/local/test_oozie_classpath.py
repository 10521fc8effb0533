"""The Oozie server's class path rule (tony_airflow/local/cluster/oozie/classpath.py), on file trees shaped as
Maven's copy-dependencies writes them."""

from __future__ import annotations

from pathlib import Path

from tony_airflow.local.cluster.oozie.classpath import (
    hadoop_artifacts,
    oozie_artifacts,
    server_classpath,
    sharelib_jars,
    webapp_archive,
)

OOZIE = [  # group, artifact, version, extension: a slice of Oozie 5.2.1's closure
    ("org.apache.oozie", "oozie-core", "5.2.1", "jar"),
    ("org.apache.oozie", "oozie-webapp", "5.2.1", "war"),
    ("org.apache.oozie", "oozie-sharelib-oozie", "5.2.1", "jar"),
    ("com.googlecode.json-simple", "json-simple", "1.1.1", "jar"),
    ("org.eclipse.jetty", "jetty-server", "9.3.27.v20190418", "jar"),
    ("org.eclipse.jetty", "jetty-rewrite", "9.3.27.v20190418", "jar"),
    ("com.google.guava", "guava", "11.0.2", "jar"),
    ("org.apache.zookeeper", "zookeeper", "3.4.6", "jar"),
    ("javax.servlet", "servlet-api", "2.5", "jar"),
    ("javax.servlet", "javax.servlet-api", "3.1.0", "jar"),
    ("org.apache.derby", "derby", "10.14.2.0", "jar"),
]
HADOOP = ["hadoop-common-3.4.2.jar", "hadoop-hdfs-3.4.2-tests.jar", "guava-27.0-jre.jar", "zookeeper-3.8.4.jar",
          "jetty-server-9.4.57.v20241219.jar", "websocket-api-9.4.57.v20241219.jar",
          "javax.servlet-api-3.1.0.jar", "json-simple-1.1.1.jar", "jsp-api-2.1.jar"]


def _trees(tmp_path: Path) -> tuple[Path, Path]:
    repo, lib = tmp_path / "repository", tmp_path / "lib"
    for group, artifact, version, ext in OOZIE:
        path = repo.joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.{ext}")
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
    lib.mkdir()
    for name in HADOOP:
        (lib / name).write_bytes(b"")
    return repo, lib


def test_artifacts_are_read_from_the_repository_layout_and_the_flat_names(tmp_path):
    repo, lib = _trees(tmp_path)
    oozie = oozie_artifacts(repo)
    assert {(a.group, a.artifact, a.version) for a in oozie} == {(g, a, v) for g, a, v, _ in OOZIE}
    hadoop = {(a.artifact, a.version) for a in hadoop_artifacts(lib)}
    assert ("hadoop-hdfs", "3.4.2-tests") in hadoop and ("javax.servlet-api", "3.1.0") in hadoop
    assert ("jetty-server", "9.4.57.v20241219") in hadoop


def test_hadoop_wins_except_jetty_servlet_2_5_goes_and_the_war_is_no_entry(tmp_path):
    repo, lib = _trees(tmp_path)
    names = [p.name for p in server_classpath(oozie_artifacts(repo), hadoop_artifacts(lib))]
    assert "guava-27.0-jre.jar" in names and "guava-11.0.2.jar" not in names
    assert "zookeeper-3.8.4.jar" in names and "zookeeper-3.4.6.jar" not in names
    assert "jetty-server-9.3.27.v20190418.jar" in names and "jetty-server-9.4.57.v20241219.jar" not in names
    assert "websocket-api-9.4.57.v20241219.jar" in names  # Hadoop's YARN client needs it beside Jetty 9.3
    assert "jsp-api-2.1.jar" not in names  # its javax.el 2.1 would hide Oozie's EL 3.0
    assert "servlet-api-2.5.jar" not in names and names.count("javax.servlet-api-3.1.0.jar") == 1
    assert "oozie-webapp-5.2.1.war" not in names and "jetty-rewrite-9.3.27.v20190418.jar" in names
    assert {"oozie-core-5.2.1.jar", "derby-10.14.2.0.jar", "hadoop-common-3.4.2.jar"} <= set(names)
    assert len(names) == len(set(names))


def test_the_sharelib_is_the_launcher_and_json_simple_and_the_war_is_found(tmp_path):
    repo, _ = _trees(tmp_path)
    oozie = oozie_artifacts(repo)
    assert sorted(p.name for p in sharelib_jars(oozie)) == ["json-simple-1.1.1.jar", "oozie-sharelib-oozie-5.2.1.jar"]
    assert webapp_archive(oozie).name == "oozie-webapp-5.2.1.war"
