"""Reads on a streaming replica: ``PostgresStore(url, read_url=…)``.

A read (``Memory``'s search, ask, get, list, history, stats) runs inside :meth:`ReplicaRouter.route`,
which decides where it goes and says so in a :class:`ReadRoute` (``read_from`` and notes for the
response). Every statement the read issues, in this thread and in the legs' threads it starts
(:meth:`ReplicaRouter.bind`), takes its connection from the replica's pool; anything else (every
write, the embedding worker, graph builds, migrations) from the primary's.

The replica is left for the primary, with a note, when

* it is down: a connection or a statement failed (then it is tried again after ``retry_s``);
* it lags: it has received WAL it has not replayed, and its last replayed commit is older than
  ``max_lag_s`` (a replica that has replayed all it received is not lagging, however old its last
  commit: the primary wrote nothing since);
* ``read_your_writes`` asks for this process's last commit on the primary (its WAL position,
  ``pg_current_wal_lsn()`` after the commit) and the replica has not replayed it within ``wait_s``.

The replica's state is read at most every ``check_s`` (one small statement), the replayed
position more often only while a read waits for its writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ...errors import StoreError

__all__ = ["ReadRoute", "ReplicaRouter", "lsn_int"]

T = TypeVar("T")
_local = threading.local()

#: in recovery, replayed position, lag (s), streaming. Lag: 0 when all WAL received is replayed
#: (an idle primary is no lag), else the age of the last replayed commit; when no WAL receiver runs
#: (the link to the primary is down) how far behind is unknown: the age of the last replayed commit
_STATUS = """
SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,
       CASE WHEN s.streaming AND (pg_last_wal_receive_lsn() IS NULL
                                  OR pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn()) THEN 0
            ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END::float8,
       s.streaming
FROM (SELECT EXISTS (SELECT 1 FROM pg_stat_wal_receiver) AS streaming) s
"""


def _reason(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def lsn_int(lsn: str | None) -> int:
    """A ``pg_lsn`` (``16/B374D848``) as an integer (0 for None)."""
    if not lsn:
        return 0
    hi, lo = lsn.split("/")
    return (int(hi, 16) << 32) + int(lo, 16)


@dataclass
class ReadRoute:
    """Where one read went: ``replica`` or ``primary``, and why when it is not the replica."""

    read_from: str = "primary"
    notes: list[str] = field(default_factory=list)


def current() -> ReadRoute | None:
    """The route of the read this thread runs (None: not inside a routed read)."""
    return getattr(_local, "route", None)


class ReplicaRouter:
    """The replica's pool and state; thread-safe."""

    def __init__(
        self,
        url: str,
        path: str,
        kwargs: dict[str, Any],
        *,
        pool_size: int,
        connect_timeout: float,
        max_lag_s: float,
        wait_s: float,
        retry_s: float,
        check_s: float,
    ) -> None:
        self.url, self.path, self._kwargs = url, path, dict(kwargs)
        self._kwargs["connect_timeout"] = max(1, min(int(connect_timeout), 3))
        self.pool_size = max(1, pool_size)
        self.max_lag_s, self.wait_s, self.retry_s, self.check_s = max_lag_s, wait_s, retry_s, check_s
        self._lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._down_until = 0.0
        self._down_reason = ""
        self._checked_at = -1e9
        self._lag = 0.0
        self._streaming = True
        self._replayed = 0
        #: (replayed position, when) of the last read_your_writes wait that ran out
        self._gave_up = (-1, -1e9)
        #: the primary's WAL position after this process's last write commit (read_your_writes)
        self.last_write_lsn = 0

    # ------------------------------------------------------------------ opening
    def connect(self) -> psycopg.Connection:
        """A direct connection to the replica (the checks at open)."""
        try:
            return psycopg.connect(self.url, **self._kwargs)
        except psycopg.OperationalError as e:
            raise StoreError(
                f"cannot connect to the read replica (read_url) at {self.path}: {str(e).strip()}"
            ) from None

    def open_pool(self) -> None:
        pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=self.pool_size,
            kwargs=self._kwargs,
            timeout=2.0,  # a replica that cannot give a connection soon is left for the primary
            open=False,
            name="hybridmem-replica",
        )
        try:
            pool.open(wait=True, timeout=float(self._kwargs["connect_timeout"]))
        except Exception:
            pool.close(timeout=0)
            raise
        self._pool = pool

    # ------------------------------------------------------------------ the writes' positions
    def record_write(self, conn: psycopg.Connection) -> None:
        """After a write committed on ``conn`` (the primary): its WAL position, for read_your_writes."""
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        lsn = lsn_int(row[0] if row else None)
        with self._lock:
            self.last_write_lsn = max(self.last_write_lsn, lsn)

    # ------------------------------------------------------------------ routing
    def pool(self) -> ConnectionPool | None:
        """The replica's pool when this thread's read is routed there, else None (the primary)."""
        route = current()
        if route is None or route.read_from != "replica":
            return None
        pool = self._pool
        if pool is None:  # failed under another thread's read meanwhile: this one goes on on the primary
            route.read_from = "primary"
            route.notes.append(self._down_note())
        return pool

    @contextmanager
    def route(self, read_your_writes: bool = False, *, primary: bool = False) -> Iterator[ReadRoute]:
        """Run one read: on the replica unless it is down, lags, or has not replayed this process's
        writes in time (``read_your_writes``); ``primary``: on the primary (a retry)."""
        previous = current()
        if previous is not None and not primary:  # a read inside a read (ask's search): its route
            yield previous
            return
        route = ReadRoute() if primary else self._choose(read_your_writes)
        _local.route = route
        try:
            yield route
        finally:
            _local.route = previous

    def bind(self, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` to run in another thread (a leg) on the calling thread's route."""
        route = current()
        if route is None:
            return fn

        def run(*args: Any, **kwargs: Any) -> T:
            previous = current()
            _local.route = route
            try:
                return fn(*args, **kwargs)
            finally:
                _local.route = previous

        return run

    def failed(self, reason: str) -> None:
        """A statement or connection on the replica failed: reads go to the primary until ``retry_s``
        has passed; this thread's read (and its legs) go on there."""
        self._mark_down(reason)
        route = current()
        if route is not None and route.read_from == "replica":
            route.read_from = "primary"
            route.notes.append(self._down_note())

    def _mark_down(self, reason: str) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            self._down_until = time.monotonic() + self.retry_s
            self._down_reason = reason
        if pool is not None:  # closed aside: a read of another thread may still hold one of its connections
            threading.Thread(target=pool.close, kwargs={"timeout": 1.0}, daemon=True).start()

    def _down_note(self) -> str:
        return (
            f"the read replica at {self.path} is unavailable ({self._down_reason}): read from the primary; "
            f"the replica is tried again within {self.retry_s:g} s"
        )

    def _usable_pool(self) -> ConnectionPool | None:
        """The replica's pool; None while it is down. Once ``retry_s`` has passed since it failed,
        a thread of its own opens it again (the reads meanwhile go to the primary, none waits)."""
        with self._lock:
            if self._pool is not None:
                return self._pool
            if time.monotonic() < self._down_until:
                return None
            self._down_until = time.monotonic() + self.retry_s + 3.0  # one reopening at a time
        threading.Thread(target=self._reopen, name="hybridmem-replica-reopen", daemon=True).start()
        return None

    def _reopen(self) -> None:
        try:
            self.open_pool()
        except (PoolTimeout, psycopg.Error, OSError) as e:
            self._mark_down(_reason(e))
            return
        self._checked_at = -1e9  # its state is read again before its first read

    def _choose(self, read_your_writes: bool) -> ReadRoute:
        pool = self._usable_pool()
        if pool is None:
            return ReadRoute("primary", [self._down_note()])
        try:
            if time.monotonic() - self._checked_at >= self.check_s:
                self._check(pool)
            if self._lag > self.max_lag_s:
                why = "lags" if self._streaming else "is not streaming from the primary: its last commit is"
                note = (
                    f"the read replica {why} {self._lag:.1f} s behind the primary (bound {self.max_lag_s:g} s): "
                    "read from the primary"
                )
                return ReadRoute("primary", [note])
            if read_your_writes and not self._wait_replayed(pool, self.last_write_lsn):
                note = (
                    "read_your_writes: the read replica had not replayed this process's last write within "
                    f"{self.wait_s:g} s: read from the primary"
                )
                return ReadRoute("primary", [note])
        except (PoolTimeout, psycopg.Error) as e:
            self._mark_down(_reason(e))
            return ReadRoute("primary", [self._down_note()])
        return ReadRoute("replica")

    def _check(self, pool: ConnectionPool) -> None:
        with pool.connection() as conn:
            row = conn.execute(_STATUS).fetchone()
        assert row is not None
        in_recovery, replayed, lag, self._streaming = row
        self._checked_at = time.monotonic()
        self._replayed = lsn_int(replayed)
        # promoted (no longer in recovery): it replays nothing, and lags by nothing
        self._lag = float(lag) if in_recovery else 0.0

    def _wait_replayed(self, pool: ConnectionPool, lsn: int) -> bool:
        """Whether the replica replays ``lsn`` within ``wait_s`` (polling its position). After a wait
        that ran out, the reads of the next ``max(check_s, wait_s)`` do not wait again while the
        replica has replayed nothing since (a paused or stuck replica costs one wait, not each read)."""
        if lsn <= self._replayed:
            return True
        stuck_at, when = self._gave_up
        if self._replayed <= stuck_at and time.monotonic() - when < max(self.check_s, self.wait_s):
            return False
        end = time.monotonic() + self.wait_s
        with pool.connection() as conn:
            while True:
                row = conn.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text").fetchone()
                assert row is not None
                if not row[0]:
                    return True  # promoted: it holds everything it will ever get
                self._replayed = max(self._replayed, lsn_int(row[1]))
                if self._replayed >= lsn:
                    return True
                if time.monotonic() >= end:
                    self._gave_up = (self._replayed, time.monotonic())
                    return False
                time.sleep(0.002)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


_META_KEYS = ["schema_version", "tokenizer_version", "embedder", "dim"]


def _identity(conn: psycopg.Connection) -> tuple[str, dict[str, str]]:
    """(the cluster's system identifier, the store's meta rows that must be the same on both)."""
    row = conn.execute("SELECT system_identifier::text FROM pg_control_system()").fetchone()
    rows = conn.execute("SELECT key, value FROM meta WHERE key = ANY(%s)", (_META_KEYS,)).fetchall()
    meta: dict[str, str] = {str(k): str(v) for k, v in rows}
    return (row[0] if row else ""), meta


def check_replica(store: Any, router: ReplicaRouter, *, timeout: float) -> None:
    """At open: ``read_url`` is a streaming standby of this primary that has replayed what the
    primary held at open (waited for up to ``timeout``), with the same schema version, tokenizer
    and embedder. A clear StoreError otherwise."""
    with store._conn(write=True, record=False) as conn:
        target = lsn_int(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
        system, meta = _identity(conn)
    where = f"the read replica (read_url) at {router.path}"
    with router.connect() as conn:
        end = time.monotonic() + timeout
        while True:
            row = conn.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text").fetchone()
            assert row is not None
            if not row[0]:
                raise StoreError(f"{where} is not a standby (pg_is_in_recovery() is false): give a streaming replica")
            if lsn_int(row[1]) >= target:
                break
            if time.monotonic() >= end:
                raise StoreError(f"{where} has not replayed the primary's state at open within {timeout:g} s")
            time.sleep(0.01)
        try:
            r_system, r_meta = _identity(conn)
        except psycopg.errors.UndefinedTable:
            raise StoreError(
                f"{where} holds no hybridmem schema {store.schema!r}: is it this store's replica?"
            ) from None
    if r_system != system:
        raise StoreError(f"{where} is not a replica of the primary at {store.path} (another cluster)")
    for key in _META_KEYS:
        if meta.get(key) != r_meta.get(key):
            raise StoreError(
                f"{where} has {key} {r_meta.get(key)!r} where the primary has {meta.get(key)!r}: "
                "is it this store's database?"
            )
