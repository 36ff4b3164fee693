#include "client/ps/table_save.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace ferry::ps::detail {

namespace {

// Rows a restore reads at once: a few MiB whatever the table's width.
constexpr std::uint64_t kRestoreBytes = 4ull << 20;

bool plain_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool plain_name(std::string_view s, std::size_t most) noexcept {
  return !s.empty() && s.size() <= most && s.front() != '.' && std::all_of(s.begin(), s.end(), plain_char);
}

std::string table_file(const TableSpec& t) {
  return plain_name(t.name, 200) ? t.name : "table-" + std::to_string(t.id);
}

std::string part_prefix(const TableSpec& t) { return table_file(t) + ".shard-"; }

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string dir_of(const std::string& path) { return path.substr(0, path.rfind('/')); }
std::string file_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string hidden(const std::string& path) { return dir_of(path) + "/." + file_of(path) + ".tmp"; }

bool exists(const std::string& path) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

Error sys_error(const std::string& what, const std::string& path) {
  return Error(Status::BadRequest, what + " '" + path + "': " + std::strerror(errno));
}

Error sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sys_error("cannot open", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Error{} : sys_error("cannot sync", dir);
}

Error write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return sys_error("cannot create", path);
  const bool ok = write_all(fd, text.data(), text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return sys_error("cannot write", path);
  }
  return {};
}

std::string describe(const TableSpec& t, const PartPlace& place, std::uint64_t rows, std::uint64_t first) {
  const bool dense = t.kind == TableKind::Dense;
  std::string j = "{\"format\": \"ferry-ps-shard-part\", \"version\": 1, \"table\": " + json_string(t.name) +
                  ", \"id\": " + std::to_string(t.id) + ", \"kind\": \"" + std::string(to_string(t.kind)) +
                  "\", \"dim\": " + std::to_string(t.dim) + ", \"table_rows\": " + std::to_string(t.rows) +
                  ", \"optimizer\": \"" + std::string(to_string(t.optimizer.kind)) +
                  "\", \"shard\": " + std::to_string(place.shard) + ", \"shards\": " + std::to_string(place.shards) +
                  ", \"rows\": " + std::to_string(rows);
  if (dense) j += ", \"first_element\": " + std::to_string(first);
  return j + "}\n";
}

// Another shard count's part of the same table under NAME (for a restore's message), 0 when none.
std::uint32_t other_count(const std::string& dir, const TableSpec& t, std::uint32_t shards) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  const std::string prefix = part_prefix(t);
  std::uint32_t found = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view f = e->d_name;
    if (f.substr(0, prefix.size()) != prefix || f.size() < 5 || f.substr(f.size() - 5) != ".json") continue;
    const std::size_t of = f.find("-of-", prefix.size());
    if (of == std::string_view::npos) continue;
    const std::uint32_t n =
        static_cast<std::uint32_t>(std::strtoul(std::string(f.substr(of + 4)).c_str(), nullptr, 10));
    if (n != shards && n != 0) found = n;
  }
  ::closedir(d);
  return found;
}

}  // namespace

bool valid_checkpoint_name(std::string_view name) noexcept { return plain_name(name, kMaxSaveName); }

std::string part_path(const PartPlace& place, std::string_view name, const TableSpec& table) {
  return place.dir + "/" + std::string(name) + "/" + part_prefix(table) + std::to_string(place.shard) + "-of-" +
         std::to_string(place.shards);
}

PartInfo part_info(const TableStore& store) noexcept {
  const bool dense = store.spec().kind == TableKind::Dense;
  return PartInfo{&store.spec(), store.has_state(), dense ? store.slice().begin : 0};
}

StepRows step_rows(const TableStore& store, std::uint32_t first, std::uint32_t count) noexcept {
  const std::uint64_t end = std::min<std::uint64_t>(store.saved_rows(), std::uint64_t{first} + count);
  StepRows r;
  if (end <= first) return r;
  r.rows = end - first;
  r.keys = store.row_keys(first);
  r.values = store.row_values(first);
  r.state = store.row_state(first);
  return r;
}

PsStatus TableSaver::check(std::string_view name, std::uint32_t first) const noexcept {
  return first == 0 || (open_ && name == name_ && first == next_) ? PsStatus::Ok : PsStatus::BadRange;
}

PsStatus TableSaver::write(const PartPlace& place, std::string_view name, const PartInfo& part, std::uint32_t first,
                           std::uint32_t count, const StepRows& rows, std::uint32_t* written) noexcept {
  if (const PsStatus st = begin_step(place, name, part, first); st != PsStatus::Ok) return st;
  if (const PsStatus st = append(rows, part.spec->dim); st != PsStatus::Ok) return st;
  *written = static_cast<std::uint32_t>(rows.rows);
  return end_step(place, part, first, count, rows.rows);
}

PsStatus TableSaver::begin_step(const PartPlace& place, std::string_view name, const PartInfo& part,
                                std::uint32_t first) noexcept {
  try {
    if (check(name, first) != PsStatus::Ok) return PsStatus::BadRange;
    return first == 0 ? start(place, name, part) : PsStatus::Ok;
  } catch (const std::exception& e) {
    return failed(Error(Status::NoMemory, e.what()));
  }
}

PsStatus TableSaver::append(const StepRows& rows, std::uint32_t dim) noexcept {
  const std::uint64_t n = rows.rows;
  if (n == 0) return PsStatus::Ok;
  try {
    if (keys_.is_open())
      if (Error e = keys_.append(rows.keys, 8 * n); e.failed()) return failed(e);
    if (Error e = values_.append(rows.values, 4 * n * dim); e.failed()) return failed(e);
    if (state_.is_open())
      if (Error e = state_.append(rows.state, 4 * n * dim); e.failed()) return failed(e);
    return PsStatus::Ok;
  } catch (const std::exception& e) {
    return failed(Error(Status::NoMemory, e.what()));
  }
}

PsStatus TableSaver::end_step(const PartPlace& place, const PartInfo& part, std::uint32_t first, std::uint32_t count,
                              std::uint64_t rows) noexcept {
  try {
    // Each step's rows reach the disk before it is answered: no step, the
    // last one included, waits for more than its own rows' writeback (a
    // part of many GB synced at once would hold the worker's call for a minute).
    if (rows > 0)
      for (NpyWriter* w : {&keys_, &values_, &state_})
        if (w->is_open())
          if (Error e = w->sync(); e.failed()) return failed(e);
    next_ = first + rows;
    return rows < count ? finish(part, place) : PsStatus::Ok;
  } catch (const std::exception& e) {
    return failed(Error(Status::NoMemory, e.what()));
  }
}

PsStatus TableSaver::start(const PartPlace& place, std::string_view name, const PartInfo& part) {
  // A name that holds the part already is refused before anything changes
  // (a save in progress of another name goes on).
  if (exists(part_path(place, name, *part.spec) + ".json")) return PsStatus::Exists;
  abandon();  // a step at 0 starts over: the last starter's save wins
  const std::string dir = place.dir + "/" + std::string(name);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return failed(sys_error("cannot create", dir));
  base_ = part_path(place, name, *part.spec);
  const bool dense = part.spec->kind == TableKind::Dense;
  const std::uint32_t dim = dense ? 0 : part.spec->dim;
  if (!dense)
    if (Error e = keys_.open(hidden(base_ + ".keys.npy"), NpyType::U64, 0); e.failed()) return failed(e);
  if (Error e = values_.open(hidden(base_ + ".values.npy"), NpyType::F32, dim); e.failed()) return failed(e);
  if (part.state)
    if (Error e = state_.open(hidden(base_ + ".state.npy"), NpyType::F32, dim); e.failed()) return failed(e);
  name_ = std::string(name);
  next_ = 0;
  open_ = true;
  return PsStatus::Ok;
}

PsStatus TableSaver::finish(const PartInfo& part, const PartPlace& place) {
  std::vector<std::string> files;
  for (auto [w, ext] : {std::pair{&keys_, ".keys.npy"}, {&values_, ".values.npy"}, {&state_, ".state.npy"}}) {
    if (!w->is_open()) continue;
    if (Error e = w->finish(next_); e.failed()) return failed(e);
    files.push_back(base_ + ext);
  }
  for (const std::string& f : files)
    if (::rename(hidden(f).c_str(), f.c_str()) != 0) return failed(sys_error("cannot rename into", f));
  const std::string json = base_ + ".json";
  if (Error e = write_file(hidden(json), describe(*part.spec, place, next_, part.first_element)); e.failed())
    return failed(e);
  if (::rename(hidden(json).c_str(), json.c_str()) != 0) return failed(sys_error("cannot rename into", json));
  if (Error e = sync_dir(dir_of(json)); e.failed()) return failed(e);
  open_ = false;
  return PsStatus::Ok;
}

PsStatus TableSaver::failed(const Error& why) noexcept {
  std::fprintf(stderr, "ferry ps: shard-side save of '%s' failed: %s\n", base_.c_str(), why.message().c_str());
  abandon();
  return PsStatus::IoFailed;
}

void TableSaver::abandon() noexcept {
  for (NpyWriter* w : {&keys_, &values_, &state_}) w->discard();
  if (open_ || !base_.empty()) {
    // Files renamed into place before a later one failed: a part without its .json is not kept either.
    if (!exists(base_ + ".json"))
      for (const char* ext : {".keys.npy", ".values.npy", ".state.npy"}) ::unlink((base_ + ext).c_str());
  }
  open_ = false;
}

namespace {

// Reads one part (`base`, saved as shard `from` of `of`) into `store`.
// `all_ours`: the part was this very shard's (same index and count), so
// every key must be ours; else it is one of another shard count's parts
// and the rows this shard does not own are passed over.
Error read_part(const std::string& base, TableStore& store, std::uint32_t from, std::uint32_t of, bool all_ours) {
  const TableSpec& t = store.spec();
  const bool dense = t.kind == TableKind::Dense;
  const std::uint32_t dim = dense ? 0 : t.dim;
  NpyReader keys, values, state;
  if (Error e = values.open(base + ".values.npy", NpyType::F32, dim); e.failed()) return e;
  if (!dense)
    if (Error e = keys.open(base + ".keys.npy", NpyType::U64, 0); e.failed()) return e;
  // A part saved without optimizer state (SGD then) leaves the accumulators at their start.
  const bool with_state = store.has_state() && exists(base + ".state.npy");
  if (with_state)
    if (Error e = state.open(base + ".state.npy", NpyType::F32, dim); e.failed()) return e;
  const std::uint64_t rows = values.rows();
  if ((!dense && keys.rows() != rows) || (with_state && state.rows() != rows))
    return Error::bad_request("the files of " + base + " disagree on the number of rows");
  const DenseSlice saved = dense_slice(t.rows, from, of);  // a dense part holds its shard's slice then
  if (dense && rows != saved.size())
    return Error::bad_request(base + ".values.npy holds " + std::to_string(rows) + " elements, not " +
                              std::to_string(saved.size()) + ": the table's size changed");
  const std::size_t width = t.dim;
  const std::uint64_t batch = std::max<std::uint64_t>(1, kRestoreBytes / (4 * width + 8));
  std::vector<Key> k(batch);
  std::vector<float> v(batch * width);
  std::vector<float> s(with_state ? batch * width : 0);
  const DenseSlice mine = store.slice();
  for (std::uint64_t done = 0; done < rows;) {
    const std::uint64_t n = std::min(batch, rows - done);
    if (!dense)
      if (Error e = keys.read(k.data(), 8 * n); e.failed()) return e;
    if (Error e = values.read(v.data(), 4 * n * width); e.failed()) return e;
    if (with_state)
      if (Error e = state.read(s.data(), 4 * n * width); e.failed()) return e;
    for (std::uint64_t i = 0; i < n; ++i) {
      const Key key = dense ? saved.begin + done + i : k[i];
      if (!all_ours &&
          (dense ? key < mine.begin || key >= mine.end : shard_of(t.id, key, store.shards()) != store.shard()))
        continue;  // another shard's row now
      const PsStatus st = store.restore_row(key, &v[i * width], with_state ? &s[i * width] : nullptr);
      if (st == PsStatus::BadKey)
        return Error::bad_request(
            "row " + std::to_string(done + i) + " of " + base + ".keys.npy has key " + std::to_string(key) +
            ", which this shard does not hold (" +
            (t.rows != 0 && key >= t.rows ? "outside the table's rows" : "placed on another shard: other table ids?") +
            ")");
      if (st == PsStatus::TableFull)
        return Error::bad_request(base + " holds more rows than table '" + t.name + "' may hold on a shard (max_rows " +
                                  std::to_string(t.max_rows) + ")");
    }
    done += n;
  }
  return {};
}

}  // namespace

Error restore_table(const PartPlace& place, std::string_view name, TableStore& store) {
  const TableSpec& t = store.spec();
  const std::string base = part_path(place, name, t);
  if (exists(base + ".json")) return read_part(base, store, place.shard, place.shards, true);
  // Taken with another shard count: every one of its parts is read, each
  // row kept by the shard that owns it now (resharding), if all are here.
  const std::string where = place.dir + "/" + std::string(name);
  const std::uint32_t of = other_count(where, t, place.shards);
  if (of == 0)
    return Error::bad_request("checkpoint '" + std::string(name) + "' has no part of table '" + t.name +
                              "' for shard " + std::to_string(place.shard) + " of " + std::to_string(place.shards) +
                              " (" + base + ".json is missing: that save did not finish, or went to another host)");
  for (std::uint32_t k = 0; k < of; ++k) {
    const std::string part = part_path(PartPlace{place.dir, k, of}, name, t);
    if (!exists(part + ".json"))
      return Error::bad_request(
          "checkpoint '" + std::string(name) + "' holds table '" + t.name + "' as " + std::to_string(of) +
          " shards' parts, and " + part + ".json is not here: to restore it with " + std::to_string(place.shards) +
          " shards, give every shard all " + std::to_string(of) + " parts (copy them here, or use a shared directory)");
  }
  for (std::uint32_t k = 0; k < of; ++k)
    if (Error e = read_part(part_path(PartPlace{place.dir, k, of}, name, t), store, k, of, false); e.failed()) return e;
  return {};
}

}  // namespace ferry::ps::detail
