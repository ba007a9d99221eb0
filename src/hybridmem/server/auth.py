"""API keys -> namespaces: who may read and write which tenant, and where the server may bind.

A key is sent as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``. Keys are kept only as
SHA-256 digests and compared in constant time. With no key configured the server is open, so it
may bind to loopback only (:func:`check_bind`).

Loopback is not a boundary by itself: a web page the user visits can reach 127.0.0.1 through DNS
rebinding (its own name resolved to 127.0.0.1: the browser sends ``Host: evil.example``) or post
a form to it (CSRF: the browser sends ``Origin`` and ``Sec-Fetch-Site``). :class:`HostPolicy`
decides which ``Host`` values are served (421 otherwise) and which state-changing requests come
from another site (403).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import HybridMemError
from .config import ALL_NAMESPACES, ConfigError

__all__ = [
    "LOOPBACK_NAMES",
    "STATE_CHANGING",
    "AuthError",
    "ForbiddenError",
    "HostPolicy",
    "KeyRing",
    "Principal",
    "api_key",
    "bare_host",
    "check_bind",
    "is_loopback",
]

#: the Host names a loopback server always answers to (with any port)
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: bind addresses that listen on every interface: the server cannot know the names it is reached by
WILDCARD_BINDS = ("", "0.0.0.0", "::")
#: the methods a cross-site request may not use (a cross-site GET cannot read the answer: CORS)
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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


def api_key(headers: Mapping[str, str]) -> str | None:
    """The key a request sends (``X-API-Key``, else ``Authorization: Bearer``); ``headers`` has
    lower-case names."""
    key = headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def bare_host(host: str) -> str:
    """An address as a socket takes it: ``[::1]`` -> ``::1``."""
    h = host.strip()
    return h[1:-1] if h.startswith("[") and h.endswith("]") else h


def _host_port(value: str) -> tuple[str, str | None] | None:
    """``Host`` header (or allow-list entry) -> (host, port): lower case, no trailing dot, IPv6 in
    brackets (``::1`` -> ``[::1]``); None when malformed."""
    v = value.strip().lower()
    if v.startswith("["):
        end = v.find("]")
        host, rest = v[: end + 1], v[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] or None
    elif v.count(":") > 1:  # a bare IPv6 address (an allow-list entry, not a Host header)
        host, port = f"[{v}]", None
    else:
        host, _, p = v.partition(":")
        port = p or None
    host = host.rstrip(".")
    if not host or (port is not None and not port.isdigit()):
        return None
    return host, port


@dataclass(frozen=True)
class HostPolicy:
    """Which ``Host`` a server answers to, and which ``Origin`` may change its state.

    Host: the loopback names, the bound address and ``extra`` (each with or without a port:
    without, any port); a wildcard bind (0.0.0.0, ::) with no ``extra``, or ``*`` in it: any Host.
    Origin of a state-changing request: this server itself (the request's Host: same origin) or a
    name of ``extra`` (named on purpose); not another port of localhost (another local site)."""

    hosts: tuple[tuple[str, str | None], ...]
    any_host: bool = False
    #: the names given in ``allowed_hosts``: an Origin there may change state
    origins: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def for_bind(cls, bind: str, extra: tuple[str, ...] | list[str] = ()) -> HostPolicy:
        def parse(names: list[str]) -> tuple[tuple[str, str | None], ...]:
            return tuple(dict.fromkeys(hp for hp in (_host_port(n) for n in names if n != "*") if hp is not None))

        names = [*LOOPBACK_NAMES, *extra]
        if bare_host(bind) not in WILDCARD_BINDS:
            names.append(bind)
        any_host = "*" in extra or (bare_host(bind) in WILDCARD_BINDS and not extra)
        return cls(parse(names), any_host=any_host, origins=parse(list(extra)))

    @staticmethod
    def _listed(listed: tuple[tuple[str, str | None], ...], host: str, port: str | None) -> bool:
        return any(h == host and (p is None or p == port) for h, p in listed)

    def allows_host(self, value: str | None) -> bool:
        if self.any_host:
            return True
        hp = _host_port(value) if value else None
        return hp is not None and self._listed(self.hosts, *hp)

    def allows_origin(self, origin: str, host: str | None) -> bool:
        """``Origin`` (``scheme://host[:port]``) is this server (the request's Host, a default
        port left out on either side) or a name of ``allowed_hosts``; ``null`` (a sandboxed
        page, a file) is neither."""
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        hp = _host_port(parts.netloc) if parts.netloc else None
        if hp is None:
            return False
        if self._listed(self.origins, *hp):
            return True
        own = _host_port(host) if host else None
        if own is None or own[0] != hp[0]:
            return False
        default = {"http": "80", "https": "443"}.get(parts.scheme.lower())
        return (own[1] or default) == (hp[1] or default)

    def describe(self) -> str:
        if self.any_host:
            return "any"
        return ", ".join(h + (f":{p}" if p else "") for h, p in self.hosts)

    def refusal(self, method: str, headers: Mapping[str, str], every_method: bool = False) -> tuple[int, str] | None:
        """Why this request is refused, as (status, message), or None. ``headers``: lower-case
        names. ``every_method``: check Origin on reads too (the MCP endpoint's streams)."""
        host = headers.get("host")
        if not self.allows_host(host):
            shown = repr(host[:100]) if host else "(none)"
            return 421, (
                f"this server does not answer to Host {shown} (DNS rebinding protection); it answers to "
                f"{self.describe()}; add a name with --allowed-host or allowed_hosts"
            )
        if not (every_method or method.upper() in STATE_CHANGING):
            return None
        origin = headers.get("origin")
        if origin is not None and not self.allows_origin(origin, host):
            return 403, f"cross-origin request refused: Origin {origin[:100]!r} is not this server"
        site = headers.get("sec-fetch-site", "").strip().lower()
        if site in ("cross-site", "same-site"):
            return 403, f"cross-origin request refused: the browser says it comes from another site ({site})"
        return None


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
