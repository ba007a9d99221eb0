"""The exception tree of hybridmem: one root, a shallow tree.

Each class carries what every adapter needs to report it: ``exit_code`` (the CLI), ``http_status``,
``error_type`` (the ``type`` of the JSON error body) and ``http_headers`` (the HTTP server). A
subclass that sets none of them answers like its parent: the lookup walks the class's MRO.

    HybridMemError
    ├── ValidationError        bad request: empty query, top_k out of range, negative weight...
    │   └── FilterError        unknown filter key or operator, malformed filter
    ├── NotFoundError          unknown document, missing path
    ├── StoreError             the store file is not a hybridmem store, is corrupt, or is locked
    │   └── EmbedderMismatchError  the store was built with another embedder (model or dimension)
    ├── EmbedderError          the embedder failed or returned vectors of the wrong shape
    ├── IngestError            a file could not be read as text
    └── LLMError               the language model is not usable (no key), failed after its retries,
                               or returned output that stayed invalid after one repair attempt
"""

from __future__ import annotations

__all__ = [
    "EmbedderError",
    "EmbedderMismatchError",
    "FilterError",
    "HybridMemError",
    "IngestError",
    "LLMError",
    "NotFoundError",
    "StoreError",
    "ValidationError",
]


class HybridMemError(Exception):
    """Root of every error hybridmem raises on purpose."""

    #: exit code used by the CLI
    exit_code = 1
    #: HTTP status, JSON error ``type`` and extra response headers used by the server
    http_status = 500
    error_type = "hybrid_mem_error"
    http_headers: tuple[tuple[str, str], ...] = ()


class ValidationError(HybridMemError, ValueError):
    """The request is malformed; ``field`` names the offending field when known."""

    exit_code = 2
    http_status = 422
    error_type = "validation_error"

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class FilterError(ValidationError):
    """A metadata filter uses an unknown key or operator, or is malformed."""

    error_type = "filter_error"

    def __init__(self, message: str) -> None:
        super().__init__(message, field="metadata_filter")


class NotFoundError(HybridMemError, LookupError):
    exit_code = 3
    http_status = 404
    error_type = "not_found"


class StoreError(HybridMemError):
    exit_code = 4
    http_status = 500
    error_type = "store_error"


class StoreUnavailableError(StoreError):
    """The database went away (a PostgreSQL restart, a dropped connection): retry shortly. A write
    in flight may or may not have been committed; writes are idempotent by id, so retrying is safe."""

    http_status = 503
    error_type = "unavailable"
    http_headers = (("Retry-After", "1"),)


class StoreFullError(StoreError):
    """The disk holding the store (or the store's own size limit) is full: nothing of the write was
    kept (its transaction rolled back) and what was acknowledged before stays. Writes succeed
    again by themselves once there is space; retry later."""

    http_status = 507
    error_type = "insufficient_storage"
    http_headers = (("Retry-After", "30"),)


class EmbedderMismatchError(StoreError):
    """The store holds vectors of one embedder and another one was given."""

    exit_code = 5
    http_status = 409
    error_type = "embedder_mismatch"

    def __init__(self, stored: str, stored_dim: int | None, given: str, given_dim: int | None) -> None:
        self.stored, self.stored_dim, self.given, self.given_dim = stored, stored_dim, given, given_dim

        def dim(d: int | None) -> str:  # a dimension not known yet (the model is not loaded) is not said
            return f" (dim {d})" if d else ""

        super().__init__(
            f"this store was built with embedder {stored!r}{dim(stored_dim)} but {given!r}{dim(given_dim)} "
            "was given; use the same embedder, or run `hybridmem reembed --embedder SPEC` to switch models"
        )


class EmbedderError(HybridMemError):
    exit_code = 6
    http_status = 502
    error_type = "embedder_error"


class IngestError(HybridMemError):
    exit_code = 7
    http_status = 422
    error_type = "ingest_error"


class LLMError(HybridMemError):
    """A chat model call failed. ``usage`` holds what the failed call(s) cost, when known, so that
    a caller falling back to an offline path can still report it."""

    exit_code = 8
    http_status = 502
    error_type = "llm_error"

    def __init__(self, message: str, usage: object | None = None) -> None:
        super().__init__(message)
        self.usage = usage
