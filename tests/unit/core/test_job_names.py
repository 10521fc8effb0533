"""Issue #53 item 4: nothing is called TensorFlow that is not: a job's default name comes from its framework
(or, for a generic job, from the program it runs); the commands' and the provider's descriptions name no one
framework."""

from __future__ import annotations

import pytest

from tony_airflow.core.spec import build_job_spec


@pytest.mark.parametrize("options, name", [
    ({}, "tensorflow"),
    ({"framework": "tensorflow"}, "tensorflow"),
    ({"framework": "pytorch"}, "pytorch"),
    ({"framework": "generic", "command": "python3 train.py --epochs 2"}, "python3"),
    ({"framework": "generic", "command": "/opt/bin/run.sh x"}, "run.sh"),
    ({"framework": "generic", "command": "OMP_NUM_THREADS=1 exec horovodrun -np 2"}, "horovodrun"),
    ({"framework": "generic", "command": "'unbalanced"}, "'unbalanced"),
    ({"framework": "pytorch", "name": "resnet-nightly"}, "resnet-nightly"),
])
def test_the_default_name_is_the_framework_or_the_program(options, name):
    spec = build_job_spec({"cluster_requirement": "worker:1", "command": "x", **options}, check_paths=False)
    assert spec.name == name


def test_a_generic_job_with_commands_per_type_is_named_by_the_first():
    spec = build_job_spec({"cluster_requirement": "worker:1", "framework": "generic"}, check_paths=False,
                          type_commands={"worker": "torchrun --nnodes 1 t.py"})
    assert spec.name == "torchrun"


def test_descriptions_name_no_one_framework():
    from tony_airflow.cli import submit, tony
    from tony_airflow.providers.yarn.get_provider_info import get_provider_info

    info = get_provider_info()
    for text in (submit.build_parser().description, tony.build_parser().description, info["name"],
                 info["description"]):
        assert "TensorFlow on" not in text and "TensorFlow job" not in text, text
    assert "PyTorch" in info["description"] and "PyTorch" in submit.build_parser().description
