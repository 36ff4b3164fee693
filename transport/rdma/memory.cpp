// Memory registration (see memory.h).
#include "transport/rdma/memory.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace ferry::transport::rdma {

Result<ibv_mr*> register_region(ibv_pd* pd, void* addr, std::size_t len, int access) {
  if (pd == nullptr || addr == nullptr || len == 0) return Result<ibv_mr*>::fail(Status::BadRequest);
  ibv_mr* mr = ibv_reg_mr(pd, addr, len, access);
  if (mr != nullptr) return Result<ibv_mr*>::ok(mr);
  const int err = errno;
  if (err == ENOMEM || err == EAGAIN || err == EPERM) {
    rlimit rl{};
    getrlimit(RLIMIT_MEMLOCK, &rl);
    const auto show = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v); };
    spdlog::error(
        "rdma: ibv_reg_mr of {} bytes failed: {}; pinned memory is limited by RLIMIT_MEMLOCK "
        "(soft {}, hard {} bytes): raise it (ulimit -l, LimitMEMLOCK=) or register less",
        len, std::strerror(err), show(rl.rlim_cur), show(rl.rlim_max));
    return Result<ibv_mr*>::fail(Status::NoMemory);
  }
  spdlog::error("rdma: ibv_reg_mr of {} bytes at {} failed: {}", len, addr, std::strerror(err));
  return Result<ibv_mr*>::fail(Status::BadRequest);
}

void deregister_region(ibv_mr* mr) noexcept {
  if (mr == nullptr) return;
  if (const int rc = ibv_dereg_mr(mr); rc != 0) spdlog::error("rdma: ibv_dereg_mr failed: {}", std::strerror(rc));
}

MemoryHandle handle_of(const ibv_mr* mr) noexcept {
  MemoryHandle h;
  if (mr != nullptr) {
    h.id = reinterpret_cast<std::uintptr_t>(mr);
    h.lkey = mr->lkey;
    h.rkey = mr->rkey;
  }
  return h;
}

void RegisteredSlab::reset() noexcept {
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  if (data_ != nullptr) munmap(data_, bytes_);
  mr_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

Status RegisteredSlab::init(ibv_pd* pd, std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    spdlog::error("rdma: cannot map a {} byte slab: {}", bytes, std::strerror(errno));
    return Status::NoMemory;
  }
  data_ = static_cast<std::byte*>(p);
  bytes_ = bytes;
  // The transport's own receive and bounce slots: no peer ever names them.
  auto mr = register_region(pd, p, bytes, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) return mr.status == Status::NoMemory ? Status::NoMemory : mr.status;
  mr_ = mr.value;
  return Status::Ok;
}

}  // namespace ferry::transport::rdma
