# triage-farm: every target does its own setup on a fresh Debian 12 machine (as root):
# install missing packages, configure with CMake + Ninja into build/, build, then run.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CTEST_ARGS ?=
# make demo KEEP=1: leave the demo's coordinator and agents running (scripts/demo.sh stop)
KEEP ?= 0

.PHONY: all deps configure build test unit integration e2e badinput demo bench format format-check clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Every label (unit, integration, e2e, badinput) plus the clang-format check; fails on any failure.
test: build format-check
	ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error -j $(JOBS) $(CTEST_ARGS)

unit integration e2e badinput: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error -j $(JOBS) -L $@ $(CTEST_ARGS)

demo: build
	KEEP=$(KEEP) scripts/demo.sh $(BUILD_DIR)

bench: build
	scripts/bench.sh $(BUILD_DIR)

format-check:
	@scripts/format.sh --check

format:
	@scripts/format.sh

clean:
	rm -rf $(BUILD_DIR) demo-out
