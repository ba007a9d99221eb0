"""``hybridmem serve`` (HTTP) and ``hybridmem mcp`` (an agent over MCP).

While ``serve`` runs on a store file, it announces itself in a discovery file next to the store,
``<store>.serve.json`` (pid, address, whether it needs an API key; never a key), removed when it
stops. ``hybridmem search`` reads it (:func:`running_server`) to have the running server embed the
query instead of loading the model itself. A file whose pid is gone is stale and ignored."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, List, Optional

import typer

from .. import __version__, config
from ..errors import HybridMemError
from .common import CliContext, cli_context, err, fail, stored_embedder

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["ServerInfo", "discovery_path", "register", "running_server"]

DISCOVERY_SUFFIX = ".serve.json"
log = logging.getLogger(__name__)

_LOG_LEVEL_HELP = "debug, info (default: one line per request), warning, error, critical."
_LOG_FORMAT_HELP = "text (default: key=value lines) or json (one object per line), on stderr."
_ALLOWED_HOST_HELP = (
    "A Host name (or host:port) to answer to besides 127.0.0.1, localhost, [::1] and --host; repeatable "
    "(also HYBRIDMEM_ALLOWED_HOSTS='a,b'). Other Hosts get 421 (DNS rebinding protection)."
)


def _url_host(host: str) -> str:
    """A host as a URL spells it: ``::1`` -> ``[::1]``."""
    from ..server.auth import bare_host

    bare = bare_host(host)
    return f"[{bare}]" if ":" in bare else bare


def _note(cfg: Any, message: str) -> None:
    """A line for the operator on stderr: a log record in the json format (every line of stderr is
    then JSON), else plain text."""
    if getattr(cfg, "log_format", "text") == "json":
        log.info(message)
    else:
        err.print(message, highlight=False, markup=False, soft_wrap=True)


def discovery_path(db: str) -> Path | None:
    """Where a server of the store ``db`` announces itself; None for a database URL (no file)."""
    if "://" in db:
        return None
    store = Path(db).expanduser().resolve()
    return store.with_name(store.name + DISCOVERY_SUFFIX)


@dataclass(frozen=True)
class ServerInfo:
    """A running ``hybridmem serve``, as its discovery file describes it."""

    pid: int
    host: str
    port: int
    api_key_required: bool
    max_top_k: int
    #: the embedder's recorded name and the spec it was made from
    embedder: str | None = None
    spec: str | None = None

    @property
    def address(self) -> str:
        """host:port to connect to (a wildcard bind is reached on loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


def _alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would end the process there: let the HTTP request tell
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    except OSError:
        return False
    return True


def running_server(db: str) -> ServerInfo | None:
    """The server announced for the store ``db``, if its process still runs (else None)."""
    path = discovery_path(db)
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        info = ServerInfo(
            pid=int(data["pid"]),
            host=str(data["host"]),
            port=int(data["port"]),
            api_key_required=bool(data["api_key_required"]),
            max_top_k=int(data.get("max_top_k", 100)),
            embedder=data.get("embedder"),
            spec=data.get("spec"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, unreadable, or half-written
    return info if _alive(info.pid) else None


def _announce(db: str, cfg: Any, embedder: str | None, spec: str | None) -> Path | None:
    """Write the discovery file (atomically); returns its path (None for a database URL)."""
    path = discovery_path(db)
    if path is None or not cfg.port:  # port 0: the OS picks one we do not know here
        return None
    from ..server.auth import bare_host

    data = {
        "pid": os.getpid(),
        "host": bare_host(cfg.host),  # "[::1]" -> "::1": ServerInfo.address adds the brackets
        "port": cfg.port,
        "api_key_required": bool(cfg.api_keys),
        "max_top_k": cfg.max_top_k,
        "embedder": embedder,
        "spec": spec,
        "version": __version__,
        "started_at": time.time(),
    }
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a read-only directory: serve anyway, searches just won't find us
        err.print(f"note: cannot write {path} ({e.strerror}); searches will not use this server", markup=False)
        return None
    return path


def _withdraw(path: Path | None) -> None:
    """Remove the discovery file if it is still ours (another server may have replaced it)."""
    if path is None:
        return
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    # uvicorn shuts down gracefully on SIGTERM, then re-raises it: exit through the `finally`s
    # (which remove the discovery file) instead of dying on the default handler
    raise SystemExit(0)


def _run(
    cli: CliContext,
    cfg: Any,
    emb: Any,
    spec: str,
    run_server: Callable[[Any, Memory], None],
    replica: tuple[str | None, bool] = (None, False),
) -> None:
    """Warm the embedder and every namespace's indexes, then serve until stopped. ``replica``: the
    read replica's URL (None: none) and whether reads wait for this server's writes there."""
    from ..memory import Memory
    from ..runtime import display_target

    emb.warm_up()
    read_url, ryw = replica
    with Memory(
        cli.db, embedder=emb, namespace=cli.namespace, auto_embed=True, read_url=read_url, read_your_writes=ryw
    ) as mem:
        # load every namespace's BM25 postings and vectors before taking traffic (and start any
        # HNSW build): the first requests must not each pay, or queue behind, a cold load
        t0 = time.perf_counter()
        names = mem.store.namespaces()
        for ns in names:
            mem.wait_for_indexes(namespace=ns, timeout=0)
        if names:
            _note(
                cfg,
                f"indexes of {len(names)} namespace{'' if len(names) == 1 else 's'} loaded in "
                f"{time.perf_counter() - t0:.1f} s",
            )
        keys = len(cfg.api_keys)
        _note(
            cfg,
            f"hybridmem serving {display_target(cli.db)} on http://{_url_host(cfg.host)}:{cfg.port} "
            f"({keys or 'no'} API key{'' if keys == 1 else 's'}; OpenAPI at /docs)",
        )
        if read_url is not None:
            _note(
                cfg, f"queries read the replica {display_target(read_url)} (read_your_writes {'on' if ryw else 'off'})"
            )
        announced = _announce(cli.db, cfg, getattr(emb, "name", None), spec)
        if announced is not None:
            _note(cfg, f"announced in {announced}: `hybridmem search` of this store has this server embed its queries")
        try:
            previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        except ValueError:  # not the main thread (an embedding application): leave signals alone
            previous = None
        try:
            run_server(cfg, mem)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            _withdraw(announced)


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
    allowed_host: Optional[List[str]] = typer.Option(None, "--allowed-host", help=_ALLOWED_HOST_HELP),
    log_level: Optional[str] = typer.Option(None, "--log-level", help=_LOG_LEVEL_HELP),
    log_format: Optional[str] = typer.Option(None, "--log-format", help=_LOG_FORMAT_HELP),
    read_db: Optional[str] = typer.Option(
        None, "--read-db", envvar="HYBRIDMEM_READ_DB", help="postgresql:// URL of a streaming replica the queries read."
    ),
    read_your_writes: bool = typer.Option(
        False,
        "--read-your-writes",
        envvar="HYBRIDMEM_READ_YOUR_WRITES",
        help="Queries wait (1 s at most) until the replica has replayed this server's last write, else read the primary.",
    ),
) -> None:
    """Serve the memory over HTTP: /v1/query, /v1/answer, /v1/memories, /v1/messages, /v1/documents, /metrics, /docs."""
    cli = cli_context(ctx)
    try:
        from ..server.auth import check_bind
        from ..server.common import configure_logging
        from ..server.config import load_config
        from ..server.http import run_server

        ns = cli.namespace if cli.namespace != config.DEFAULT_NAMESPACE else None  # the global --namespace
        cfg = load_config(
            config_file,
            host=host,
            port=port,
            default_namespace=ns,
            allowed_hosts=allowed_host or None,
            log_level=log_level,
            log_format=log_format,
        )
        check_bind(cfg.host, cfg.api_keys)  # before opening anything: fail fast and clearly
        configure_logging(cfg.log_level, cfg.log_format)
        if db is not None:
            cli.db = db
        elif cfg.db and cli.db == str(config.DEFAULT_DB):
            cli.db = cfg.db
        from ..server.embedding import CoalescingEmbedder

        spec = cli.embedder or cfg.embedder or stored_embedder(cli.db)  # the store's own, as every command
        # concurrent requests' query embeddings are computed in one batch (a bundled model's cost is per call)
        from ..runtime import limit_process_blas

        # many request threads run numpy at once: one BLAS thread per call (OPENBLAS_NUM_THREADS overrides).
        # Before the embedder is made: the e5 model writes OMP_NUM_THREADS into the environment.
        blas_threads = limit_process_blas(1)
        if blas_threads is not None:
            _note(cfg, f"numpy BLAS: {blas_threads} thread per call (set OPENBLAS_NUM_THREADS to choose)")
        spec = spec or config.DEFAULT_EMBEDDER
        emb = CoalescingEmbedder(spec)
        try:
            replica = (read_db or cfg.read_db, read_your_writes or cfg.read_your_writes)
            _run(cli, cfg, emb, spec, run_server, replica)
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
    host: str = typer.Option("127.0.0.1", "--host", help="http transport: address (loopback only without API keys)."),
    port: int = typer.Option(8765, "--port", help="http transport: port."),
    config_file: Optional[Path] = typer.Option(
        None,
        "--config",
        envvar="HYBRIDMEM_SERVER_CONFIG",
        help="http transport: TOML or JSON server settings (API keys, as for serve).",
    ),
    allowed_host: Optional[List[str]] = typer.Option(None, "--allowed-host", help=_ALLOWED_HOST_HELP),
    log_level: Optional[str] = typer.Option(None, "--log-level", help=_LOG_LEVEL_HELP),
    log_format: Optional[str] = typer.Option(None, "--log-format", help=_LOG_FORMAT_HELP),
) -> None:
    """Serve the memory to an agent over MCP: tools remember, recall, history, forget, ask; resource hybridmem://stats."""
    try:
        from ..server.common import configure_logging
        from ..server.config import load_config
        from ..server.mcp import check_transport, run_mcp

        # the API keys (HYBRIDMEM_API_KEYS, --config) -> namespaces, as `hybridmem serve` takes them
        cfg = load_config(config_file, allowed_hosts=allowed_host or None, log_level=log_level, log_format=log_format)
        check_transport(transport, host, cfg.api_keys)  # before opening anything
        configure_logging(cfg.log_level, cfg.log_format)
        cli = cli_context(ctx)
        with cli.open_memory(create=True, auto_embed=True, long_running=True) as mem:
            run_mcp(
                mem,
                transport=transport,
                host=host,
                port=port,
                api_keys=cfg.api_keys,
                allowed_hosts=cfg.allowed_hosts,
                log_level=cfg.log_level,
            )
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
