"""A local HTTP proxy that injects faults: 429 (with Retry-After), 500, or a stall.

Faults are drawn per request from a seeded generator with the configured shares. A stalled
request is held open for ``stall_s`` and dropped without ever reaching the upstream server, so
every request the upstream answers is one the client receives. Give stalls far longer than the
client's timeout (the default is 30 s): a stall must only ever end as a client timeout.
``completed`` counts 200 answers per request body, to check that every prompt completes
exactly once. While the upstream is down (a restart), the proxy answers 502 (counted as
``faults["upstream_down"]``); :meth:`FaultProxy.redirect` points it at a restarted upstream.
``stall_matching`` stalls the first request whose body contains it, whatever the draw.

:class:`CannedServer` answers every request with one fixed status and body (the API-fault
cases of the bad-input battery).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        *,
        p429: float = 0.0,
        p500: float = 0.0,
        pstall: float = 0.0,
        stall_s: float = 30.0,
        retry_after: str = "0.05",
        seed: int = 0,
        stall_matching: bytes | None = None,
    ) -> None:
        self.upstream = urlsplit(upstream)
        self.p429, self.p500, self.pstall = p429, p500, pstall
        self.stall_s, self.retry_after = stall_s, retry_after
        self.stall_matching = stall_matching
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.faults: Counter[str] = Counter()
        self.completed: Counter[str] = Counter()
        self.headers_seen: list[dict[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                proxy.headers_seen.append({"authorization": self.headers.get("authorization", "")})
                with proxy.lock:
                    draw = proxy.rng.random()
                    if proxy.stall_matching is not None and proxy.stall_matching in body:
                        proxy.stall_matching = None
                        fault = "stall"
                    elif draw < proxy.p429:
                        fault = "429"
                    elif draw < proxy.p429 + proxy.p500:
                        fault = "500"
                    elif draw < proxy.p429 + proxy.p500 + proxy.pstall:
                        fault = "stall"
                    else:
                        fault = ""
                    if fault:
                        proxy.faults[fault] += 1
                if fault == "429":
                    self._reply(
                        429,
                        b'{"error": {"message": "rate limited"}}',
                        {"Retry-After": proxy.retry_after},
                    )
                    return
                if fault == "500":
                    self._reply(500, b'{"error": {"message": "server error"}}')
                    return
                if fault == "stall":
                    time.sleep(proxy.stall_s)
                    self.close_connection = True
                    return
                upstream = proxy.upstream
                conn = http.client.HTTPConnection(
                    upstream.hostname or "127.0.0.1", upstream.port, timeout=300
                )
                try:
                    conn.request("POST", self.path, body, {"content-type": "application/json"})
                    response = conn.getresponse()
                    data = response.read()
                except OSError:  # refused, or reset by a server killed mid-request
                    with proxy.lock:
                        proxy.faults["upstream_down"] += 1
                    self._reply(502, b'{"error": {"message": "upstream unavailable"}}')
                    return
                finally:
                    conn.close()
                if response.status == 200:
                    with proxy.lock:
                        proxy.completed[hashlib.sha256(body).hexdigest()] += 1
                self._reply(response.status, data)

            def _reply(self, status: int, data: bytes, extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def redirect(self, upstream: str) -> None:
        """Send the next requests to ``upstream`` (a restarted server on a new port)."""
        self.upstream = urlsplit(upstream)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class CannedServer:
    """A local endpoint answering every POST with ``status`` and ``body`` (counted in ``hits``)."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.hits = 0
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                canned.hits += 1
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> CannedServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def chat_completion(
    content: str | None = "Yes", logprobs: bool = False, calls: Any = None
) -> bytes:
    """A chat-completion body answering ``content`` (with first-token log-probabilities,
    tool calls), for a :class:`CannedServer`."""
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": content, "tool_calls": calls},
    }
    if logprobs:
        top = [{"token": "Yes", "logprob": -0.1, "bytes": None}]
        entry = {"token": "Yes", "logprob": -0.1, "bytes": None, "top_logprobs": top}
        choice["logprobs"] = {"content": [entry]}
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    return json.dumps(body).encode()
