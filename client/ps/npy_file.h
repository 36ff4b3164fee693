// .npy files (format 1.0) of little-endian u64 or f32 in C order, one or
// two dimensions: what shard-side checkpoints write and read, and what
// numpy.load(path, mmap_mode="r") reads anywhere. Written and read a piece
// at a time, so a table larger than memory passes through a few MiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/error.h"

namespace ferry::ps::detail {

enum class NpyType : std::uint8_t { U64, F32 };  // '<u8', '<f4'

// Writes all `bytes` to `fd` (again after a short write or EINTR); false on an error.
bool write_all(int fd, const void* data, std::size_t bytes) noexcept;

// One .npy file of a length known only at the end: the header is written
// with room for any row count and rewritten by finish() with the real one.
class NpyWriter {
 public:
  NpyWriter() = default;
  ~NpyWriter() { discard(); }
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;

  // Creates (or truncates) `path` for rows of `dim` values (0: one value
  // per row, a 1-D array).
  [[nodiscard]] Error open(const std::string& path, NpyType type, std::uint32_t dim);
  [[nodiscard]] Error append(const void* data, std::size_t bytes);
  // Writes what was appended so far to the disk (fdatasync): a caller that
  // appends a piece at a time syncs each, so that finish() never has more
  // than the last piece to wait for.
  [[nodiscard]] Error sync();
  // Rewrites the header for `rows` rows, syncs the file and closes it.
  [[nodiscard]] Error finish(std::uint64_t rows);
  // Closes and removes an unfinished file (nothing once finished).
  void discard() noexcept;
  bool is_open() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::string path_;
  NpyType type_ = NpyType::F32;
  std::uint32_t dim_ = 0;
};

// Reads one .npy file written by NpyWriter or numpy: its shape is checked
// against what the caller expects, then its data read in order.
class NpyReader {
 public:
  NpyReader() = default;
  ~NpyReader();
  NpyReader(const NpyReader&) = delete;
  NpyReader& operator=(const NpyReader&) = delete;

  // BadRequest, naming the file, unless it holds `type` in C order with
  // `dim` values per row (0: a 1-D array).
  [[nodiscard]] Error open(const std::string& path, NpyType type, std::uint32_t dim);
  std::uint64_t rows() const noexcept { return rows_; }
  // The next `bytes` bytes of data; BadRequest when the file is short.
  [[nodiscard]] Error read(void* out, std::size_t bytes);

 private:
  int fd_ = -1;
  std::string path_;
  std::uint64_t rows_ = 0;
};

}  // namespace ferry::ps::detail
