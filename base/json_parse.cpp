// Strict RFC 8259 parser. Input comes from untrusted control-socket peers,
// so every rule is enforced (no trailing commas, comments, single quotes,
// leading zeros, raw control characters, invalid UTF-8, lone surrogates or
// duplicate keys), nesting is bounded by kMaxDepth so recursion cannot
// overflow the stack, and nothing throws: failures report an offset.
#include <locale.h>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/json.h"

namespace ferry::json {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  std::optional<Value> run(ParseError* error) {
    std::optional<Value> v;
    if (s_.size() > kMaxTextBytes) {
      fail(0, "input larger than the size limit");
    } else {
      skip_ws();
      v = parse_value(0);
      if (v) {
        skip_ws();
        if (pos_ != s_.size()) {
          fail(pos_, "trailing characters after the value");
          v.reset();
        }
      }
    }
    if (!v && error != nullptr) *error = err_;
    return v;
  }

 private:
  bool fail(std::size_t at, const char* msg) {
    if (!failed_) {
      failed_ = true;
      err_.offset = at;
      err_.message = msg;
    }
    return false;
  }

  bool eof() const { return pos_ >= s_.size(); }
  char peek() const { return eof() ? '\0' : s_[pos_]; }

  void skip_ws() {
    while (!eof()) {
      char c = s_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail(pos_, "invalid literal");
    pos_ += word.size();
    return true;
  }

  std::optional<Value> parse_value(std::size_t depth) {
    if (eof()) {
      fail(pos_, "unexpected end of input");
      return std::nullopt;
    }
    switch (peek()) {
      case 'n':
        if (!literal("null")) return std::nullopt;
        return Value(nullptr);
      case 't':
        if (!literal("true")) return std::nullopt;
        return Value(true);
      case 'f':
        if (!literal("false")) return std::nullopt;
        return Value(false);
      case '"': {
        std::string str;
        if (!parse_string(str)) return std::nullopt;
        return Value(std::move(str));
      }
      case '[': return parse_array(depth + 1);
      case '{': return parse_object(depth + 1);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail(pos_, "unexpected character");
        return std::nullopt;
    }
  }

  std::optional<Value> parse_array(std::size_t depth) {
    if (depth > kMaxDepth) {
      fail(pos_, "nesting deeper than the limit");
      return std::nullopt;
    }
    ++pos_;  // '['
    Array a;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return Value(std::move(a));
    }
    for (;;) {
      skip_ws();
      auto v = parse_value(depth);
      if (!v) return std::nullopt;
      a.push_back(std::move(*v));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Value(std::move(a));
      }
      fail(pos_, eof() ? "unexpected end of input in array" : "expected ',' or ']'");
      return std::nullopt;
    }
  }

  std::optional<Value> parse_object(std::size_t depth) {
    if (depth > kMaxDepth) {
      fail(pos_, "nesting deeper than the limit");
      return std::nullopt;
    }
    ++pos_;  // '{'
    Object o;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return Value(std::move(o));
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') {
        fail(pos_, eof() ? "unexpected end of input in object" : "expected a string key");
        return std::nullopt;
      }
      const std::size_t key_at = pos_;
      std::string key;
      if (!parse_string(key)) return std::nullopt;
      skip_ws();
      if (peek() != ':') {
        fail(pos_, "expected ':'");
        return std::nullopt;
      }
      ++pos_;
      skip_ws();
      auto v = parse_value(depth);
      if (!v) return std::nullopt;
      // RFC 8259 leaves duplicates to the implementation; rejecting them
      // stops a request from smuggling two different values for one field.
      if (!o.emplace(std::move(key), std::move(*v)).second) {
        fail(key_at, "duplicate object key");
        return std::nullopt;
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return Value(std::move(o));
      }
      fail(pos_, eof() ? "unexpected end of input in object" : "expected ',' or '}'");
      return std::nullopt;
    }
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads the four hex digits after "\u" at pos_ (pos_ is on the first digit).
  bool read_hex4(std::uint32_t& out) {
    if (s_.size() - pos_ < 4) return fail(pos_, "truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      int d = hex_digit(s_[pos_ + static_cast<std::size_t>(i)]);
      if (d < 0) return fail(pos_, "invalid hex digit in \\u escape");
      out = (out << 4) | static_cast<std::uint32_t>(d);
    }
    pos_ += 4;
    return true;
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool parse_escape(std::string& out) {
    const std::size_t at = pos_;  // on the backslash
    ++pos_;
    if (eof()) return fail(at, "truncated escape");
    char c = s_[pos_++];
    switch (c) {
      case '"': out.push_back('"'); return true;
      case '\\': out.push_back('\\'); return true;
      case '/': out.push_back('/'); return true;
      case 'b': out.push_back('\b'); return true;
      case 'f': out.push_back('\f'); return true;
      case 'n': out.push_back('\n'); return true;
      case 'r': out.push_back('\r'); return true;
      case 't': out.push_back('\t'); return true;
      case 'u': break;
      default: return fail(at, "invalid escape");
    }
    std::uint32_t cp = 0;
    if (!read_hex4(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(at, "lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (s_.substr(pos_, 2) != "\\u") return fail(at, "high surrogate without a low surrogate");
      pos_ += 2;
      std::uint32_t lo = 0;
      if (!read_hex4(lo)) return false;
      if (lo < 0xDC00 || lo > 0xDFFF) return fail(at, "high surrogate without a low surrogate");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    append_utf8(out, cp);
    return true;
  }

  // Validates one UTF-8 sequence starting at pos_ (first byte >= 0x80)
  // following RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF.
  bool copy_utf8(std::string& out) {
    const std::size_t at = pos_;
    const auto b0 = static_cast<unsigned char>(s_[pos_]);
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;  // overlong
      if (b0 == 0xED) hi = 0x9F;  // UTF-16 surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;  // overlong
      if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return fail(at, "invalid UTF-8 lead byte");
    }
    if (s_.size() - pos_ < len) return fail(at, "truncated UTF-8 sequence");
    for (std::size_t i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(s_[pos_ + i]);
      const unsigned char min = i == 1 ? lo : 0x80;
      const unsigned char max = i == 1 ? hi : 0xBF;
      if (b < min || b > max) return fail(at, "invalid UTF-8 sequence");
    }
    out.append(s_.substr(pos_, len));
    pos_ += len;
    return true;
  }

  bool parse_string(std::string& out) {
    const std::size_t start = pos_;
    ++pos_;  // opening quote
    for (;;) {
      if (eof()) return fail(start, "unterminated string");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c == '\\') {
        if (!parse_escape(out)) return false;
      } else if (c < 0x20) {
        return fail(pos_, "control character in string");
      } else if (c >= 0x80) {
        if (!copy_utf8(out)) return false;
      } else {
        out.push_back(static_cast<char>(c));
        ++pos_;
      }
    }
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  std::optional<Value> parse_number() {
    const std::size_t start = pos_;
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (!is_digit(peek())) {
      fail(start, "invalid number");
      return std::nullopt;
    }
    if (peek() == '0') {
      ++pos_;
      if (is_digit(peek())) {
        fail(start, "leading zero in number");
        return std::nullopt;
      }
    } else {
      while (is_digit(peek())) ++pos_;
    }
    const std::size_t int_end = pos_;
    bool is_integer = true;
    if (peek() == '.') {
      is_integer = false;
      ++pos_;
      if (!is_digit(peek())) {
        fail(pos_, "expected digits after '.'");
        return std::nullopt;
      }
      while (is_digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      is_integer = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) {
        fail(pos_, "expected digits in exponent");
        return std::nullopt;
      }
      while (is_digit(peek())) ++pos_;
    }
    if (is_integer) {
      if (auto v =
              exact_integer(s_.substr(negative ? start + 1 : start, int_end - start - (negative ? 1 : 0)), negative)) {
        return v;
      }
      // Beyond 64 bits: fall through to a double, as documented.
    }
    return to_double(start);
  }

  // Exact int64 (or uint64 for positive values above INT64_MAX); nullopt on
  // overflow.
  static std::optional<Value> exact_integer(std::string_view digits, bool negative) {
    std::uint64_t mag = 0;
    for (char c : digits) {
      const auto d = static_cast<std::uint64_t>(c - '0');
      if (mag > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
      mag = mag * 10 + d;
    }
    if (!negative) {
      if (mag <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return Value(static_cast<std::int64_t>(mag));
      }
      return Value(static_cast<std::uint64_t>(mag));
    }
    constexpr std::uint64_t kMinMag = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1;
    if (mag > kMinMag) return std::nullopt;
    if (mag == kMinMag) return Value(std::numeric_limits<std::int64_t>::min());
    return Value(-static_cast<std::int64_t>(mag));
  }

  std::optional<Value> to_double(std::size_t start) {
    // strtod_l with the C locale: the grammar was checked above, and the
    // process locale must not change what '.' means.
    static locale_t c_locale = newlocale(LC_ALL_MASK, "C", nullptr);
    const std::string token(s_.substr(start, pos_ - start));
    char* end = nullptr;
    const double d = c_locale != nullptr ? strtod_l(token.c_str(), &end, c_locale) : std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) {
      fail(start, "invalid number");
      return std::nullopt;
    }
    // Underflow rounds to zero quietly; overflow cannot be represented.
    if (!std::isfinite(d)) {
      fail(start, "number out of range");
      return std::nullopt;
    }
    return Value(d);
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  bool failed_ = false;
  ParseError err_;
};

}  // namespace

std::optional<Value> parse(std::string_view text, ParseError* error) { return Parser(text).run(error); }

}  // namespace ferry::json
