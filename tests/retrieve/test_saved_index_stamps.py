"""A saved index file this machine already hashed (or hashed while writing it) is not read whole
again by the next process while the file system shows it unchanged (issue 18: at 10M chunks the
saved graph, its vectors and the postings are ~25 GB, which every fresh process read before its
first answer). Any change the file system records (a write, a rename over it, a truncation, even
an mtime put back) makes the next open hash it in full, and a mismatch refuses it as before."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.retrieve import files, sparse_file
from hybridmem.retrieve.files import checksum_of, stamp_verified, verified


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files ``verified`` hashes (each call of checksum_of through it)."""
    seen: list[Path] = []
    real = files.checksum_of

    def counting(path: Path, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(Path(path))
        return real(path, *a, **k)

    monkeypatch.setattr(files, "checksum_of", counting)
    return seen


def _file(tmp_path: Path, data: bytes = b"x" * 10_000) -> tuple[Path, int]:
    p = tmp_path / "index.bin"
    p.write_bytes(data)
    return p, checksum_of(p)


def test_a_stamped_file_is_not_hashed_again(tmp_path: Path, hashed: list[Path]) -> None:
    p, value = _file(tmp_path)
    stamp_verified(p, "xxh3", value)
    assert verified(p, "xxh3", value) and verified(p, "xxh3", value)
    assert hashed == []
    assert not verified(p, "xxh3", value + 1)  # another checksum than the stamped one: hashed, refused
    assert hashed == [p]


def test_an_unstamped_file_is_hashed_once_then_trusted(tmp_path: Path, hashed: list[Path]) -> None:
    p, value = _file(tmp_path)
    assert verified(p, "xxh3", value) and verified(p, "xxh3", value)
    assert hashed == [p]


def test_a_change_after_the_stamp_is_seen(tmp_path: Path, hashed: list[Path]) -> None:
    p, value = _file(tmp_path)
    stamp_verified(p, "xxh3", value)
    st = os.stat(p)
    with open(p, "r+b") as f:  # one byte flipped in place, the size kept
        f.seek(5000)
        f.write(b"y")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old mtime put back: the change time moved
    assert not verified(p, "xxh3", value)
    assert hashed == [p]


def test_a_file_renamed_over_it_is_hashed(tmp_path: Path, hashed: list[Path]) -> None:
    p, value = _file(tmp_path)
    stamp_verified(p, "xxh3", value)
    other = tmp_path / "other.bin"
    other.write_bytes(b"z" * 10_000)  # same size, other bytes, another inode
    os.replace(other, p)
    assert not verified(p, "xxh3", value)
    p.write_bytes(b"x" * 10_000)  # the right bytes again: hashed, then trusted
    assert verified(p, "xxh3", value) and verified(p, "xxh3", value)
    assert hashed == [p, p]


def test_a_range_is_stamped_apart(tmp_path: Path, hashed: list[Path]) -> None:
    p, _ = _file(tmp_path, bytes(range(256)) * 40)
    part = checksum_of(p, "xxh3", 100, 500)
    stamp_verified(p, "xxh3", part, 100, 500)
    assert verified(p, "xxh3", part, 100, 500) and hashed == []
    assert not verified(p, "xxh3", part, 100, 400)  # another range: hashed, and it differs


def test_a_directory_that_refuses_the_stamp_costs_a_hash_each_time(tmp_path: Path, hashed: list[Path]) -> None:
    p, value = _file(tmp_path)
    stamp = p.with_name(p.name + ".verified")
    stamp.mkdir()  # the stamp cannot be written there
    assert verified(p, "xxh3", value) and verified(p, "xxh3", value)
    assert hashed == [p, p]


def test_a_new_process_maps_the_saved_indexes_without_reading_them_whole(
    tmp_path: Path, hashed: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 100)  # the postings saved from 100 chunks (20,000)
    db, rng = tmp_path / "m.db", random.Random(1)
    words = ["".join(rng.choices("abcdefghij", k=6)) for _ in range(500)]
    with Memory(db, embedder="hash", exact_threshold=300) as m:
        m.add_documents([{"id": f"d{i}", "text": " ".join(rng.choices(words, k=10))} for i in range(400)])
        m.embed_pending()
        assert m.legs.dense_index("default").wait_ready(timeout=120)
        m.search("abc", mode="bm25")
    saved = [p for p in tmp_path.rglob("*") if p.suffix in (".usearch", ".vectors", ".postings")]
    assert {p.suffix for p in saved} == {".usearch", ".vectors", ".postings"}
    hashed.clear()  # what the saves hashed as they wrote
    with Memory(db, embedder="hash", exact_threshold=300) as m:
        idx = m.legs.dense_index("default")
        assert idx.wait_ready(timeout=120) and idx.mapped
        assert m.search(words[0], mode="hybrid").results
    assert hashed == []  # every file was stamped when written: none read whole at open
    vectors = next(p for p in saved if p.suffix == ".vectors")
    with open(vectors, "r+b") as f:  # a byte of a vector flipped
        f.seek(vectors.stat().st_size - 7)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))
    with Memory(db, embedder="hash", exact_threshold=300) as m:
        idx = m.legs.dense_index("default")
        assert idx.wait_ready(timeout=120) and not idx.mapped  # refused, rebuilt
    assert vectors in hashed


def test_a_file_is_stamped_only_once_its_last_change_is_a_tick_old(tmp_path: Path) -> None:
    """A change in the same clock tick as the last one would leave the file's times as they are: the
    stamp waits until that tick has passed, so any later change shows."""
    p, value = _file(tmp_path)
    stamp_verified(p, "xxh3", value)
    assert time.time_ns() - os.stat(p).st_ctime_ns >= files.RACY_NS
