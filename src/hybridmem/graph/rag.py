"""The GraphRAG layer over one store: build / incremental update (:mod:`.build`), status,
communities, entity lookup and export (:mod:`.reads`), plot, the local ``graph`` leg and global
map-reduce answers (:mod:`.global_search`)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NotFoundError, ValidationError
from ..llm.base import ChatModel
from ..llm.registry import resolve_llm
from ..store.base import Store
from ..text.tokenize import fold
from . import build as gbuild
from . import global_search, reads
from .build import DEFAULT_PARAMS, GraphReport
from .extract import Extractor, LLMExtractor, RuleExtractor, entity_key
from .reads import GraphStatus
from .search import GlobalAnswer, LocalGraphIndex
from .store import GraphStore, StoredCommunity

if TYPE_CHECKING:
    import networkx as nx

_WORDS = re.compile(r"[^\W_][\w.-]*")

__all__ = ["GraphRAG", "GraphReport", "GraphStatus", "DEFAULT_PARAMS"]


class GraphRAG:
    """Reached as ``memory.graph``; every method takes an optional namespace (default: the memory's).

    ``namespace`` turns an optional namespace into a checked one (the memory's default when None);
    ``llm`` returns the memory's chat model (None: offline paths)."""

    def __init__(
        self, store: Store, *, namespace: Callable[[str | None], str], llm: Callable[[], ChatModel | None]
    ) -> None:
        self.store = store
        self._namespace = namespace
        self._llm = llm
        self.gstore = GraphStore(store)
        self._local: dict[str, LocalGraphIndex] = {}
        self._keys: dict[str, tuple[int, set[str]]] = {}
        self._lock = threading.Lock()

    def _ns(self, namespace: str | None) -> str:
        return self._namespace(namespace)

    # ------------------------------------------------------------------ build / update
    def build(self, namespace: str | None = None, **kwargs: Any) -> GraphReport:
        """Extract every chunk, detect communities, summarize them all (``update(rebuild=True)``)."""
        return self.update(namespace, rebuild=True, **kwargs)

    def update(
        self,
        namespace: str | None = None,
        *,
        llm: str | ChatModel | None = None,
        extractor: str | Extractor | None = None,
        summarizer: str | None = None,
        rebuild: bool = False,
        max_cluster_size: int | None = None,
        max_levels: int | None = None,
        resolution: float | None = None,
        batch_size: int = 4,
        progress: Callable[[str, int, int | None], None] | None = None,
    ) -> GraphReport:
        """Incremental refresh: extract only chunks not yet in the graph (new or rewritten; deleted
        chunks already left with their provenance), re-detect communities, and summarize only the
        communities whose fingerprint changed (others keep their summary: no LLM call).

        ``extractor``/``summarizer``: ``rules``/``extractive`` (offline), ``llm``, or ``auto`` (the
        LLM when one is configured, the default). ``llm``: a spec or ChatModel (default: the memory's).
        """
        t0 = time.perf_counter()
        ns = self._ns(namespace)
        model, ext, use_llm_summary = self._models(llm, extractor, summarizer, batch_size)
        state = self.gstore.state(ns)
        params = gbuild.community_params(
            state, rebuild, max_cluster_size=max_cluster_size, max_levels=max_levels, resolution=resolution
        )
        return gbuild.update_graph(
            self.store,
            self.gstore,
            ns,
            ext=ext,
            model=model if use_llm_summary else None,
            state=state,
            params=params,
            rebuild=rebuild,
            batch_size=batch_size,
            progress=progress,
            t0=t0,
        )

    def _models(
        self, llm: str | ChatModel | None, extractor: str | Extractor | None, summarizer: str | None, batch_size: int
    ) -> tuple[ChatModel | None, Extractor, bool]:
        """The chat model, the extractor and whether summaries come from the model."""
        model = self._model(llm)
        ext = self._extractor(extractor, model, batch_size)
        use_llm_summary = self._pick(summarizer, "summarizer", ("extractive", "llm"), model) == "llm"
        if use_llm_summary and model is None:
            raise ValidationError("summarizer 'llm' needs an LLM (set HYBRIDMEM_LLM or pass llm=)", field="summarizer")
        return model, ext, use_llm_summary

    def _model(self, llm: str | ChatModel | None) -> ChatModel | None:
        if llm is None:
            return self._llm()

        return resolve_llm(llm)

    @staticmethod
    def _pick(choice: str | None, field: str, names: tuple[str, str], model: ChatModel | None) -> str:
        c = (choice or "auto").strip().lower()
        if c == "auto":
            return names[1] if model is not None else names[0]
        if c not in names:
            raise ValidationError(f"unknown {field} {choice!r}; use auto, {', '.join(names)}", field=field)
        return c

    def _extractor(self, extractor: str | Extractor | None, model: ChatModel | None, batch_size: int) -> Extractor:
        if extractor is not None and not isinstance(extractor, str):
            return extractor
        pick = self._pick(extractor, "extractor", ("rules", "llm"), model)
        if pick == "llm":
            if model is None:
                raise ValidationError(
                    "extractor 'llm' needs an LLM (set HYBRIDMEM_LLM or pass llm=)", field="extractor"
                )
            return LLMExtractor(model, batch_size=batch_size)
        return RuleExtractor()

    # ------------------------------------------------------------------ status / reads
    def status(self, namespace: str | None = None) -> GraphStatus:
        return reads.status(self.store, self.gstore, self._ns(namespace))

    def stale_community_ids(self, namespace: str | None = None) -> set[str]:
        return reads.stale_community_ids(self.gstore, self._ns(namespace))

    def communities(self, namespace: str | None = None, level: int | None = None) -> list[StoredCommunity]:
        return self.gstore.communities(self._ns(namespace), level)

    def show(self, name: str, namespace: str | None = None, *, limit: int = 20) -> dict[str, Any]:
        """An entity (by any variant of its name): type, provenance, relations, communities."""
        return reads.show(self.store, self.gstore, self._ns(namespace), name, limit)

    def find(self, text: str, namespace: str | None = None, *, limit: int = 20) -> dict[str, Any]:
        """Entities whose name matches ``text`` (prefix, word, substring, near spelling), best first."""
        return reads.find(self.gstore, self._ns(namespace), text, limit)

    def to_networkx(self, namespace: str | None = None) -> nx.DiGraph:
        return reads.to_digraph(self.store, self.gstore, self._ns(namespace))

    def export(self, fmt: str = "json", namespace: str | None = None) -> str:
        fmt = reads.export_format(fmt)
        return reads.export(self.store, self.gstore, self._ns(namespace), fmt)

    # ------------------------------------------------------------------ write hook (staleness on add)
    def on_write(self, namespace: str, chunk_texts: list[str]) -> int:
        """Called by Memory after a committed write: existing entities that the new chunks name
        (words and 2-3-word runs matched against entity keys; no extraction, no model) are marked
        stale, so their communities show as stale until ``graph update``. Returns entities marked."""
        if not chunk_texts or self.gstore.state(namespace) is None:
            return 0
        version = self.gstore.version(namespace)[0]
        cached = self._keys.get(namespace)
        if cached is None or cached[0] != version:
            keys = set(self.gstore.entity_hashes(namespace))
            cached = self._keys[namespace] = (version, keys)
        keys = cached[1]
        hits: set[str] = set()
        for text in chunk_texts:
            words = [w.replace("_", "-").strip(".-") for w in _WORDS.findall(fold(text))]
            for n in (1, 2, 3):
                for i in range(len(words) - n + 1):
                    k = "-".join(words[i : i + n])
                    if k not in keys and n == 1 and any(c.isdigit() for c in k):
                        k = entity_key(k)  # "kb5034441" is keyed "kb-5034441", "http504" "http-504"
                    if k in keys:
                        hits.add(k)
        return self.gstore.mark_stale(namespace, sorted(hits)) if hits else 0

    # ------------------------------------------------------------------ local search (the graph leg)
    def local_index(self, namespace: str) -> LocalGraphIndex:
        version = self.gstore.version(namespace)
        idx = self._local.get(namespace)
        if idx is not None and idx.version == version:
            return idx
        with self._lock:
            idx = self._local.get(namespace)
            if idx is None or idx.version != version:
                idx = self._local[namespace] = LocalGraphIndex(self.gstore.load(namespace))
        return idx

    def search_leg(self, namespace: str, text: str, allowed: np.ndarray | None, k: int) -> list[tuple[int, float]]:
        """Ranked (chunk rowid, score) of the ``graph`` leg; empty when the namespace has no graph."""
        if self.gstore.state(namespace) is None:
            return []
        return self.local_index(namespace).search(text, allowed, k)

    # ------------------------------------------------------------------ global search
    def ask_global(
        self,
        question: str,
        *,
        level: int | None = None,
        max_communities: int = 8,
        map_batch: int = 4,
        llm: str | ChatModel | None = None,
        namespace: str | None = None,
    ) -> GlobalAnswer:
        """Map-reduce over the summaries of one community level (default: the top level, 0): the
        ``max_communities`` most relevant summaries are mapped to rated key points (``map_batch``
        summaries per call), and the best points reduced to one answer citing community and chunk ids."""
        t0 = time.perf_counter()
        global_search.check_question(question, max_communities, map_batch)
        return global_search.ask_global(
            self.gstore,
            self._ns(namespace),
            question,
            level=level,
            max_communities=max_communities,
            map_batch=map_batch,
            model=lambda: self._model(llm),
            t0=t0,
        )

    # ------------------------------------------------------------------ picture
    def plot(
        self,
        path: str,
        namespace: str | None = None,
        *,
        top: int = 8,
        max_nodes: int = 80,
        level: int | None = None,
        entity: str | None = None,
        hops: int = 1,
        labels: int = 40,
    ) -> dict[str, Any]:
        """A PNG that stays readable at any graph size (``hybridmem.graph.plot``). By default the
        ``top`` largest communities of ``level`` (default: the top level), each by its most central
        entities, ``max_nodes`` entities in all; with ``entity``, that entity (any variant of its name)
        and its strongest neighbours within ``hops`` (1 or 2). At most ``labels`` labels, none
        overlapping another; the legend has its own panel inside the picture."""
        from . import plot as gplot

        ns = self._ns(namespace)
        comms = self.gstore.communities(ns)
        if not comms:
            raise NotFoundError(f"namespace {ns!r} has no graph communities: run `hybridmem graph build` first")
        sel = gplot.select(
            self.gstore.load(ns),
            comms,
            top=top,
            max_nodes=max_nodes,
            level=level,
            entity=entity,
            hops=hops,
            namespace=ns,
        )
        fig = gplot.figure(sel, labels=labels)
        gplot.save(fig, path)
        labelled = sum(1 for ax in fig.axes for t in ax.texts if getattr(t, "xy", None) is not None)
        return {
            "path": str(path),
            "mode": sel.mode,
            "nodes": len(sel.nodes),
            "edges": len(sel.edges),
            "labels": labelled,
            "entities": sel.total_entities,
            "communities": sel.communities,
            "entity": sel.names[sel.centre] if sel.centre is not None else None,
        }
