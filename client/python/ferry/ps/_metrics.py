"""A shard server's counters and table usage in Prometheus' text format,
served over HTTP (``python3 -m ferry.ps.server --metrics HOST:PORT``, path
``/metrics``), beside ferryd's own metrics."""

from __future__ import annotations

import http.server
import socket
import threading
from typing import Any, List, Optional, Tuple

COUNTERS = [
    ("requests", "Requests the shard answered."),
    ("rejected", "Requests refused with an error record (the four below among them)."),
    ("non_finite", "Pushes or assigns refused for a NaN or infinite value."),
    ("forbidden", "Requests refused by a table's access list."),
    ("table_full", "Pushes or assigns refused at a table's max_rows."),
    ("save_failed", "Save steps refused IoFailed: a full or failing disk, or one that hangs (--save-stall-s)."),
    ("pulls", "Pulls applied."),
    ("pushes", "Pushes applied."),
    ("assigns", "Assigns applied."),
    ("saves", "Save steps written (shard-side checkpoints)."),
    ("keys", "Keys (dense: elements) the applied requests carried."),
    ("waited", "Requests that queued for a response buffer."),
    ("refusals", "Replies ferryd refused Busy, each sent again."),
]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(server: Any) -> str:
    """The exposition of ``server`` (a ferry.ps.ShardServer), serving or stopped."""
    c = server.counters()
    base = 'service="%s",shard="%d",shards="%d"' % (_label(server.service), server.index, server.shards)
    out: List[str] = ["# HELP ferry_ps_shard_up 1 while the shard serves.", "# TYPE ferry_ps_shard_up gauge",
                      "ferry_ps_shard_up{%s} %d" % (base, 1 if c["result"] == "Running" else 0)]
    for name, what in COUNTERS:
        metric = "ferry_ps_shard_%s_total" % name
        out += ["# HELP %s %s" % (metric, what), "# TYPE %s counter" % metric, "%s{%s} %d" % (metric, base, c[name])]
    usage = server.usage()
    for field, what in (("rows", "Rows this shard holds of the table (dense: its elements)."),
                        ("bytes", "Heap bytes the table holds on this shard.")):
        metric = "ferry_ps_shard_table_%s" % field
        out += ["# HELP %s %s" % (metric, what), "# TYPE %s gauge" % metric]
        out += ['%s{%s,table="%s"} %d' % (metric, base, _label(t), u[field]) for t, u in sorted(usage.items())]
    return "\n".join(out) + "\n"


def parse_address(text: str) -> Optional[Tuple[str, int]]:
    """HOST:PORT or [V6]:PORT, None when it is not one."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    return host.strip("[]"), int(port)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    address_family = socket.AF_INET


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    """An HTTP server on (host, port) answering GET /metrics with render(shard);
    bound at construction (OSError when the address is taken), serving from
    start() on a thread of its own until close()."""

    def __init__(self, host: str, port: int) -> None:
        self.shard: Any = None
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics" or owner.shard is None:
                    self.send_error(404)
                    return
                body = render(owner.shard).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # one line per scrape would flood the log
                pass

        self._httpd = (_Server6 if ":" in host else _Server)((host, port), Handler)
        self.address = self._httpd.server_address[:2]
        self._thread: Optional[threading.Thread] = None

    def start(self, shard: Any) -> None:
        self.shard = shard
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="ferry-ps-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(10)
        self._httpd.server_close()
