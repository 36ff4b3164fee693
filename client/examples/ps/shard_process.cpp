#include "shard_process.h"

#include <cstdio>

#include "ferry/ps/shard_service.h"
#include "tcp_link.h"

namespace ferry::ps::tool {

int serve_shard(Shard& shard, const ShardProcessSpec& spec) {
  if (spec.kind == TransportKind::Tcp)
    return serve_shard_tcp(shard, spec.listen, spec.stop_fd, spec.ready, spec.failed);
  const unsigned index = shard.spec().index;
  ShardServiceOptions o;
  o.server.socket = spec.socket;
  o.server.pool = spec.pool;
  o.server.busy_poll = spec.busy_poll;
  o.reattach = std::chrono::milliseconds(spec.reattach_ms);
  std::unique_ptr<ShardService> server;
  o.on_reattached = [&server, index] {
    const unsigned long long n = server->reattached();
    std::fprintf(stderr,
                 "ferry-ps shard %u: ferryd went away and is back: serving %s again, with its rows (%llu time%s)\n",
                 index, server->service().c_str(), n, n == 1 ? "" : "s");
  };
  if (const Error bad = ShardService::start(shard, std::move(o), &server); bad.failed()) {
    spec.failed(bad.message());
    return 1;
  }
  spec.ready("");
  const Status st = server->run(spec.stop_fd);
  const ShardServerCounters c = server->counters();
  if (c.waited != 0)
    std::fprintf(stderr, "ferry-ps shard %u: %llu requests waited for a response buffer (pool %u)\n", index,
                 static_cast<unsigned long long>(c.waited), spec.pool);
  if (c.refusals != 0)
    std::fprintf(stderr, "ferry-ps shard %u: %llu replies refused Busy and sent again\n", index,
                 static_cast<unsigned long long>(c.refusals));
  // What the shard holds and what it refused to let in.
  for (const TableUsage& u : shard.usage())
    std::fprintf(stderr, "ferry-ps shard %u: table %u: %llu rows, %llu bytes\n", index, static_cast<unsigned>(u.id),
                 static_cast<unsigned long long>(u.rows), static_cast<unsigned long long>(u.bytes));
  const ShardCounters& sc = shard.counters();
  if (sc.non_finite + sc.forbidden + sc.table_full != 0)
    std::fprintf(stderr, "ferry-ps shard %u: refused %llu non-finite, %llu forbidden, %llu past max_rows\n", index,
                 static_cast<unsigned long long>(sc.non_finite), static_cast<unsigned long long>(sc.forbidden),
                 static_cast<unsigned long long>(sc.table_full));
  if (st != Status::Ok) {
    spec.failed("ferryd went away (" + std::string(to_string(st)) + ")" +
                (spec.reattach_ms != 0
                     ? " and was not back within --reattach-s " + std::to_string(spec.reattach_ms / 1000) + " s"
                     : std::string()));
    return 1;
  }
  return 0;
}

}  // namespace ferry::ps::tool
