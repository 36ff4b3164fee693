// ferry-ps subcommands; each returns the process exit code.
#pragma once

#include "ps_options.h"

namespace ferry::ps::tool {

int run_bench(const PsOptions& o);
int run_check(const PsOptions& o);
int run_server(const PsOptions& o);
int run_worker(const PsOptions& o);

}  // namespace ferry::ps::tool
