"""The upload route (``/v1/documents``): files -> documents, loaded as ``Memory.ingest_path`` loads them."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, File, Form, UploadFile

from ..errors import ValidationError
from ..ingest import load_documents
from ..models import Document, IngestReport
from .routing import Caller, Deps, WriteReport, error_responses, written

#: the upload endpoint (its body limit is ``max_upload_bytes``, not ``max_body_bytes``)
UPLOAD_PATH = "/v1/documents"


def register(app: FastAPI, d: Deps) -> None:
    @app.post(
        UPLOAD_PATH,
        response_model=WriteReport,
        tags=["memories"],
        responses=error_responses(401, 403, 413, 422, 429, 504, 507),
    )
    async def upload_documents(
        files: Annotated[list[UploadFile], File(description="Text files: .md .txt .rst .html .json .jsonl")],
        p: Caller,
        namespace: Annotated[str | None, Form(min_length=1, max_length=128)] = None,
        metadata: Annotated[str | None, Form(description="A JSON object added to every document's metadata.")] = None,
        id: Annotated[
            str | None, Form(min_length=1, max_length=512, description="Document id (one file only).")
        ] = None,
    ) -> WriteReport:
        """Upload files; each becomes a document (JSON/JSONL: one per record), chunked and indexed.
        The id defaults to the file name without its suffix; binary files are skipped and listed."""
        ns = p.namespace(namespace)
        d.check_batch(len(files), "files")
        if id is not None and len(files) != 1:
            raise ValidationError("an id needs exactly one file", field="id")
        meta = _form_metadata(metadata)
        uploads = [(f.filename or f"upload-{i}.txt", await f.read()) for i, f in enumerate(files)]
        return await d.expensive(p).write(_ingest_uploads, d.memory(), uploads, ns, meta, id)


def _form_metadata(metadata: str | None) -> dict[str, Any]:
    """The upload form's ``metadata`` field: a JSON object ({} when absent)."""
    if not metadata:
        return {}
    try:
        meta = json.loads(metadata)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValidationError(f"not valid JSON: {e}", field="metadata") from None
    if not isinstance(meta, dict):
        raise ValidationError("must be a JSON object", field="metadata")
    return meta


def _safe_name(name: str, i: int) -> str:
    base = Path(name.replace("\\", "/")).name.strip()
    base = re.sub(r"[^\w.\-]+", "_", base)[:200].lstrip(".")
    return base or f"upload-{i}.txt"


def _load_upload(
    tmp: Path, i: int, name: str, data: bytes, meta: dict[str, Any], doc_id: str | None
) -> tuple[list[Document], list[dict[str, str]]]:
    """One uploaded file -> documents, as ``Memory.ingest_path`` loads a file
    (:func:`hybridmem.ingest.load_documents`), from a copy of the bytes in a directory of its own;
    the temporary path is then replaced by the uploaded name in sources and skip reasons (a client
    never sees the server's paths)."""
    path = tmp / str(i) / _safe_name(name, i)
    path.parent.mkdir()
    path.write_bytes(data)
    batch = load_documents(path, metadata=meta, doc_id=doc_id, base=path.parent)
    for doc in batch.docs:
        if doc.source == path.name:
            doc.source = name
    return batch.docs, [{"path": name, "reason": s["reason"].replace(path.as_posix(), name)} for s in batch.skipped]


def _ingest_uploads(
    mem: Any, uploads: list[tuple[str, bytes]], ns: str, meta: dict[str, Any], doc_id: str | None
) -> WriteReport:
    """Uploaded files -> documents (:func:`_load_upload`) -> ``Memory.add_documents``, in one call.

    As ``Memory.ingest_path`` but for two answers kept from the first version of this endpoint: an
    upload with nothing loadable is a 422 naming every reason, and an invalid document (say, a JSON
    record whose id has control characters) fails the request with a 422 instead of being skipped."""
    docs: list[Document] = []
    skipped: list[dict[str, str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="hybridmem-upload-"))
    try:
        for i, (name, data) in enumerate(uploads):
            found, skip = _load_upload(tmp, i, name, data, meta, doc_id)
            docs += found
            skipped += skip
        if not docs:
            reasons = "; ".join(s["reason"] for s in skipped) or "no text"
            raise ValidationError(f"nothing to ingest: {reasons}", field="files")
        report: IngestReport = mem.add_documents(docs, namespace=ns)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report.skipped += skipped
    return written(report, ns)
