// ferryctl top. Reads status every interval over a fresh connection (the
// daemon need not keep connections open), shows counter totals and rates.
// On a terminal it redraws in place and reads 'q' in non-canonical mode;
// otherwise (pipes, tests) it prints frames one after another.
#include "control/ferryctl_top.h"

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>

#include "control/control_client.h"
#include "control/ferryctl_tables.h"

namespace ferry::ctl {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

std::optional<double> counter_rate(const json::Value* prev, const std::string& key, const json::Value& cur,
                                   double dt_s) {
  if (prev == nullptr || dt_s <= 0) return std::nullopt;
  const json::Value* pc = prev->find("counters");
  const json::Value* p = pc == nullptr ? nullptr : pc->find(key);
  if (p == nullptr || !p->as_double() || !cur.as_double()) return std::nullopt;
  return (*cur.as_double() - *p->as_double()) / dt_s;
}

std::optional<double> cpu_percent(const json::Value* prev, const json::Value& cur, double dt_s) {
  if (prev == nullptr || dt_s <= 0) return std::nullopt;
  auto total = [](const json::Value& s) -> std::optional<double> {
    const json::Value* u = s.find("cpu_user_us");
    const json::Value* y = s.find("cpu_sys_us");
    if (u == nullptr || y == nullptr || !u->as_double() || !y->as_double()) return std::nullopt;
    return *u->as_double() + *y->as_double();
  };
  auto a = total(*prev), b = total(cur);
  if (!a || !b) return std::nullopt;
  return (*b - *a) / 1e6 / dt_s * 100.0;
}

// Restores the terminal mode on every exit path.
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  bool active() const { return active_; }

 private:
  termios saved_{};
  bool active_ = false;
};

// Sleeps up to `seconds`; true when the user asked to quit (q or Ctrl-C).
bool wait_or_quit(double seconds, bool read_keys) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (g_interrupted) return true;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int n = ::poll(read_keys ? &p : nullptr, read_keys ? 1 : 0, static_cast<int>(left.count()));
    if (n > 0 && (p.revents & POLLIN) != 0) {
      char c = 0;
      if (::read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) return true;
    }
  }
}

}  // namespace

std::string render_top_frame(const json::Value* prev, const json::Value& cur, double dt_s, double interval_s) {
  auto text = [&](std::string_view key) {
    const json::Value* v = cur.find(key);
    return v == nullptr ? std::string("-") : cell_text(*v);
  };
  std::string out = "ferryd " + text("version") + "  transport " + text("transport");
  const json::Value* up = cur.find("uptime_s");
  out += "  up " + (up != nullptr && up->as_int() ? format_duration(*up->as_int()) : std::string("-"));
  const json::Value* clients = cur.find("clients");
  const json::Array* cl = clients == nullptr ? nullptr : clients->as_array();
  out += "  clients " + (cl != nullptr ? std::to_string(cl->size()) : text("clients"));
  const json::Value* peers = cur.find("peers");
  const json::Array* pl = peers == nullptr ? nullptr : peers->as_array();
  out += "  peers " + (pl != nullptr ? std::to_string(pl->size()) : std::string("-"));
  char buf[64];
  if (auto cpu = cpu_percent(prev, cur, dt_s)) {
    std::snprintf(buf, sizeof buf, "  cpu %.1f%%", *cpu);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "    (every %gs, q to quit)\n\n", interval_s);
  out += buf;
  if (std::string engines = render_engines(cur, ""); !engines.empty()) out += engines + "\n";
  std::vector<Row> rows;
  const json::Value* counters = cur.find("counters");
  if (const json::Object* o = counters == nullptr ? nullptr : counters->as_object()) {
    for (const auto& [k, v] : *o) {
      std::string rate = "-";
      if (auto r = counter_rate(prev, k, v, dt_s)) {
        std::snprintf(buf, sizeof buf, "%.1f", *r);
        rate = buf;
      }
      rows.push_back(Row{k, cell_text(v), rate});
    }
  }
  out += format_table(Row{"COUNTER", "TOTAL", "RATE/S"}, rows);
  return out;
}

json::Value top_json(const json::Value* prev, const json::Value& cur, double dt_s) {
  json::Value out;
  if (const json::Value* up = cur.find("uptime_s")) out["uptime_s"] = *up;
  const json::Value* counters = cur.find("counters");
  out["counters"] = counters == nullptr ? json::Value(json::Object{}) : *counters;
  if (const json::Value* engines = cur.find("engines")) out["engines"] = *engines;
  if (prev != nullptr) {
    out["interval_s"] = dt_s;
    json::Object rates;
    if (const json::Object* o = counters == nullptr ? nullptr : counters->as_object()) {
      for (const auto& [k, v] : *o) {
        if (auto r = counter_rate(prev, k, v, dt_s)) rates[k] = *r;
      }
    }
    out["rates"] = std::move(rates);
    if (auto cpu = cpu_percent(prev, cur, dt_s)) out["cpu_percent"] = *cpu;
  }
  return out;
}

int run_top(const Options& o) {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;  // no SA_RESTART: poll must return on Ctrl-C
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const bool tty_out = isatty(STDOUT_FILENO) != 0 && !o.json;
  RawTerminal term;  // only when stdin is a terminal
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  std::optional<json::Value> prev;
  auto prev_at = std::chrono::steady_clock::now();
  for (int frame = 0; o.count == 0 || frame < o.count; ++frame) {
    if (frame > 0 && wait_or_quit(o.interval_s, term.active())) break;
    auto r = control::call(o.control_path, control::Command::Status, timeout);
    const auto now = std::chrono::steady_clock::now();
    if (!r.ok()) {
      std::fprintf(stderr, "ferryctl: %s\n", r.error.c_str());
      return 1;
    }
    const double dt = std::chrono::duration<double>(now - prev_at).count();
    const json::Value* p = prev ? &*prev : nullptr;
    std::string text =
        o.json ? json::dump(top_json(p, r.result, dt)) + "\n" : render_top_frame(p, r.result, dt, o.interval_s);
    if (tty_out)
      text = "\x1b[H\x1b[2J" + text;  // home + clear: redraw in place
    else if (!o.json && frame > 0)
      text = "\n" + text;
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    prev = std::move(r.result);
    prev_at = now;
  }
  return 0;
}

}  // namespace ferry::ctl
