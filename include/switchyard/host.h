/*
 * Switchyard host C API: the runtime inside your own program (libswitchyard.so).
 *
 * The same pipeline as `switchyard run`, as a library: a runtime discovers the backend
 * plugins once; a model is opened (a Hugging Face folder or a GGUF file); a plan places every
 * op on a device of this machine before any weight is loaded, or says with a documented code
 * why it cannot. The plan's weights are loaded once, the first time a context or session needs
 * them, and shared by every context and session made from it. A context (since 1.1) holds a KV
 * memory of many sequences and runs batches: any mix of prompt chunks and decode tokens of many
 * sequences in one step (llama.cpp's llama_batch). A session (1.0) is a context with one
 * sequence. The CLI's `run` and this API call the same core code, so they give the same tokens
 * for the same model, prompt and seed.
 *
 * Conventions (they hold for every declaration below):
 *
 * - Pure C99. No C++ type, exception or allocator crosses. Link with -lswitchyard only.
 * - Status: every function except the *_destroy family, sy_host_api_version,
 *   sy_host_error_name and sy_host_string_free returns an int: 0 for success, else
 *   the number of an entry of the error catalog (`switchyard errors`,
 *   docs/errors.md): 11 is SY011 does_not_fit, 304 is SY304 prompt_too_long, 401 is
 *   SY401 invalid_handle, 402 SY402 invalid_argument, ... The *_destroy functions
 *   return 0 or 401.
 * - Errors: functions that can fail take a `sy_host_error*` last; when it is non-NULL and
 *   the call fails, the code, its name and a message naming what was wrong are written there
 *   (truncated to the buffer, always NUL-terminated). NULL means "no message wanted".
 * - struct_size: every options/result struct starts with `size_t struct_size`, which the
 *   caller sets to sizeof() as its header knows it. Structs only grow at the end; the library
 *   reads a newer caller's known prefix and refuses a struct smaller than version 1.0's with
 *   SY402. Zero-initialise a struct, set struct_size, then set the fields you need: 0/NULL
 *   fields take the documented defaults.
 * - Handles are opaque. Each is created by one function and destroyed by its *_destroy. The
 *   library keeps a registry of live handles: a NULL, destroyed or wrong-kind handle is SY401
 *   and the call does nothing (destroying twice is SY401, never a crash — unless the same
 *   address was handed out again in between, which the registry cannot tell apart).
 * - Ownership: a child keeps what it was made from alive. A model keeps its runtime, a plan its
 *   model, a session its plan; destroying a parent first only drops your reference, and the
 *   last child's destroy frees it. Strings the library returns (char**) are the caller's, freed
 *   with sy_host_string_free. Strings and arrays the caller passes are read during the call
 *   only.
 * - Threads, per handle:
 *   - runtime, model and plan: any number of threads at once (loading a plan's weights and
 *     making contexts are serialised inside).
 *   - context and session: one thread at a time each (every call that takes one). Different
 *     contexts and sessions, of one plan or of several, run on different threads at once:
 *     each has its own prepared kernels, activation arena and KV memory; they share the plan's
 *     weights, which no one writes after loading. Contexts on one accelerator share its
 *     plugin's device: its copies and synchronize must then be thread-safe (docs/host-api.md
 *     says what is tested).
 *   - Callbacks run on the calling thread, inside the call.
 * - Nothing is printed unless sy_runtime_options asks for it: log_level (on stderr), or a
 *   log_callback of that runtime's own (since 1.1).
 */
#ifndef SWITCHYARD_HOST_H_
#define SWITCHYARD_HOST_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SY_HOST_API __attribute__((visibility("default")))
#else
#define SY_HOST_API
#endif

/* Major changes only on incompatible change; minor grows with additive change. */
#define SY_HOST_API_VERSION_MAJOR 1
#define SY_HOST_API_VERSION_MINOR 3

/* The library's (major << 16) | minor. A program built against major M should refuse a
 * library whose major differs. */
SY_HOST_API uint32_t sy_host_api_version(void);

/* ------------------------------------------------------------------------ */
/* Errors and strings                                                        */
/* ------------------------------------------------------------------------ */

/* Caller-owned. Filled only when a call fails (and the pointer is non-NULL). */
typedef struct sy_host_error {
  size_t struct_size; /* sizeof(sy_host_error) */
  int32_t code;       /* catalog number, e.g. 11; 0 = no error */
  char code_text[8];  /* "SY011" */
  char name[40];      /* "does_not_fit" */
  char message[2048]; /* what went wrong and where, truncated, NUL-terminated */
} sy_host_error;

/* The catalog name of `code` ("does_not_fit"), or NULL for a number that is not a code.
 * Static storage. */
SY_HOST_API const char* sy_host_error_name(int32_t code);

/* Frees a string the library returned. NULL is a no-op. */
SY_HOST_API void sy_host_string_free(char* text);

/* ------------------------------------------------------------------------ */
/* Runtime: the plugins, discovered once                                     */
/* ------------------------------------------------------------------------ */

typedef struct sy_runtime sy_runtime;

typedef struct sy_runtime_options {
  size_t struct_size;
  /* Plugin folders, searched in order, replacing the default. NULL/0: the folders of
   * SWITCHYARD_PLUGIN_PATH (a colon list) if it is set, else `switchyard/plugins` beside
   * libswitchyard.so (the layout of an install and of the build tree). */
  const char* const* plugin_dirs;
  size_t num_plugin_dirs;
  /* Worker threads a CPU plugin may use; 0: SWITCHYARD_NUM_THREADS, else every core. */
  int32_t num_threads;
  /* "trace", "debug", "info", "warn", "err", "off"; NULL: print nothing. What the runtime
   * and its plugins log goes to stderr at this level (through an spdlog logger named
   * "switchyard"; the program's own default spdlog logger is left alone). The last runtime
   * created sets it for the process. */
  const char* log_level;
  /* Since 1.1. When non-NULL, what this runtime and the plugins it loaded log goes here instead
   * of stderr, at log_level (NULL: "info"): `level` is 0 trace .. 4 error, `message` valid
   * during the call. Called from any thread that logs (the calling thread, or a plugin's). */
  void (*log_callback)(void* user_data, int32_t level, const char* message);
  void* log_user_data;
} sy_runtime_options;

/* Discovers the plugins. A plugin that fails to load is not an error: it is listed, with its
 * stage and reason, by sy_runtime_report_json. `options` may be NULL (every default).
 * On success *runtime is a new handle. */
SY_HOST_API int sy_runtime_create(const sy_runtime_options* options, sy_runtime** runtime,
                                  sy_host_error* error);

/* Drops the caller's reference; children keep the runtime alive until they are destroyed. */
SY_HOST_API int sy_runtime_destroy(sy_runtime* runtime);

/* Every plugin (loaded or failed: path, stage, reason), every device of this machine (id,
 * name, arch, availability, memory and free memory) and the search path, as JSON (schema
 * switchyard.host-report/1). *json is the caller's: free it with sy_host_string_free. */
SY_HOST_API int sy_runtime_report_json(sy_runtime* runtime, char** json, sy_host_error* error);

/* ------------------------------------------------------------------------ */
/* Model: a Hugging Face folder or a GGUF file, with its tokenizer           */
/* ------------------------------------------------------------------------ */

typedef struct sy_model sy_model;

/* Opens `path` (a folder with config.json, model.safetensors and tokenizer.json, or a .gguf
 * file): reads its config, tokenizer and generation settings; the weights are mapped later,
 * by sy_session_create. Errors: SY2xx / SY302 / SY303 naming the file and field. */
SY_HOST_API int sy_model_open(sy_runtime* runtime, const char* path, sy_model** model,
                              sy_host_error* error);
SY_HOST_API int sy_model_destroy(sy_model* model);

/* How sy_model_tokenize reads the text. */
typedef enum sy_prompt_kind {
  SY_PROMPT_PLAIN = 0, /* the text, with the special tokens the tokenizer declares */
  SY_PROMPT_CHAT = 1   /* one user message rendered with the model's chat template */
} sy_prompt_kind;

/* The ids of `text` (NUL-terminated UTF-8), as `switchyard run --prompt` / `--chat` makes
 * them. Writes at most `capacity` ids to `ids` (which may be NULL when capacity is 0) and sets
 * *count to the number of ids the prompt has: when *count > capacity the call returns SY402
 * and writes nothing, so call once with capacity 0 to learn the size. */
SY_HOST_API int sy_model_tokenize(sy_model* model, const char* text, sy_prompt_kind kind,
                                  int64_t* ids, size_t capacity, size_t* count,
                                  sy_host_error* error);

/* Since 1.1. One message of a conversation: `role` "system", "user" or "assistant" (what the
 * model's chat template knows), `content` UTF-8. Both NUL-terminated, read during the call. */
typedef struct sy_chat_message {
  const char* role;
  const char* content;
} sy_chat_message;

/* Since 1.1. The ids of a whole conversation rendered with the model's chat template (then the
 * assistant's turn opened when add_generation_prompt is non-zero), as sy_model_tokenize: at most
 * `capacity` ids, *count the number it has. A next turn re-renders the whole conversation: a
 * context sequence keeps the tokens it shares with it (sy_context_generate). SY211 when the
 * model has no template or it refuses the conversation. */
SY_HOST_API int sy_model_tokenize_chat(sy_model* model, const sy_chat_message* messages,
                                       size_t num_messages, int32_t add_generation_prompt,
                                       int64_t* ids, size_t capacity, size_t* count,
                                       sy_host_error* error);

/* Since 1.1. The UTF-8 text of `count` ids (special tokens as their text), streaming-safe:
 * writes up to `capacity` bytes to `text` (NULL when 0) and sets *length to the text's bytes
 * (more than capacity: SY402, nothing written; call with 0 to learn it) and *complete to how
 * many of them end on a whole character: a stream prints that many and passes the ids of the
 * rest again with the next ones (a character may span tokens). Not NUL-terminated. */
SY_HOST_API int sy_model_detokenize(sy_model* model, const int64_t* ids, size_t count, char* text,
                                    size_t capacity, size_t* length, size_t* complete,
                                    sy_host_error* error);

/* Since 1.1. The size of the model's tokenizer vocabulary: ids at or above it are not tokens
 * (detokenize writes them as "<id>"). A batch refuses ids at or above the embedding's rows
 * (SY403), which for every model this runtime imports is the same number. */
SY_HOST_API int sy_model_vocab_size(sy_model* model, int64_t* vocab, sy_host_error* error);

/* ------------------------------------------------------------------------ */
/* Plan: every op placed on a device of this machine, before any weight     */
/* ------------------------------------------------------------------------ */

typedef struct sy_plan sy_plan;

typedef struct sy_plan_options {
  size_t struct_size;
  /* Tokens one step takes, every sequence's together (required, >= 1; `--max-batch-tokens`):
   * a prompt up to that length runs in one step, a longer one in several. (In 1.0 this was the
   * one prompt length a plan served.) With a plugin older than ABI 1.5 the plan may take the
   * contiguous layout (sy_plan_json's "kv_layout"): one sequence, a prompt of exactly this
   * length as one step and any other token by token. */
  int64_t prompt_tokens;
  /* Tokens per sequence: prompt plus generated tokens. 0: 1024; negative: SY402. */
  int64_t context;
  /* Device types, most preferred first, e.g. "cuda,cpu". NULL: cuda, then cpu. */
  const char* prefer;
  /* Attention family pin: "flash", "sdpa", "flex", "fused_decode"; NULL: any. */
  const char* attention;
  /* Non-zero: a refusal of the preferred choice, or memory that does not fit, is the error
   * (no fallback, no split). */
  int32_t strict;
  /* "f32" or "bf16" instead of the model's dtype; NULL: the model's. */
  const char* dtype;
  /* Bytes left free on every device, when memory_reserve_set is non-zero; otherwise the
   * default (1 GiB, or an eighth of a smaller device). */
  int64_t memory_reserve;
  int32_t memory_reserve_set;
  /* Caps per location ("cuda:0"; "host", "cpu" or "cpu:N" for host memory), parallel arrays
   * of num_memory_caps entries, bytes >= 0. */
  const char* const* memory_cap_locations;
  const int64_t* memory_cap_bytes;
  size_t num_memory_caps;
  /* Since 1.1. Sequences one step may hold (`--max-sequences`); 0: 1. */
  int64_t max_sequences;
  /* Since 1.1. KV blocks of 16 tokens per pool (`--kv-blocks`); 0: enough for max_sequences
   * sequences at their full context, or as many as the memory left holds when fewer. */
  int64_t kv_blocks;
  /* Since 1.2. The arithmetic kernels may use (`--numerics`, docs/numerics.md): "exact"
   * (products on the weights as stored or dequantized), "auto" (also kernels that quantize
   * their activations to 16-bit blocks and multiply integers with quantized weights) or "fast"
   * (also 8-bit blocks, as llama.cpp does); NULL: the runtime's default, "auto" (exact until
   * 2026-12-05).
   * Another string is SY402. sy_plan_json says per op which it got ("numerics"). */
  const char* numerics;
} sy_plan_options;

/* Imports the model for `options` and plans it for the runtime's live devices. Returns 0 for
 * a legal plan; for none, the SY0xx code (e.g. SY011 when it does not fit in memory) — and
 * *plan is set all the same, so sy_plan_json can show what was refused and why. For an error
 * before planning (bad options, a config the importer refuses) *plan is not set. */
SY_HOST_API int sy_plan_create(sy_model* model, const sy_plan_options* options, sy_plan** plan,
                               sy_host_error* error);
SY_HOST_API int sy_plan_destroy(sy_plan* plan);

/* 0 for a legal plan, else its SY0xx code (with the message in *error). */
SY_HOST_API int sy_plan_status(sy_plan* plan, sy_host_error* error);

/* The plan as `switchyard plan --json` prints it (schema switchyard.plan/1): per op the
 * plugin, kernel, device and why; rejected candidates with every reason; copies; KV caches;
 * the memory table. Caller frees *json with sy_host_string_free. */
SY_HOST_API int sy_plan_json(sy_plan* plan, char** json, sy_host_error* error);

/* ------------------------------------------------------------------------ */
/* Context (since 1.1): a KV memory of many sequences, stepped with batches  */
/* ------------------------------------------------------------------------ */

typedef struct sy_context sy_context;

typedef struct sy_context_options {
  size_t struct_size;
  /* KV blocks of this context's pools; 0: the plan's budget, or fewer when less memory is
   * left (at least one sequence's context, else SY011 naming the numbers). At most the plan's
   * kv_blocks bound. */
  int64_t kv_blocks;
} sy_context_options;

/* Loads the plan's weights if no context or session of it did yet (once, shared by all), then
 * prepares every kernel for this context and allocates its activation arena and KV memory
 * (`options` may be NULL). Errors: SY0xx for a plan with an error, SY011 when the memory left
 * does not hold this context (the message names what it needs and what is left), SY302
 * weights, SY305 out of memory, SY306/SY307 from plugins. */
SY_HOST_API int sy_context_create(sy_plan* plan, const sy_context_options* options,
                                  sy_context** context, sy_host_error* error);
SY_HOST_API int sy_context_destroy(sy_context* context);

/* A sequence of a context: an id the context gave out. */
typedef int64_t sy_seq_id;

/* A new, empty sequence. */
SY_HOST_API int sy_seq_add(sy_context* context, sy_seq_id* seq, sy_host_error* error);
/* Drops the sequence; its KV blocks stay a reusable prefix until the pool needs them. */
SY_HOST_API int sy_seq_remove(sy_context* context, sy_seq_id seq, sy_host_error* error);
/* A new sequence sharing `seq`'s KV so far (copy-on-write at the first block that differs):
 * a shared system prompt, or one prompt continued several ways. */
SY_HOST_API int sy_seq_fork(sy_context* context, sy_seq_id seq, sy_seq_id* fork,
                            sy_host_error* error);
/* Keeps the first `length` tokens of the sequence (0 <= length <= its length, else SY402). */
SY_HOST_API int sy_seq_truncate(sy_context* context, sy_seq_id seq, int64_t length,
                                sy_host_error* error);
/* The tokens the sequence holds: the next position a batch gives it. */
SY_HOST_API int sy_seq_length(sy_context* context, sy_seq_id seq, int64_t* length,
                              sy_host_error* error);
/* Starts the empty sequence `seq` from the longest prefix of `tokens` whose KV the context
 * still holds (in whole blocks of 16, leaving at least one token to run); *reused is its length:
 * give the sequence tokens[*reused..] next. 0 with the contiguous layout. */
SY_HOST_API int sy_seq_reuse_prefix(sy_context* context, sy_seq_id seq, const int64_t* tokens,
                                    size_t count, int64_t* reused, sy_host_error* error);

/* One step's tokens (llama.cpp's llama_batch): n_tokens entries of the parallel arrays. A
 * sequence's tokens are consecutive, in position order, from the sequence's length on. At most
 * the plan's prompt_tokens tokens and max_sequences sequences. */
typedef struct sy_batch {
  size_t struct_size;
  size_t n_tokens;
  const int64_t* tokens;
  const int64_t* positions;
  const sy_seq_id* seq_ids;
  /* Non-zero: the token's logits are wanted. NULL: only the last token's. */
  const int8_t* logits;
} sy_batch;

typedef struct sy_decode_result {
  size_t struct_size;
  int32_t ran;      /* 1: the step ran; 0: refused, nothing ran, nothing was written */
  size_t n_logits;  /* rows of logits the step wrote (tokens that asked), in batch order */
  size_t n_refused; /* sequences the step could not take (ran == 0) */
  /* Context-owned, valid until the next call on the context: the refused sequences and why,
   * 308 (SY308 kv_pool_full: no KV block left for it) or 304 (SY304: past its context). */
  const sy_seq_id* refused_seqs;
  const int32_t* refused_codes;
} sy_decode_result;

/* Runs one step. Returns 0 when it ran. A batch that breaks the bounds, names a sequence that
 * does not exist, gives a token at another position than its sequence's next one, or an id
 * outside the vocabulary is SY403 bad_batch (nothing runs). When a sequence cannot get KV
 * memory (SY308) or would pass its context (SY304), the step does not run and the first of
 * those codes is returned; *result (may be NULL) lists every refused sequence: drop or defer
 * them and step again, the others go on. SY305-SY307 from plugins at run time. */
SY_HOST_API int sy_context_decode(sy_context* context, const sy_batch* batch,
                                  sy_decode_result* result, sy_host_error* error);

/* The logits row `i` (0 <= i < n_logits) of the last step that ran: *logits points at vocab
 * floats, context-owned, valid until the next step. */
SY_HOST_API int sy_context_logits(sy_context* context, size_t i, const float** logits,
                                  sy_host_error* error);

/* ------------------------------------------------------------------------ */
/* Session: one sequence of its own context, and generation                 */
/* ------------------------------------------------------------------------ */

typedef struct sy_session sy_session;

/* A context with one sequence: loads the plan's weights if nothing of it did yet (shared with
 * every other session and context of the plan), prepares every kernel of a legal plan (a plan
 * with an error is SY0xx again). Errors: SY302 weights, SY305 out of memory, SY306/SY307 from
 * plugins, SY011 when the memory left does not hold it. */
SY_HOST_API int sy_session_create(sy_plan* plan, sy_session** session, sy_host_error* error);
SY_HOST_API int sy_session_destroy(sy_session* session);

typedef struct sy_session_info {
  size_t struct_size;
  int64_t vocab_size;    /* logits per position */
  int64_t context;       /* tokens the sequence may hold */
  int64_t prompt_tokens; /* tokens one step takes (a longer prompt runs in several) */
  int64_t position;      /* the next position decode writes */
} sy_session_info;

SY_HOST_API int sy_session_info_get(sy_session* session, sy_session_info* info,
                                    sy_host_error* error);

/* Runs the prompt (1 to context ids) from position 0 and writes its last token's logits
 * (vocab_size floats) to `logits`, or skips that when logits is NULL. A capacity below
 * vocab_size with non-NULL logits is SY402; an id outside the vocabulary SY403. */
SY_HOST_API int sy_session_prefill(sy_session* session, const int64_t* ids, size_t count,
                                   float* logits, size_t capacity, sy_host_error* error);

/* One token at the next position; its logits as for prefill. SY304 when the context is full;
 * the session stays usable (prefill starts over). */
SY_HOST_API int sy_session_decode(sy_session* session, int64_t token, float* logits,
                                  size_t capacity, sy_host_error* error);

/* Called once per generated token, with the text that may be shown now (held back while it
 * may still become a stop text or an incomplete UTF-8 character; `text` is valid during the
 * call only, `length` bytes, not NUL-terminated). A final call with token -1 hands over text
 * still held back when generation ended otherwise. Return 0 to go on, non-zero to stop. */
typedef int (*sy_token_callback)(void* user_data, int64_t token, const char* text, size_t length);

/* Since 1.3. The whole sampler chain (core/sampling/, the one `run` and `serve` use):
 *   logit bias → repetition, frequency and presence penalties → grammar mask → temperature →
 *   min-p → top-k → top-p → a pick from the seeded generator.
 * Zero fields are the defaults (no bias, no penalty, no grammar, greedy). Ranges are checked
 * when it is used: a value outside is SY402 naming the field. Strings and arrays are read during
 * the call that takes the struct only. */
typedef struct sy_sampler_params {
  size_t struct_size;
  double temperature;            /* [0, 2]; 0: the most likely token (after bias and penalties) */
  int64_t top_k;                 /* >= 0; 0: every token */
  double top_p;                  /* (0, 1]; 0: 1 */
  double min_p;                  /* [0, 1]: drop tokens below min_p x the likeliest (vLLM's) */
  double presence_penalty;       /* [-2, 2], OpenAI's: over the tokens generated so far */
  double frequency_penalty;      /* [-2, 2], OpenAI's */
  double repetition_penalty;     /* (0, 100], transformers': over the prompt and the generated
                                    tokens; 0: 1, none */
  const int64_t* logit_bias_ids; /* num_logit_bias token ids, each in the vocabulary */
  const float* logit_bias;       /* their biases, each in [-100, 100], added to the logits */
  size_t num_logit_bias;
  uint64_t seed;           /* the generator's seed (std::mt19937 of its low 32 bits) */
  const char* grammar;     /* GBNF (llama.cpp's syntax) the output is held to; NULL: none */
  const char* json_schema; /* JSON Schema text the output is a JSON value of (docs/serve.md's
                              subset; a keyword outside it is SY402 naming its place); NULL:
                              none. Not together with grammar. */
} sy_sampler_params;

typedef struct sy_generate_options {
  size_t struct_size;
  int64_t max_tokens; /* 0: 32 */
  double temperature; /* 0: greedy */
  int64_t top_k;      /* 0: all */
  double top_p;       /* 0: 1.0 */
  uint64_t seed;      /* the sampler's seed (std::mt19937 of its low 32 bits, as `run --seed`) */
  int32_t ignore_eos; /* non-zero: generate past the model's EOS ids */
  const char* const* stop; /* stop texts, num_stop entries */
  size_t num_stop;
  sy_token_callback on_token; /* NULL: none */
  void* user_data;
  /* Since 1.1. Checked between steps (prompt chunks and decode tokens): non-zero stops the
   * generation there (stop_reason SY_STOP_CALLBACK). NULL: none. Gets user_data. */
  int (*abort_callback)(void* user_data);
  /* Since 1.3. The whole sampler chain; NULL: temperature, top_k, top_p and seed above. When
   * set, those four must be 0 (SY402 otherwise: one of the two would be ignored). With a
   * grammar, generation also ends when the output is whole (stop_reason SY_STOP_GRAMMAR). */
  const sy_sampler_params* sampling;
} sy_generate_options;

typedef enum sy_stop_reason {
  SY_STOP_EOS = 1,
  SY_STOP_TEXT = 2,
  SY_STOP_MAX_TOKENS = 3,
  SY_STOP_CALLBACK = 4,
  SY_STOP_GRAMMAR = 5 /* since 1.3: the constrained output is whole (no byte can follow) */
} sy_stop_reason;

typedef struct sy_generate_result {
  size_t struct_size;
  int64_t generated_tokens; /* ids written (or that would have been) */
  int32_t stop_reason;      /* sy_stop_reason */
  int64_t decode_steps;
  double prefill_ms, decode_ms;
  /* Since 1.1. Prompt tokens found in the KV memory and not run again. */
  int64_t cached_tokens;
} sy_generate_result;

/* Prefills `prompt` and samples until an EOS id, a stop text, max_tokens, or the callback
 * asks to stop. Writes up to `capacity` generated ids to `out_ids` (NULL when 0) and fills
 * *result (NULL: not wanted). prompt + max_tokens beyond the context is SY304. The session's
 * sequence starts over from position 0, reusing any cached prefix of the prompt. */
SY_HOST_API int sy_session_generate(sy_session* session, const int64_t* prompt, size_t prompt_count,
                                    const sy_generate_options* options, int64_t* out_ids,
                                    size_t capacity, sy_generate_result* result,
                                    sy_host_error* error);

/* Since 1.1. Generation on sequence `seq` of a context: `prompt` is the whole conversation so far
 * (every earlier turn as the template renders it, then the new message: sy_model_tokenize_chat).
 * The sequence keeps the tokens it already holds that begin `prompt`, and runs only the rest, in
 * steps of at most the plan's prompt_tokens; then it samples as sy_session_generate does. A
 * multi-turn chat never prefills its earlier turns again. */
SY_HOST_API int sy_context_generate(sy_context* context, sy_seq_id seq, const int64_t* prompt,
                                    size_t prompt_count, const sy_generate_options* options,
                                    int64_t* out_ids, size_t capacity, sy_generate_result* result,
                                    sy_host_error* error);

/* ------------------------------------------------------------------------ */
/* Sampler (since 1.3): the engine's chain for a program's own decode loop   */
/* ------------------------------------------------------------------------ */

/* One sequence's sampler: its parameters, its generator, the counts of its tokens (penalties)
 * and, with a grammar, where the output stands in it. A program that runs its own loop
 * (sy_session_decode, sy_context_decode) picks with it exactly as generate would. One thread at
 * a time per sampler. */
typedef struct sy_sampler sy_sampler;

/* A sampler over `model`'s vocabulary (the grammar's token masks come from its tokenizer),
 * keeping the model alive. Errors: SY401 model; SY402 a parameter out of range, a logit_bias
 * id outside the vocabulary, a GBNF syntax error (with its line and column), a JSON Schema
 * keyword not served (naming its place), or grammar and json_schema both set. */
SY_HOST_API int sy_sampler_create(sy_model* model, const sy_sampler_params* params,
                                  sy_sampler** sampler, sy_host_error* error);
SY_HOST_API int sy_sampler_destroy(sy_sampler* sampler);

/* Starts a new sequence: the counts start over from `prompt` (count ids; repetition_penalty
 * sees them, the others count generated tokens only), the grammar from its start and the
 * generator from the seed. A new sampler is already reset with an empty prompt. */
SY_HOST_API int sy_sampler_reset(sy_sampler* sampler, const int64_t* prompt, size_t count,
                                 sy_host_error* error);

/* Picks the next token from `logits` (n_vocab floats: a row of sy_context_logits or the
 * logits of sy_session_decode) and counts it as generated. With a grammar, tokens that cannot
 * continue the output are never picked, and the model's EOS ids only where the output is whole.
 * The first call fixes the vocabulary's length (with a grammar, a sy_sampler_accept before any
 * sample fixes it at the tokenizer's).
 * Errors: SY402 n_vocab is not the vocabulary the sampler first saw, or smaller than a
 * logit_bias id; SY303 the grammar needs bytes no token of the vocabulary has. */
SY_HOST_API int sy_sampler_sample(sy_sampler* sampler, const float* logits, size_t n_vocab,
                                  int64_t* token, sy_host_error* error);

/* Counts a token the program chose itself (a forced or replayed one), as sample would have.
 * With a grammar, a token that cannot continue the output is SY402 and changes nothing. */
SY_HOST_API int sy_sampler_accept(sy_sampler* sampler, int64_t token, sy_host_error* error);

/* *complete: 1 when the sampler has a grammar and no byte can follow its output (the output is
 * whole: stop there), else 0. */
SY_HOST_API int sy_sampler_complete(sy_sampler* sampler, int32_t* complete, sy_host_error* error);

/* The plan's memory prediction per location beside what this session took, as `run --json`
 * reports it under "memory". Caller frees *json with sy_host_string_free. */
SY_HOST_API int sy_session_memory_json(sy_session* session, char** json, sy_host_error* error);

#ifdef __cplusplus
}
#endif

#endif /* SWITCHYARD_HOST_H_ */
