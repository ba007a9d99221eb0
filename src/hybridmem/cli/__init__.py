"""The ``hybridmem`` command line: a thin adapter over :class:`hybridmem.Memory`.

``root`` holds the app and its global options; ``common`` the per-invocation context, consoles and
error mapping; ``render`` the human-readable output; one module per command group."""

from .root import app, main

__all__ = ["app", "main"]
