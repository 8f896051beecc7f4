# Thin wrapper over the CMake presets (CMakePresets.json). Nothing else lives here.
.PHONY: deps demo test clean

deps:
	@scripts/install-deps.sh

demo: deps
	cmake --preset release
	cmake --build --preset demo

test: deps
	cmake --preset release
	cmake --build --preset release
	ctest --preset release

clean:
	rm -rf build build-debug
