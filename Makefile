# bulletin: two commands a newcomer needs, each installs what it needs and can be re-run.
#   make demo   builds everything, starts a local cluster, runs examples/quickstart.py, stops it
#   make test   builds everything and runs the Java and Python test suites
# Also: make build, make bench (offload overhead against Dask and Ray), make bench-data (data
# plane: 1 GiB handoff, cross-host, Dask, Ray), make bench-notebooks (the notebooks of
# examples/notebooks at real size, executed copies written back), make clean,
#       make slurm-up / slurm-down (the one-node test Slurm of .ci/slurm; make test brings it up).

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

.PHONY: all build demo test test-java test-python bench bench-data bench-notebooks bench-scheduler bench-usage clean slurm-up slurm-down toolchain chromium

all: build

$(STAMPS):
	mkdir -p $(STAMPS)

# JDK 17+, Maven and a Python that can make a venv; installed with apt when missing (root).
toolchain:
	@PYTHON_BOOT=$(PYTHON_BOOT) bash .ci/toolchain.sh

# The venv is rebuilt when the package's dependencies change.
$(STAMPS)/venv: python-client/pyproject.toml | $(STAMPS) toolchain
	test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "grpcio-tools>=1.85.1" -e "python-client[test]"
	touch $@

$(STAMPS)/bench: $(STAMPS)/venv
	$(PIP) install -q -e "python-client[bench]"
	touch $@

$(JAR): pom.xml $(shell find protocol arrow-bridge worker runtime -name '*.java' -o -name '*.proto' -o -name pom.xml | grep -v /target/) | toolchain
	$(MVN) install -DskipTests
	touch $(JAR)

python-client/bulletin/_jars/bulletin-runtime.jar: $(JAR)
	mkdir -p $(dir $@)
	cp $(JAR) $@

build: toolchain $(STAMPS)/venv $(JAR) python-client/bulletin/_jars/bulletin-runtime.jar
	$(PY) python-client/tools/gen_proto.py

# The Slurm provider's tests run against a real one-node Slurm on loopback. up.sh installs and
# starts it (root, apt) and is a no-op when it already answers; it runs every time because a
# stamp would outlive the daemons (a reboot). Exit 3 = it cannot run here (not root, no apt):
# the Slurm tests then skip, saying why.
slurm-up:
	@bash .ci/slurm/up.sh || { rc=$$?; [ $$rc -eq 3 ] || exit $$rc; echo "slurm: tests that need it will be skipped"; }

slurm-down:
	@bash .ci/slurm/down.sh

# mvn -q hides Surefire's counts: .ci/java_test_counts.py says them in one line, from the reports
# of this run (newer than the stamp). `make test` says them at its end, or when Java fails.
JAVA_COUNTS := $(PY) .ci/java_test_counts.py --since $(STAMPS)/java-tests

test-java: build slurm-up
	@touch $(STAMPS)/java-tests
	$(MVN) install || { $(JAVA_COUNTS); exit 1; }
	$(if $(filter test,$(MAKECMDGOALS)),,@$(JAVA_COUNTS))

# The dashboard's browser test drives Debian's chromium and chromium-driver: chromium.sh
# installs them (root, apt) and exits 3 where it cannot; that test then skips, saying why.
chromium:
	@bash .ci/chromium.sh || { rc=$$?; [ $$rc -eq 3 ] || exit $$rc; echo "chromium: the dashboard's browser test will be skipped"; }

test-python: build chromium
	cd python-client && ../$(PY) -m pytest -q -p no:cacheprovider tests

test: test-java test-python
	@$(JAVA_COUNTS)

demo: build
	$(PY) examples/quickstart.py

bench: build $(STAMPS)/bench
	$(PY) examples/overhead_benchmark.py

bench-data: build $(STAMPS)/bench
	$(PY) examples/data_plane_benchmark.py

# `make test` runs them at their CI size (python-client/tests/e2e/test_notebooks.py).
bench-notebooks: build $(STAMPS)/bench
	$(PY) examples/notebooks/run_notebooks.py --size real --write

# The scheduler simulations (docs/scheduler.md): 1,000 workers x 8 GPUs with up to 100,000 calls
# against FIFO first-fit, and a lab week against notebooks that hold a GPU per session.
bench-scheduler:
	$(MVN) -pl runtime -am test -Dtest=SchedulerBench -Dsurefire.failIfNoSpecifiedTests=false \
	  -Dbulletin.bench=true

# What GPU utilisation sampling costs the runtime: 100 simulated workers (docs/usage.md).
bench-usage: build
	$(PY) examples/usage_sampling_benchmark.py

clean:
	$(MVN) clean
	rm -rf $(STAMPS) python-client/bulletin/_jars
