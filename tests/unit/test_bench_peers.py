"""The TonY peer (issue #20): built from a checkout outside the repository, adapted in a few imports."""

from __future__ import annotations

import sys

import pytest

from bench.peers.tony import adapt, run


def test_tonys_hadoop2_imports_are_moved_to_hadoop_3_4():
    java = """import com.google.protobuf.BlockingService;
import azkaban.jobtype.HadoopConfigurationInjector;
import azkaban.utils.Props;
import org.apache.commons.lang.StringUtils;
import org.apache.commons.collections.CollectionUtils;
import org.codehaus.jackson.map.ObjectMapper;
import org.apache.hadoop.ipc.ProtobufRpcEngine;
class C { void f() {
    RPC.setProtocolEngine(conf, TonyClusterPB.class, ProtobufRpcEngine.class);
    HadoopConfigurationInjector.injectResources(new Props() /* ignored */);
} }
"""
    out = adapt.adapt_java(java)
    assert "import org.apache.hadoop.thirdparty.protobuf.BlockingService;" in out
    assert "azkaban" not in out and "HadoopConfigurationInjector" not in out
    assert "org.apache.commons.lang3.StringUtils" in out and "org.apache.commons.collections4.CollectionUtils" in out
    assert "com.fasterxml.jackson.databind.ObjectMapper" in out
    assert "import org.apache.hadoop.ipc.ProtobufRpcEngine2;" in out and "ProtobufRpcEngine2.class" in out
    assert "ProtobufRpcEngine22" not in adapt.adapt_java(out)  # adapting twice changes nothing more


def test_without_tony_src_the_build_says_what_to_set(monkeypatch, tmp_path):
    monkeypatch.delenv("TONY_SRC", raising=False)
    with pytest.raises(adapt.TonyBuildError, match="TONY_SRC is not set: set it to a checkout of"):
        adapt.build()
    monkeypatch.setenv("TONY_SRC", str(tmp_path))
    with pytest.raises(adapt.TonyBuildError, match="is not a TonY checkout"):
        adapt.build()


def test_tony_conf_names_every_task_type_with_security_off(tmp_path):
    text = run.write_conf(tmp_path / "tony.xml", {"ps": 1, "worker": 2}, 512,
                          {"A": "1"}).read_text()
    for expected in ("<name>tony.ps.instances</name><value>1</value>",
                     "<name>tony.worker.instances</name><value>2</value>",
                     "<name>tony.worker.memory</name><value>512m</value>",
                     "<name>tony.application.security.enabled</name><value>false</value>",
                     "<name>tony.containers.envs</name><value>SKIP_HADOOP_PATH=true,TMPDIR=tmp,A=1</value>",
                     "<name>tony.task.am.jvm.opts</name><value>"
                     f"{run.JVM_FLAGS} -Djava.io.tmpdir=tmp</value>",
                     "<name>tony.task.executor.jvm.opts</name><value>"
                     f"-Xmx1536m {run.JVM_FLAGS} -Djava.io.tmpdir=tmp</value>"):
        assert expected in text


def test_without_its_venv_tf_yarn_says_what_to_set(monkeypatch):
    from bench.peers.tfyarn import runner

    monkeypatch.delenv(runner.PYTHON_ENV, raising=False)
    found, why = runner.available()
    assert found is None and "TONY_BENCH_TFYARN_PYTHON is not set" in why and ".venv-tfyarn" in why


def test_a_venv_without_tf_yarn_is_named_with_its_error(monkeypatch):
    import sys

    from bench.peers.tfyarn import runner

    monkeypatch.setenv(runner.PYTHON_ENV, sys.executable)  # ours: no tf_yarn
    found, why = runner.available()
    assert found is None and "import tf_yarn.tensorflow" in why and "ModuleNotFoundError" in why


def test_the_empty_tmp_dirs_tf_yarn_leaves_are_swept_after_its_run(tmp_path):
    """tf-yarn (and cluster-pack) make an empty /tmp/<uuid1> in every process that imports them and
    never remove it: the benchmark removes those its run left, and nothing else."""
    import os
    import uuid

    from bench.peers.tfyarn import runner

    before = tmp_path / str(uuid.uuid1())
    before.mkdir()
    os.utime(before, (1, 1))  # made before the run
    started = 1000.0
    left = [tmp_path / str(uuid.uuid1()) for _ in range(3)]
    for path in left:
        path.mkdir()
    full = tmp_path / str(uuid.uuid1())
    (full / "kept").mkdir(parents=True)  # not empty: not ours to judge
    other = tmp_path / str(uuid.uuid4())
    other.mkdir()  # not a uuid1 name
    assert runner.sweep_tmp(started, tmp_path) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([before.name, full.name, other.name])


def test_the_launch_table_has_ytf_submits_ratio_to_each_peer_for_each_figure():
    from bench import launch_latency as ll

    nan = float("nan")
    medians = {"ytf-submit": (5.0, 6.0, 1.0, 7.0), "skein floor": (4.0, 8.0, nan, nan),
               ll.TONY: (8.0, 10.0, 2.0, 12.0), ll.TF_YARN: (20.0, 30.0, 50.0, 70.0)}
    rows = {row[0]: row for row in ll.table_rows(medians)}
    assert all(len(row) == len(ll.COLUMNS) for row in rows.values())
    assert rows["skein floor"][3] == "n/a" and rows["skein floor"][6] == "n/a"  # no client waits on it
    assert rows["ytf-submit / TonY"] == ["ytf-submit / TonY", "0.62", "0.60", "0.58", "", "", "0.50"]
    assert rows["ytf-submit / tf-yarn"] == ["ytf-submit / tf-yarn", "0.25", "0.20", "0.10", "", "", "0.02"]
    without_peers = ll.table_rows({k: medians[k] for k in ("ytf-submit", "skein floor")})
    assert [row[0] for row in without_peers] == ["ytf-submit", "skein floor"]


def test_tfyarn_containers_unpack_the_pex_into_the_fixed_root(monkeypatch, tmp_path):
    """tf-yarn 0.7.0 sets the containers' PEX_ROOT from the *client's* environment (a new
    /tmp/<uuid4> per run otherwise, ~1.8 GB unpacked each time and left there); `env` cannot set it."""
    import sys
    import types

    from bench.peers.tfyarn import submit

    seen: dict[str, str] = {}

    def _execute_and_await_termination(poll_every_secs: int = 10) -> None: ...

    def run_on_yarn(experiment_fn, spec, pyenv_zip_path, custom_task_module, files, env, name) -> None:
        import os
        import uuid
        # tf_yarn.client._get_pex_root and _setup_task_env, 0.7.0: the client's PEX_ROOT overrides `env`'s
        seen["PEX_ROOT"] = os.environ.get("PEX_ROOT", f"/tmp/{uuid.uuid4()}/")

    client = types.ModuleType("tf_yarn.client")
    client._execute_and_await_termination = _execute_and_await_termination  # type: ignore[attr-defined]
    tensorflow = types.ModuleType("tf_yarn.tensorflow")
    tensorflow.TaskSpec = lambda **kw: kw  # type: ignore[attr-defined]
    tensorflow.run_on_yarn = run_on_yarn  # type: ignore[attr-defined]
    package = types.ModuleType("tf_yarn")
    package.client, package.tensorflow = client, tensorflow  # type: ignore[attr-defined]
    for name, module in {"tf_yarn": package, "tf_yarn.client": client, "tf_yarn.tensorflow": tensorflow}.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delenv("PEX_ROOT", raising=False)
    root = tmp_path / "pex-root"
    monkeypatch.setattr(sys, "argv", ["submit.py", "--pex", "hdfs:///p.pex", "--pex-root", str(root)])
    submit.main()
    assert seen["PEX_ROOT"] == str(root)


def test_tfyarn_runs_name_a_pex_root_in_the_cache_not_in_tmp():
    from bench.peers.tfyarn import pack, runner

    assert runner.PEX_ROOT.is_relative_to(pack.CACHE)


def test_the_tfyarn_requirements_are_the_venvs_own_whatever_pythonpath_holds(tmp_path, monkeypatch):
    from bench.peers.tfyarn import pack

    dist = tmp_path / "stray_checkout-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: stray-checkout\nVersion: 0.1.0\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert not [r for r in pack.requirements(sys.executable) if r.lower().startswith("stray")]
