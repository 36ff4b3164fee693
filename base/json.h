// A small JSON value for the control socket (JSON lines), ferryctl and the
// benchmarks' --json output. Control path only: it allocates freely.
// Numbers keep integers exact (int64/uint64) and doubles separate.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ferry::json {

class Value;
using Array = std::vector<Value>;
using Object = std::map<std::string, Value>;  // keys sorted: stable output

class Value {
 public:
  using Storage = std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, double, std::string, Array, Object>;

  Value() : v_(nullptr) {}
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(std::int64_t{i}) {}
  Value(long i) : v_(std::int64_t{i}) {}
  Value(long long i) : v_(std::int64_t{i}) {}
  Value(unsigned u) : v_(std::uint64_t{u}) {}
  Value(unsigned long u) : v_(std::uint64_t{u}) {}
  Value(unsigned long long u) : v_(std::uint64_t{u}) {}
  Value(double d) : v_(d) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Object o) : v_(std::move(o)) {}

  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_number() const;
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_array() const { return std::holds_alternative<Array>(v_); }
  bool is_object() const { return std::holds_alternative<Object>(v_); }

  // Typed reads; nullopt when the type does not match (integers convert
  // when the value fits).
  std::optional<bool> as_bool() const;
  std::optional<std::int64_t> as_int() const;
  std::optional<std::uint64_t> as_uint() const;
  std::optional<double> as_double() const;
  const std::string* as_string() const;
  const Array* as_array() const;
  const Object* as_object() const;
  Array* as_array();
  Object* as_object();

  // Object member lookup; nullptr when not an object or no such key.
  const Value* find(std::string_view key) const;
  // Object member access, turning a null value into an object first.
  Value& operator[](const std::string& key);

  const Storage& storage() const { return v_; }

 private:
  Storage v_;
};

// Compact single-line serialisation (no trailing newline); `indent` > 0
// pretty-prints.
std::string dump(const Value& v, int indent = 0);

struct ParseError {
  std::size_t offset = 0;
  std::string message;
};

// Strict RFC 8259 parser with a nesting limit and a size limit; never
// throws. On failure returns nullopt and fills *error when given.
std::optional<Value> parse(std::string_view text, ParseError* error = nullptr);

inline constexpr std::size_t kMaxDepth = 64;
inline constexpr std::size_t kMaxTextBytes = 1 << 20;

}  // namespace ferry::json
