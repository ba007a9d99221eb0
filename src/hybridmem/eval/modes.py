"""What the harness runs: the modes (the query modes and the agent-memory variants of hybrid, each
with the hybrid parameters it sets), the single legs hybrid is compared with, and the run's
configuration."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import config
from ..models import MODES

#: every mode the harness can run (the query modes of :data:`hybridmem.models.MODES`), and the default
#: plus the agent-memory variants of hybrid: in the harness ``hybrid`` is plain (no time leg, no
#: feedback leg, no centering, no substance leg); ``hybrid+time+feedback+centering+substance`` is
#: the product's default (on conversation turns: the time legs when a question names a time or asks
#: when, the feedback leg, the dense leg centered, the substance leg);
#: ``hybrid+time+feedback+centering`` the default before the substance leg, ``hybrid+substance``
#: plain hybrid with it; ``hybrid+time+feedback`` the default before the centering,
#: ``hybrid+time`` the one before the feedback leg; ``hybrid+centering`` plain hybrid with it; ``hybrid+context`` adds each hit's neighbouring turns after it (conversational sets);
#: ``hybrid+adaptive`` is plain hybrid with the adaptive fusion's per-query leg weights and
#: ``hybrid+time+adaptive`` hybrid+time with them; ``hybrid+feedback`` is plain hybrid with the
#: feedback leg (every other mode runs classic RRF, whatever HYBRIDMEM_FUSION says)
PLAIN_HYBRID = {
    "time_weight": 0.0,
    "feedback_weight": 0.0,
    "dense_centering": 0.0,
    "substance_weight": 0.0,
    "fusion": "rrf",
}


AGENT_MODES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "hybrid+time": ({**PLAIN_HYBRID, "time_weight": 1.0}, None),
    "hybrid+context": ({**PLAIN_HYBRID, "time_weight": 1.0}, {"before": 1, "after": 1}),
    "hybrid+adaptive": ({**PLAIN_HYBRID, "fusion": "adaptive"}, None),
    "hybrid+time+adaptive": ({**PLAIN_HYBRID, "time_weight": 1.0, "fusion": "adaptive"}, None),
    "hybrid+feedback": ({**PLAIN_HYBRID, "feedback_weight": 1.0}, None),
    "hybrid+time+feedback": ({**PLAIN_HYBRID, "time_weight": 1.0, "feedback_weight": 1.0}, None),
    "hybrid+centering": ({**PLAIN_HYBRID, "dense_centering": 0.75}, None),
    "hybrid+time+feedback+centering": (
        {**PLAIN_HYBRID, "time_weight": 1.0, "feedback_weight": 1.0, "dense_centering": 0.75},
        None,
    ),
    "hybrid+substance": ({**PLAIN_HYBRID, "substance_weight": 1.0}, None),
    # the product's default for conversation turns
    "hybrid+time+feedback+centering+substance": (
        {**PLAIN_HYBRID, "time_weight": 1.0, "feedback_weight": 1.0, "dense_centering": 0.75, "substance_weight": 1.0},
        None,
    ),
}


ALL_MODES: tuple[str, ...] = (*MODES, *AGENT_MODES)


#: the single-leg modes hybrid is compared with
SINGLE_LEGS = ("bm25", "vector")


#: hybrid with the graph leg fused in, evaluated alongside ``graph`` (the weight that did best on
#: HotpotQA in docs/graphrag.md; the default weight is 0)
HYBRID_GRAPH = ("hybrid+graph", {"graph_weight": 0.5})


CURVE_KS = (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100)


Progress = Callable[[str, int | None], Callable[[int], None]]


@dataclass
class EvalConfig:
    modes: Sequence[str] = MODES
    embedder: str = config.DEFAULT_EMBEDDER
    top_k: int = 10
    depth: int = 100
    cache_dir: Path = Path(".hybridmem") / "eval-cache"
    sweep: dict[str, list[float]] = field(default_factory=dict)
    metric: str = "ndcg@10"
    limit: int | None = None  # evaluate only the first N queries (quick looks; never for published numbers)
    #: chat model for mode ``rerank`` (a spec); None = HYBRIDMEM_LLM, and without one the offline
    #: identifier reranker runs (the report says which)
    llm: str | None = None
    seed: int = 0
