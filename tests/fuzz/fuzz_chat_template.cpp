// libFuzzer target: a chat template comes from a model's files, so any text must parse and
// render (with a fixed conversation) or be an Error, never a crash, a hang or another exception.
#include <cstdint>
#include <string>

#include "core/chat_template/chat_template.hpp"
#include "core/errors/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  static const nlohmann::ordered_json context =
      sy::chat_context({{{"role", "system"}, {"content", "Be brief."}},
                        {{"role", "user"}, {"content", "Hi {{ x }}"}}},
                       true, {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  try {
    (void)sy::ChatTemplate::parse(source, "fuzz.jinja").render(context, 0);
  } catch (const sy::Error&) {
  }
  return 0;
}
