"""Prometheus text metrics (exposition format 0.0.4) without a client library: requests, errors
and latency per endpoint, latency and status per retrieval leg."""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .limits import ERROR_KEY

__all__ = ["CONTENT_TYPE", "Metrics", "MetricsMiddleware"]

_CONVERTER = re.compile(r":\w+}")  # /v1/memories/{doc_id:path} -> /v1/memories/{doc_id}
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: seconds; a leg answers in ~1-100 ms, a request up to the timeout
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(d: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_esc(str(v))}"' for k, v in d.items()) + "}" if d else ""


class _Histogram:
    __slots__ = ("counts", "n", "total")

    def __init__(self) -> None:
        self.counts = [0] * len(BUCKETS)
        self.total = 0.0
        self.n = 0

    def observe(self, v: float) -> None:
        for i, b in enumerate(BUCKETS):
            if v <= b:
                self.counts[i] += 1
                break
        self.total += v
        self.n += 1

    def lines(self, name: str, labels: dict[str, str]) -> list[str]:
        out, cum = [], 0
        for b, c in zip(BUCKETS, self.counts):
            cum += c
            out.append(f"{name}_bucket{_labels({**labels, 'le': repr(b)})} {cum}")
        out.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {self.n}")
        out.append(f"{name}_sum{_labels(labels)} {self.total:.6f}")
        out.append(f"{name}_count{_labels(labels)} {self.n}")
        return out


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, str], int] = defaultdict(int)  # (method, endpoint, status)
        self.errors: dict[tuple[str, str], int] = defaultdict(int)  # (endpoint, error type)
        self.latency: dict[str, _Histogram] = defaultdict(_Histogram)  # endpoint
        self.legs: dict[str, _Histogram] = defaultdict(_Histogram)  # leg
        self.leg_status: dict[tuple[str, str], int] = defaultdict(int)  # (leg, status)
        self.reads: dict[str, int] = defaultdict(int)  # queries by where they read (a read replica's)
        self.in_flight = 0
        self.started = time.time()
        self.llm_calls: dict[tuple[str, str, str], int] = defaultdict(int)  # (model, purpose, ok|error)
        self.llm_tokens: dict[tuple[str, str, str], int] = defaultdict(int)  # (model, purpose, prompt|completion)

    def observe_llm(self, usage: Any) -> None:
        """Count the calls and tokens of a :class:`~hybridmem.models.Usage` (each call listed)."""
        with self._lock:
            for call in usage.per_call:
                purpose = call.purpose or "call"
                self.llm_calls[(call.model, purpose, "ok" if call.ok else "error")] += 1
                self.llm_tokens[(call.model, purpose, "prompt")] += call.prompt_tokens or 0
                self.llm_tokens[(call.model, purpose, "completion")] += call.completion_tokens or 0

    def request(self, method: str, endpoint: str, status: int, seconds: float, error: str | None) -> None:
        with self._lock:
            self.requests[(method, endpoint, str(status))] += 1
            self.latency[endpoint].observe(seconds)
            if status >= 400:
                self.errors[(endpoint, error or f"http_{status}")] += 1

    def observe_legs(self, legs: Mapping[str, Any]) -> None:
        """``legs``: a QueryResponse's ``legs`` (LegReport objects or their dicts)."""
        with self._lock:
            for name, leg in legs.items():
                status = leg["status"] if isinstance(leg, dict) else leg.status
                took = leg.get("took_ms", 0.0) if isinstance(leg, dict) else leg.took_ms
                self.leg_status[(name, status)] += 1
                if status == "ok":
                    self.legs[name].observe(took / 1000.0)

    def observe_read(self, read_from: str | None) -> None:
        """Where a query read (``QueryResponse.read_from``; None without a read replica: not counted)."""
        if read_from is not None:
            with self._lock:
                self.reads[read_from] += 1

    def render(self) -> str:
        with self._lock:
            out = [
                "# HELP hybridmem_http_requests_total HTTP requests by method, endpoint (route template) and status.",
                "# TYPE hybridmem_http_requests_total counter",
            ]
            for (m, e, s), n in sorted(self.requests.items()):
                out.append(f"hybridmem_http_requests_total{_labels({'method': m, 'endpoint': e, 'status': s})} {n}")
            out += [
                "# HELP hybridmem_http_errors_total HTTP error responses (status >= 400) by endpoint and error type.",
                "# TYPE hybridmem_http_errors_total counter",
            ]
            for (e, t), n in sorted(self.errors.items()):
                out.append(f"hybridmem_http_errors_total{_labels({'endpoint': e, 'type': t})} {n}")
            out += [
                "# HELP hybridmem_http_request_duration_seconds Request latency by endpoint.",
                "# TYPE hybridmem_http_request_duration_seconds histogram",
            ]
            for e, h in sorted(self.latency.items()):
                out += h.lines("hybridmem_http_request_duration_seconds", {"endpoint": e})
            out += [
                "# HELP hybridmem_leg_duration_seconds Retrieval leg latency (legs that answered).",
                "# TYPE hybridmem_leg_duration_seconds histogram",
            ]
            for leg, h in sorted(self.legs.items()):
                out += h.lines("hybridmem_leg_duration_seconds", {"leg": leg})
            out += [
                "# HELP hybridmem_leg_total Retrieval legs run, by leg and status (ok, error, timeout, skipped).",
                "# TYPE hybridmem_leg_total counter",
            ]
            for (leg, s), n in sorted(self.leg_status.items()):
                out.append(f"hybridmem_leg_total{_labels({'leg': leg, 'status': s})} {n}")
            out += self._llm_lines()
            if self.reads:
                out += [
                    "# HELP hybridmem_query_reads_total Queries by where they read, with a read replica.",
                    "# TYPE hybridmem_query_reads_total counter",
                ]
                out += [
                    f"hybridmem_query_reads_total{_labels({'read_from': w})} {n}" for w, n in sorted(self.reads.items())
                ]
            out += [
                "# HELP hybridmem_http_requests_in_flight Requests being served.",
                "# TYPE hybridmem_http_requests_in_flight gauge",
                f"hybridmem_http_requests_in_flight {self.in_flight}",
                "# HELP hybridmem_process_start_time_seconds Start time of the server (Unix epoch).",
                "# TYPE hybridmem_process_start_time_seconds gauge",
                f"hybridmem_process_start_time_seconds {self.started:.3f}",
            ]
        return "\n".join(out) + "\n"

    def _llm_lines(self) -> list[str]:
        out = [
            "# HELP hybridmem_llm_calls_total LLM calls (e.g. fact extraction) by model, purpose and outcome.",
            "# TYPE hybridmem_llm_calls_total counter",
        ]
        for (m, p, s), n in sorted(self.llm_calls.items()):
            out.append(f"hybridmem_llm_calls_total{_labels({'model': m, 'purpose': p, 'status': s})} {n}")
        out += [
            "# HELP hybridmem_llm_tokens_total LLM tokens by model, purpose and type (prompt, completion).",
            "# TYPE hybridmem_llm_tokens_total counter",
        ]
        for (m, p, t), n in sorted(self.llm_tokens.items()):
            out.append(f"hybridmem_llm_tokens_total{_labels({'model': m, 'purpose': p, 'type': t})} {n}")
        return out


class MetricsMiddleware:
    """Outermost middleware: times every HTTP request and labels it with its route template
    (``/v1/memories/{doc_id}``, not the raw path: bounded label cardinality)."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Callable[[], Sequence[Any]] | None = None) -> None:
        self.app, self.metrics, self.routes = app, metrics, routes

    def _template(self, scope: Scope) -> str:
        route = scope.get("route")
        if route is None and self.routes is not None:  # answered before routing (e.g. 413): match it now
            from starlette.routing import Match

            route = next((r for r in self.routes() if r.matches(scope)[0] != Match.NONE), None)
        return _CONVERTER.sub("}", getattr(route, "path", None) or "unmatched")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500
        self.metrics.in_flight += 1

        async def send_wrapper(msg: Message) -> None:
            nonlocal status
            if msg["type"] == "http.response.start":
                status = msg["status"]
            await send(msg)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.in_flight -= 1
            self.metrics.request(
                scope.get("method", "?"), self._template(scope), status, time.perf_counter() - t0, scope.get(ERROR_KEY)
            )
