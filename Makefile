# The two commands a new user needs (see README):
#   make demo   runs nodegate on the embedded default rules
#   make test   sets everything up and runs the whole suite (lint, types, unit, fuzz, Pulumi, e2e...)
#   make image  builds the reconciler image from Dockerfile (docker, else podman; see docs/reconciler.md)
#   make release  versioned artifacts in dist/: wheel, sdist, chart .tgz, SHA256SUMS (README "Install")
#   make fuzz   the fuzz tier with many more random examples (minutes)
#   make bench  nodegate beside a kopf operator at 1,000 and 5,000 nodes (docs/benchmarks.md)
# Everything installs itself: a venv in .venv, Python deps from PyPI, the control plane from Go modules,
# podman (if no docker daemon answers) and the offline base image from Debian packages.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup controlplane kubelet kubectl promtool helm karpenter pulumi-tools e2e-pulumi chart image lint typecheck unit fast fuzz restart-anywhere e2e bench bench-cli bench-neighbours bench-plan bench-karpenter bench-restart bench-agents bench-access bench-noderules bench-storm clean manifests constraints release release-image

# PYTHONWARNINGS=ignore: setuptools prints a notice about strict editable installs on every
# install; it is for packagers, and a new user should see a quiet set-up.
# Two distributions: the product (.) and the development harness (harness/: local control plane,
# image builder, demo story), which the image never installs.
HARNESS := harness
# The runtime dependencies at constraints.txt's versions (the lock the image and `make release`
# install with; `make constraints` rewrites it), so the tests run what ships.
$(STAMP): pyproject.toml $(HARNESS)/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --constraint constraints.txt -e '.[dev,ansible]' -e ./$(HARNESS) --config-settings editable_mode=strict
	touch $(STAMP)

# Strict editable mode keeps a tree of links to the files: only a file added or removed needs a
# re-link, so the link step runs when the list of files changes (its checksum names the stamp),
# and `make` inside `make test`'s phases finds setup done.
PACKAGE_DIRS := defaults core bootstrap manifests reconciler migrate infra cli templates examples harness
LINKED := $(VENV)/.linked-$(shell find $(PACKAGE_DIRS) -type f -not -path '*/__pycache__/*' -not -path 'harness/build/*' 2>/dev/null | LC_ALL=C sort | cksum | cut -d' ' -f1)
$(LINKED): $(STAMP)
	rm -f $(VENV)/.linked-*
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --no-deps -e . -e ./$(HARNESS) --config-settings editable_mode=strict
	touch $@

setup: $(LINKED)

demo: setup
	$(BIN)/nodegate demo

# deploy/reconciler.yaml (example rules) and deploy/reconciler-webhook.yaml (the AKS webhook
# example, with the Node admission webhook) are generated from the one manifest builder;
# tests/unit/manifests/test_deploy_yaml.py fails when either is stale.
DEPLOY_IMAGE_REPOSITORY ?= registry.example.com/nodegate
manifests: setup
	$(BIN)/nodegate manifests --rules examples/rules.yaml --image-repository $(DEPLOY_IMAGE_REPOSITORY) > deploy/reconciler.yaml
	$(BIN)/nodegate manifests --rules examples/aks-webhook-rules.yaml --settings deploy/webhook-settings.yaml --image-repository $(DEPLOY_IMAGE_REPOSITORY) > deploy/reconciler-webhook.yaml

controlplane: setup
	$(BIN)/python -m nodegate.localcluster.build

# kubelet and its fake CRI for the real-kubelet e2e tests (docs/bootstrap.md), under a stamp of
# their own; after `controlplane`, whose Go build cache they reuse (a no-op when cached).
kubelet: controlplane
	$(BIN)/python -m nodegate.localcluster.build --kubelet

# kubectl for the kubectl-plugin tests (`kubectl nodegate ...`, tests/e2e/test_day2.py), under a
# stamp of its own in the control plane's cache; after `controlplane`, whose Go build cache it
# reuses (a no-op when cached).
kubectl: controlplane
	$(BIN)/python -m nodegate.localcluster.build --kubectl

# promtool for the alert tests, `promtool check rules` and `promtool test rules` on the shipped
# PrometheusRule (tests/unit/manifests/test_alerts_promtool.py): copied out of Debian's
# prometheus package (2.42; never installed) where apt answers, else built from Prometheus 3.16's
# Go module; cached under a stamp of its own in ~/.cache/nodegate/promtool (a no-op when cached).
promtool: setup
	$(BIN)/python -m nodegate.localcluster.build --promtool

# The chart tools, each from its Go module and cached under a stamp of its own in ~/.cache/nodegate
# (a no-op when cached): helm v3.22 and v4.3 (`helm lint --strict`, `helm template` equal to the
# manifest builder, values.schema.json; tests/e2e/test_helm_chart.py installs with both),
# helm-unittest 1.1 (charts/nodegate/tests) and chart-testing 3.14 (`ct lint`).
helm: setup
	$(BIN)/python -m nodegate.localcluster.build --helm

# charts/nodegate is written by hand (its helm-unittest suites in charts/nodegate/tests); `make
# chart` only packages it into build/charts/ with the real helm.
# tests/unit/manifests/test_chart_helm.py checks that `helm template` equals `nodegate manifests`
# for a table of values. The helm that packages it is the one on PATH when it is 3.8+ or 4.x,
# else the pinned helm built from its Go module (harness/release/helm.py; only helm, not the
# other chart tools).
chart: setup
	mkdir -p build/charts
	$$($(BIN)/python -m nodegate.release.helm) package charts/nodegate --destination build/charts

# Karpenter's kwok provider for the `karpenter` e2e tests, under a stamp of its own (a no-op when
# cached).
karpenter: setup
	$(BIN)/python -m nodegate.localcluster.build --karpenter

# The real Pulumi engine (v3.274.1), its Python language host and the Kubernetes provider, each
# from its Go module under a stamp of its own in ~/.cache/nodegate (a no-op when cached; cold,
# 10 to 36 minutes on 2 cores and over 4 GB of memory for the provider). A phase of `make test`.
pulumi-tools: setup
	$(BIN)/python -m nodegate.localcluster.pulumi_tools

# `pulumi up` and `pulumi destroy` with those tools on a local control plane: a small program
# (tests/e2e/test_pulumi_engine.py) and this project's own stack of the reconciler and a Karpenter
# pool (tests/e2e/test_pulumi_stack.py); marker `pulumi`, also run by `make test`.
e2e-pulumi: controlplane karpenter pulumi-tools
	$(BIN)/pytest -m pulumi tests/e2e

image: setup
	$(BIN)/python -m nodegate.image.build

# The runtime lock, constraints.txt: the closure of `nodegate[oci]` and the build backend from a
# clean venv at the versions this venv holds (harness/release/constraints.py; a few minutes).
constraints: setup
	$(BIN)/python -m nodegate.release.constraints

# Versioned artifacts in dist/, all of pyproject.toml's version, built from the commit HEAD
# alone (harness/release/build.py; RELEASE_ARGS="--ref v0.1.0" for another): the sdist and wheel
# (`python -m build`, `twine check --strict`), the committed chart as a .tgz, SHA256SUMS; two
# runs on one commit give the same bytes. About 20 s; not in `make test`, where
# tests/unit/packaging/test_release.py installs the wheel into a clean venv and runs it.
# `make release-image` adds the image as an OCI archive (`make image`, then `save`).
release: setup
	$(BIN)/python -m nodegate.release.build $(RELEASE_ARGS)

release-image: setup
	$(BIN)/python -m nodegate.release.build --image $(RELEASE_ARGS)

# ansible-lint (production profile) checks the collection and the example playbooks, which find
# the collection through a link in build/ (offline: Ansible Galaxy is never asked).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	mkdir -p build/ansible/ansible_collections/nodegate
	ln -sfn ../../../../ansible/nodegate build/ansible/ansible_collections/nodegate/nodegate
	ANSIBLE_COLLECTIONS_PATH=build/ansible PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/ansible-lint -q \
	  -c ansible/nodegate/.ansible-lint ansible/nodegate examples/ansible

# mypy's cache lives beside the tools' (outside the clone), so a fresh clone checks only what
# changed: mypy compares each file's hash with its cache entry, so a stale entry is re-checked,
# never trusted.
NODEGATE_CACHE ?= $(HOME)/.cache/nodegate
export MYPY_CACHE_DIR ?= $(NODEGATE_CACHE)/mypy
typecheck: setup
	$(BIN)/mypy -p nodegate.defaults -p nodegate.core -p nodegate.bootstrap -p nodegate.reconciler -p nodegate.manifests -p nodegate.infra -p nodegate.cli -p nodegate.migrate -p nodegate.localcluster -p nodegate.image -p nodegate.demo -p nodegate.suite -p nodegate.release
	$(BIN)/mypy tests
	$(BIN)/mypy ansible/nodegate/plugins/lookup

fast: lint typecheck promtool helm
	$(BIN)/pytest tests/unit tests/pulumi tests/fuzz

# The fuzz tier runs in `make test` derandomized and short; this runs it random and long
# (tests/fuzz/profiles.py), keeping failing examples in .hypothesis/ to replay next time.
fuzz: setup
	NODEGATE_FUZZ=long $(BIN)/pytest tests/fuzz --hypothesis-show-statistics

# The restart-anywhere tier random and long: a new seed each run (printed) and five kills of the
# leader per history, after steps drawn at random; `make test` runs it derandomized and short.
restart-anywhere: setup controlplane
	NODEGATE_RESTART=long $(BIN)/pytest -m restart tests/e2e -s

# Benchmarks (tests/bench/README.md): tens of minutes, waits for a quiet machine first, rewrites
# docs/benchmarks.md. Not part of `make test`, which runs its 50-node smoke size.
# Options: make bench BENCH_ARGS="--nodes 1000 --write-qps 200"
bench: setup controlplane
	$(BIN)/python -m tests.bench.run $(BENCH_ARGS)
	$(BIN)/python -m tests.bench.hostile_neighbours
	$(BIN)/python -m tests.bench.cli_startup

# How long `nodegate --help`, a TAB and `validate` take to start, 10 runs each beside
# `python -c pass` (tests/bench/cli_startup.py): a minute or two, no control plane; also the
# last table of `make bench`.
bench-cli: setup
	$(BIN)/python -m tests.bench.cli_startup $(BENCH_ARGS)

# What nodes writing 50 changes/s about themselves cost (tests/bench/hostile_neighbours.py):
# a minute; also a table of `make bench`.
bench-neighbours: setup controlplane
	$(BIN)/python -m tests.bench.hostile_neighbours $(BENCH_ARGS)

# What Karpenter does when the gate is left out of startupTaints (tests/bench/karpenter_startup_taints.py):
# a 2-minute measurement, not a test, so not in `make test`.
bench-karpenter: setup controlplane karpenter
	$(BIN)/python -m tests.bench.karpenter_startup_taints $(BENCH_ARGS)

# What a restart costs at 1,000 nodes (tests/bench/restart_cost.py): from the new process's start
# to ready and to its first write; a minute, not in `make test`.
bench-restart: setup controlplane
	$(BIN)/python -m tests.bench.restart_cost $(BENCH_ARGS)

# `nodegate plan` on 5,000 nodes of kubelet size (tests/bench/day2_plan.py): minutes, not in `make test`.
bench-plan: setup controlplane
	$(BIN)/python -m tests.bench.day2_plan $(BENCH_ARGS)

# What node-agent rules cost the reconciler at 5,000 nodes x 20 DaemonSets (tests/bench/agents_cost.py):
# the memory of the 100,000 DaemonSet pods it holds (tracemalloc, VmRSS) and the CPU of deciding one
# node; no control plane, about 1.5 minutes, not in `make test`.
bench-agents: setup
	$(BIN)/python -m tests.bench.agents_cost $(BENCH_ARGS)

# What the reads an installation on NodeRules objects grants by default cost once rules read them,
# at 5,000 nodes (tests/bench/access_cost.py): the CSINodes and DaemonSets held (the Pods' cost is
# bench-agents'); seconds, no control plane.
bench-access: setup
	$(BIN)/python -m tests.bench.access_cost $(BENCH_ARGS)

# A NodeRules object's status at 1,000 and 5,000 nodes (tests/bench/noderules_status.py): its size
# and the CPU of counting every node against every rule; seconds, no control plane.
bench-noderules: setup
	$(BIN)/python -m tests.bench.noderules_status $(BENCH_ARGS)

# Issue 62's condition storm (tests/bench/storm.py): 1,000 kwok nodes, one TestReady rule, every
# node's condition flipped from 32 threads, beside the bare-client floor of the same run; 3 rounds,
# 10 to 40 minutes on 2 shared cores, not in `make test`. A before and an after on one cluster:
# make bench-storm BENCH_ARGS="--revisions OLD NEW"
bench-storm: setup controlplane
	$(BIN)/python -m tests.bench.storm $(BENCH_ARGS)

# `make test` runs its phases through one runner (harness/suite): lint, types, each tool, the
# image, then the test tiers (pytest-xdist workers, each with its own control planes), and ends
# by printing the time of each phase and the 20 slowest tests (JUnit XML in build/test-reports).
test: setup
	$(BIN)/python -m nodegate.suite

clean:
	rm -rf $(VENV) build dist *.egg-info
