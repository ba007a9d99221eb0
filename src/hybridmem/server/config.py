"""Server settings: every default in one place, read from a TOML/JSON file, then the environment.

    # hybridmem.toml                          # or the same keys in a .json file
    host = "127.0.0.1"
    port = 8080
    db = ".hybridmem/memory.db"
    max_top_k = 100
    [api_keys]                                # key -> namespaces it may use ("*" = every one)
    "sk-team-a" = ["team-a", "shared"]
    "sk-admin" = ["*"]

Environment (overrides the file): ``HYBRIDMEM_API_KEYS='key1:ns1,ns2;key2:*'``,
``HYBRIDMEM_ALLOWED_HOSTS='memory.internal,10.0.0.5:8080'`` (added to ``allowed_hosts``),
``HYBRIDMEM_SERVER_<NAME>`` for any other setting (``HYBRIDMEM_SERVER_MAX_TOP_K=50``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HybridMemError

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "ALL_NAMESPACES",
    "API_KEYS_ENV",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "ConfigError",
    "ServerConfig",
    "load_config",
    "parse_api_keys",
]

API_KEYS_ENV = "HYBRIDMEM_API_KEYS"
ALLOWED_HOSTS_ENV = "HYBRIDMEM_ALLOWED_HOSTS"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("text", "json")
_ENV_PREFIX = "HYBRIDMEM_SERVER_"
#: a key mapped to this may use every namespace
ALL_NAMESPACES = "*"


class ConfigError(HybridMemError):
    """The server configuration is invalid or unsafe (e.g. no API keys on a public address)."""

    exit_code = 2
    http_status = 500
    error_type = "config_error"


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    #: store file; None = the CLI's ``--db`` (``HYBRIDMEM_DB``)
    db: str | None = None
    #: embedder spec; None = the store's own
    embedder: str | None = None
    #: a PostgreSQL streaming replica the queries read (``--read-db``, ``HYBRIDMEM_READ_DB``); None: none
    read_db: str | None = None
    #: queries wait (bounded) for this server's last write on the replica (``--read-your-writes``)
    read_your_writes: bool = False
    #: namespace used when a request names none and its key allows every namespace
    default_namespace: str = "default"
    #: API key -> namespaces it may use (``("*",)`` = all). Empty: no auth, loopback only.
    api_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: largest JSON request body (bytes) -> 413
    max_body_bytes: int = 1_048_576
    #: largest upload to POST /v1/documents (bytes) -> 413
    max_upload_bytes: int = 20 * 1_048_576
    #: largest ``top_k`` (and ``fetch_k`` is capped at 10x it) -> 422 naming the field
    max_top_k: int = 100
    #: most memories in one POST /v1/memories -> 422 naming ``memories``
    max_batch: int = 256
    #: seconds a request may take -> 504 (a write that times out may still complete: writes are
    #: idempotent by id, so retrying is safe)
    request_timeout: float = 30.0
    #: threads running Memory calls (SQLite readers run in parallel; writes are serialized)
    worker_threads: int = 16
    #: how often a write that found the store locked by another process is retried before a 503
    write_retries: int = 3
    #: ``Host`` header values served besides the loopback names (127.0.0.1, localhost, [::1]) and
    #: the bound address, with or without a port (without: any port); ``*`` = any. Another Host
    #: -> 421 (DNS rebinding); a state-changing request whose Origin is not one of them -> 403.
    #: Empty on a wildcard bind (0.0.0.0, ::, which needs keys) = any Host.
    allowed_hosts: tuple[str, ...] = ()
    #: expensive requests (query, answer, upload, graph) of one tenant (API key, or "anonymous")
    #: running at once; a request over it waits in the tenant's queue
    max_concurrent_per_tenant: int = 8
    #: requests of one tenant waiting for a slot (until their deadline -> 504); past it -> 429
    max_queued_per_tenant: int = 16
    #: seconds a background graph build or update may run before it is stopped
    graph_job_timeout: float = 3600.0
    #: graph jobs waiting to start (one runs at a time); past it -> 429
    max_graph_jobs: int = 16
    #: ``POST /v1/remember`` and the MCP ``remember`` tool skip a statement a current memory of its
    #: scope already says (``dedupe``, docs/agent-memory.md) when the request does not say
    remember_dedupe: bool = False
    #: ``debug``, ``info`` (one line per request), ``warning``, ``error``, ``critical``
    log_level: str = "info"
    #: ``text`` (key=value) or ``json`` (one object per line), on stderr
    log_format: str = "text"

    @property
    def max_fetch_k(self) -> int:
        return 10 * self.max_top_k

    def validate(self) -> ServerConfig:
        positive = ("max_body_bytes", "max_upload_bytes", "max_top_k", "max_batch", "worker_threads")
        for name in ("port", *positive, "max_concurrent_per_tenant"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "port" else 1):
                raise ConfigError(f"server setting {name} must be a positive integer, got {v!r}")
        if self.port > 65535:
            raise ConfigError(f"server setting port must be 0-65535, got {self.port}")
        if not isinstance(self.request_timeout, (int, float)) or self.request_timeout <= 0:
            raise ConfigError(f"server setting request_timeout must be > 0 seconds, got {self.request_timeout!r}")
        if not isinstance(self.graph_job_timeout, (int, float)) or self.graph_job_timeout <= 0:
            raise ConfigError(f"server setting graph_job_timeout must be > 0 seconds, got {self.graph_job_timeout!r}")
        for name in ("write_retries", "max_queued_per_tenant", "max_graph_jobs"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"server setting {name} must be >= 0, got {v!r}")
        self._validate_logging()
        self._validate_hosts()
        for key, nss in self.api_keys.items():
            if not key or any(c.isspace() for c in key) or len(key) < 8:
                raise ConfigError("an API key must be at least 8 characters without spaces")
            if not nss:
                raise ConfigError(f'API key {_mask(key)} maps to no namespace (use "*" for all)')
        return self

    def _validate_logging(self) -> None:
        if not isinstance(self.log_level, str) or self.log_level.lower() not in LOG_LEVELS:
            raise ConfigError(
                f"server setting log_level must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}"
            )
        if not isinstance(self.log_format, str) or self.log_format.lower() not in LOG_FORMATS:
            raise ConfigError(f"server setting log_format must be text or json, got {self.log_format!r}")
        self.log_level, self.log_format = self.log_level.lower(), self.log_format.lower()

    def _validate_hosts(self) -> None:
        if isinstance(self.allowed_hosts, str):
            self.allowed_hosts = _host_list(self.allowed_hosts)
        if not isinstance(self.allowed_hosts, (list, tuple)) or not all(isinstance(h, str) for h in self.allowed_hosts):
            raise ConfigError("server setting allowed_hosts must be a list of host names (host or host:port)")
        hosts = tuple(h.strip() for h in self.allowed_hosts if h.strip())
        for h in hosts:
            if h != "*" and (any(c.isspace() or c in "/@?#" for c in h) or len(h) > 255):
                raise ConfigError(f"allowed_hosts: {h!r} is not a host name or host:port")
        self.allowed_hosts = hosts


def _host_list(spec: str) -> tuple[str, ...]:
    """``"a.example, b:8080"`` -> ``("a.example", "b:8080")``."""
    return tuple(h.strip() for h in spec.replace(";", ",").split(",") if h.strip())


def _mask(key: str) -> str:
    return key[:4] + "…" if len(key) > 4 else "…"


def parse_api_keys(spec: str) -> dict[str, tuple[str, ...]]:
    """``key1:ns1,ns2;key2:*`` -> ``{"key1": ("ns1", "ns2"), "key2": ("*",)}``."""
    keys: dict[str, tuple[str, ...]] = {}
    for part in spec.replace("\n", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        key, sep, nss = part.partition(":")
        names = tuple(n.strip() for n in nss.split(",") if n.strip())
        if not sep or not key.strip() or not names:
            raise ConfigError(
                f"{API_KEYS_ENV}: expected 'key:namespace[,namespace…]' entries separated by ';', "
                f"got an entry starting with {_mask(key.strip())!r}"
            )
        keys[key.strip()] = names
    return keys


def _keys_from_mapping(raw: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: api_keys must be a table/object mapping each key to its namespaces")
    out: dict[str, tuple[str, ...]] = {}
    for key, nss in raw.items():
        if isinstance(nss, str):
            nss = [nss]
        if not isinstance(nss, list) or not all(isinstance(n, str) and n for n in nss):
            raise ConfigError(f"{where}: api key {_mask(str(key))} must map to a list of namespace names")
        out[str(key)] = tuple(nss)
    return out


_FIELDS = {f.name: f for f in dataclasses.fields(ServerConfig)}


def _coerce(name: str, value: Any, where: str) -> Any:
    default = getattr(ServerConfig(), name)
    if name in ("db", "embedder", "read_db"):
        return None if value in (None, "") else str(value)
    if name == "allowed_hosts":
        if isinstance(value, str):
            return _host_list(value)
        if isinstance(value, list) and all(isinstance(h, str) for h in value):
            return tuple(value)
        raise ConfigError(f"{where}: allowed_hosts must be a list of host names, got {value!r}")
    try:
        if isinstance(default, bool):
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
        if isinstance(default, int):
            if isinstance(value, bool):
                raise TypeError  # True is an int to Python, not a number to a config file
            return int(value)
        if isinstance(default, float):
            return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {name} must be a number, got {value!r}") from None
    return str(value)


def load_config(path: str | Path | None = None, env: dict[str, str] | None = None, **overrides: Any) -> ServerConfig:
    """Defaults, then the file (``.toml`` or ``.json``), then the environment, then ``overrides``
    (the CLI's flags; None values are ignored; ``allowed_hosts`` adds to what came before)."""
    env = dict(os.environ if env is None else env)
    cfg = ServerConfig()
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"--config: no such file: {p}")
        try:
            text = p.read_text(encoding="utf-8")
            data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'TOML'}: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: expected a table/object of settings")
        data = dict(data.get("server", {}), **{k: v for k, v in data.items() if k != "server"})
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise ConfigError(
                f"{p}: unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                f"known: {', '.join(sorted(_FIELDS))}"
            )
        for name, value in data.items():
            if name == "api_keys":
                cfg.api_keys = _keys_from_mapping(value, str(p))
            else:
                setattr(cfg, name, _coerce(name, value, str(p)))
    if env.get(API_KEYS_ENV, "").strip():
        cfg.api_keys = {**cfg.api_keys, **parse_api_keys(env[API_KEYS_ENV])}
    if env.get(ALLOWED_HOSTS_ENV, "").strip():
        cfg.allowed_hosts = (*cfg.allowed_hosts, *_host_list(env[ALLOWED_HOSTS_ENV]))
    for name in _FIELDS:
        raw = env.get(_ENV_PREFIX + name.upper())
        if raw not in (None, "") and name != "api_keys":
            setattr(cfg, name, _coerce(name, raw, _ENV_PREFIX + name.upper()))
    for name, value in overrides.items():
        if name not in _FIELDS:
            raise ConfigError(f"unknown server setting {name!r}")
        if value is None:
            continue
        if name == "allowed_hosts":  # the flags add to the file's and the environment's
            value = (*cfg.allowed_hosts, *((value,) if isinstance(value, str) else value))
        setattr(cfg, name, value)
    return cfg.validate()
