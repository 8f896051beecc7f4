/*
 * Switchyard inside your own program: open a model, plan it for this machine, load it and
 * generate 16 tokens, streaming them as they come. C99; links only libswitchyard and its
 * header (switchyard/host.h).
 *
 *   embed_c MODEL [PROMPT] [SEED] [TEMPERATURE]
 *
 * MODEL is a Hugging Face folder (config.json, model.safetensors, tokenizer.json) or a .gguf
 * file; `switchyard make-test-model DIR` writes a small one. The last line lists the generated
 * ids ("ids: ..."), which the test suite compares with `switchyard run --json`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/host.h"

#define MAX_TOKENS 16

/* Prints the failing call, its code and message, and exits. */
static void check(int status, const char* what, const sy_host_error* error) {
  if (status == 0) return;
  fprintf(stderr, "embed_c: %s failed: %s (%s): %s\n", what, error->code_text, error->name,
          error->message);
  exit(1);
}

/* Streams each piece of text as it is generated. */
static int print_piece(void* user_data, int64_t token, const char* text, size_t length) {
  (void)user_data;
  (void)token;
  fwrite(text, 1, length, stdout);
  fflush(stdout);
  return 0; /* non-zero would stop generation here */
}

int main(int argc, char** argv) {
  const char* model_path = argc > 1 ? argv[1] : NULL;
  const char* prompt_text = argc > 2 ? argv[2] : "the cat";
  sy_host_error error;
  sy_runtime* runtime = NULL;
  sy_model* model = NULL;
  sy_plan* plan = NULL;
  sy_session* session = NULL;
  sy_plan_options plan_options;
  sy_generate_options options;
  sy_generate_result result;
  int64_t* prompt;
  int64_t ids[MAX_TOKENS];
  size_t count = 0;
  int64_t i;

  if (!model_path) {
    fprintf(stderr, "usage: embed_c MODEL [PROMPT] [SEED] [TEMPERATURE]\n");
    return 2;
  }
  if ((sy_host_api_version() >> 16) != SY_HOST_API_VERSION_MAJOR) {
    fprintf(stderr, "embed_c: libswitchyard speaks another major version of the API\n");
    return 1;
  }
  memset(&error, 0, sizeof error);
  error.struct_size = sizeof error;

  /* Plugins from SWITCHYARD_PLUGIN_PATH, else switchyard/plugins beside the library. */
  check(sy_runtime_create(NULL, &runtime, &error), "sy_runtime_create", &error);
  check(sy_model_open(runtime, model_path, &model, &error), "sy_model_open", &error);

  /* The prompt's ids: ask for the size, then fill. */
  if (sy_model_tokenize(model, prompt_text, SY_PROMPT_PLAIN, NULL, 0, &count, &error) != 0 &&
      count == 0)
    check(1, "sy_model_tokenize", &error);
  prompt = (int64_t*)malloc(count * sizeof *prompt);
  if (!prompt) return 1;
  check(sy_model_tokenize(model, prompt_text, SY_PROMPT_PLAIN, prompt, count, &count, &error),
        "sy_model_tokenize", &error);

  /* Every op placed before any weight is loaded; a model that cannot run here fails now. */
  memset(&plan_options, 0, sizeof plan_options);
  plan_options.struct_size = sizeof plan_options;
  plan_options.prompt_tokens = (int64_t)count;
  plan_options.context = (int64_t)count + MAX_TOKENS;
  check(sy_plan_create(model, &plan_options, &plan, &error), "sy_plan_create", &error);
  check(sy_session_create(plan, &session, &error), "sy_session_create", &error);

  memset(&options, 0, sizeof options);
  options.struct_size = sizeof options;
  options.max_tokens = MAX_TOKENS;
  options.ignore_eos = 1;
  options.seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 0;
  options.temperature = argc > 4 ? strtod(argv[4], NULL) : 0.0;
  options.on_token = print_piece;
  memset(&result, 0, sizeof result);
  result.struct_size = sizeof result;
  fputs(prompt_text, stdout);
  check(sy_session_generate(session, prompt, count, &options, ids, MAX_TOKENS, &result, &error),
        "sy_session_generate", &error);

  printf("\nids:");
  for (i = 0; i < result.generated_tokens && i < MAX_TOKENS; ++i)
    printf(" %lld", (long long)ids[i]);
  printf("\n");

  free(prompt);
  sy_session_destroy(session);
  sy_plan_destroy(plan);
  sy_model_destroy(model);
  sy_runtime_destroy(runtime);
  return 0;
}
