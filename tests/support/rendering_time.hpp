// The time the chat-template renderings were made at (tests/fixtures/chat_templates/
// make_renderings.py pins strftime_now() to it): 2026-03-14 12:00, local time.
#pragma once

#include <ctime>

namespace sy::test {

inline std::time_t rendering_time() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 2;
  tm.tm_mday = 14;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

}  // namespace sy::test
