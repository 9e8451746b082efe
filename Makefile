# triage-farm: every target does its own setup on a fresh Debian 12 machine (as root):
# install missing packages, configure with CMake + Ninja into build/, build, then run.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
# RelWithDebInfo with line tables only (-g1): backtraces, sanitizer reports and perf keep file and
# line, and the build on 2 cores takes about a quarter less than with full debug info (-g).
# BUILD_TYPE=Debug for a debugger's locals.
RELWITHDEBINFO_FLAGS ?= -O2 -g1 -DNDEBUG
JOBS ?= $(shell nproc)
CTEST_ARGS ?=
# make fuzz: seconds per target (make test's regression run uses FUZZ_CHECK_SECONDS)
FUZZ_SECONDS ?= 300
FUZZ_CHECK_SECONDS ?= 15
# make demo KEEP=1: leave the demo's coordinator and agents running (scripts/demo.sh stop)
KEEP ?= 0

.PHONY: all deps configure build test unit integration e2e badinput demo bench format format-check \
	clean fuzz fuzz-check asan asan-check image image-test

all: build

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(RELWITHDEBINFO_FLAGS)"

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(RELWITHDEBINFO_FLAGS)"

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Every label (unit, integration, e2e, badinput), the clang-format check and the fuzz regression
# run; fails on any failure.
test: build format-check fuzz-check
	ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error -j $(JOBS) $(CTEST_ARGS)

unit integration e2e badinput: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error -j $(JOBS) -L $@ $(CTEST_ARGS)

demo: build
	KEEP=$(KEEP) scripts/demo.sh $(BUILD_DIR)

bench: build
	scripts/bench.sh $(BUILD_DIR)

# The Dockerfile's image, built here with podman from local Debian 12 bases (docs/image.md).
image: deps
	scripts/image.sh

# The image run: non-root, --version, size, and the demo's sweep in containers with the same
# patches as on the host. Not part of CI (docs/image.md, "When to run it").
image-test: build image
	scripts/image-test.sh $(BUILD_DIR)

# libFuzzer targets (docs/fuzzing.md) in build-fuzz/ with clang, ASan and UBSan: FUZZ_SECONDS
# of fuzzing per target; new inputs are kept, minimised, in tests/fuzz/corpus/.
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) scripts/fuzz.sh

# The regression run of make test: every committed corpus and regression input, then
# FUZZ_CHECK_SECONDS of fuzzing per target; the committed corpus is left as it is.
fuzz-check: deps
	FUZZ_SECONDS=$(FUZZ_CHECK_SECONDS) JOBS=$(JOBS) scripts/fuzz.sh --check

# The whole project with ASan + UBSan in build-asan/ (gcc), then the unit and integration tests.
asan: deps
	JOBS=$(JOBS) CTEST_ARGS="$(CTEST_ARGS)" scripts/asan.sh

# CI's sanitizer run: the same build, only the intake, merge, report, PR text and landing tests
# and the real-size night end to end (scripts/asan.sh --check).
asan-check: deps
	JOBS=$(JOBS) scripts/asan.sh --check

format-check:
	@scripts/format.sh --check

format:
	@scripts/format.sh

clean:
	rm -rf $(BUILD_DIR) build-fuzz build-asan demo-out
