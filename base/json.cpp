// JSON value accessors and serialisation (the parser is in json_parse.cpp).
#include "base/json.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace ferry::json {

bool Value::is_number() const {
  return std::holds_alternative<std::int64_t>(v_) || std::holds_alternative<std::uint64_t>(v_) ||
         std::holds_alternative<double>(v_);
}

std::optional<bool> Value::as_bool() const {
  if (const bool* b = std::get_if<bool>(&v_)) return *b;
  return std::nullopt;
}

std::optional<std::int64_t> Value::as_int() const {
  if (const auto* i = std::get_if<std::int64_t>(&v_)) return *i;
  if (const auto* u = std::get_if<std::uint64_t>(&v_)) {
    if (*u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return static_cast<std::int64_t>(*u);
    }
  }
  return std::nullopt;
}

std::optional<std::uint64_t> Value::as_uint() const {
  if (const auto* u = std::get_if<std::uint64_t>(&v_)) return *u;
  if (const auto* i = std::get_if<std::int64_t>(&v_)) {
    if (*i >= 0) return static_cast<std::uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<double> Value::as_double() const {
  if (const auto* d = std::get_if<double>(&v_)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v_)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&v_)) return static_cast<double>(*u);
  return std::nullopt;
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&v_); }
const Array* Value::as_array() const { return std::get_if<Array>(&v_); }
const Object* Value::as_object() const { return std::get_if<Object>(&v_); }
Array* Value::as_array() { return std::get_if<Array>(&v_); }
Object* Value::as_object() { return std::get_if<Object>(&v_); }

const Value* Value::find(std::string_view key) const {
  const Object* o = as_object();
  if (o == nullptr) return nullptr;
  // std::map<std::string, ...> without a transparent comparator: build the key.
  auto it = o->find(std::string(key));
  return it == o->end() ? nullptr : &it->second;
}

Value& Value::operator[](const std::string& key) {
  // Any non-object (not only null) becomes an empty object: the alternative,
  // a shared dummy value, would silently swallow writes.
  if (!is_object()) v_ = Object{};
  return std::get<Object>(v_)[key];
}

namespace {

void dump_string(std::string& out, const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xf]);
        } else {
          out.push_back(ch);  // UTF-8 passes through unchanged
        }
    }
  }
  out.push_back('"');
}

void dump_double(std::string& out, double d) {
  // JSON has no NaN or infinity; null is the conventional stand-in.
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest round trip
  if (ec != std::errc{}) {
    out += "null";
    return;
  }
  std::string_view text(buf, static_cast<std::size_t>(end - buf));
  out += text;
  // Keep a double a double across a round trip ("1" would parse as integer).
  if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

void newline(std::string& out, int indent, int level) {
  if (indent <= 0) return;
  out.push_back('\n');
  out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
}

void dump_value(std::string& out, const Value& v, int indent, int level) {
  const auto& s = v.storage();
  if (std::holds_alternative<std::nullptr_t>(s)) {
    out += "null";
  } else if (const bool* b = std::get_if<bool>(&s)) {
    out += *b ? "true" : "false";
  } else if (const auto* i = std::get_if<std::int64_t>(&s)) {
    out += std::to_string(*i);
  } else if (const auto* u = std::get_if<std::uint64_t>(&s)) {
    out += std::to_string(*u);
  } else if (const auto* d = std::get_if<double>(&s)) {
    dump_double(out, *d);
  } else if (const auto* str = std::get_if<std::string>(&s)) {
    dump_string(out, *str);
  } else if (const auto* a = std::get_if<Array>(&s)) {
    if (a->empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    bool first = true;
    for (const Value& e : *a) {
      if (!first) out.push_back(',');
      first = false;
      newline(out, indent, level + 1);
      dump_value(out, e, indent, level + 1);
    }
    newline(out, indent, level);
    out.push_back(']');
  } else if (const auto* o = std::get_if<Object>(&s)) {
    if (o->empty()) {
      out += "{}";
      return;
    }
    out.push_back('{');
    bool first = true;
    for (const auto& [k, e] : *o) {
      if (!first) out.push_back(',');
      first = false;
      newline(out, indent, level + 1);
      dump_string(out, k);
      out += indent > 0 ? ": " : ":";
      dump_value(out, e, indent, level + 1);
    }
    newline(out, indent, level);
    out.push_back('}');
  }
}

}  // namespace

std::string dump(const Value& v, int indent) {
  std::string out;
  dump_value(out, v, indent, 0);
  return out;
}

}  // namespace ferry::json
