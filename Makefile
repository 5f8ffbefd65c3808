# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv and install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The Kubernetes release `make k8s` builds and the live-cluster tests and tools run against: tests/k8s/build.sh's
# default unless K8S_RELEASE names another pinned one (a folder of tests/k8s/kubernetes/: 1.35, 1.36, 1.37),
# e.g. `make k8s unit K8S_RELEASE=1.37`. The tests read it as OUTRIGGER_K8S_RELEASE.
K8S_RELEASE ?= $(OUTRIGGER_K8S_RELEASE)
export OUTRIGGER_K8S_RELEASE := $(K8S_RELEASE)

.PHONY: install demo demo-cluster test browser test-latest lock lint typecheck unit k8s compat proto bench compare fuzz faults faults-cluster clean go-proto go-build go-test

# Every Python package at the version and hash in requirements.lock (docs/dependencies.md), then this
# project itself, editable, built by the lock's setuptools. An existing .venv is brought to the lock in
# place (a package the lock no longer has is reported by tests/test_dependencies.py: `make clean install`).
$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

# The same suite on the newest versions pyproject.toml allows (not the lock), in its own virtualenv: an
# upstream release that breaks Outrigger fails this job, while `make test` stays on what the lock pins.
LATEST := .venv-latest
test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev]'
	$(LATEST)/bin/python -m pip freeze --exclude-editable > $(LATEST)/versions.txt
	@# Nothing newer than the lock: `make test` runs exactly these versions, so the suite is not run twice.
	@if $(PYTHON) -c 'import re, sys; norm = lambda t: {re.sub(r"[-_.]+", "-", m[0].lower()) + "==" + m[1] for m in re.findall(r"(?m)^([A-Za-z0-9_.-]+)==([^\s\\]+)", t)}; sys.exit(0 if norm(open("$(LATEST)/versions.txt").read()) - norm(open("requirements.lock").read()) else 1)'; then \
		OUTRIGGER_DEPS=latest $(LATEST)/bin/python -m pytest -q -p no:cacheprovider; \
	else \
		echo "test-latest: the newest versions pyproject.toml allows are the lock's; make test covers them"; \
	fi

# Rewrite requirements.lock from pyproject.toml: the newest versions its ranges allow, with hashes.
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --upgrade --extra dev --generate-hashes --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" -o requirements.lock

# CONSOLE=1 (or an address, CONSOLE=127.0.0.1:8080) serves the web console, prints its address and keeps
# serving it after the summary until Ctrl-C (docs/console.md).
CONSOLE ?=
CONSOLE_FLAG = $(if $(CONSOLE),--console$(if $(filter 1 yes true,$(CONSOLE)),, $(CONSOLE)))

demo: $(STAMP)
	$(BIN)/outrigger demo $(CONSOLE_FLAG)

# The same on a real kube-apiserver + etcd on loopback (built by `make k8s` when missing): Outrigger with the
# example sidecar plugins, nodes and pods applied with kubectl, `kubectl get pods -o wide`, a summary, then
# everything stopped (docs/kubernetes.md).
demo-cluster: $(STAMP) k8s
	$(BIN)/python -m tools.democluster $(CONSOLE_FLAG)

test: $(STAMP) lint typecheck go-test browser unit

# The headless chromium the console's browser tests drive (tests/test_console.py; Playwright's own
# browsers are never downloaded): Debian's package, installed with apt-get where missing and possible.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			DEBIAN_FRONTEND=noninteractive timeout 180 apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends chromium >/dev/null \
			|| echo "note: could not install chromium; tests/test_console.py is skipped" >&2; \
		else echo "note: no chromium (apt-get install chromium); tests/test_console.py is skipped" >&2; fi; }

lint: $(STAMP)
	$(BIN)/ruff check pluginhost framework clients tools tests

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) k8s
	$(BIN)/python -m pytest -q -p no:cacheprovider

# etcd, kube-apiserver, kube-scheduler, kubectl and kube-controller-manager at the pinned versions of
# K8S_RELEASE (tests/k8s/build.sh), for the live-cluster tests: built from the Go module proxy into a cache
# outside the work tree, one folder per release, minutes the first time (half an hour on a busy 2-core
# machine), reused after.
k8s:
	bash tests/k8s/build.sh

# The live-cluster tests (tests/test_kube_*.py but the kube-scheduler comparison) against each pinned
# release's API server in turn, then a summary per release (tools/compat.py). It builds the releases not
# built yet; COMPAT_RELEASES=1.35,1.37 runs some. Not part of `make test` (an hour and more).
COMPAT_RELEASES ?=
compat: $(STAMP)
	$(BIN)/python -m tools.compat $(if $(COMPAT_RELEASES),--releases $(COMPAT_RELEASES))

# Regenerate the Python stubs in pluginhost/_gen from proto/ (a test fails when they are stale).
proto: $(STAMP)
	$(BIN)/python -m pluginhost._genproto

# The Go SDK and kube-scheduler plugin adapter (clients/go, docs/plugin-go.md): regenerate its code from
# proto/ with pinned protoc-gen-go/-grpc (a test fails when it is stale); vet and test it.
go-proto: $(STAMP)
	clients/go/genproto.sh

# The Go plugin hosts (clients/go/cmd/*, built against Kubernetes 1.37.2, the release tests/k8s builds by
# default) into clients/go/.bin (ignored by git). CGO_ENABLED=0 -trimpath as tests/k8s/build.sh builds
# kube-scheduler, so the build cache is shared. clients/go/schedplugins is a module of its own at the
# Kubernetes release sigs.k8s.io/scheduler-plugins is built against (1.34: -tags k8s1.34 gives the
# adapter that release's framework types); its host goes to the same folder.
GO_SCHEDPLUGINS_TAGS = -tags k8s1.34

go-build:
	cd clients/go && CGO_ENABLED=0 go build -trimpath -o .bin/ ./cmd/...
	cd clients/go/schedplugins && CGO_ENABLED=0 go build -trimpath $(GO_SCHEDPLUGINS_TAGS) -o ../.bin/ ./cmd/...

# Vet and test the Go modules (the adapter, package kube, at 1.37 and against 1.34 as well); vet the DRA
# comparison harness.
go-test:
	cd clients/go && CGO_ENABLED=0 go vet -trimpath ./... && CGO_ENABLED=0 go test -trimpath ./...
	cd tools/dracompare/harness && CGO_ENABLED=0 go vet -trimpath ./...
	cd clients/go/schedplugins && CGO_ENABLED=0 go vet -trimpath $(GO_SCHEDPLUGINS_TAGS) ./... outrigger.dev/clients/go/kube/... \
		&& CGO_ENABLED=0 go test -trimpath $(GO_SCHEDPLUGINS_TAGS) ./... outrigger.dev/clients/go/kube/...

# Every benchmark scenario (tools/bench/): prints a table, writes bench-results.json (under 10 minutes).
bench: $(STAMP)
	$(BIN)/python -m tools.bench --out bench-results.json

# Outrigger side by side with the real kube-scheduler (tools/compare/): scheduler_perf workloads through a
# fresh API server each (throughput), placements pod by pod against kube-scheduler's logged scores, FailedScheduling
# messages verbatim; writes compare-results.md and compare-results.json (under 15 minutes once `make k8s` has built).
compare: $(STAMP) k8s
	$(BIN)/python -m tools.compare --out compare-results

# The fuzz tests with 50 x their `make test` budget and fresh random examples (docs/bad-input.md).
fuzz: $(STAMP)
	OUTRIGGER_FUZZ=long $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_fuzz_parsers.py tests/test_fuzz_services.py

# The full fault harness (tests/fault_harness.py; `make test` runs a short version): a few minutes.
faults: $(STAMP)
	$(BIN)/python tests/fault_harness.py

# The live-cluster fault harness (tests/kube_fault_harness.py; `make test` runs a short version): 2000 pods
# through two Outrigger replicas with leader election (kube-scheduler's 15 s lease) and two plugin replicas on
# a real API server of its own, while the leader is killed, the API server restarted, a plugin replica killed
# and another stalled; checked through the API. A few minutes, everything on 127.0.0.1.
faults-cluster: $(STAMP) k8s
	$(BIN)/python tests/kube_fault_harness.py --pods 2000

clean:
	rm -rf $(VENV) $(LATEST) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
