// ferry._ferry.ps: tables, placement and init functions, and shard servers
// (a Shard served over ferry on a thread of this process, GIL-free).
#include <fcntl.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "errors.h"
#include "ferry/ps/shard.h"
#include "ferry/ps/shard_service.h"
#include "py_ps.h"

namespace ferry::py {

namespace pyb = pybind11;
using namespace pybind11::literals;

namespace {

// One shard served on a thread of this process until stop(), across
// restarts of its ferryd for up to reattach_ms (ps::ShardService).
class ShardHost {
 public:
  ShardHost(const std::vector<ps::TableSpec>& tables, std::uint32_t index, std::uint32_t shards,
            const std::string& socket, std::uint32_t pool, std::uint32_t max_count, bool busy_poll,
            const std::string& prefix, bool allow_non_finite, const std::string& checkpoint_dir,
            const std::string& restore, std::uint32_t save_stall_ms, std::uint32_t reattach_ms) {
    ps::ShardSpec spec;
    spec.index = index;
    spec.shards = shards;
    spec.tables = tables;
    spec.max_count = max_count;
    spec.allow_non_finite = allow_non_finite;
    spec.checkpoint_dir = checkpoint_dir;
    spec.restore = restore;
    spec.save_stall_ms = save_stall_ms;
    Error made;
    {
      pyb::gil_scoped_release nogil;  // a restore reads the shard's part of every table
      made = ps::Shard::create(spec, &shard_);
    }
    if (made.failed()) raise(made.status(), made.message());
    ps::ShardServiceOptions o;
    o.server.socket = socket;
    o.server.pool = pool;
    o.server.busy_poll = busy_poll;
    o.server.service_prefix = prefix;
    o.reattach = std::chrono::milliseconds(reattach_ms);
    Error started;
    {
      pyb::gil_scoped_release nogil;
      started = ps::ShardService::start(*shard_, std::move(o), &service_);
    }
    if (started.failed()) raise(started.status(), "shard " + std::to_string(index) + ": " + started.message());
    if (::pipe2(stop_, O_CLOEXEC) != 0) raise(Status::NoMemory, "shard: no pipe for its stop signal");
  }

  ~ShardHost() {
    pyb::gil_scoped_release nogil;
    halt();
    if (stop_[0] >= 0) ::close(stop_[0]);
  }

  void start() {
    if (thread_.joinable() || stopped_) raise(Status::BadRequest, "the shard server was already started");
    thread_ = std::thread([this] {
      result_ = service_->run(stop_[0]);
      finished_.store(true, std::memory_order_release);  // ferryd went away for good, or stop()
    });
  }

  void stop() {
    pyb::gil_scoped_release nogil;
    halt();
  }

  // False once the serving loop ended, whether stop() ended it or ferryd
  // went away (and did not come back within reattach_ms).
  bool running() const { return thread_.joinable() && !stopped_ && !finished_.load(std::memory_order_acquire); }
  const std::string& service() const { return service_->service(); }
  std::uint64_t reattached() const { return service_->reattached(); }

  // A snapshot, while serving too; "result" is "Running" until the loop ended.
  pyb::dict counters() const {
    const bool serving = running();
    const ps::ShardCounters c = shard_->counters();
    const ps::ShardServerCounters s = service_->counters();
    pyb::dict d;
    d["requests"] = c.requests;
    d["rejected"] = c.rejected;
    d["pulls"] = c.pulls;
    d["pushes"] = c.pushes;
    d["assigns"] = c.assigns;
    d["saves"] = c.saves;
    d["keys"] = c.keys;
    d["non_finite"] = c.non_finite;
    d["forbidden"] = c.forbidden;
    d["table_full"] = c.table_full;
    d["save_failed"] = c.save_failed;
    d["waited"] = s.waited;
    d["refusals"] = s.refusals;
    d["reattached"] = service_->reattached();
    d["result"] = serving ? std::string("Running") : std::string(to_string(result_));
    return d;
  }

  // Rows and bytes each table holds on this shard; read while serving too
  // (a snapshot: the serving thread may be changing them).
  pyb::dict usage() const {
    pyb::dict d;
    for (const ps::TableUsage& u : shard_->usage()) {
      pyb::dict t;
      t["rows"] = u.rows;
      t["bytes"] = u.bytes;
      d[pyb::int_(u.id)] = t;
    }
    return d;
  }

  // A parameter's values after stop() (None when this shard never held it).
  pyb::object find(ps::TableId table, ps::Key key) const {
    if (running()) raise(Status::Busy, "parameters are read after stop()");
    const float* v = shard_->find(table, key);
    if (v == nullptr) return pyb::none();
    std::uint32_t dim = 1;
    for (const auto& t : shard_->spec().tables)
      if (t.id == table && t.kind == ps::TableKind::Embedding) dim = t.dim;
    return copy_array(v, dim);
  }

 private:
  void halt() {
    if (stop_[1] >= 0) {
      ::close(stop_[1]);
      stop_[1] = -1;
    }
    if (thread_.joinable()) thread_.join();
    stopped_ = true;
  }

  std::unique_ptr<ps::Shard> shard_;
  std::unique_ptr<ps::ShardService> service_;
  std::thread thread_;
  int stop_[2] = {-1, -1};
  bool stopped_ = false;
  std::atomic<bool> finished_{false};
  Status result_ = Status::Ok;
};

}  // namespace

void bind_ps_tables(pyb::module_& ps) {
  pyb::enum_<ps::TableKind>(ps, "TableKind")
      .value("embedding", ps::TableKind::Embedding)
      .value("dense", ps::TableKind::Dense);
  pyb::enum_<ps::OptimizerKind>(ps, "OptimizerKind")
      .value("sgd", ps::OptimizerKind::Sgd)
      .value("adagrad", ps::OptimizerKind::Adagrad);
  pyb::enum_<ps::InitKind>(ps, "InitKind")
      .value("zeros", ps::InitKind::Zeros)
      .value("uniform", ps::InitKind::Uniform)
      .value("pattern", ps::InitKind::Pattern);
  pyb::class_<ps::TableSpec>(ps, "TableSpec")
      .def(pyb::init<>())
      .def_readwrite("id", &ps::TableSpec::id)
      .def_readwrite("name", &ps::TableSpec::name)
      .def_readwrite("kind", &ps::TableSpec::kind)
      .def_readwrite("dim", &ps::TableSpec::dim)
      .def_readwrite("rows", &ps::TableSpec::rows)
      .def_property(
          "optimizer", [](const ps::TableSpec& t) { return t.optimizer.kind; },
          [](ps::TableSpec& t, ps::OptimizerKind k) { t.optimizer.kind = k; })
      .def_property(
          "lr", [](const ps::TableSpec& t) { return t.optimizer.lr; },
          [](ps::TableSpec& t, float v) { t.optimizer.lr = v; })
      .def_property(
          "eps", [](const ps::TableSpec& t) { return t.optimizer.eps; },
          [](ps::TableSpec& t, float v) { t.optimizer.eps = v; })
      .def_property(
          "initial_accumulator", [](const ps::TableSpec& t) { return t.optimizer.initial_accumulator; },
          [](ps::TableSpec& t, float v) { t.optimizer.initial_accumulator = v; })
      .def_property(
          "init", [](const ps::TableSpec& t) { return t.init.kind; },
          [](ps::TableSpec& t, ps::InitKind k) { t.init.kind = k; })
      .def_property(
          "init_scale", [](const ps::TableSpec& t) { return t.init.scale; },
          [](ps::TableSpec& t, float v) { t.init.scale = v; })
      .def_property(
          "init_seed", [](const ps::TableSpec& t) { return t.init.seed; },
          [](ps::TableSpec& t, std::uint64_t v) { t.init.seed = v; })
      .def_readwrite("max_rows", &ps::TableSpec::max_rows)
      .def_property(
          "pull_uids", [](const ps::TableSpec& t) { return t.access.pull; },
          [](ps::TableSpec& t, const std::vector<std::uint32_t>& v) { t.access.pull = v; })
      .def_property(
          "push_uids", [](const ps::TableSpec& t) { return t.access.push; },
          [](ps::TableSpec& t, const std::vector<std::uint32_t>& v) { t.access.push = v; })
      .def_property(
          "assign_uids", [](const ps::TableSpec& t) { return t.access.assign; },
          [](ps::TableSpec& t, const std::vector<std::uint32_t>& v) { t.access.assign = v; })
      .def(
          "check",
          [](const ps::TableSpec& t) {
            if (const Error bad = ps::check_table(t); bad.failed()) raise(bad.status(), bad.message());
          },
          "Raises ferry.BadRequest (a ValueError), saying why, when this spec cannot be used.");
  ps.attr("REMOTE_CALLER") = ps::kRemoteCaller;
  ps.attr("UNKNOWN_CALLER") = ps::kUnknownCaller;

  ps.def(
      "initial_values",
      [](const ps::TableSpec& t, const I64& keys) {
        const std::size_t n = static_cast<std::size_t>(keys.size());
        const std::size_t dim = t.kind == ps::TableKind::Embedding ? t.dim : 1;
        float* o = nullptr;
        pyb::object out = new_array<float>({n, dim}, &o);
        const std::int64_t* k = keys.data();
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < dim; ++j)
            o[i * dim + j] = ps::initial_value(t, static_cast<ps::Key>(k[i]), static_cast<std::uint32_t>(j));
        return out;
      },
      "table"_a, "keys"_a, "The values a shard gives these keys (dense: elements) before any push: [n, dim] float32.");
  ps.def(
      "shard_of",
      [](ps::TableId table, const I64& keys, std::uint32_t shards) {
        if (shards == 0 || shards > ps::kMaxShards) raise(Status::BadRequest, "shards must be in [1, 256]");
        std::uint32_t* o = nullptr;
        pyb::object out = new_array<std::uint32_t>({keys.size()}, &o);
        for (std::size_t i = 0; i < keys.size(); ++i)
          o[i] = ps::shard_of(table, static_cast<ps::Key>(keys.data()[i]), shards);
        return out;
      },
      "table"_a, "keys"_a, "shards"_a, "The shard that owns each key (the documented placement hash).");
  ps.def("mix64", [](std::uint64_t x) { return ps::mix64(x); });

  pyb::class_<ShardHost>(ps, "ShardServer", R"(
A parameter-server shard served over ferry from a thread of this process:
constructing it attaches to ferryd and serves PREFIX<index>; start() begins
answering (GIL-free), stop() ends it. counters() and find() after stop().)")
      .def(pyb::init<const std::vector<ps::TableSpec>&, std::uint32_t, std::uint32_t, const std::string&, std::uint32_t,
                     std::uint32_t, bool, const std::string&, bool, const std::string&, const std::string&,
                     std::uint32_t, std::uint32_t>(),
           "tables"_a, "index"_a, "shards"_a, "socket"_a = "", "pool"_a = 64, "max_count"_a = 65536,
           "busy_poll"_a = false, "service_prefix"_a = "ps-shard-", "allow_non_finite"_a = false,
           "checkpoint_dir"_a = "", "restore"_a = "", "save_stall_ms"_a = 60000, "reattach_ms"_a = 0)
      .def("start", &ShardHost::start)
      .def("stop", &ShardHost::stop)
      .def_property_readonly("running", &ShardHost::running)
      .def_property_readonly("service", &ShardHost::service)
      .def_property_readonly("reattached", &ShardHost::reattached,
                             "How many times it attached again after its ferryd went away.")
      .def("counters", &ShardHost::counters)
      .def("usage", &ShardHost::usage, "Rows and bytes each table holds on this shard, by table id.")
      .def("find", &ShardHost::find, "table"_a, "key"_a);
}

}  // namespace ferry::py
