# The two commands of the README. Each sets up what it needs on a fresh machine:
# the virtual environment, the Python packages and (through `tony cluster up`)
# the Hadoop jars from Maven Central.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= test,airflow,tensorflow,bench,kerberos,openlineage
# the tests also run PyTorch (~5.4 GB, the CUDA build PyPI serves); the demo does not need it
TEST_EXTRAS ?= $(EXTRAS),pytorch,docs
DOCS_STAMP := $(VENV)/.installed-$(EXTRAS),docs
STAMP  := $(VENV)/.installed-$(EXTRAS)
TEST_STAMP := $(VENV)/.installed-$(TEST_EXTRAS)

.PHONY: demo test docs docs-screenshots soak bench venv browser krb5 containers cluster-down clean

# krb5 first: the `kerberos` extra's gssapi builds against libkrb5-dev (krb5-config).
$(VENV)/.installed-%: pyproject.toml | krb5
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$*]'
	@touch $@

venv: $(STAMP)

## make demo: start the local YARN + HDFS and run the example job on it.
demo: $(STAMP)
	$(BIN)/tony cluster up
	$(BIN)/python -m tony_airflow.cli.demo

## make test: lint and types, then the whole test suite; end-to-end tests start their own local cluster.
## `pytest -m "not e2e"` is the fast loop (no cluster).
test: $(TEST_STAMP) browser containers
	$(BIN)/ruff check .
	$(BIN)/mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python -m pytest --junitxml=artifacts/junit.xml

## make docs: the documentation site into site/ (MkDocs, --strict: a broken link, a missing page or a
## docstring that does not match its signature fails it; `make test` builds it too).
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## make docs-screenshots: the guides' pictures (docs/images/*.png), taken by the e2e tests that look at each view
## in the real headless browser (the AM's job page, TensorBoard, the history UI, Airflow's task page, the built
## site's reference pages); commit them.
docs-screenshots: $(TEST_STAMP) browser
	TONY_DOCS_SCREENSHOTS=1 $(BIN)/python -m pytest -p no:cacheprovider tests/e2e/test_tensorboard.py \
		tests/e2e/test_docs_site.py \
		tests/e2e/test_history.py::test_history_web_ui_in_a_real_browser \
		"tests/e2e/test_airflow_deployment.py::test_the_example_pipeline_defers_streams_its_training_and_feeds_the_model_asset"

## make soak: the model-checked protocol tests (the output's commit, the AM's take-over, the gangs' wait-die,
## an elastic job's worker replacement)
## at thousands of examples each; `make test` runs a few hundred. No cluster.
SOAK_EXAMPLES ?= 5000
soak: $(STAMP)
	TONY_MODEL_EXAMPLES=$(SOAK_EXAMPLES) TONY_TAKEOVER_EXAMPLES=$(SOAK_EXAMPLES) TONY_GANG_EXAMPLES=$(SOAK_EXAMPLES) \
	  TONY_ELASTIC_EXAMPLES=$(SOAK_EXAMPLES) \
	  $(BIN)/python -m pytest -q -p no:cacheprovider tests/unit/core/executor/test_output_commit_model.py \
	  tests/unit/core/am/test_take_over_model.py tests/unit/core/am/test_gang_model.py \
	  tests/unit/core/am/test_elastic_model.py

## make bench: every benchmark on the local cluster; writes docs/BENCHMARKS.md and docs/bench/*.png.
## The peers run beside ours: TonY built from a checkout named by TONY_SRC (bench/peers/tony), and
## tf-yarn 0.7.0 from a venv of its own with the TensorFlow it needs (2.15: tf.estimator).
TFYARN_VENV ?= .venv-tfyarn
## tf-keras without its dependencies: it asks for `tensorflow`, the GPU build, beside tensorflow-cpu.
## scikit-learn: the digits data of the training benchmark (the same program in every launcher).
TFYARN_REQUIREMENTS = tf-yarn==0.7.0 tensorflow-cpu==2.15.* scikit-learn
$(TFYARN_VENV)/.installed: Makefile
	@test -x $(TFYARN_VENV)/bin/python || $(PYTHON) -m venv $(TFYARN_VENV)
	$(TFYARN_VENV)/bin/python -m pip install -q --upgrade pip
	$(TFYARN_VENV)/bin/python -m pip install -q $(foreach r,$(TFYARN_REQUIREMENTS),'$(r)')
	$(TFYARN_VENV)/bin/python -m pip install -q --no-deps 'tf-keras==2.15.*'
	@touch $@

bench: $(TEST_STAMP) $(TFYARN_VENV)/.installed containers
	$(BIN)/tony cluster up
	TONY_BENCH_TFYARN_PYTHON=$(CURDIR)/$(TFYARN_VENV)/bin/python $(BIN)/python -m bench

## Debian's chromium + chromedriver, for the real-browser checks (TensorBoard).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

## Debian's MIT Kerberos: the KDC of `tony cluster up --secure`, kinit/klist, and the headers gssapi builds against.
krb5:
	@command -v krb5kdc >/dev/null && command -v kadmin.local >/dev/null && command -v kinit >/dev/null \
	  && command -v krb5-config >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    krb5-kdc krb5-admin-server krb5-user libkrb5-dev >/dev/null; }

## Debian's container engines for --docker_image (docker.io: dockerd, started by `tony cluster up --docker` or the
## tests with no bridge and no firewall rules; podman), debootstrap for `tony image build`, and busybox-static for
## the tests' small image.
containers:
	@command -v dockerd >/dev/null && command -v podman >/dev/null && command -v debootstrap >/dev/null \
	  && command -v busybox >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    docker.io podman debootstrap busybox-static >/dev/null; }

cluster-down: $(STAMP)
	$(BIN)/tony cluster down

clean: cluster-down
	rm -rf $(VENV) $(TFYARN_VENV) build *.egg-info
