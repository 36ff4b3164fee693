// remote-rpc: local-rpc across two daemons (--socket / --server-socket,
// --target = the serving daemon's --listen). Registered now so the CLI
// shape is fixed; the cross-daemon path lands with the next issue.
#include "scenarios.h"

namespace ferry::bench {

Outcome run_remote_rpc(ScenarioContext& ctx) {
  return ctx.fail(Outcome::NotAvailable,
                  "remote-rpc is not available yet (the cross-daemon data path lands with the next issue); "
                  "use local-rpc, ipc-echo, uds-rpc or tcp-rpc");
}

}  // namespace ferry::bench
