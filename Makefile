# Entry points. `make demo` and `make test` work on a fresh Debian 12 machine: each runs setup first.
JOBS ?= $(shell nproc)
# Tests: Debug + AddressSanitizer + UndefinedBehaviorSanitizer.
BUILD ?= build
# The demo and benchmarks: optimised.
RELEASE ?= build-release
# The Python package: $(PYTHON_BUILD)/grag/ (PYTHONPATH=$(PYTHON_BUILD)); CMake's files in cmake/.
PYTHON_BUILD ?= build-python

.PHONY: setup build release demo-build test demo bench install package deb python docs format format-check clean
# Where `make install` puts grag (bin/, share/man/, share/*completion*/).
PREFIX ?= /usr/local

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGRAG_SANITIZE=ON -DGRAG_BUILD_BENCH=OFF \
	  -DGRAG_BUILD_PYTHON=ON

$(RELEASE)/build.ninja:
	cmake -S . -B $(RELEASE) -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRAG_BUILD_TESTS=OFF

$(PYTHON_BUILD)/cmake/build.ninja:
	cmake -S . -B $(PYTHON_BUILD)/cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRAG_BUILD_PYTHON=ON \
	  -DGRAG_BUILD_TESTS=OFF -DGRAG_BUILD_BENCH=OFF -DGRAG_PYTHON_DIR=$(abspath $(PYTHON_BUILD))

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

release: setup $(RELEASE)/build.ninja
	cmake --build $(RELEASE) -j $(JOBS)

# The demo needs the two binaries only, not the benchmarks (minutes of compiling on 2 cores).
demo-build: setup $(RELEASE)/build.ninja
	cmake --build $(RELEASE) -j $(JOBS) --target grag grag-serve

# The binaries, the man page, the shell completions and the library (libgrag.a, its headers and
# find_package(grag) config) under $(PREFIX).
install: demo-build
	cmake --build $(RELEASE) -j $(JOBS) --target grag_install_files grag_library
	cmake --install $(RELEASE) --prefix $(PREFIX)

# A Debian package of the same, in $(RELEASE)/ (grag_<version>_<arch>.deb).
package: demo-build
	cmake --build $(RELEASE) -j $(JOBS) --target grag_install_files grag_library
	cd $(RELEASE) && cpack -G DEB
deb: package

# The Python module, optimised, into $(PYTHON_BUILD)/grag (docs/python.md).
python: setup $(PYTHON_BUILD)/cmake/build.ninja
	cmake --build $(PYTHON_BUILD)/cmake -j $(JOBS) --target python

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: demo-build
	bash scripts/demo.sh $(RELEASE)/grag

bench: release
	bash scripts/bench.sh $(RELEASE)

# The generated parts of docs/ (the settings list in docs/configuration.md), from the binary.
docs: demo-build
	bash scripts/gen_docs.sh $(RELEASE)/grag

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

format-check:
	bash scripts/format_check.sh

clean:
	rm -rf $(BUILD) $(RELEASE) $(PYTHON_BUILD)
