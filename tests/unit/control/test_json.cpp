// base/json: strict parsing, exact integers, escaping, round trips.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "base/json.h"

using namespace ferry::json;

namespace {

Value must_parse(std::string_view text) {
  ParseError e;
  auto v = parse(text, &e);
  INFO("text: " << text << " error@" << e.offset << ": " << e.message);
  REQUIRE(v.has_value());
  return *v;
}

ParseError must_reject(std::string_view text) {
  ParseError e;
  auto v = parse(text, &e);
  INFO("text: " << text);
  REQUIRE_FALSE(v.has_value());
  CHECK_FALSE(e.message.empty());
  CHECK(e.offset <= text.size());
  return e;
}

}  // namespace

TEST_CASE("json: scalars and containers parse to the right types", "[json]") {
  CHECK(must_parse("null").is_null());
  CHECK(must_parse("true").as_bool() == true);
  CHECK(must_parse(" false ").as_bool() == false);
  CHECK(must_parse("0").as_int() == 0);
  CHECK(must_parse("-0").as_int() == 0);
  CHECK(must_parse("1.5").as_double() == 1.5);
  CHECK(std::holds_alternative<double>(must_parse("1.0").storage()));
  CHECK(std::holds_alternative<double>(must_parse("1e2").storage()));
  CHECK(must_parse("1E+2").as_double() == 100.0);
  CHECK(must_parse("-2.5e-3").as_double() == -0.0025);
  CHECK(*must_parse("\"hi\"").as_string() == "hi");
  Value o = must_parse(" {\"a\" : [1, {\"b\":null}], \"c\":\"d\"}\r\n\t");
  REQUIRE(o.is_object());
  REQUIRE(o.find("a") != nullptr);
  REQUIRE(o.find("a")->as_array()->size() == 2);
  CHECK(o.find("a")->as_array()->at(1).find("b")->is_null());
  CHECK(*o.find("c")->as_string() == "d");
  CHECK(o.find("zz") == nullptr);
  CHECK(must_parse("[]").as_array()->empty());
  CHECK(must_parse("{}").as_object()->empty());
}

TEST_CASE("json: integers are exact at the int64 and uint64 edges", "[json]") {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  constexpr auto kUMax = std::numeric_limits<std::uint64_t>::max();
  Value v = must_parse("9223372036854775807");
  CHECK(std::holds_alternative<std::int64_t>(v.storage()));
  CHECK(v.as_int() == kMax);
  v = must_parse("-9223372036854775808");
  CHECK(v.as_int() == kMin);
  CHECK_FALSE(v.as_uint().has_value());
  v = must_parse("9223372036854775808");
  CHECK(std::holds_alternative<std::uint64_t>(v.storage()));
  CHECK(v.as_uint() == std::uint64_t{kMax} + 1);
  CHECK_FALSE(v.as_int().has_value());
  v = must_parse("18446744073709551615");
  CHECK(v.as_uint() == kUMax);
  CHECK(dump(v) == "18446744073709551615");
  CHECK(dump(must_parse("-9223372036854775808")) == "-9223372036854775808");
  // One past the exact ranges: becomes a double, as documented.
  v = must_parse("18446744073709551616");
  CHECK(std::holds_alternative<double>(v.storage()));
  CHECK(v.as_double() == 18446744073709551616.0);
  v = must_parse("-9223372036854775809");
  CHECK(std::holds_alternative<double>(v.storage()));
  // Integer conversions only when the value fits.
  CHECK(Value(-1).as_uint() == std::nullopt);
  CHECK(Value(5u).as_int() == 5);
  CHECK(Value(1.5).as_int() == std::nullopt);
  CHECK(Value("7").as_int() == std::nullopt);
}

TEST_CASE("json: strings decode escapes and surrogate pairs to UTF-8", "[json]") {
  CHECK(*must_parse(R"("a\"b\\c\/d\be\ff\ng\rh\ti")").as_string() == "a\"b\\c/d\be\ff\ng\rh\ti");
  CHECK(*must_parse(R"("\u0041\u00e9\u20AC")").as_string() == "A\xc3\xa9\xe2\x82\xac");
  CHECK(*must_parse(R"("\ud83d\ude00")").as_string() == "\xf0\x9f\x98\x80");  // U+1F600
  CHECK(*must_parse(R"("\uDBFF\uDFFF")").as_string() == "\xf4\x8f\xbf\xbf");  // U+10FFFF
  CHECK(must_parse(R"("\u0000")").as_string()->size() == 1);
  // Raw valid UTF-8 passes through.
  CHECK(*must_parse("\"h\xc3\xa9llo \xf0\x9f\x98\x80\"").as_string() == "h\xc3\xa9llo \xf0\x9f\x98\x80");
}

TEST_CASE("json: every malformed input is rejected with an offset", "[json]") {
  for (const char* bad : {
           "",
           " ",
           "nul",
           "nulll",
           "tru",
           "True",
           "NaN",
           "Infinity",
           "-",
           "+1",
           "01",
           "-01",
           "1.",
           ".5",
           "1e",
           "1e+",
           "0x10",
           "[1,]",
           "[,1]",
           "[1 2]",
           "{\"a\":1,}",
           "{,}",
           "{\"a\"}",
           "{\"a\":}",
           "{a:1}",
           "{'a':1}",
           "['a']",
           "[1]//c",
           "/*c*/1",
           "[1] x",
           "1 2",
           "{}{}",
           "\"abc",
           "\"\\x\"",
           "\"\\u12\"",
           "\"\\u12G4\"",
           "\"\\ud800\"",
           "\"\\ud800x\"",
           "\"\\ud800\\u0041\"",
           "\"\\udc00\"",
           "\"\\",
           "[",
           "{",
           "{\"a\":1",
           "[1,2",
           "{\"a\":1,\"a\":2}",
           "1e400",
           "-1e400",
       }) {
    must_reject(bad);
  }
}

TEST_CASE("json: raw control characters and invalid UTF-8 in strings are rejected", "[json]") {
  for (int c = 0; c < 0x20; ++c) {
    std::string s = "\"a";
    s.push_back(static_cast<char>(c));
    s += "\"";
    auto e = must_reject(s);
    CHECK(e.offset == 2);
  }
  for (const char* bad : {
           "\"\x80\"",              // continuation as lead
           "\"\xc0\xaf\"",          // overlong '/'
           "\"\xc1\xbf\"",          // overlong
           "\"\xe0\x80\xaf\"",      // overlong 3-byte
           "\"\xed\xa0\x80\"",      // UTF-8 encoded surrogate
           "\"\xf0\x80\x80\xaf\"",  // overlong 4-byte
           "\"\xf4\x90\x80\x80\"",  // above U+10FFFF
           "\"\xf5\x80\x80\x80\"",  // invalid lead
           "\"\xff\"",              // invalid byte
           "\"\xc3\"",              // truncated before the quote
           "\"\xe2\x82\"",          // truncated 3-byte
           "\"\xc3\x28\"",          // bad continuation
       }) {
    must_reject(bad);
  }
}

TEST_CASE("json: truncating a valid document anywhere is rejected", "[json]") {
  const std::string doc = R"({"a":[1,-2.5e3,"x\u00e9\ud83d\ude00",true,false,null],"b":{"c":{}}})";
  REQUIRE(parse(doc).has_value());
  for (std::size_t n = 0; n < doc.size(); ++n) {
    INFO("prefix length " << n);
    CHECK_FALSE(parse(doc.substr(0, n)).has_value());
  }
}

TEST_CASE("json: nesting limit and size limit", "[json]") {
  auto nested = [](std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  CHECK(parse(nested(kMaxDepth)).has_value());
  ParseError e;
  CHECK_FALSE(parse(nested(kMaxDepth + 1), &e).has_value());
  CHECK(e.offset == kMaxDepth);
  CHECK(e.message.find("nesting") != std::string::npos);
  // A depth bomb far beyond the limit fails quickly instead of overflowing the stack.
  CHECK_FALSE(parse(std::string(1000000, '[')).has_value());
  std::string objs;
  for (std::size_t i = 0; i <= kMaxDepth; ++i) objs += "{\"a\":";
  objs += "1" + std::string(kMaxDepth + 1, '}');
  CHECK_FALSE(parse(objs).has_value());

  std::string big = "\"" + std::string(kMaxTextBytes - 2, 'x') + "\"";
  CHECK(parse(big).has_value());
  big.insert(big.begin(), ' ');
  CHECK_FALSE(parse(big, &e).has_value());
  CHECK(e.message.find("size") != std::string::npos);
}

TEST_CASE("json: dump escapes what it must and round trips", "[json]") {
  Value s(std::string("q\"b\\n\n\r\t\b\f\x01\x1f\x7f/\xc3\xa9"));
  CHECK(dump(s) == R"("q\"b\\n\n\r\t\b\f\u0001\u001f\u007f/)"
                   "\xc3\xa9\"");
  CHECK(*parse(dump(s))->as_string() == *s.as_string());
  std::string nul("a\0b", 3);
  CHECK(dump(Value(nul)) == R"("a\u0000b")");
  CHECK(*parse(dump(Value(nul)))->as_string() == nul);

  Value doc;
  doc["z"] = 1;
  doc["a"] = Array{Value(nullptr), Value(true),  Value(-3),  Value(std::uint64_t{18446744073709551615ull}),
                   Value(0.1),     Value(1e300), Value(2.0), Value("s")};
  doc["m"] = Object{{"k", Value(Object{})}, {"l", Value(Array{})}};
  const std::string compact = dump(doc);
  CHECK(compact == R"({"a":[null,true,-3,18446744073709551615,0.1,1e+300,2.0,"s"],"m":{"k":{},"l":[]},"z":1})");
  auto back = parse(compact);
  REQUIRE(back.has_value());
  CHECK(dump(*back) == compact);
  CHECK(std::holds_alternative<double>(back->find("a")->as_array()->at(6).storage()));

  const std::string pretty = dump(doc, 2);
  CHECK(pretty.find("\n  \"a\": [\n    null,") != std::string::npos);
  CHECK(pretty.find("\"k\": {}") != std::string::npos);
  auto back2 = parse(pretty);
  REQUIRE(back2.has_value());
  CHECK(dump(*back2) == compact);

  // Non-finite doubles have no JSON form: null keeps the output parseable.
  CHECK(dump(Value(std::numeric_limits<double>::infinity())) == "null");
  CHECK(dump(Value(std::numeric_limits<double>::quiet_NaN())) == "null");
}

TEST_CASE("json: operator[] turns null into an object", "[json]") {
  Value v;
  v["a"]["b"] = 2;
  CHECK(dump(v) == R"({"a":{"b":2}})");
  Value n(5);
  n["x"] = true;  // a non-object becomes an object rather than losing the write
  CHECK(dump(n) == R"({"x":true})");
}
