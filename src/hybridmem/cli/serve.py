"""``hybridmem serve`` (HTTP) and ``hybridmem mcp`` (an agent over MCP)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from .. import config
from ..errors import HybridMemError
from ..memory import Memory, display_target
from .common import CliContext, cli_context, err, fail, stored_embedder

__all__ = ["register"]


def _run(cli: CliContext, cfg: Any, emb: Any, run_server: Callable[[Any, Memory], None]) -> None:
    """Warm the embedder and every namespace's indexes, then serve until stopped."""
    emb.warm_up()
    with Memory(cli.db, embedder=emb, namespace=cli.namespace, auto_embed=True) as mem:
        # load every namespace's BM25 postings and vectors before taking traffic (and start any
        # HNSW build): the first requests must not each pay, or queue behind, a cold load
        t0 = time.perf_counter()
        names = mem.store.namespaces()
        for ns in names:
            mem.wait_for_indexes(namespace=ns, timeout=0)
        if names:
            err.print(
                f"indexes of {len(names)} namespace(s) loaded in {time.perf_counter() - t0:.1f} s",
                highlight=False,
                markup=False,
            )
        err.print(
            f"hybridmem serving {display_target(cli.db)} on http://{cfg.host}:{cfg.port} ({len(cfg.api_keys)} API "
            "key(s); OpenAPI at /docs)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        run_server(cfg, mem)


def serve(
    ctx: typer.Context,
    host: Optional[str] = typer.Option(
        None, "--host", help="Address to bind (default 127.0.0.1; others need API keys)."
    ),
    port: Optional[int] = typer.Option(None, "--port", help="Port (default 8080)."),
    db: Optional[str] = typer.Option(
        None, "--db", help="SQLite file or postgresql:// URL (overrides the global --db)."
    ),
    config_file: Optional[Path] = typer.Option(
        None, "--config", envvar="HYBRIDMEM_SERVER_CONFIG", help="TOML or JSON server settings (API keys, limits)."
    ),
) -> None:
    """Serve the memory over HTTP: /v1/query, /v1/answer, /v1/memories, /v1/documents, /metrics, /docs."""
    cli = cli_context(ctx)
    try:
        from ..server.auth import check_bind
        from ..server.config import load_config
        from ..server.http import run_server

        ns = cli.namespace if cli.namespace != config.DEFAULT_NAMESPACE else None  # the global --namespace
        cfg = load_config(config_file, host=host, port=port, default_namespace=ns)
        check_bind(cfg.host, cfg.api_keys)  # before opening anything: fail fast and clearly
        if db is not None:
            cli.db = db
        elif cfg.db and cli.db == str(config.DEFAULT_DB):
            cli.db = cfg.db
        from ..server.embedding import CoalescingEmbedder

        spec = cli.embedder or cfg.embedder or stored_embedder(cli.db)  # the store's own, as every command
        # concurrent requests' query embeddings are computed in one batch (a bundled model's cost is per call)
        from ..memory import limit_process_blas

        # many request threads run numpy at once: one BLAS thread per call (OPENBLAS_NUM_THREADS overrides).
        # Before the embedder is made: the e5 model writes OMP_NUM_THREADS into the environment.
        blas_threads = limit_process_blas(1)
        if blas_threads is not None:
            err.print(
                f"numpy BLAS: {blas_threads} thread per call (set OPENBLAS_NUM_THREADS to choose)",
                highlight=False,
                markup=False,
            )
        emb = CoalescingEmbedder(spec or config.DEFAULT_EMBEDDER)
        try:
            _run(cli, cfg, emb, run_server)
        finally:
            emb.close()
    except ModuleNotFoundError as e:
        err.print(f"[bold red]error:[/] the server needs its extra: pip install 'hybridmem[server]' (missing {e.name})")
        raise typer.Exit(1) from None
    except HybridMemError as e:
        raise fail(e) from None


def mcp_cmd(
    ctx: typer.Context,
    transport: str = typer.Option("stdio", "--transport", help="stdio (default) or http (streamable HTTP)."),
    host: str = typer.Option("127.0.0.1", "--host", help="http transport: address (loopback only)."),
    port: int = typer.Option(8765, "--port", help="http transport: port."),
) -> None:
    """Serve the memory to an agent over MCP: tools remember, recall, forget, ask; resource hybridmem://stats."""
    try:
        from ..server.mcp import check_transport, run_mcp

        check_transport(transport, host)  # before opening anything
        with cli_context(ctx).open_memory(create=True, auto_embed=True) as mem:
            run_mcp(mem, transport=transport, host=host, port=port)
    except ModuleNotFoundError as e:
        err.print(
            f"[bold red]error:[/] the MCP server needs its extra: pip install 'hybridmem[server]' (missing {e.name})"
        )
        raise typer.Exit(1) from None
    except HybridMemError as e:
        raise fail(e) from None


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("mcp")(mcp_cmd)
