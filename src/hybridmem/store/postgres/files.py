"""What the PostgreSQL store has in place of a file's checks: ``integrity_check`` (its counters,
document frequencies, postings and queue against the rows), and ``check``/``backup`` refused with
what to use instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import StoreError
from .core import _Core
from .schema import _one

__all__ = ["_Files"]


class _Files(_Core):
    """Consistency checks; no file to check or back up."""

    def check(self) -> dict[str, Any]:
        """Not for a database server (``capabilities.file_checks`` is False): use ``integrity_check``."""
        raise StoreError("a PostgreSQL store has no file to check: `hybridmem check` runs integrity_check on it")

    def backup(self, dest: str | Path) -> dict[str, Any]:
        """Not for a database server (``capabilities.file_checks`` is False): use pg_dump or ``export``."""
        raise StoreError("a PostgreSQL store is backed up with pg_dump (or copied with `hybridmem migrate`)")

    def integrity_check(self) -> str:
        """``ok``, or what is inconsistent: chunk statistics, document frequencies, postings, and
        chunks with neither a vector nor a queue entry."""
        problems: list[str] = []
        with self.snapshot() as db:
            for ns, name in db.execute("SELECT id, name FROM namespaces ORDER BY id").fetchall():
                n, total = _one(
                    db.execute("SELECT n_chunks, total_len FROM namespace_stats WHERE ns_id=?", (ns,)).fetchone()
                )
                cn, ct = _one(
                    db.execute(
                        "SELECT count(*), coalesce(sum(n_tokens), 0) FROM chunks WHERE ns_id=?", (ns,)
                    ).fetchone()
                )
                if (n, total) != (cn, ct):
                    problems.append(f"{name}: BM25 statistics say {n} chunks / {total} tokens, chunks hold {cn} / {ct}")
                bad_df = _one(
                    db.execute(
                        "SELECT count(*) FROM (SELECT term, count(*) AS n FROM postings WHERE ns_id=? GROUP BY term) p "
                        "FULL JOIN (SELECT term, df FROM term_df WHERE ns_id=?) d ON d.term = p.term "
                        "WHERE p.n IS DISTINCT FROM d.df",
                        (ns, ns),
                    ).fetchone()
                )[0]
                if bad_df:
                    problems.append(f"{name}: {bad_df} terms with a wrong document frequency")
                orphan = _one(
                    db.execute(
                        "SELECT count(*) FROM postings p WHERE p.ns_id=? AND NOT EXISTS "
                        "(SELECT 1 FROM chunks c WHERE c.id = p.chunk_rowid AND c.ns_id = p.ns_id)",
                        (ns,),
                    ).fetchone()
                )[0]
                if orphan:
                    problems.append(f"{name}: {orphan} postings of missing chunks")
                lost = _one(
                    db.execute(
                        "SELECT count(*) FROM chunks c WHERE c.ns_id=? AND NOT EXISTS "
                        "(SELECT 1 FROM vectors v WHERE v.chunk_rowid = c.id) AND NOT EXISTS "
                        "(SELECT 1 FROM embed_queue q WHERE q.chunk_rowid = c.id)",
                        (ns,),
                    ).fetchone()
                )[0]
                if lost:
                    problems.append(f"{name}: {lost} chunks with neither a vector nor a queue entry")
        return "ok" if not problems else "; ".join(problems)
