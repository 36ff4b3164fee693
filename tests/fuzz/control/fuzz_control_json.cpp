// libFuzzer target: json::parse and control-line decoding on arbitrary
// bytes. Beyond "no crash, no sanitizer report" it checks properties:
// anything that parses dumps to text that parses back to the same dump
// (compact and pretty), and decoded requests/responses re-encode to lines
// that decode to the same thing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/json.h"
#include "control/control_protocol.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

void check_json(std::string_view text) {
  ferry::json::ParseError err;
  auto v = ferry::json::parse(text, &err);
  if (!v) {
    require(!err.message.empty() && err.offset <= text.size());
    return;
  }
  const std::string compact = ferry::json::dump(*v);
  // Escaping can grow text (a raw 0x7f becomes \u007f) past the size limit.
  if (compact.size() > ferry::json::kMaxTextBytes) return;
  auto again = ferry::json::parse(compact);
  require(again.has_value());
  require(ferry::json::dump(*again) == compact);
  const std::string pretty = ferry::json::dump(*v, 2);
  if (pretty.size() > ferry::json::kMaxTextBytes) return;
  auto from_pretty = ferry::json::parse(pretty);
  require(from_pretty.has_value());
  require(ferry::json::dump(*from_pretty) == compact);
}

void check_protocol(std::string_view line) {
  using namespace ferry::control;
  Request req;
  if (const ferry::Error e = decode_request(line, &req); e.ok()) {
    const std::string enc = encode_request(req);
    if (enc.size() <= kMaxLineBytes) {
      Request back;
      require(decode_request(enc, &back).ok());
      require(back.cmd == req.cmd);
      require(encode_request(back) == enc);
    }
  } else {
    require(!e.message().empty());
  }
  Response resp;
  if (const ferry::Error e = decode_response(line, &resp); e.ok()) {
    const std::string enc = encode_response(resp);
    if (enc.size() <= kMaxLineBytes) {
      Response back;
      require(decode_response(enc, &back).ok());
      require(back.ok == resp.ok);
      require(encode_response(back) == enc);
    }
  } else {
    require(!e.message().empty());
  }
  // The same bytes as a stream: every line the reader yields is bounded.
  LineReader reader;
  reader.feed(line);
  std::string one;
  while (reader.next(&one) == LineReader::State::Line) require(one.size() < kMaxLineBytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_json(text);
  check_protocol(text);
  return 0;
}
