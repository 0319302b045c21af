# bulletin: two commands a newcomer needs, each installs what it needs and can be re-run.
#   make demo   builds everything, starts a local cluster, runs examples/quickstart.py, stops it
#               (a .venv of some 0.3 GB: the client and what building it takes)
#   make test   builds everything and runs the Java and Python test suites, and ends with both
#               suites' counts whichever failed (adds the suites' packages to .venv: some 6 GB)
# Also: make build, make dist (a wheel of the client with the runtime's jar inside), make bench
# (a call's path against Ray and Dask: latency, throughput, CPU, 1 GiB; BENCH_ARGS="--rounds 3"),
# make bench-data (data plane: 1 GiB handoff, cross-host, Dask, Ray), make bench-notebooks (the notebooks of examples/notebooks at real size,
# executed copies written back), make clean,
#       make slurm-up / slurm-down (the one-node test Slurm of .ci/slurm; make test brings it up
#       and leaves it running: slurm-down stops it), make kube (etcd and the kube-apiserver the
#       Kubernetes provider's tests start; make test builds it once).

PYTHON_BOOT ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
PIP         := $(PY) -m pip
# No colour codes: -Dstyle.color=never for Maven's messages, and jansi.noreset (a JVM property,
# hence MAVEN_OPTS) for the ESC[0m resets jansi writes at start and exit, which -q leaves bare.
MVN         := MAVEN_OPTS="$$MAVEN_OPTS -Djansi.noreset=true" mvn -B -q -Dstyle.color=never
JAR         := runtime/target/bulletin-runtime.jar
STAMPS      := .stamps
export BULLETIN_JAR := $(CURDIR)/$(JAR)
# Java tests that start real Python executors use the project's interpreter.
export BULLETIN_TEST_PYTHON := $(CURDIR)/$(PY)

.PHONY: all build dist demo test test-java test-kube test-python test-paths bench bench-data bench-notebooks bench-scheduler bench-scale bench-usage clean slurm-up slurm-down toolchain chromium kube

all: build

$(STAMPS):
	mkdir -p $(STAMPS)

# JDK 17+, Maven and a Python that can make a venv; installed with apt when missing (root).
toolchain:
	@PYTHON_BOOT=$(PYTHON_BOOT) bash .ci/toolchain.sh

# The venv: the client and what building it takes (grpcio-tools makes the gRPC stubs), some
# 0.3 GB: all that `make build` and `make demo` install. It is brought up to date when the
# package's dependencies change; what the suites, the benchmarks and the benchmark notebooks
# add comes in stamps of their own, for the targets that need it.
$(STAMPS)/venv: python-client/pyproject.toml | $(STAMPS) toolchain
	test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "grpcio-tools>=1.85.1" -e python-client
	touch $@

# The suites' packages ([test]: pytest, selenium, datasets, and [notebooks], whose PyTorch
# wheel brings its CUDA libraries): some 6 GB, for `make test` alone.
$(STAMPS)/venv-test: $(STAMPS)/venv
	$(PIP) install -q -e "python-client[test]"
	touch $@

$(STAMPS)/bench: $(STAMPS)/venv
	$(PIP) install -q -e "python-client[bench]"
	touch $@

# What the benchmark notebooks need ([notebooks]: PyTorch, transformers, plots, the kernel).
$(STAMPS)/notebooks: $(STAMPS)/venv
	$(PIP) install -q -e "python-client[notebooks]"
	touch $@

# With Error Prone's bug checks (-Perrorprone, pom.xml): a build with a known bug pattern fails.
$(JAR): pom.xml $(shell find protocol arrow-bridge worker runtime -name '*.java' -o -name '*.proto' -o -name pom.xml | grep -v /target/) | toolchain
	$(MVN) install -DskipTests -Perrorprone
	touch $(JAR)

python-client/bulletin/_jars/bulletin-runtime.jar: $(JAR)
	mkdir -p $(dir $@)
	cp $(JAR) $@

build: toolchain $(STAMPS)/venv $(JAR) python-client/bulletin/_jars/bulletin-runtime.jar
	$(PY) python-client/tools/gen_proto.py

# A wheel of the client with the runtime's jar and the gRPC stubs inside, for a Jupyter kernel's
# environment here or on another machine (where `bulletin up` needs a Java 17 runtime):
#   pip install "target/dist/bulletin-<version>-py3-none-any.whl[quickstart]"
dist: build
	rm -rf target/dist python-client/build
	$(PIP) wheel -q --no-deps -w target/dist ./python-client
	rm -rf python-client/build
	@ls target/dist/*.whl

# The Slurm provider's tests run against a real one-node Slurm on loopback. up.sh installs and
# starts it (root, apt) and is a no-op when it already answers; it runs every time because a
# stamp would outlive the daemons (a reboot). Exit 3 = it cannot run here (not root, no apt):
# the Slurm tests then skip, saying why.
slurm-up:
	@bash .ci/slurm/up.sh || { rc=$$?; [ $$rc -eq 3 ] || exit $$rc; echo "slurm: tests that need it will be skipped"; }

slurm-down:
	@bash .ci/slurm/down.sh

# The Kubernetes provider's tests run against a real kube-apiserver and etcd on loopback (the
# tests start them). kube.sh installs etcd (root, apt) and builds the API server once into
# .stamps/kube (20-30 minutes cold on two busy cores, seconds with Go's caches): in the
# background, so that the build overlaps the Java suite, whose Kubernetes tests wait for it.
# Exit 3 = it cannot here: the Kubernetes tests then skip, saying why.
kube:
	@bash .ci/kube.sh --background || { rc=$$?; [ $$rc -eq 3 ] || exit $$rc; echo "kube: the Kubernetes provider's tests will be skipped"; }

# Each suite's counts in one line, `java: N passed, N failed, N skipped` (.ci/test_counts.py):
# mvn -q hides Surefire's, so they come from the reports of this run (newer than the stamp);
# pytest's from the report it writes. Run alone, a suite says its counts at its end; under
# `make test` (SUITE_COUNTS=end) they come once, after both suites, whichever failed.
COUNTS        := $(PYTHON_BOOT) .ci/test_counts.py
JAVA_COUNTS   := $(COUNTS) java --since $(STAMPS)/java-tests
PYTHON_REPORT := $(STAMPS)/python-tests.xml
PYTHON_COUNTS := $(COUNTS) python $(PYTHON_REPORT)
PATHS_REPORT  := $(STAMPS)/path-tests.xml
PATHS_COUNTS  := $(COUNTS) python --label bulletin-folder $(PATHS_REPORT)

# The Java tests' own logs (the runtime's INFO lines, the Slurm provider's warnings) go to each
# module's target/test.log, not the console (.ci/java-test-logging.properties).
test-java: build $(STAMPS)/venv-test slurm-up
	@touch $(STAMPS)/java-tests
	$(MVN) install || { echo "java: the code's logs are in */target/test.log"; \
	  $(if $(SUITE_COUNTS),,$(JAVA_COUNTS);) exit 1; }
	$(if $(SUITE_COUNTS),,@$(JAVA_COUNTS))

# The dashboard's browser test drives Debian's chromium and chromium-driver: chromium.sh
# installs them (root, apt) and exits 3 where it cannot; that test then skips, saying why.
chromium:
	@bash .ci/chromium.sh || { rc=$$?; [ $$rc -eq 3 ] || exit $$rc; echo "chromium: the dashboard's browser test will be skipped"; }

# The Kubernetes provider's tests against a real kube-apiserver (tagged "kube", left out of
# test-java): last, so that the API server's cold build, which `make test` starts first in the
# background, overlaps the Java and Python suites; they wait for it if it is still building.
test-kube: build kube
	@touch -a $(STAMPS)/java-tests
	$(MVN) -pl runtime -am test -Dgroups=kube -Dbulletin.excludedGroups=none \
	  -Dsurefire.failIfNoSpecifiedTests=false || { echo "kube: the code's logs are in runtime/target/test.log"; \
	  $(if $(SUITE_COUNTS),,$(JAVA_COUNTS);) exit 1; }
	$(if $(SUITE_COUNTS),,@$(JAVA_COUNTS))

test-python: build $(STAMPS)/venv-test chromium
	@rm -f $(PYTHON_REPORT)
	(cd python-client && ../$(PY) -m pytest -q -p no:cacheprovider --junitxml=../$(PYTHON_REPORT) tests) \
	  $(if $(SUITE_COUNTS),,|| { $(PYTHON_COUNTS); exit 1; })
	$(if $(SUITE_COUNTS),,@$(PYTHON_COUNTS))

# `git clone` of the repository makes a folder named bulletin, where every path of the checkout
# holds /bulletin/: the tests that look at the file paths of tracebacks run again from a copy
# of the client there (1 MB, without the jar: BULLETIN_JAR names the one built), so that none
# mistakes the checkout's folder for the package's.
PATH_TESTS := tests/test_envelope.py tests/test_tracebacks.py tests/test_executor.py \
              tests/e2e/test_dask_api.py::test_traceback_clean
CLONE      := $(STAMPS)/clone/bulletin/python-client
test-paths: build $(STAMPS)/venv-test
	@rm -rf $(STAMPS)/clone $(PATHS_REPORT) && mkdir -p $(CLONE)
	@tar -C python-client --exclude=_jars --exclude=__pycache__ --exclude=artifacts \
	  -cf - bulletin tests pyproject.toml | tar -C $(CLONE) -xf -
	cd $(CLONE) && $(CURDIR)/$(PY) -m pytest -q -p no:cacheprovider \
	  --junitxml=$(CURDIR)/$(PATHS_REPORT) $(PATH_TESTS)
	@rm -rf $(STAMPS)/clone

# Every part runs whatever another did (make -k), then the counts of each, and the target
# fails if any part failed. Quick first: the path check (seconds), then Java, then Python.
test:
	@mkdir -p $(STAMPS) && touch $(STAMPS)/java-tests && rm -f $(PYTHON_REPORT) $(PATHS_REPORT)
	@$(MAKE) -f $(firstword $(MAKEFILE_LIST)) --no-print-directory -k SUITE_COUNTS=end kube test-paths test-java test-python test-kube; \
	  status=$$?; \
	  echo "== make test: $$([ $$status = 0 ] && echo passed || echo FAILED)"; \
	  $(PATHS_COUNTS); $(JAVA_COUNTS); $(PYTHON_COUNTS); \
	  exit $$status

demo: build
	$(PY) examples/quickstart.py

bench: build $(STAMPS)/bench
	$(PY) examples/call_path_benchmark.py $(BENCH_ARGS)

bench-data: build $(STAMPS)/bench
	$(PY) examples/data_plane_benchmark.py

# `make test` runs them at their CI size (python-client/tests/e2e/test_notebooks.py).
bench-notebooks: build $(STAMPS)/bench $(STAMPS)/notebooks
	$(PY) examples/notebooks/run_notebooks.py --size real --write

# The scheduler simulations (docs/scheduler.md): 1,000 workers x 8 GPUs with up to 100,000 calls
# against FIFO first-fit, and a lab week against notebooks that hold a GPU per session.
bench-scheduler:
	$(MVN) -pl runtime -am test -Dtest=SchedulerBench -Dsurefire.failIfNoSpecifiedTests=false \
	  -Dbulletin.bench=true

# One runtime and 10, 100 and 1,000 simulated workers (no Python; each answers a call at once)
# and as many users as fill their slots (slots / 4 in the default class; -Dbulletin.bench.users=N):
# the runtime's CPU per call and calls/s per core (issue 30, docs/internals.md). Smaller:
# make bench-scale SCALE_ARGS="-Dbulletin.bench.calls=20000 -Dbulletin.bench.workers=10,1000"
bench-scale: $(STAMPS)/venv
	$(MVN) -pl runtime -am test -Dtest=ScaleBench -Dsurefire.failIfNoSpecifiedTests=false \
	  -Dbulletin.bench=true $(SCALE_ARGS)

# What GPU utilisation sampling costs the runtime: 100 simulated workers (docs/usage.md).
bench-usage: build
	$(PY) examples/usage_sampling_benchmark.py

clean:
	$(MVN) clean
	rm -rf $(STAMPS) python-client/bulletin/_jars
