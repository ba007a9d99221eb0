"""What extracting facts from chat turns reports (``Memory.add_messages(..., extract=True)``,
``Memory.extract_pending``): each batch of turns, the facts proposed from it and what the conflict
check did with each, the LLM usage per batch and in total, and the batches left pending."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from .responses import Usage


class ExtractedFact(BaseModel):
    """One fact the model proposed and what became of it: ``event`` ADD / UPDATE / DELETE / NONE
    (the conflict check, or the fact's ``key`` held by a current fact), the memory it wrote or
    touched (``id``), why (``reason``, also in that memory's history) and the turns it came from."""

    text: str
    key: str | None = None
    #: when it happened (ISO 8601 UTC), resolved from the model's date or relative words
    occurred_at: str | None = None
    #: what the model said of the time, when it was words resolved against the turn's time
    occurred_text: str | None = None
    source_turns: list[str] = Field(default_factory=list)
    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    id: str | None = None
    reason: str
    decided_by: str
    candidates: list[str] = Field(default_factory=list)


class DroppedFact(BaseModel):
    """A proposal the validation refused (empty text, no turn of the batch as its source, ...)."""

    text: str
    reason: str


class ExtractionBatch(BaseModel):
    """One LLM call's turns and its outcome: ``done``, or ``pending`` (the model failed: the turns
    stay stored, ``Memory.extract_pending`` / ``hybridmem extract --pending`` retry them)."""

    batch_id: str
    session_id: str | None = None
    turns: list[str]
    status: Literal["done", "pending"]
    facts: list[ExtractedFact] = Field(default_factory=list)
    dropped: list[DroppedFact] = Field(default_factory=list)
    #: the current facts of the scope shown to the model with the turns
    known: list[str] = Field(default_factory=list)
    error: str | None = None
    #: every LLM call of the batch: the extraction, then the conflict checks of its facts
    usage: Usage = Field(default_factory=Usage)


class ExtractionReport(BaseModel):
    """Every batch of one extraction run, the usage of all of them, and how many batches of the
    namespace are still pending after it."""

    model: str | None = None
    batches: list[ExtractionBatch] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    pending: int = 0

    @property
    def facts(self) -> list[ExtractedFact]:
        return [f for b in self.batches for f in b.facts]

    def merge(self, other: ExtractionReport) -> None:
        self.model = self.model or other.model
        self.batches += other.batches
        self.usage.merge(other.usage)
        self.pending = other.pending
