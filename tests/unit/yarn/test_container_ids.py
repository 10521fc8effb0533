"""A container id names its application by Hadoop's rule (ContainerId.fromString), with or without the RM's
epoch: after a ResourceManager restart or failover, ids read `container_e<epoch>_…` (found by a CI run whose
test looked for `container_<ts>_<app>_` and missed every container of the job)."""

import pytest

from tony_airflow.yarn.rest import application_of_container, attempt_of_container


@pytest.mark.parametrize(("container_id", "app_id"), [
    ("container_1795829221646_0002_01_000004", "application_1795829221646_0002"),
    ("container_e01_1795830383639_0002_01_000002", "application_1795830383639_0002"),
    ("container_e17_1700000000000_0003_03_000001", "application_1700000000000_0003"),
    ("container_1700000000000_12345_01_000001", "application_1700000000000_12345"),
    ("container_e3_1700000000000_0007_01_1099511627777", "application_1700000000000_0007"),
])
def test_the_application_of_a_container(container_id, app_id):
    assert application_of_container(container_id) == app_id


@pytest.mark.parametrize("text", ["", "container_", "container_x_1_01_1", "application_1_0001", "container_1_2_3",
                                  "container_e01_1795830383639_0002_01", "container_1795830383639_0002_01_000002\n"])
def test_what_is_not_a_container_id_names_no_application(text):
    assert application_of_container(text) == "" and attempt_of_container(text) == 0


def test_the_attempt_of_a_container():
    assert attempt_of_container("container_e01_1795830383639_0002_03_000002") == 3
    assert attempt_of_container("container_1795830383639_0002_01_000002") == 1
