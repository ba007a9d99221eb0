"""``GET /v1/export`` over real HTTP: the export file streamed for admin keys only (a tenant's key
is refused: it would read every namespace), the same lines ``hybridmem export`` writes, readable
by ``hybridmem import``."""

from __future__ import annotations

import json
from pathlib import Path

from hybridmem import Memory
from hybridmem.server.config import ServerConfig
from hybridmem.transfer import export_store, import_into
from server_utils import LiveServer, assert_error

KEYS = {"admin-key-00001": ("*",), "tenant-key-0001": ("alpha",)}


def test_export_streams_the_file_for_admin_keys_only(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add("alpha note about HEL-4040", id="a1", namespace="alpha")
    mem.add("beta note", id="b1", namespace="beta")
    mem.embed_pending()
    with LiveServer(mem, ServerConfig(api_keys=KEYS)) as srv, srv.client("admin-key-00001") as admin:
        with srv.client("tenant-key-0001") as tenant:
            assert_error(tenant.get("/v1/export"), 403, "forbidden")
        r = admin.get("/v1/export", params={"vectors": "true"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
        lines = r.text.splitlines()
        assert [json.loads(x)["id"] for x in lines if json.loads(x)["kind"] == "document"] == ["a1", "b1"]
        local = tmp_path / "local.jsonl"
        export_store(mem.store, local, None, vectors=True, source="http")
        assert lines[1:] == local.read_text().splitlines()[1:]
        one = admin.get("/v1/export", params={"namespace": "beta"}).text.splitlines()
        assert [json.loads(x)["name"] for x in one if json.loads(x)["kind"] == "namespace"] == ["beta"]
        assert_error(admin.get("/v1/export", params={"namespace": "nope"}), 404, "not_found")
        assert_error(admin.get("/v1/export", params={"vectors": "maybe"}), 422, "validation_error")
    mem.close()
    got = tmp_path / "got.jsonl"
    got.write_text(r.text)
    rep = import_into(got, str(tmp_path / "copy.db"))
    assert rep.vectors_reused and rep.namespaces["alpha"]["written"] == rep.namespaces["beta"]["written"] == 1
