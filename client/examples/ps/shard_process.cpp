#include "shard_process.h"

#include <cstdio>

#include "ferry/ps/shard_server.h"
#include "tcp_link.h"

namespace ferry::ps::tool {

int serve_shard(Shard& shard, const ShardProcessSpec& spec) {
  if (spec.kind == TransportKind::Tcp)
    return serve_shard_tcp(shard, spec.listen, spec.stop_fd, spec.ready, spec.failed);
  ShardServerOptions o;
  o.socket = spec.socket;
  o.pool = spec.pool;
  o.busy_poll = spec.busy_poll;
  std::unique_ptr<ShardServer> server;
  if (const Error bad = ShardServer::start(shard, o, &server); bad.failed()) {
    spec.failed(bad.message());
    return 1;
  }
  spec.ready("");
  const Status st = server->run(spec.stop_fd);
  const ShardServerCounters& c = server->counters();
  const unsigned index = shard.spec().index;
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
    spec.failed("ferryd went away (" + std::string(to_string(st)) + ")");
    return 1;
  }
  return 0;
}

}  // namespace ferry::ps::tool
