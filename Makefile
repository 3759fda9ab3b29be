# Thin wrapper over CMake. Each target installs missing Debian packages first
# (scripts/install-deps.sh; as root it installs them, otherwise it prints the apt-get line).
BUILD        ?= build
FUZZ_BUILD   ?= $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 1
JOBS         ?= $(shell nproc)
CMAKE_FLAGS  ?=

.PHONY: all deps configure test fuzz report clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps.sh --check 2>/dev/null || scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

fuzz: deps
	@test -f $(FUZZ_BUILD)/CMakeCache.txt || CC=clang cmake -S . -B $(FUZZ_BUILD) -DPF_ENABLE_FUZZING=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_BUILD=$(FUZZ_BUILD) scripts/run-fuzzers.sh

report: all
	@echo "precision-report is not built yet (issue 7); running the softmax survey instead" >&2
	$(BUILD)/bin/precfuzz list

clean:
	rm -rf $(BUILD)
