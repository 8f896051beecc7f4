// libFuzzer target: a tokenizer.json and a tokenizer_config.json (the input's bytes before and
// after its first NUL) must load into a tokenizer and generation settings or give an Error,
// never a crash, a hang or another exception. A tokenizer that loads then encodes and decodes a
// fixed text, decodes every id it gave, and resolves the config's special tokens and chat
// template the way `switchyard run` does.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/errors/error.hpp"
#include "core/generation/generation.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;

// A folder of this process for tokenizer_config.json (read_generation_settings reads a folder).
const fs::path& model_dir() {
  static const fs::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    fs::path d =
        fs::path(tmp && *tmp ? tmp : "/tmp") / ("fuzz_tokenizer." + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

void exercise(const sy::Tokenizer& tok) {
  const std::string text = "Hello, world! 12345 <|endoftext|> \xc3\xa9t\xc3\xa9 \xe2\x82\xac\n\t x";
  const std::vector<int64_t> ids = tok.encode(text);
  for (int64_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();  // an id the tokenizer does not have
  (void)tok.decode(ids);
  for (int64_t id : ids) (void)tok.decode_token(id);
  for (int64_t id : tok.special_prefix()) (void)tok.decode_token(id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string tokenizer_json(all.substr(0, nul));
  const fs::path config = model_dir() / "tokenizer_config.json";
  std::error_code ec;
  fs::remove(config, ec);
  if (nul != std::string_view::npos) {
    FILE* f = std::fopen(config.c_str(), "wb");
    if (!f) std::abort();
    const std::string_view rest = all.substr(nul + 1);
    if (!rest.empty() && std::fwrite(rest.data(), 1, rest.size(), f) != rest.size()) std::abort();
    std::fclose(f);
  }
  try {
    sy::Tokenizer tok = sy::Tokenizer::parse(tokenizer_json, "fuzz/tokenizer.json");
    exercise(tok);
    sy::GenerationSettings g = sy::read_generation_settings(model_dir(), tok);
    (void)sy::plain_prompt_ids(tok, g, "Hi");
    if (g.chat_template) (void)sy::render_chat_prompt(g, "Hi", std::string("Be brief."), 0);
  } catch (const sy::Error&) {
  }
  return 0;
}
