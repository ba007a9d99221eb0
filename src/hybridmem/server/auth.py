"""API keys -> namespaces: who may read and write which tenant, and where the server may bind.

A key is sent as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``. Keys are kept only as
SHA-256 digests and compared in constant time. With no key configured the server is open, so it
may bind to loopback only (:func:`check_bind`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass
from typing import Any

from ..errors import HybridMemError
from .config import ALL_NAMESPACES, ConfigError

__all__ = ["AuthError", "ForbiddenError", "KeyRing", "Principal", "check_bind", "is_loopback"]


class AuthError(HybridMemError):
    """No API key, or an unknown one (HTTP 401)."""

    exit_code = 2
    http_status = 401
    error_type = "unauthorized"
    http_headers = (("WWW-Authenticate", "Bearer"),)


class ForbiddenError(HybridMemError):
    """The key is valid but may not use the namespace asked for (HTTP 403)."""

    exit_code = 2
    http_status = 403
    error_type = "forbidden"

    def __init__(self, message: str, field: str | None = "namespace") -> None:
        self.field = field
        super().__init__(message)


@dataclass(frozen=True)
class Principal:
    """Who is calling: a key id (a digest prefix, safe to log) and the namespaces it may use."""

    key_id: str
    namespaces: tuple[str, ...]
    default_namespace: str

    @property
    def all_namespaces(self) -> bool:
        return ALL_NAMESPACES in self.namespaces

    def allows(self, namespace: str) -> bool:
        return self.all_namespaces or namespace in self.namespaces

    def namespace(self, asked: str | None) -> str:
        """The namespace a request works in: the one it names (if allowed), else the key's first."""
        ns = self.default_namespace if asked is None else asked
        if not self.allows(ns):
            raise ForbiddenError(f"this API key may not use namespace {ns!r}")
        return ns

    def visible(self, names: list[str]) -> list[str]:
        """Of the store's namespaces, those this key may see (others' names are not disclosed)."""
        return list(names) if self.all_namespaces else [n for n in names if n in self.namespaces]


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class KeyRing:
    """The configured keys. Empty = open server (every namespace, loopback only)."""

    def __init__(self, keys: dict[str, tuple[str, ...]], default_namespace: str = "default") -> None:
        self._keys = [(_digest(k), tuple(v)) for k, v in keys.items()]
        self.default_namespace = default_namespace

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def authenticate(self, key: str | None) -> Principal:
        if not self._keys:
            return Principal("anonymous", (ALL_NAMESPACES,), self.default_namespace)
        if not key:
            raise AuthError("missing API key: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'")
        d = _digest(key)
        match = None
        for digest, nss in self._keys:  # no early exit: the time taken does not depend on which key matched
            if hmac.compare_digest(digest, d):
                match = nss
        if match is None:
            raise AuthError("invalid API key")
        default = self.default_namespace if ALL_NAMESPACES in match else match[0]
        return Principal(d.hex()[:12], match, default)


def is_loopback(host: str) -> bool:
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: KeyRing | dict[str, Any]) -> None:
    """Refuse to serve an open (key-less) memory on anything but loopback."""
    enabled = keys.enabled if isinstance(keys, KeyRing) else bool(keys)
    if not enabled and not is_loopback(host):
        raise ConfigError(
            f"refusing to bind to {host!r} without API keys: an open memory may only listen on loopback "
            "(127.0.0.1, ::1, localhost). Configure keys with HYBRIDMEM_API_KEYS='key:namespace[,…];…' or "
            "an [api_keys] table in --config FILE, or bind to 127.0.0.1."
        )
