# Thin wrapper over CMake. Every target first installs missing Debian packages
# (scripts/install-deps.sh: as root it installs them, otherwise it prints the apt-get line).
BUILD        ?= build
FUZZ_BUILD   ?= $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 1
FUZZ_SEED    ?=
JOBS         ?= $(shell nproc)

.PHONY: all deps pyenv configure test test-quick test-asan fuzz fuzz-build fuzz-faults fuzz-torch fuzz-merge report survey layers clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps.sh --check 2>/dev/null || scripts/install-deps.sh

# The Python environment (.venv) of the kernel-process tests: numpy and ml_dtypes, and PyTorch
# where scripts/python-env.sh --torch installed it (the tests labelled torch skip without).
pyenv:
	@scripts/python-env.sh >/dev/null

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD)

# Every test, the exhaustive ones included; JUnit XML in $(BUILD)/test-results.xml.
test: all pyenv
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --output-junit test-results.xml

# Everything but the tests labelled exhaustive.
test-quick: all pyenv
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE exhaustive

# The suite (but the exhaustive and gpu tests, and the tests of PyTorch's and the frameworks'
# kernels: their C side is the kernel protocol's, which tests/exec_kernel.sh and
# tests/rank_group.sh cover here, and make fuzz-torch runs them under the sanitized drivers)
# built with ASan and UBSan, without CUDA: memory errors, leaks and undefined behaviour fail it.
ASAN_BUILD ?= $(BUILD)/asan
test-asan: deps pyenv
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) -DPF_SANITIZE=ON -DPF_ENABLE_CUDA=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -LE 'exhaustive|gpu|torch' --output-junit test-results.xml

# clang + libFuzzer + ASan + UBSan build of the drivers (and of precfuzz itself).
fuzz-build: deps
	@test -f $(FUZZ_BUILD)/CMakeCache.txt || CC=clang cmake -S . -B $(FUZZ_BUILD) -DPF_ENABLE_FUZZING=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

# Each driver for FUZZ_SECONDS; fails on any finding. Also replays the bad-input checks
# against the sanitized precfuzz, and checks that a user's instrumented kernel library gives
# the drivers coverage feedback.
fuzz: fuzz-build
	tests/cli_errors.sh $(FUZZ_BUILD)/bin/precfuzz
	tests/plugin_coverage.sh $(FUZZ_BUILD)
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_SEED=$(FUZZ_SEED) FUZZ_BUILD=$(FUZZ_BUILD) scripts/run-fuzzers.sh

# Each fault switch under its driver, from an empty corpus: fails if one is not found.
fuzz-faults: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_SEED=$(FUZZ_SEED) FUZZ_BUILD=$(FUZZ_BUILD) scripts/run-fuzzers.sh --faults

# The frameworks' kernels the examples declare (scripts/targets.py: PyTorch's; DeepSpeed's and
# Megatron's where installed) under the drivers of their operations, FUZZ_SECONDS each.
fuzz-torch: fuzz-build
	scripts/python-env.sh --torch >/dev/null
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_SEED=$(FUZZ_SEED) FUZZ_BUILD=$(FUZZ_BUILD) scripts/run-fuzzers.sh --torch

# Folds the inputs make fuzz found new coverage with into corpora/ (libFuzzer -merge=1).
fuzz-merge: fuzz-build
	FUZZ_BUILD=$(FUZZ_BUILD) scripts/run-fuzzers.sh --merge

# The main job: the sweep of every kernel variant and the HTML precision report.
REPORT ?= $(BUILD)/reports/precision-report.html
report: all
	@mkdir -p $(dir $(REPORT))
	$(BUILD)/bin/precision-report -o $(REPORT) --save-results $(BUILD)/reports/results.json
	$(BUILD)/bin/precision-report -i $(BUILD)/reports/results.json --format md -o $(BUILD)/reports/precision-report.md
	@echo "report: $(REPORT)"

# The floors of the house over the include lines (scripts/check-layers.py): fails when an
# include runs upward, an oracle or a spec takes an emulation's header, or core modules form a
# cycle (make test runs it too: the test layers).
layers:
	python3 scripts/check-layers.py

# The older text survey (beta2 x lr table, seed 001 experiment).
survey: all
	scripts/survey.sh $(BUILD)/bin/precfuzz 10

clean:
	rm -rf $(BUILD)
