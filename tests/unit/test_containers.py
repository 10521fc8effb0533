"""The local engines' helpers (issue #31): dockerd's configuration and the image's inputs."""

from __future__ import annotations

import json

import pytest

from tony_airflow.containers import daemon, image


def test_dockerd_gets_no_bridge_and_no_firewall_rules_and_keeps_the_admins_keys(tmp_path, monkeypatch):
    conf = tmp_path / "daemon.json"
    conf.write_text(json.dumps({"data-root": "/srv/docker", "bridge": "docker0"}))
    monkeypatch.setattr(daemon, "DAEMON_JSON", conf)
    daemon._configure_daemon()
    assert json.loads(conf.read_text()) == {"data-root": "/srv/docker", "bridge": "none", "iptables": False,
                                            "ip6tables": False}


def test_a_missing_engine_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(daemon.shutil, "which", lambda name: None)
    with pytest.raises(daemon.ClusterError, match="^podman is not installed; install Debian's podman"):
        daemon.ensure_running("podman", tmp_path / "log")


def test_the_image_pins_this_installations_versions_and_its_digest_follows_them():
    pins = image.python_requirements()
    assert [p.split("==")[0] for p in pins] == list(image.PYTHON_PACKAGES) and all("==" in p for p in pins)
    assert image.inputs_digest(pins) == image.inputs_digest(list(pins))
    assert image.inputs_digest(pins) != image.inputs_digest([*pins[:-1], "scikit-learn==0.0"])


def test_an_image_up_to_date_is_not_built_again(monkeypatch):
    digest = image.inputs_digest(image.python_requirements())
    monkeypatch.setattr(image.shutil, "which", lambda name: "/usr/bin/docker")
    monkeypatch.setattr(image, "built_digest", lambda engine, name=image.IMAGE: digest)
    monkeypatch.setattr(image, "_root_filesystem", lambda *a: pytest.fail("built again"))
    said: list[str] = []
    assert image.build("docker", log=said.append) == image.IMAGE
    assert said == [f"{image.IMAGE} is up to date in docker (inputs {digest})"]
