"""Markdown-aware chunking and the file loaders (through Memory.ingest_path)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridmem import NotFoundError
from hybridmem.text.chunk import _SENTENCE, chunk_text
from hybridmem.text.loaders import html_to_text, load_path


def prose(word: str, n: int) -> str:
    return " ".join(f"The {word} sentence number {i} is here." for i in range(n))


CODE = "```python\n" + "\n".join(f"x_{i} = compute({i})  # step {i}" for i in range(12)) + "\n```"
DOC = "\n\n".join(
    [
        "# Guide",
        prose("alpha", 10),
        "## Code",
        CODE,
        prose("beta", 10),
        "## End",
        prose("gamma", 12),
    ]
)


# ---------------------------------------------------------------- chunking
@pytest.mark.parametrize("size", [360, 400, 600, 1200])
def test_code_block_kept_whole(size):
    assert len(CODE) < size
    chunks = chunk_text(DOC, size, 150)
    assert len(chunks) > 1
    assert sum(CODE in c for c in chunks) == 1, chunks
    # no chunk holds a piece of the code block without all of it
    for c in chunks:
        if "compute(" in c:
            assert CODE in c


def test_code_block_right_after_prose_kept_whole():
    text = "\n\n".join(["# Title", prose("alpha", 10), CODE, prose("beta", 10)])
    for size in (360, 400, 500):
        chunks = chunk_text(text, size, 150)
        assert sum(CODE in c for c in chunks) == 1
        assert max(map(len, chunks)) <= size


def test_oversized_code_block_is_split_not_lost():
    big = "```\n" + "\n".join(f"line {i} of a very long listing" for i in range(80)) + "\n```"
    chunks = chunk_text("Intro.\n\n" + big, 400, 100)
    assert len(chunks) > 2
    joined = " ".join(chunks)
    for i in range(80):
        assert f"line {i} of" in joined


def _last_line(chunk: str) -> str:
    return chunk.rstrip().split("\n")[-1]


def test_headings_never_end_a_chunk():
    for size in (200, 300, 400, 600):
        for c in chunk_text(DOC, size, 100):
            assert not _last_line(c).startswith("#"), c


def test_heading_context_carried():
    chunks = chunk_text(DOC, 400, 100)
    gamma = [c for c in chunks if "gamma" in c]
    assert len(gamma) >= 2
    # a chunk starting inside a section is prefixed with the heading path
    assert gamma[0].startswith("## End")
    assert all(c.startswith("## End") or c.startswith("Guide › End") for c in gamma)


@pytest.mark.parametrize("size, overlap", [(200, 50), (400, 100), (800, 150), (1200, 150)])
def test_chunk_size_bounded(size, overlap):
    text = "\n\n".join(prose(w, 7) for w in ("alpha", "bravo", "charlie", "delta", "echo", "fox", "golf", "hotel"))
    chunks = chunk_text(text, size, overlap)
    assert len(chunks) >= len(text) // size
    assert max(map(len, chunks)) <= size + 8
    # nothing lost: every sentence is in some chunk
    for s in _SENTENCE.split(text):
        assert any(s in c for c in chunks), s


def test_overlap_between_prose_chunks():
    text = "\n\n".join(prose(w, 10) for w in ("alpha", "bravo", "charlie", "delta", "echo", "fox"))
    chunks = chunk_text(text, 600, 100)
    assert len(chunks) >= 4
    for a, b in zip(chunks, chunks[1:]):
        sents = [s for s in _SENTENCE.split(a) if s.strip()]
        # the next chunk repeats the previous one's last whole sentences, up to the overlap
        assert b.startswith(sents[-2] + " " + sents[-1]), (a, b)
        assert sents[-3] not in b
    no_overlap = chunk_text(text, 600, 0)
    assert len(no_overlap) >= 4
    for a, b in zip(no_overlap, no_overlap[1:]):
        assert not set(_SENTENCE.split(a)) & set(_SENTENCE.split(b))


def test_size_none_keeps_one_chunk():
    assert chunk_text(DOC, None) == [DOC.strip()]
    assert chunk_text(DOC, 0) == [DOC.strip()]
    assert chunk_text("short text", 1200) == ["short text"]
    assert chunk_text("   \n ", 100) == []
    big = prose("x", 2000)
    assert chunk_text(big, None) == [big]


def test_crlf_and_tilde_fences():
    code = "~~~\nkeep\n\nthis blank line\n~~~"
    text = "Intro paragraph.\r\n\r\n" + code.replace("\n", "\r\n") + "\r\n\r\n" + prose("after", 12)
    chunks = chunk_text(text, 300, 50)
    assert sum(code in c for c in chunks) == 1


# generated markdown: sections of a short heading and prose / code blocks
_word = st.text(alphabet="abcdefghijklmnop", min_size=1, max_size=12)
_sentence = st.lists(_word, min_size=1, max_size=25).map(lambda ws: " ".join(ws).capitalize() + ".")
_para = st.lists(_sentence, min_size=1, max_size=12).map(" ".join)
_heading = st.tuples(
    st.integers(1, 3), st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=8), min_size=1, max_size=3)
).map(lambda t: "#" * t[0] + " " + " ".join(t[1]))
_code = st.lists(st.lists(_word, min_size=1, max_size=8).map(" ".join), min_size=1, max_size=15).map(
    lambda ls: "```\n" + "\n".join(ls) + "\n```"
)
_section = st.tuples(_heading, st.lists(st.one_of(_para, _para, _code), min_size=1, max_size=4))
_doc = st.lists(_section, min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(_doc, st.sampled_from([300, 500, 800, 1200]), st.sampled_from([0, 50, 150]))
def test_chunking_properties(sections, size, overlap):
    text = "\n\n".join("\n\n".join([h, *blocks]) for h, blocks in sections)
    chunks = chunk_text(text, size, overlap)
    assert chunks
    for c in chunks:
        assert c.strip() == c and c
        assert len(c) <= size + 16
        assert not _last_line(c).startswith("#")
    # a code block that fits next to its heading path is never cut (the path: at most every heading
    # of the document; a fixed 40 characters was too few for three levels of long headings)
    path = sum(len(h) + 2 for h, _ in sections)
    for _, blocks in sections:
        for b in blocks:
            if b.startswith("```") and len(b) + path + 2 <= size:
                assert any(b in c for c in chunks), b
    # every word of the text survives chunking
    words = set(re.findall(r"[a-p]+", text))
    assert words <= set(re.findall(r"[a-p]+", " ".join(chunks)))


# ---------------------------------------------------------------- loaders
@pytest.fixture
def kb(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    (kb / ".hidden").mkdir()
    (kb / "a.md").write_text("# Runbook\n\nRestart the walrus service.\n", encoding="utf-8")
    (kb / "b.txt").write_text("Plain text about otters.", encoding="utf-8")
    (kb / "c.rst").write_text("Title\n=====\n\nRST text about badgers.", encoding="utf-8")
    (kb / "d.html").write_text(
        "<html><head><title>Page T</title><style>.x{color:red}</style><script>var zzzscript=1</script></head>"
        "<body><h2>Ferret section</h2><p>HTML about ferrets &amp; stoats.</p></body></html>",
        encoding="utf-8",
    )
    (kb / "e.json").write_text(
        json.dumps(
            [
                {
                    "id": "rec-1",
                    "title": "Lynx",
                    "text": "JSON record about lynx.",
                    "service": "billing",
                    "metadata": {"env": "prod"},
                },
                {"text": "second record about hares", "severity": 2},
            ]
        ),
        encoding="utf-8",
    )
    (kb / "sub" / "f.jsonl").write_text(
        json.dumps({"_id": "j1", "text": "JSONL about minks", "source": "tickets/42"})
        + "\n\n"
        + json.dumps({"doc_id": "j2", "text": "JSONL about voles", "team": "sre"})
        + "\n",
        encoding="utf-8",
    )
    (kb / "bin.txt").write_bytes(b"\x00\x01\x02 binary about otters")
    (kb / "bad.md").write_bytes(b"caf\xe9 in latin-1, about otters")
    (kb / "img.png").write_bytes(b"\x89PNG\r\n")
    (kb / ".hidden" / "x.md").write_text("hidden file about otters", encoding="utf-8")
    return kb


def test_ingest_directory(mem, kb):
    rep = mem.ingest_path(kb)
    skipped = {Path(s["path"]).name: s["reason"] for s in rep.skipped}
    assert set(skipped) == {"bin.txt"}  # the path is its own field; the reason says why
    assert "binary" in skipped["bin.txt"] and rep.skipped[0]["path"] == "kb/bin.txt"
    # a Latin-1 file is read in the encoding detected, and the report says so; the file the walk
    # leaves out for its suffix is named, and so is the hidden directory it does not enter
    notes = {(n["path"], n["message"].split(":")[0]): n["message"] for n in rep.notes}
    assert "cp1252" in notes["kb/bad.md", "not UTF-8"]
    left = notes[
        "kb",
        "1 file left out, not of a text suffix (.htm .html .json .jsonl .markdown .md .rst .txt, each also as .gz)",
    ]
    assert left.count("kb/img.png") == 1
    assert notes["kb", "1 hidden directory not entered"].endswith("kb/.hidden/ (1 file); name one to ingest it")
    assert len(notes) == 3
    assert len(rep.added) == 9 and rep.updated == [] and rep.unchanged == []
    assert {"kb/a", "kb/b", "kb/bad", "kb/c", "kb/d", "rec-1", "j1", "j2"} <= set(rep.added)
    assert "café" in mem.get("kb/bad")["chunks"][0]["text"]

    def top(q: str):
        res = mem.search(q, mode="bm25").results
        assert res, q
        return res[0]

    assert top("walrus").doc_id == "kb/a" and top("walrus").source.endswith("kb/a.md")
    assert top("otters").doc_id == "kb/b"  # the binary, invalid and hidden files were not ingested
    assert len(mem.search("otters", mode="bm25").results) == 2  # kb/b and the Latin-1 kb/bad
    assert top("badgers").doc_id == "kb/c"
    # HTML: visible text only, headings kept as markdown
    d = mem.get("kb/d")
    assert "ferrets & stoats" in d["chunks"][0]["text"] and "## Ferret section" in d["chunks"][0]["text"]
    assert mem.search("zzzscript", mode="bm25").results == []
    # JSON records: text (+ title), id, metadata from `metadata` and from other fields
    rec = top("lynx")
    assert rec.doc_id == "rec-1" and rec.chunk_id == "rec-1_p1"
    assert rec.text == "Lynx\n\nJSON record about lynx."
    assert rec.metadata == {"env": "prod", "service": "billing"}
    hares = top("hares")
    assert hares.doc_id.startswith("mem-") and hares.metadata == {"severity": 2}
    assert top("minks").doc_id == "j1" and top("minks").source == "tickets/42"
    voles = top("voles")
    assert voles.doc_id == "j2" and voles.metadata == {"team": "sre"} and voles.source.endswith("f.jsonl")
    # metadata fields are filterable at once
    assert [r.doc_id for r in mem.search("about", mode="bm25", metadata_filter={"service": "billing"}).results] == [
        "rec-1"
    ]
    assert mem.stats().metadata_keys == ["env", "service", "severity", "team"]


def test_reingest_is_stable(mem, kb):
    first = mem.ingest_path(kb)
    chunk_ids = {d: [c["chunk_id"] for c in mem.get(d)["chunks"]] for d in first.added}
    again = mem.ingest_path(kb)
    assert sorted(again.unchanged) == sorted(first.added) and again.added == [] and again.chunks_written == 0
    for d, ids in chunk_ids.items():
        assert ids == [f"{d}_p{i}" for i in range(1, len(ids) + 1)]
        assert [c["chunk_id"] for c in mem.get(d)["chunks"]] == ids
    # editing one file updates that document only
    (kb / "a.md").write_text("# Runbook\n\nRestart the narwhal service.\n", encoding="utf-8")
    third = mem.ingest_path(kb)
    assert third.updated == ["kb/a"] and len(third.unchanged) == len(first.added) - 1
    assert mem.search("walrus", mode="bm25").results == []
    assert mem.search("narwhal", mode="bm25").results[0].chunk_id == "kb/a_p1"


def test_multi_chunk_ids(mem, tmp_path):
    f = tmp_path / "long.md"
    f.write_text("\n\n".join(prose(w, 10) for w in ("one", "two", "three", "four", "five", "six")), encoding="utf-8")
    rep = mem.ingest_path(f, doc_id="manual")
    assert rep.added == ["manual"] and rep.chunks_written >= 3
    ids = [c["chunk_id"] for c in mem.get("manual")["chunks"]]
    assert ids == [f"manual_p{i}" for i in range(1, rep.chunks_written + 1)]


def test_single_file_and_metadata(mem, kb):
    rep = mem.ingest_path(kb / "b.txt", metadata={"origin": "upload"})
    assert rep.added == ["b"] and rep.skipped == []
    assert mem.get("b")["metadata"] == {"origin": "upload"}


def test_missing_path(mem, tmp_path):
    with pytest.raises(NotFoundError, match="nope"):
        mem.ingest_path(tmp_path / "nope")
    with pytest.raises(NotFoundError):
        load_path(tmp_path / "nope.md")


def test_bad_json_skipped_with_reason(mem, tmp_path):
    (tmp_path / "ok.md").write_text("fine document about moles", encoding="utf-8")
    (tmp_path / "broken.json").write_text('[{"text": ', encoding="utf-8")
    (tmp_path / "notext.jsonl").write_text(json.dumps({"body": "no text field"}) + "\n", encoding="utf-8")
    rep = mem.ingest_path(tmp_path)
    reasons = {Path(s["path"]).name: s["reason"] for s in rep.skipped}
    assert set(reasons) == {"broken.json", "notext.jsonl"}
    assert "invalid JSON" in reasons["broken.json"] and "'text'" in reasons["notext.jsonl"]
    assert reasons["notext.jsonl"].startswith("record 1 has no string field 'text'")  # the path is not said twice
    assert "read as records" in reasons["notext.jsonl"]
    assert len(rep.added) == 1 and mem.search("moles", mode="bm25").results


def test_html_to_text():
    out = html_to_text(
        "<html><head><title>My Page</title></head><body><p>Hello <b>world</b></p>"
        "<script>alert(1)</script><ul><li>a</li><li>b</li></ul></body></html>"
    )
    assert out.startswith("# My Page")
    assert "Hello world" in out and "alert" not in out
    assert "- a" in out and "- b" in out


def test_files_a_directory_walk_leaves_out_are_named_and_can_be_ingested_by_name(mem, tmp_path):
    """As under /usr/share/doc: README.Debian (text, no text suffix) and a .gz beside a README.md.
    The walk stores the .md, names the two it left out, and a file named on its own is stored."""
    docs = tmp_path / "doc"
    docs.mkdir()
    (docs / "README.md").write_text("the walrus runbook", encoding="utf-8")
    (docs / "README.Debian").write_text("Debian notes about the walrus package", encoding="utf-8")
    (docs / "changelog.Debian.gz").write_bytes(b"\x1f\x8b\x08\x00 gzip")
    rep = mem.ingest_path(docs)
    assert rep.added == ["doc/README"] and rep.skipped == []
    (note,) = rep.notes
    assert note["path"] == "doc" and note["message"].startswith("2 files left out, not of a text suffix")
    assert "doc/README.Debian" in note["message"] and "doc/changelog.Debian.gz" in note["message"]
    assert "name a file to ingest it as text" in note["message"]
    one = mem.ingest_path(docs / "README.Debian")  # its id: its path (here its name: named alone), whole
    assert one.added == ["README.Debian"] and one.notes == []
    (docs / "README.Debian").write_text("Debian notes, revised: the walrus package moved", encoding="utf-8")
    again = mem.ingest_path(docs / "README.Debian")
    assert again.updated == ["README.Debian"] and again.added == []  # an edit updates it (not a new id)
    assert mem.search("Debian notes revised", mode="bm25").results[0].doc_id == "README.Debian"


# ---------------------------------------------------------------- what a directory walk takes (issue 43)
def _pages(tmp_path: Path) -> Path:
    """A man-page-like tree: a page named ``..md`` (the ``.`` command), gzipped pages, files without
    a text suffix, a binary, a hidden directory."""
    import gzip

    root = tmp_path / "pages"
    (root / "sub").mkdir(parents=True)
    (root / ".git" / "objects").mkdir(parents=True)
    (root / "..md").write_text("# .\n\nSource a file in the current shell.\n", encoding="utf-8")
    (root / "tar.md").write_text("# tar\n\nArchive utility.\n", encoding="utf-8")
    (root / "sub" / "zcat.md.gz").write_bytes(gzip.compress("# zcat\n\nRead a compressed page.\n".encode()))
    (root / "changelog.Debian.gz").write_bytes(gzip.compress(b"hybridmem (1.0) unstable; urgency=low\n"))
    (root / "README.Debian").write_text("Notes for Debian users.\n", encoding="utf-8")
    (root / "bad.md.gz").write_bytes(b"not gzip at all")
    (root / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (root / ".git" / "objects" / "ab").write_text("x", encoding="utf-8")
    return root


def test_a_walk_takes_dot_named_pages_and_gzip_and_names_what_it_leaves(tmp_path: Path) -> None:
    root = _pages(tmp_path)
    got = load_path(root, base=tmp_path)
    assert sorted(d.id for d in got.docs) == ["pages/..md", "pages/sub/zcat.md.gz", "pages/tar"]
    assert "Read a compressed page." in next(d.text for d in got.docs if d.id == "pages/sub/zcat.md.gz")
    assert [(s.path, s.reason.split(" (")[0]) for s in got.skipped] == [("pages/bad.md.gz", "not a readable gzip file")]
    left, hidden = (n["message"] for n in got.notes)
    assert left.startswith("3 files left out") and "pages/README.Debian" in left and "--include-all" in left
    assert "pages/changelog.Debian.gz" in left and "pages/blob.bin" in left
    assert hidden.startswith("1 hidden directory not entered: pages/.git/ (1 file)")


def test_include_all_takes_every_text_file_and_skips_binaries_with_the_reason(tmp_path: Path) -> None:
    got = load_path(_pages(tmp_path), base=tmp_path, include_all=True)
    ids = {d.id for d in got.docs}
    assert {"pages/README.Debian", "pages/changelog.Debian.gz", "pages/..md", "pages/tar"} <= ids
    assert {s.path: s.reason for s in got.skipped}["pages/blob.bin"] == "binary file (NUL bytes)"
    assert [n["message"] for n in got.notes if "left out" in n["message"]] == []


def test_a_gzip_file_is_refused_past_the_size_limit_once_decompressed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gzip

    from hybridmem import config

    monkeypatch.setattr(config, "MAX_DOCUMENT_BYTES", 10_000)
    bomb = tmp_path / "bomb.md.gz"
    bomb.write_bytes(gzip.compress(b"a " * 1_000_000))  # 2 MB of text in ~2 KB
    assert bomb.stat().st_size < 10_000
    got = load_path(bomb, base=tmp_path)
    assert got.docs == [] and "larger than the 10000-byte document limit once decompressed" in got.skipped[0].reason


def test_memory_ingest_path_passes_include_all(tmp_path: Path) -> None:
    from hybridmem import Memory

    root = _pages(tmp_path)
    with Memory(tmp_path / "m.db", embedder="hash") as m:
        plain = m.ingest_path(root, root=tmp_path)
        every = m.ingest_path(root, root=tmp_path, include_all=True)
    assert "pages/README.Debian" not in plain.added and "pages/README.Debian" in every.added
