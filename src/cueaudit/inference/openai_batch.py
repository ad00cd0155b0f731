"""OpenAI Batch API: request files, durable state, resume, error files, cost pre-flight.

State of one shard job lives in ``{state_dir}/state.json`` (written atomically after every
change) next to the request files it describes::

    results/cache/batches/{model}/seed{seed}/{task}/{shard}of{n}/state.json
    results/cache/batches/{model}/seed{seed}/{task}/{shard}of{n}/round0-part0.jsonl

* Request files hold at most ``max_lines`` lines and ``max_bytes`` bytes (50,000 and 200 MB,
  the API's limits); ``custom_id`` is derived from the response-cache key, so it is the same
  on every run.
* A killed job resumes: uploaded files are not uploaded again, a file uploaded but whose
  batch id was not yet recorded is matched against ``batches.list`` before creating a batch,
  and batches already created are polled, never resubmitted.
* When a batch ends (completed, expired, failed, cancelled) both its output file and its error
  file are downloaded; answers are yielded to the runner (which writes them to the response
  cache before asking for more), and only the requests that failed, expired or are missing
  are resubmitted in a new round, at most ``max_rounds`` times.
* Before anything is submitted the cost estimate (tokens × the price table in the config, with
  the Batch API discount) goes to the log; ``dry_run`` stops there.

Request lines hold the very bodies online calls send (cueaudit.inference.openai_protocol), so
``tools``, ``tool_choice`` and ``response_format`` pass unchanged. The runner gets its client
and bodies from a :class:`BatchEndpoint` (the OpenAI backend is one) and imports no backend.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from cueaudit.errors import CueauditError
from cueaudit.inference.core import Decoding, Generation, Request
from cueaudit.inference.openai_protocol import BatchSettings, Prices, generation_from_body
from cueaudit.io import write_text

log = logging.getLogger(__name__)

TERMINAL = {"completed", "expired", "failed", "cancelled"}
ENDPOINT = "/v1/chat/completions"
#: Body fields billed as input tokens.
INPUT_FIELDS: Final = ("messages", "tools", "response_format")


class DryRun(CueauditError):
    """Raised after the request files and the cost estimate are written, in dry-run mode."""


class BatchFailed(CueauditError):
    """Requests still unanswered after the configured number of rounds."""


def custom_id(request: Request) -> str:
    """Deterministic id of a request line (<= 64 characters), from its cache key."""
    return f"cq-{request.cache_key[:56]}"


def estimate_tokens(text: str) -> int:
    """Rough input-token count (about 4 characters a token for English)."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True)
class CostEstimate:
    requests: int
    input_tokens: int
    max_output_tokens: int
    input_usd: float
    output_usd_max: float
    batch: bool

    @property
    def total_usd_max(self) -> float:
        return self.input_usd + self.output_usd_max

    def line(self) -> str:
        mode = "Batch API" if self.batch else "online"
        return (
            f"cost estimate ({mode}): {self.requests} requests, ~{self.input_tokens} input "
            f"tokens (${self.input_usd:,.2f}), at most {self.max_output_tokens} output tokens "
            f"(${self.output_usd_max:,.2f}); at most ${self.total_usd_max:,.2f}"
        )


def estimate_cost(
    input_tokens: int, output_tokens: int, requests: int, prices: Prices, batch: bool
) -> CostEstimate:
    factor = prices.batch_discount if batch else 1.0
    return CostEstimate(
        requests=requests,
        input_tokens=input_tokens,
        max_output_tokens=output_tokens,
        input_usd=input_tokens / 1e6 * prices.input_per_million * factor,
        output_usd_max=output_tokens / 1e6 * prices.output_per_million * factor,
        batch=batch,
    )


def split_lines(lines: Sequence[bytes], max_lines: int, max_bytes: int) -> list[list[bytes]]:
    """Consecutive request files within both limits."""
    files: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        if len(line) > max_bytes:
            raise CueauditError(f"one request is {len(line)} bytes, over the file limit")
        if current and (len(current) >= max_lines or size + len(line) > max_bytes):
            files.append(current)
            current, size = [], 0
        current.append(line)
        size += len(line)
    if current:
        files.append(current)
    return files


class BatchEndpoint(Protocol):
    """Where the runner gets its API client and the request body of each prompt."""

    def client(self, asynchronous: bool) -> Any: ...

    def body(self, request: Request, decoding: Decoding) -> dict[str, Any]: ...


def input_tokens(body: Mapping[str, Any]) -> int:
    return sum(estimate_tokens(json.dumps(body[k])) for k in INPUT_FIELDS if k in body)


class BatchRunner:
    def __init__(
        self,
        endpoint: BatchEndpoint,
        state_dir: str | Path,
        settings: BatchSettings | None = None,
        prices: Prices | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.settings = settings or BatchSettings(enabled=True)
        self.prices = prices or Prices()
        self.dir = Path(state_dir)
        self.state_path = self.dir / "state.json"
        self.state: dict[str, Any] = {"version": 1, "files": [], "failures": {}}
        if self.state_path.is_file():
            self.state = json.loads(self.state_path.read_text(encoding="utf-8"))
        self.stats = {"uploads": 0, "batches_created": 0, "resumed_batches": 0}

    def save(self) -> None:
        write_text(json.dumps(self.state, indent=1), self.state_path)

    # -- public -----------------------------------------------------------------------------

    def run(
        self, requests: Sequence[Request], decoding: Decoding
    ) -> Generator[list[tuple[Request, Generation]], None, None]:
        by_id = {custom_id(r): r for r in requests}
        answered: set[str] = set()
        client = None
        while True:
            in_flight = {
                cid for f in self.state["files"] if not f.get("collected") for cid in f["ids"]
            }
            pending = [cid for cid in by_id if cid not in answered and cid not in in_flight]
            if pending:
                rounds = 1 + max((f["round"] for f in self.state["files"]), default=-1)
                if rounds >= self.settings.max_rounds:
                    raise BatchFailed(self._failure_report(pending))
                self._write_round(rounds, [by_id[c] for c in pending], decoding)
            if self.settings.dry_run:
                raise DryRun(
                    f"dry run: request files written to {self.dir}; nothing submitted "
                    "(set batch.dry_run: false to submit)"
                )
            open_files = [f for f in self.state["files"] if not f.get("collected")]
            if not open_files:
                return
            client = client or self.endpoint.client(asynchronous=False)
            for entry in open_files:
                self._submit(client, entry)
            for entry in self._poll(client, open_files):
                results = self._collect(client, entry, by_id)
                answered.update(custom_id(r) for r, _ in results)
                if results:
                    yield results
                entry["collected"] = True
                self.save()

    # -- steps ------------------------------------------------------------------------------

    def _write_round(self, round_no: int, requests: list[Request], decoding: Decoding) -> None:
        bodies = [self.endpoint.body(r, decoding) for r in requests]
        lines = [
            json.dumps(
                {"custom_id": custom_id(r), "method": "POST", "url": ENDPOINT, "body": body},
                ensure_ascii=False,
                separators=(",", ":"),
            ).encode("utf-8")
            + b"\n"
            for r, body in zip(requests, bodies, strict=True)
        ]
        estimate = estimate_cost(
            sum(input_tokens(b) for b in bodies),
            len(requests) * decoding.max_new_tokens,
            len(requests),
            self.prices,
            batch=True,
        )
        log.info("%s", estimate.line())
        parts = split_lines(lines, self.settings.max_lines, self.settings.max_bytes)
        for index, part in enumerate(parts):
            name = f"round{round_no}-part{index}.jsonl"
            write_text(b"".join(part).decode("utf-8"), self.dir / name)
            ids = [json.loads(line)["custom_id"] for line in part]
            self.state["files"].append({"name": name, "round": round_no, "ids": ids})
        self.state.setdefault("estimates", []).append(estimate.__dict__)
        self.save()
        log.info("round %d: %d requests in %d files", round_no, len(requests), len(parts))

    def _submit(self, client: Any, entry: dict[str, Any]) -> None:
        if entry.get("batch_id"):
            self.stats["resumed_batches"] += 1
            return
        if not entry.get("input_file_id"):
            data = (self.dir / entry["name"]).read_bytes()
            uploaded = client.files.create(file=(entry["name"], io.BytesIO(data)), purpose="batch")
            entry["input_file_id"] = uploaded.id
            self.stats["uploads"] += 1
            self.save()
        else:
            # Uploaded before a crash: maybe the batch was created but not recorded.
            for batch in client.batches.list(limit=100):
                if batch.input_file_id == entry["input_file_id"]:
                    entry["batch_id"] = batch.id
                    self.save()
                    self.stats["resumed_batches"] += 1
                    return
        batch = client.batches.create(
            input_file_id=entry["input_file_id"],
            endpoint=ENDPOINT,
            completion_window=self.settings.completion_window,
            metadata={"cueaudit": entry["name"]},
        )
        entry["batch_id"] = batch.id
        self.stats["batches_created"] += 1
        self.save()
        log.info("submitted %s as batch %s", entry["name"], batch.id)

    def _poll(self, client: Any, entries: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        waiting = list(entries)
        while waiting:
            still = []
            for entry in waiting:
                batch = client.batches.retrieve(entry["batch_id"])
                entry["status"] = batch.status
                entry["output_file_id"] = batch.output_file_id
                entry["error_file_id"] = batch.error_file_id
                if batch.status in TERMINAL:
                    self.save()
                    log.info("batch %s %s", entry["batch_id"], batch.status)
                    yield entry
                else:
                    still.append(entry)
            waiting = still
            if waiting:
                self.save()
                time.sleep(self.settings.poll_seconds)

    def _collect(
        self, client: Any, entry: dict[str, Any], by_id: dict[str, Request]
    ) -> list[tuple[Request, Generation]]:
        results: list[tuple[Request, Generation]] = []
        failures: dict[str, str] = self.state.setdefault("failures", {})
        for kind in ("output_file_id", "error_file_id"):
            file_id = entry.get(kind)
            if not file_id:
                continue
            text = client.files.content(file_id).text
            write_text(text, self.dir / f"{entry['name']}.{kind.split('_')[0]}.jsonl")
            for line in text.splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                cid = record.get("custom_id")
                response = record.get("response") or {}
                if cid in by_id and response.get("status_code") == 200 and not record.get("error"):
                    request = by_id[cid]
                    source = f"batch {entry['name']} result {cid}"
                    body = response.get("body")
                    results.append(
                        (request, generation_from_body(body or {}, request.answer, source=source))
                    )
                    failures.pop(cid, None)
                elif cid is not None:
                    error = record.get("error") or (response.get("body") or {}).get("error")
                    failures[cid] = json.dumps(error)[:300]
        got = {custom_id(r) for r, _ in results}
        for cid in entry["ids"]:
            if cid not in got and cid not in failures:
                failures[cid] = f"no result (batch {entry.get('status')})"
        log.info(
            "batch %s: %d answers, %d to resubmit",
            entry.get("batch_id"),
            len(results),
            len(entry["ids"]) - len(results),
        )
        return results

    def _failure_report(self, pending: list[str]) -> str:
        failures = self.state.get("failures", {})
        sample = "; ".join(f"{c}: {failures.get(c, '?')}" for c in pending[:5])
        rounds = self.settings.max_rounds
        return f"{len(pending)} requests unanswered after {rounds} rounds: {sample}"
