// The error catalog's table and its Markdown rendering (docs/errors.md).
#include "core/errors/errors.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "switchyard/plugin_api.h"

namespace sy {
namespace {

using namespace exit_code;

// The one table. Codes are stable: never renumber or reuse one.
constexpr std::array kCatalog = {
    // ---- SY0xx: no legal plan --------------------------------------------------------------
    ErrorInfo{
        Errc::no_kernel_for_op, "SY001", "no_kernel_for_op", "no plugin can serve {op}",
        "The planner asked every kernel of every loaded plugin about this op and none accepted it. "
        "The error lists each candidate (plugin/kernel) with every reason it refused: wrong "
        "device, a dtype outside its envelope, a missing feature (sinks, LSE, sliding window, "
        "GQA...), an operand in the wrong memory, a head dim or ratio outside its limits. No "
        "plugin declares the op at all when the list is empty.",
        "Read the refusals after the message; `switchyard plan MODEL --explain OP` prints them "
        "again for one op. `switchyard caps` shows what each loaded plugin can serve and "
        "`switchyard plugins` shows plugins that failed to load (a missing plugin is often one "
        "that failed). Install or fix a plugin that declares the op, or change the model's dtype "
        "or the target so that an existing kernel's envelope fits.",
        kNoPlan},
    ErrorInfo{
        Errc::flash_attn_no_cpu, "SY002", "flash_attn_no_cpu", "no cpu support for flash-attn",
        "Attention was sent to a flash kernel that runs only on CUDA, but its tensors are on the "
        "CPU: only a flash-on-CUDA plugin serves attention and the target has no available CUDA "
        "device, or `--attention flash` (or a pin) asked for flash on a CPU target. Other stacks "
        "find this out mid-forward; Switchyard refuses the plan before any weight is loaded.",
        "Install or enable a plugin with CPU attention (cpu_onednn) so the planner can choose it, "
        "drop `--attention flash` or the pin, or run on a machine where `switchyard devices` "
        "lists a CUDA device as available.",
        kNoPlan},
    ErrorInfo{
        Errc::flash_attn_dtype, "SY003", "flash_attn_dtype",
        "flash-attn is only supported for f16/bf16 (F32)",
        "The attention op's dtype is outside the flash kernel's envelope: flash attention serves "
        "f16 and bf16 only. The dtype in parentheses is the one the op has, written F32/F16/BF16 "
        "as candle writes it. The op was pinned to flash, or flash was the only attention kernel "
        "on its device.",
        "Run the model in f16 or bf16 (the config's `torch_dtype` or the graph's value dtypes), "
        "or let the planner choose an attention kernel that serves the dtype (drop `--attention "
        "flash`; the DTYPES column of `switchyard caps` shows which do).",
        kNoPlan},
    ErrorInfo{
        Errc::sinks_flex_cpu, "SY004", "sinks_flex_cpu",
        "Attention sinks cannot be run on CPU with flex attention. Please switch to a different "
        "device, e.g. CUDA",
        "The model uses attention sinks (a learnable per-head logit in the softmax, as in "
        "gpt-oss). A kernel serves them either natively (feature `sinks`) or by returning the "
        "softmax log-sum-exp (feature `lse`) so the sink can be folded in afterwards. No "
        "attention kernel on the CPU declares either, and the op was placed on the CPU.",
        "Place attention on a device whose plugin declares `sinks` or `lse` (the FEATURES column "
        "of `switchyard caps`), e.g. a CUDA device with the cuda_flash plugin, or install a CPU "
        "plugin whose attention declares one of them.",
        kNoPlan},
    ErrorInfo{
        Errc::expected_cpu_storage, "SY005", "expected_cpu_storage", "Expected CPU storage",
        "A host-only fused kernel (its envelope says its operands must live in host memory, e.g. "
        "a fused decode that reads raw slices of the weights and the KV cache) would have read a "
        "tensor in device memory. Other stacks fail mid-forward; the planner refuses the "
        "placement and names the kernel, the operand and where it lives.",
        "Let the planner keep the whole fused group on the host (drop the pin or `--prefer` that "
        "moves its operands to the device), allow it to copy the operand (drop "
        "`--no-transfers`), or use a plugin whose fused kernel accepts device operands "
        "(`switchyard caps` shows `host-only operands` under LIMITS).",
        kNoPlan},
    ErrorInfo{
        Errc::expected_cpu, "SY006", "expected_cpu", "Expected CPU",
        "A host-only KV-cache writer (a kv_cache_append kernel whose operands must live in host "
        "memory) would have met a cache tensor in device memory. Other stacks corrupt or reject "
        "the cache mid-forward; the planner refuses the placement and names the kernel and the "
        "cache.",
        "Keep the KV cache on the host with the writer, use a plugin whose cache writer runs on "
        "the device that holds the cache (`switchyard caps --plugin NAME` lists its "
        "kv_cache_append kernels), or allow copies (drop `--no-transfers`).",
        kNoPlan},
    ErrorInfo{
        Errc::kv_repeat, "SY007", "kv_repeat", "only kv-repeat = 1 is supported",
        "The model uses grouped-query attention: it has more query heads than key/value heads "
        "(Hq / Hkv > 1), and the attention kernels that could otherwise serve it do not declare "
        "`gqa`, or declare a smaller maximum ratio than the model's.",
        "Use a plugin whose attention declares `gqa` with a ratio at least the model's (LIMITS in "
        "`switchyard caps` shows `gqa <=N` or `gqa any`). For a graph you write yourself, repeat "
        "the K/V heads before attention (Hkv = Hq), at the cost of KV-cache memory.",
        kNoPlan},
    ErrorInfo{
        Errc::device_unavailable, "SY008", "device_unavailable",
        "pinned device {device} is unavailable",
        "Ops, or the whole model through `--target` or a target profile, are pinned to a device "
        "that no loaded plugin reports as available: the plugin that drives it failed to load, "
        "reports no devices (no driver, no hardware), or marks the device unavailable.",
        "`switchyard devices` lists every device with the reason it is unavailable and "
        "`switchyard plugins` lists plugins that failed to load. Fix the driver or the plugin, "
        "or pin to a device that is available.",
        kNoPlan},
    ErrorInfo{
        Errc::transfer_forbidden, "SY009", "transfer_forbidden",
        "--no-transfers forbids the copy of {value} from {from} to {to}",
        "With `--no-transfers` the plan may not copy values between memories, but the only legal "
        "placement needs this value where it does not live: its producer and a consumer are "
        "served by kernels on different devices, or a host-only kernel needs a device tensor.",
        "Drop `--no-transfers` and let the planner insert the copy (the plan lists every copy), "
        "or pin or prefer one device so that the producer and the consumers of the value sit "
        "together (`switchyard plan MODEL --explain OP` shows why each went where it did).",
        kNoPlan},

    ErrorInfo{
        Errc::kernel_unverified, "SY010", "kernel_unverified", "no verified kernel for {op}",
        "A kernel would serve the op, but it is not verified: `--require-verified` uses only "
        "kernels that passed `switchyard conformance` for this exact build of their plugin (a "
        "report beside the plugin, NAME.conformance.json, whose sha256 is the library's SHA-256), "
        "and a "
        "kernel that failed conformance is never used. The candidates list why each is not "
        "verified: no report, a report of another build, or the failure it recorded.",
        "Run `switchyard conformance PLUGIN --output DIR/NAME.conformance.json` beside the plugin "
        "and fix what it reports, or plan without `--require-verified` to accept unverified "
        "kernels (a failed one is never used).",
        kNoPlan},

    ErrorInfo{
        Errc::does_not_fit, "SY011", "does_not_fit", "the plan needs more memory than {device} has",
        "The planner counted, per device, the weights at their stored dtype, the KV caches for "
        "the context, the largest activation set of each phase, the second copies of values "
        "the plan moves, and the workspace each kernel declares, and one device cannot hold "
        "its share: its capacity is the free memory its plugin reports (or the target "
        "profile's `memory_bytes`) minus `--memory-reserve`, capped by `--max-device-memory`. "
        "Without `--strict` the planner first moves whole layers to the next device in the "
        "preference order (usually the host CPU) and fails only when that is not enough; with "
        "`--strict` it moves nothing. The message names each device, its need by kind and its "
        "capacity, and the largest context that would fit.",
        "Shorten `--context` to the figure the message gives (the KV caches grow with it), "
        "drop `--strict` to let whole layers move to the next device, use a quantized model "
        "(GGUF Q4/Q8 weights take a quarter to a half of bf16), lower `--memory-reserve`, or "
        "plan for a device with more memory. `switchyard plan MODEL` prints the memory table.",
        kNoPlan},

    // ---- SY1xx: plugin load failures, by stage ---------------------------------------------
    ErrorInfo{
        Errc::plugin_open, "SY101", "plugin_open",
        "plugin {path} failed to load at stage open: {reason}",
        "The file could not be opened as a shared object: it does not exist, it is "
        "world-writable (refused, as anyone could replace it), it is not an ELF shared object "
        "for this machine, or one of its dependencies is not on the library path. As for every "
        "SY1xx error, `switchyard plugins` reports the plugin with path, stage and reason and "
        "the other plugins carry on; a command fails with exit 5 when the user named the plugin "
        "(`--plugin NAME`).",
        "`ldd {path}` lists missing dependencies: install them or add their folder to "
        "`LD_LIBRARY_PATH`. Remove write permission for others (`chmod o-w {path}`). Keep only "
        "plugins in the plugin folders (`SWITCHYARD_PLUGIN_PATH`, `--plugin-dir`).",
        kPluginFailed},
    ErrorInfo{
        Errc::plugin_entry, "SY102", "plugin_entry",
        "plugin {path} failed to load at stage entry: {reason}",
        "The shared object opened but does not export the entry symbol `sy_plugin_entry`, or "
        "the entry returned NULL: the plugin refused this host (its log says why) or could not "
        "describe itself.",
        "Plugin authors: export `SY_EXPORT const sy_plugin_api* sy_plugin_entry(const "
        "sy_host_info*)` with C linkage and default visibility (`nm -D --defined-only {path}` "
        "must list it). When it returns NULL, run with `--log-level debug` to see the plugin's "
        "own log messages.",
        kPluginFailed},
    ErrorInfo{
        Errc::plugin_abi, "SY103", "plugin_abi",
        "plugin {path} failed to load at stage abi: {reason}",
        "The plugin's function table does not fit this host: its ABI major version differs, its "
        "ABI minor is older than the host accepts, its `struct_size` is too small for the "
        "negotiated minor, a required slot (init, shutdown, get_devices, get_kernels, check) is "
        "NULL, or `plugin_name` is missing or not `[a-z0-9_]+`.",
        "`switchyard --version` prints the host's ABI. Rebuild the plugin against headers of "
        "that ABI major (or upgrade switchyard when the plugin is newer), set `struct_size = "
        "sizeof(sy_plugin_api)` from the headers you build with, fill every required slot and "
        "name the plugin in lower case. docs/abi.md is the contract.",
        kPluginFailed},
    ErrorInfo{
        Errc::plugin_init, "SY104", "plugin_init",
        "plugin {path} failed to load at stage init: {reason}",
        "The plugin's `init` returned an error or no instance, or its declarations were broken: "
        "`get_devices` or `get_kernels` failed, or returned a NULL, undersized or unnamed device "
        "or kernel envelope, or a kernel of an unknown op.",
        "Run with `--log-level debug` to see the plugin's own messages; check what it needs at "
        "run time (driver, libraries, `SWITCHYARD_NUM_THREADS`). Plugin authors: the reason names "
        "the broken declaration; fix it in the plugin.",
        kPluginFailed},
    ErrorInfo{
        Errc::plugin_manifest, "SY105", "plugin_manifest",
        "plugin {path} failed to load at stage manifest: {reason}",
        "The manifest beside the plugin (PLUGIN.json, written at build time from the plugin's "
        "own declaration) is missing or unreadable, or disagrees with what the plugin declares "
        "at run time: the plugin was rebuilt and its manifest was not, or the other way round. "
        "The reason names the file and the first difference.",
        "Regenerate the manifest from the plugin: `switchyard manifest {path} --output "
        "PLUGIN.json` (the build does this after linking), and install the two together.",
        kPluginFailed},
    ErrorInfo{
        Errc::plugin_capability, "SY106", "plugin_capability",
        "plugin {path} failed to load at stage capability: {reason}",
        "The plugin lies about its capability: probed with ops that its own kernel envelopes "
        "exclude (a dtype, a feature or a head dim it does not declare), its `check` accepted "
        "one. `check` may only narrow an envelope, never widen it, or the planner would send it "
        "ops it cannot run.",
        "Plugin authors: make `check` refuse everything the envelope excludes (the shared "
        "filters of `switchyard/envelope_check.h` do this), or widen the envelope if the kernel "
        "really serves it. The reason names the kernel and the op it wrongly accepted.",
        kPluginFailed},

    ErrorInfo{
        Errc::plugin_probe, "SY107", "plugin_probe",
        "plugin {path} failed to load at stage probe: {reason}",
        "Before the host opens a plugin library, a child process opens it and calls its entry; "
        "that child was killed by a signal (SIGILL: the library executes an instruction this CPU "
        "lacks while loading, before it could pick code for this CPU; SIGSEGV: it crashes in its "
        "static initializers or its entry) or did not finish in 30 s. The host never opened it, "
        "and goes on with the other plugins. A library that passed is remembered by its SHA-256 "
        "and this CPU in the user's cache (`$SWITCHYARD_CACHE_DIR`, `$XDG_CACHE_HOME/switchyard` "
        "or `~/.cache/switchyard`), so later loads skip the child.",
        "SIGILL: use a build of the plugin for this CPU (`grep flags /proc/cpuinfo` lists what it "
        "has) or report it to the plugin's authors; otherwise report the crash, or remove the "
        "plugin from the plugin folders. Plugin authors: docs/cpu-tiers.md, \"The rule\", says "
        "how cpu_onednn keeps tier code from running at load.",
        kPluginFailed},

    // ---- SY2xx: bad input ------------------------------------------------------------------
    ErrorInfo{
        Errc::json_syntax, "SY201", "json_syntax", "{file}:{line}:{column}: invalid JSON: {reason}",
        "A graph, model config or target profile is not valid JSON. The position is where the "
        "parser stopped, which is at or just after the mistake.",
        "Fix the JSON at that position (a missing comma or quote, a trailing comma, a comment: "
        "JSON allows none). `python3 -m json.tool FILE` shows the same position.",
        kBadInput},
    ErrorInfo{
        Errc::schema_version, "SY202", "schema_version",
        "{file}:{json_path}: unsupported schema '{schema}', this switchyard reads '{expected}'",
        "The file's `schema` field names a format or version this switchyard does not read "
        "(graphs are `switchyard.graph/1`, target profiles `switchyard.target/1`), or the field "
        "is missing.",
        "Write the file in the schema named in the message, or use the switchyard version that "
        "wrote it. A file from a newer switchyard needs that switchyard.",
        kBadInput},
    ErrorInfo{Errc::unknown_op, "SY203", "unknown_op",
              "{file}:{json_path}: unknown op '{op}' (known: {ops})",
              "A graph node names an op that is not in the operator vocabulary, so no plugin could "
              "ever serve it. The message lists the known ops.",
              "Use one of the listed ops (docs/operators.md describes each, with its operands and "
              "attributes); check the spelling (`rms_norm`, not `rmsnorm`).",
              kBadInput},
    ErrorInfo{
        Errc::shape_mismatch, "SY204", "shape_mismatch",
        "{file}:{json_path}: shape mismatch: '{a}' {shape_a} vs '{b}' {shape_b}",
        "Two values connected through an op do not have the shapes the op's contract requires "
        "(e.g. a matmul whose inner dimensions differ, an add of different shapes, an op missing "
        "an input or output it needs). The path names the op.",
        "Fix the shapes in the graph (or the config values they come from: hidden size, head "
        "counts, head dim). docs/operators.md gives each op's shape contract.",
        kBadInput},
    ErrorInfo{
        Errc::dtype_mismatch, "SY205", "dtype_mismatch",
        "{file}:{json_path}: dtype mismatch: '{a}' is {dtype_a}, '{b}' is {dtype_b}",
        "Two operands of one op have different dtypes where the op's contract requires the same "
        "one. Ops do not convert implicitly.",
        "Give both values the same dtype, or insert an explicit `copy` op that converts one of "
        "them.",
        kBadInput},
    ErrorInfo{
        Errc::graph_cycle, "SY206", "graph_cycle",
        "{file}:{json_path}: the ops form a cycle through '{op_id}'",
        "A phase's ops depend on each other in a loop, so there is no order to run them in. "
        "(KV caches, written in place, are the only values allowed several producers; they do "
        "not make cycles.)",
        "Follow the inputs and outputs from the named op back to itself and break the loop; "
        "usually an output was given the name of one of its own inputs.",
        kBadInput},
    ErrorInfo{
        Errc::bad_config, "SY207", "bad_config",
        "{file}:{json_path}: invalid model config: {reason}",
        "A model's config.json lacks a field the importer needs (hidden_size, num_attention_heads, "
        "num_hidden_layers...) or has an absurd value (zero or negative sizes, a head count "
        "that does not divide the hidden size, more KV heads than query heads).",
        "Use the config.json that ships with the model's weights; if you wrote it, fix the named "
        "field. The reason names the field and the value that was found.",
        kBadInput},
    ErrorInfo{
        Errc::unknown_model_type, "SY208", "unknown_model_type",
        "{file}: unknown model_type '{model_type}' (supported: {types})",
        "The config's `model_type` names an architecture that Switchyard has no graph importer "
        "for. The message lists the supported ones.",
        "Use a supported model, or describe the model as a Switchyard graph JSON "
        "(`switchyard.graph/1`) and pass that file instead of the config.",
        kBadInput},
    ErrorInfo{
        Errc::bad_graph, "SY209", "bad_graph", "{file}:{json_path}: {reason}",
        "A graph file is structurally wrong: a required field is missing or has the wrong type, "
        "an op names a value that is not declared, a value or op id is declared twice, a value "
        "has two producers, an activation is consumed but never produced, or a phase is empty.",
        "Fix the graph at the JSON path in the message; the reason says what was expected there. "
        "docs/graph-format.md describes the format.",
        kBadInput},
    ErrorInfo{
        Errc::bad_target, "SY210", "bad_target",
        "{file}:{json_path}: invalid target profile: {reason}",
        "A target profile (`--target FILE`, the machine to plan for) is invalid: a missing or "
        "unknown device type, a device without a name, a negative memory size or unit count, or "
        "no devices at all.",
        "Fix the named field; examples/targets/ has complete profiles (cpu-laptop.json, "
        "h200.json) to start from.",
        kBadInput},
    ErrorInfo{
        Errc::chat_template, "SY211", "chat_template",
        "{file}:{line}: cannot render the chat template: {reason}",
        "`switchyard run --chat` renders the model's own chat template (Jinja, from "
        "tokenizer_config.json or chat_template.jinja). Either the model has none, the "
        "template uses a construct outside the Jinja subset Switchyard implements (the reason "
        "names it: a statement, filter, test, method or function), a value has the wrong type "
        "for what the template does with it, or the template itself refused the conversation "
        "(its raise_exception(), e.g. Gemma's \"System role not supported\").",
        "For a model without a template, use --prompt with the text the model expects. For an "
        "unsupported construct, report it with the template (docs/chat-templates.md lists the "
        "subset); meanwhile pass the rendered prompt with --prompt-file. For a refusal, change "
        "the conversation as the message says (e.g. drop --system).",
        kBadInput},
    ErrorInfo{
        Errc::weight_type_unsupported, "SY212", "weight_type_unsupported",
        "{file}: tensor '{tensor}' is {type}, a weight type with no dtype in Switchyard's "
        "vocabulary",
        "The file is valid, but one of its tensors is stored in a GGML type that Switchyard's "
        "dtype vocabulary (abi/include/switchyard/vocabulary.h) has no name for yet, so no "
        "plugin can declare a kernel for it. This is not SY302: that code is for files that are "
        "malformed. The message lists the weight types that are served.",
        "Use a file of a served type (docs/gguf.md lists them): llama.cpp's llama-quantize "
        "makes one from the original checkpoint, e.g. Q4_K or Q8_0. A type that is in the "
        "vocabulary but that no loaded plugin serves is a planner refusal (SY001) instead, "
        "naming every candidate kernel and why it refused.",
        kBadInput},

    // ---- SY3xx: run time ---------------------------------------------------------------------
    ErrorInfo{
        Errc::kernel_failed, "SY301", "kernel_failed",
        "kernel {plugin}/{kernel} failed on {op}: {status}",
        "A kernel that the planner chose, and whose plugin's `check` had accepted the op, failed "
        "while running it. That should not happen: either the planner sent an op outside what "
        "was checked, or the plugin's `check` accepted something its kernel cannot run.",
        "Report it as a bug, with the full message, `switchyard plan MODEL --explain OP` and "
        "`switchyard plugins --json`. To carry on meanwhile, steer the op to another kernel "
        "(`--prefer` another plugin, or `--attention` for attention).",
        kInternal},
    ErrorInfo{
        Errc::bad_weights, "SY302", "bad_weights", "weights file {file} is invalid: {reason}",
        "A weights file (safetensors or GGUF) could not be used: it is truncated or malformed, a "
        "tensor the graph needs is missing, a tensor's shape or dtype differs from what the "
        "graph declares (a stacked expert tensor of another expert count among them), or its "
        "values cannot be weights (an MXFP4 block whose E8M0 scale is 0xFF, NaN).",
        "Check that the weights and the config.json (or the GGUF metadata) come from the same "
        "model and revision, and download the file again if it is truncated (its size must match "
        "the header). A NaN scale is in the file itself: quantize the checkpoint again.",
        kBadInput},
    ErrorInfo{
        Errc::bad_tokenizer, "SY303", "bad_tokenizer", "tokenizer {file} is invalid: {reason}",
        "The tokenizer file is missing, is not a tokenizer.json Switchyard can read (a byte-level "
        "BPE, or a SentencePiece-style BPE with byte fallback; the reason names the field: a "
        "pre-tokenizer regex PCRE2 rejects, with the offset it stopped at, a normalizer or "
        "decoder Switchyard does not implement), a GGUF vocabulary it cannot read "
        "(`tokenizer.ggml.*`, named), or does not match the model (a vocabulary larger than the "
        "embedding table).",
        "Use the tokenizer.json that ships with the model's weights.", kBadInput},
    ErrorInfo{
        Errc::prompt_too_long, "SY304", "prompt_too_long",
        "prompt of {tokens} tokens plus {new_tokens} to generate exceeds the context of {context} "
        "tokens",
        "The prompt and the tokens to generate do not fit the model's context length (its "
        "`max_position_embeddings`), which also bounds the KV cache the plan allocated.",
        "Shorten the prompt or ask for fewer new tokens.", kBadInput},
    ErrorInfo{Errc::device_out_of_memory, "SY305", "device_out_of_memory",
              "out of memory on {device}: {detail}",
              "Allocating a buffer (weights, KV caches, activations, a kernel's workspace) failed "
              "while loading or running the plan: a plugin answered OUT_OF_MEMORY, or the host "
              "could not allocate host memory. The message names the device, the value or op "
              "and the plugin's own words.",
              "Run with a shorter `--context` (the KV caches grow with it), a smaller dtype "
              "(`--dtype bf16`), or place part of the model on another device (`--prefer`). "
              "`switchyard devices` shows each device's memory; close other programs that hold "
              "it.",
              kOutOfMemory},
    ErrorInfo{Errc::device_lost, "SY306", "device_lost",
              "device {device} became unavailable: {detail}",
              "A plugin answered UNAVAILABLE while the plan ran: the device, its driver or a "
              "library the kernel needs went away or is busy (a GPU reset, a driver unloaded, a "
              "library such as cuBLAS missing at run time). The plan itself was legal.",
              "Check the device with `switchyard devices` and the driver (for NVIDIA, "
              "`nvidia-smi`); install the missing library the message names. Run again, or "
              "plan for another device (`--prefer cpu`).",
              kDeviceLost},
    ErrorInfo{Errc::plugin_internal, "SY307", "plugin_internal",
              "plugin {plugin} failed internally on {op}: {detail}",
              "A plugin answered INTERNAL (a bug of its own, or an error of the device it could "
              "not classify), or a status outside the ABI's closed set, while running an op the "
              "planner had legally given it.",
              "Report it to the plugin's author with the full message and `switchyard plugins "
              "--json`. To carry on meanwhile, steer the op to another plugin (`--prefer`, "
              "`--attention`).",
              kPluginBug},
    ErrorInfo{Errc::kv_pool_full, "SY308", "kv_pool_full",
              "sequence {sequence} needs KV blocks for {tokens} tokens: {detail}",
              "A step asked for KV memory the context's pool does not have: every block is held "
              "by a sequence (cached prefixes of finished sequences are given up first). Nothing "
              "ran and nothing was written; the other sequences of the step can go on without "
              "the one named.",
              "Drop or defer the named sequence and run the step again (a server queues it); "
              "finish or remove other sequences to free their blocks; or give the context more "
              "blocks (--kv-blocks, or more memory: --max-device-memory, a shorter --context "
              "for the others).",
              kOutOfMemory},

    // ---- SY4xx: host C API misuse ------------------------------------------------------------
    ErrorInfo{Errc::invalid_handle, "SY401", "invalid_handle",
              "{function}: the {handle} handle is NULL or was destroyed",
              "A function of the host C API (switchyard/host.h) was given a handle that is NULL, "
              "that was already destroyed, or that is not a handle of that kind. The call did "
              "nothing. Destroying a handle twice is this error, not a crash: the library keeps "
              "a registry of the handles it gave out.",
              "Pass the handle the matching _create or _open function returned, and destroy each "
              "handle once, children (sessions, plans, models) before the runtime is no longer "
              "needed. docs/host-api.md lists the ownership rules per function.",
              kUsage},
    ErrorInfo{Errc::invalid_argument, "SY402", "invalid_argument",
              "{function}: {argument} is invalid: {detail}",
              "A function of the host C API was given an argument it cannot use: a NULL pointer "
              "where one is required, an options struct whose struct_size is smaller than the "
              "API's first version of it, an output buffer too small (the call reports the size "
              "it needs), or a value out of range. The call did nothing.",
              "Set struct_size = sizeof(the struct) from the header you compile with, pass the "
              "buffers the function's documentation asks for (docs/host-api.md), and read the "
              "message: it names the argument.",
              kUsage},
    ErrorInfo{Errc::bad_batch, "SY403", "bad_batch",
              "batch: token {index} (sequence {sequence}): {detail}",
              "A batch given to a context breaks the plan's bounds (more tokens, sequences or "
              "logits than --max-batch-tokens, --max-sequences and the outputs it was planned "
              "for), names a sequence that does not exist, gives a sequence's tokens out of order "
              "or not at its next position, or holds a token id outside the vocabulary. Nothing "
              "ran and nothing was written.",
              "Read the message: it names the token and what is wrong. Split a batch that is "
              "too large into steps; add each sequence before its first token; give each "
              "sequence's tokens consecutively, from its current length on.",
              kUsage},

    // ---- SY5xx: requests to `switchyard serve` ------------------------------------------------
    ErrorInfo{Errc::bad_request, "SY501", "bad_request", "{field}: {detail}",
              "A request to `switchyard serve` is not one it serves: a body that is not JSON or "
              "is too large, a field of the wrong type or out of range, a required field "
              "missing (`messages`, `prompt`), or a field the server does not implement set to "
              "anything but its neutral value (`n` > 1, penalties, `tools`, `logprobs`). HTTP "
              "400 (413 for a body over the limit); nothing ran.",
              "Read the message: it names the field. docs/serve.md lists every field the server "
              "takes and what it refuses.",
              kUsage},
    ErrorInfo{Errc::model_not_found, "SY502", "model_not_found",
              "the model {model} does not exist; this server serves {alias}",
              "A request named another model than the one this server loaded (its `--alias`, "
              "by default the model file's or folder's name). HTTP 404.",
              "Send the id GET /v1/models lists, or start the server with --alias set to the "
              "name your clients use.",
              kUsage},
    ErrorInfo{Errc::unauthorized, "SY503", "unauthorized", "a valid API key is required",
              "The server was started with --api-key and the request carried no "
              "`Authorization: Bearer <key>` header, or another key. HTTP 401.",
              "Send the key the server was started with, as `Authorization: Bearer KEY`.", kUsage},
    ErrorInfo{Errc::queue_full, "SY504", "queue_full",
              "{queued} requests are waiting (--max-queue {limit}); retry after {seconds} s",
              "Every running slot (--parallel) is busy and the queue of waiting requests "
              "(--max-queue) is full. HTTP 429 with Retry-After; the running streams go on.",
              "Retry after the time the Retry-After header gives, or start the server with a "
              "larger --max-queue or --parallel (memory permitting: `switchyard plan` shows it).",
              kUsage},
    ErrorInfo{Errc::unavailable, "SY505", "unavailable", "the server is {state}",
              "The server is still loading its model, or it is draining after SIGINT or SIGTERM "
              "(the requests in flight finish, new ones are refused). HTTP 503.",
              "Retry when GET /health answers 200, or send the request to another replica.",
              kUsage},
};
static_assert(kCatalog.size() == 46);

// Each entry's code text is its Errc's number, and the entries are in code order.
constexpr bool codes_match_numbers() {
  int previous = 0;
  for (const auto& e : kCatalog) {
    int n = (e.code[2] - '0') * 100 + (e.code[3] - '0') * 10 + (e.code[4] - '0');
    if (e.code[0] != 'S' || e.code[1] != 'Y' || e.code[5] != '\0' || n != int(e.errc) ||
        n <= previous)
      return false;
    previous = n;
  }
  return true;
}
static_assert(codes_match_numbers());

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct Series {
  char digit;  // the code's first digit after "SY"
  const char* title;
  const char* intro;
};

constexpr std::array kSeries = {
    Series{'0', "SY0xx: no legal plan",
           "The planner proved, before loading any weight, that some op has no plugin that can "
           "legally serve it where it must run. The full error names every candidate kernel and "
           "every reason it refused."},
    Series{'1', "SY1xx: plugin load failures",
           "A plugin failed to load, at one of its stages: open, entry, abi, init, manifest, "
           "capability. `switchyard plugins` lists each failure with path, stage, reason and a "
           "hint; the other plugins carry on."},
    Series{'2', "SY2xx: bad input",
           "A graph, model config or target profile is invalid. The message starts with the "
           "file and the JSON path (or line and column) of the problem."},
    Series{'3', "SY3xx: at run time",
           "Errors while loading or running a plan: a kernel failing (a bug), weights, "
           "tokenizer or prompt that do not fit the model, and what a plugin reports at run "
           "time: memory exhausted, a device lost, an internal failure."},
    Series{'4', "SY4xx: host C API misuse",
           "A program embedding libswitchyard (switchyard/host.h) passed a handle or an "
           "argument the API cannot use. Every function returns one of these instead of "
           "crashing; the CLI never does."},
    Series{'5', "SY5xx: requests to the server",
           "`switchyard serve` refused an HTTP request. The reply is OpenAI-shaped: "
           "`{\"error\": {\"message\", \"type\", \"code\"}}`, `code` being the SY code, with "
           "the HTTP status each entry names."},
};

// GitHub's heading anchor for "SY001 `name`".
std::string anchor(const ErrorInfo& e) {
  return lower(e.code) + "-" + e.name;
}

std::string table_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::span<const ErrorInfo> error_catalog() {
  return kCatalog;
}

const ErrorInfo* find_error(std::string_view code_or_name) {
  std::string key = lower(code_or_name);
  for (const auto& e : kCatalog)
    if (lower(e.code) == key || e.name == key) return &e;
  return nullptr;
}

const char* error_exit_code_meaning(int exit_code) {
  switch (exit_code) {
    case kInternal: return "internal error";
    case kUsage: return "usage error";
    case kNoPlan: return "no legal plan";
    case kBadInput: return "bad input";
    case kPluginFailed: return "a plugin the user asked for failed to load";
    case kOutOfMemory: return "out of memory";
    case kDeviceLost: return "a device became unavailable";
    case kPluginBug: return "a plugin failed internally";
    default: return "unknown exit code";
  }
}

const ErrorInfo& error_info(Errc code) {
  for (const auto& e : kCatalog)
    if (e.errc == code) return e;
  return kCatalog[0];  // unreachable: a test checks every Errc is catalogued
}

std::string code_text(Errc code) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%03d", kCodePrefix, static_cast<int>(code));
  return buf;
}

std::ostream& operator<<(std::ostream& os, Errc code) {
  return os << code_text(code);
}

Error::Error(Errc code_, std::string message_, std::string where_, std::string hint_)
    : code(code_), message(std::move(message_)), where(std::move(where_)), hint(std::move(hint_)) {
  what_ = where.empty() ? message : where + ": " + message;
}

Error& Error::with_status(int plugin_status) {
  status = plugin_status;
  return *this;
}

int Error::exit_code() const {
  return error_info(code).exit_code;
}

Errc errc_for_plugin_status(int status) {
  switch (status) {
    case SY_STATUS_INVALID_ARGUMENT:
    case SY_STATUS_UNSUPPORTED: return Errc::kernel_failed;
    case SY_STATUS_OUT_OF_MEMORY: return Errc::device_out_of_memory;
    case SY_STATUS_UNAVAILABLE: return Errc::device_lost;
    default: return Errc::plugin_internal;
  }
}

std::string render_errors_markdown() {
  std::ostringstream md;
  md << "# Switchyard error catalog\n\n"
     << "<!-- Generated from the table in core/errors/errors.cpp; do not edit by hand.\n"
     << "     Regenerate: build/bin/switchyard errors --markdown > docs/errors.md -->\n\n"
     << "Every error Switchyard reports has a stable code and a message from this catalog, "
        "followed by\nSwitchyard's own detail (the op, every candidate and why it refused, the "
        "file and position).\nIn a message, `{op}`, `{path}` and the like stand for that "
        "detail; the rest is verbatim, so\nsearching for the text you saw finds its entry. "
        "Codes are never renumbered or reused.\n\n"
     << "`switchyard errors` lists the catalog; `switchyard errors CODE` (or NAME) prints one "
        "entry;\n`--json` gives either as JSON.\n\n"
     << "| code | name | message | exit code |\n|---|---|---|---|\n";
  for (const auto& e : kCatalog)
    md << "| [" << e.code << "](#" << anchor(e) << ") | `" << e.name << "` | `"
       << table_cell(e.message) << "` | " << e.exit_code << " |\n";
  for (const auto& s : kSeries) {
    md << "\n## " << s.title << "\n\n" << s.intro << "\n";
    for (const auto& e : kCatalog) {
      if (e.code[2] != s.digit) continue;
      md << "\n### " << e.code << " `" << e.name << "`\n\n"
         << "- **Message:** `" << e.message << "`\n"
         << "- **Exit code:** " << e.exit_code << " (" << error_exit_code_meaning(e.exit_code)
         << ")\n\n"
         << "**What it means.** " << e.meaning << "\n\n"
         << "**How to fix it.** " << e.fix << "\n";
    }
  }
  md << "\n## Exit codes\n\n"
     << "| exit code | meaning |\n|---|---|\n"
     << "| 0 | success |\n"
     << "| 1 | internal error (SY301 and anything unexpected: please report it) |\n"
     << "| 2 | usage error: a bad command line |\n"
     << "| 3 | no legal plan (SY0xx) |\n"
     << "| 4 | bad input: a graph, config, target, weights, tokenizer or prompt (SY2xx, "
        "SY302-SY304) |\n"
     << "| 5 | a plugin the user asked for failed to load (SY1xx) |\n"
     << "| 6 | out of memory (SY305) |\n"
     << "| 7 | a device, its driver or a library it needs became unavailable (SY306) |\n"
     << "| 8 | a plugin failed internally (SY307: a plugin bug) |\n"
     << "| 9 | `switchyard conformance`: the plugin failed at least one check (each failure is "
        "listed with its verdict) |\n";
  return md.str();
}

}  // namespace sy
