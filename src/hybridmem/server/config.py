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
``HYBRIDMEM_SERVER_<NAME>`` for any scalar setting (``HYBRIDMEM_SERVER_MAX_TOP_K=50``).
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

__all__ = ["ALL_NAMESPACES", "API_KEYS_ENV", "ConfigError", "ServerConfig", "load_config", "parse_api_keys"]

API_KEYS_ENV = "HYBRIDMEM_API_KEYS"
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

    @property
    def max_fetch_k(self) -> int:
        return 10 * self.max_top_k

    def validate(self) -> ServerConfig:
        for name in ("port", "max_body_bytes", "max_upload_bytes", "max_top_k", "max_batch", "worker_threads"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "port" else 1):
                raise ConfigError(f"server setting {name} must be a positive integer, got {v!r}")
        if self.port > 65535:
            raise ConfigError(f"server setting port must be 0-65535, got {self.port}")
        if not isinstance(self.request_timeout, (int, float)) or self.request_timeout <= 0:
            raise ConfigError(f"server setting request_timeout must be > 0 seconds, got {self.request_timeout!r}")
        if not isinstance(self.write_retries, int) or self.write_retries < 0:
            raise ConfigError(f"server setting write_retries must be >= 0, got {self.write_retries!r}")
        for key, nss in self.api_keys.items():
            if not key or any(c.isspace() for c in key) or len(key) < 8:
                raise ConfigError("an API key must be at least 8 characters without spaces")
            if not nss:
                raise ConfigError(f'API key {_mask(key)} maps to no namespace (use "*" for all)')
        return self


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
    if name in ("db", "embedder"):
        return None if value in (None, "") else str(value)
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
    (the CLI's flags; None values are ignored)."""
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
    for name in _FIELDS:
        raw = env.get(_ENV_PREFIX + name.upper())
        if raw not in (None, "") and name != "api_keys":
            setattr(cfg, name, _coerce(name, raw, _ENV_PREFIX + name.upper()))
    for name, value in overrides.items():
        if name not in _FIELDS:
            raise ConfigError(f"unknown server setting {name!r}")
        if value is not None:
            setattr(cfg, name, value)
    return cfg.validate()
