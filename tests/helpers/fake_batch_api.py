"""A local stand-in of the OpenAI ``/v1/files`` and ``/v1/batches`` endpoints.

Batches are processed when first retrieved. ``expire_first`` batches end ``expired``: their
output file holds the first ``answered`` lines, their error file holds ``errored`` lines with
an error object, and the remaining requests appear in neither (as a real expired batch can
leave them). Every call is counted in ``calls``.
"""

from __future__ import annotations

import email.parser
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def echo_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A deterministic chat completion: 'Yes' for prompts that mention 'doctor', else 'No'.

    A forced tool (``tool_choice`` naming a function) is answered as OpenAI does: a call with
    ``{"decision": "yes"|"no"}`` arguments, no content, and finish reason ``stop``.
    """
    text = body["messages"][-1]["content"]
    yes = "doctor" in text
    message: dict[str, Any] = {"role": "assistant", "content": "Yes" if yes else "No"}
    if isinstance(choice := body.get("tool_choice"), dict):
        call = {
            "id": "call-fake",
            "type": "function",
            "function": {
                "name": choice["function"]["name"],
                "arguments": json.dumps({"decision": "yes" if yes else "no"}),
            },
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": 1, "total_tokens": 0},
    }


class FakeBatchAPI:
    def __init__(
        self,
        answer: Callable[[dict[str, Any]], dict[str, Any]] = echo_answer,
        *,
        expire_first: int = 0,
        answered: int = 0,
        errored: int = 0,
    ) -> None:
        self.answer = answer
        self.expire_first, self.answered, self.errored = expire_first, answered, errored
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.calls: Counter[str] = Counter()
        self.lines_submitted: list[int] = []
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                pass

            def _send(self, status: int, payload: Any, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with api.lock:
                    if self.path.rstrip("/").endswith("/files"):
                        self._send(200, api.upload(self.headers["content-type"], body))
                    elif self.path.rstrip("/").endswith("/batches"):
                        self._send(200, api.create(json.loads(body)))
                    else:
                        self._send(404, {"error": {"message": "not found"}})

            def do_GET(self) -> None:
                path = self.path.split("?")[0].rstrip("/")
                with api.lock:
                    if path.endswith("/content"):
                        file_id = path.split("/")[-2]
                        api.calls["content"] += 1
                        self._send(200, None, raw=api.files[file_id])
                    elif path.endswith("/batches"):
                        api.calls["list"] += 1
                        data = list(api.batches.values())
                        self._send(200, {"object": "list", "data": data, "has_more": False})
                    elif "/batches/" in path:
                        self._send(200, api.retrieve(path.split("/")[-1]))
                    else:
                        self._send(404, {"error": {"message": "not found"}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # -- endpoints --------------------------------------------------------------------------

    def upload(self, content_type: str, body: bytes) -> dict[str, Any]:
        self.calls["upload"] += 1
        message = email.parser.BytesParser().parsebytes(
            b"content-type: " + content_type.encode() + b"\r\n\r\n" + body
        )
        data = b""
        filename = "upload.jsonl"
        for part in message.walk():
            if part.get_param("name", header="content-disposition") == "file":
                payload = part.get_payload(decode=True)
                data = payload if isinstance(payload, bytes) else data
                filename = part.get_filename() or filename
        file_id = f"file-{next(self.ids)}"
        self.files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": 0,
            "filename": filename,
            "purpose": "batch",
            "status": "processed",
        }

    def create(self, request: dict[str, Any]) -> dict[str, Any]:
        self.calls["create"] += 1
        batch_id = f"batch-{next(self.ids)}"
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": request["endpoint"],
            "input_file_id": request["input_file_id"],
            "completion_window": request["completion_window"],
            "status": "validating",
            "created_at": int(time.time()),
            "output_file_id": None,
            "error_file_id": None,
            "metadata": request.get("metadata"),
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
        }
        self.batches[batch_id] = batch
        return batch

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        self.calls["retrieve"] += 1
        batch = self.batches[batch_id]
        if batch["status"] == "validating":
            batch["status"] = "in_progress"  # first poll: not finished yet
        elif batch["status"] == "in_progress":
            self._process(batch)
        return batch

    def _process(self, batch: dict[str, Any]) -> None:
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]].splitlines() if x]
        self.lines_submitted.append(len(lines))
        expire = self.calls["processed"] < self.expire_first
        self.calls["processed"] += 1
        out, err = [], []
        for i, line in enumerate(lines):
            if expire and i >= self.answered:
                if i < self.answered + self.errored:
                    err.append(
                        {
                            "id": f"req-{i}",
                            "custom_id": line["custom_id"],
                            "response": None,
                            "error": {"code": "batch_expired", "message": "expired"},
                        }
                    )
                continue
            out.append(
                {
                    "id": f"req-{i}",
                    "custom_id": line["custom_id"],
                    "response": {
                        "status_code": 200,
                        "request_id": f"r{i}",
                        "body": self.answer(line["body"]),
                    },
                    "error": None,
                }
            )
        batch["status"] = "expired" if expire else "completed"
        for kind, records in (("output_file_id", out), ("error_file_id", err)):
            if records:
                file_id = f"file-{next(self.ids)}"
                self.files[file_id] = "".join(json.dumps(r) + "\n" for r in records).encode()
                batch[kind] = file_id
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}

    def __enter__(self) -> FakeBatchAPI:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
