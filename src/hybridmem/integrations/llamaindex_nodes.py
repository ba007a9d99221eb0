"""LlamaIndex nodes <-> hybridmem documents and query results: one node is one document (its
other fields kept in the metadata under ``_node_id``, ``_node_type``, ``_node_content``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import (
    BaseNode,
    Document,
    ImageNode,
    IndexNode,
    MetadataMode,
    Node,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
)

from hybridmem.errors import EmbedderError, ValidationError
from hybridmem.models import QueryResult

#: the metadata key holding a node's ``ref_doc_id`` (the LlamaIndex convention: filterable)
REF_DOC_ID = "ref_doc_id"
_NODE_ID, _NODE_TYPE, _NODE_CONTENT = "_node_id", "_node_type", "_node_content"
#: set in ``_node_content`` when the node's own metadata held ``ref_doc_id`` (kept on the way back)
_OWN_REF = "ref_doc_id_in_metadata"
_NODE_CLASSES: dict[str, type[BaseNode]] = {c.class_name(): c for c in (TextNode, Node, Document, IndexNode, ImageNode)}


def _check_embedding(vector: Sequence[float] | None, dim: int, what: str) -> None:
    """A vector LlamaIndex computed is not used (hybridmem embeds with its own embedder), but one of
    another dimension means another model: an error rather than a silent mix."""
    if vector is not None and len(vector) and len(vector) != dim:
        raise EmbedderError(
            f"{what} has an embedding of dimension {len(vector)}, but this hybridmem store embeds with a "
            f"{dim}-dimensional embedder: give the index an embed_model of that dimension "
            "(HybridMemEmbedding(store) computes the store's own vectors)"
        )


def node_to_document(node: BaseNode) -> dict[str, Any]:
    """A node as a hybridmem document (``Memory.add_documents``)."""
    meta = dict(node.metadata)
    clash = [k for k in (_NODE_ID, _NODE_TYPE, _NODE_CONTENT) if k in meta]
    if REF_DOC_ID in meta and meta[REF_DOC_ID] != node.ref_doc_id:
        clash.append(REF_DOC_ID)
    if clash:
        raise ValidationError(
            f"node {node.node_id!r}: the metadata keys {', '.join(map(repr, clash))} are the store's own "
            f"({REF_DOC_ID} must be the node's ref_doc_id)",
            field="metadata",
        )
    content = node.model_dump(
        mode="json", exclude={"id_", "embedding", "metadata", "text", "text_resource"}, exclude_defaults=True
    )
    if REF_DOC_ID in meta:
        content[_OWN_REF] = True
    meta.update({_NODE_ID: node.node_id, _NODE_TYPE: node.class_name(), _NODE_CONTENT: content})
    if node.ref_doc_id is not None:
        meta[REF_DOC_ID] = node.ref_doc_id
    source = node.metadata.get("file_path") or node.metadata.get("file_name")
    return {
        "id": node.node_id,
        "text": node.get_content(metadata_mode=MetadataMode.NONE),
        "metadata": meta,
        "source": source if isinstance(source, str) and len(source) <= 4096 else None,
    }


def _node(metadata: dict[str, Any], text: str, doc_id: str, chunk_id: str) -> BaseNode:
    meta = dict(metadata)
    content, node_id, node_type = meta.pop(_NODE_CONTENT, None), meta.pop(_NODE_ID, None), meta.pop(_NODE_TYPE, None)
    if not isinstance(content, dict) or not isinstance(node_id, str):
        # a memory hybridmem wrote itself (Memory.add, the MCP remember tool): a text node per chunk
        source = RelatedNodeInfo(node_id=doc_id)
        return TextNode(id_=chunk_id, text=text, metadata=meta, relationships={NodeRelationship.SOURCE: source})
    content = dict(content)
    if not content.pop(_OWN_REF, False):
        meta.pop(REF_DOC_ID, None)
    cls = _NODE_CLASSES.get(str(node_type), TextNode)
    content.pop("class_name", None)
    fields: dict[str, Any] = {**content, "id_": node_id, "metadata": meta}
    if issubclass(cls, TextNode):  # the text given at once: one validation, not two
        return cls(**fields, text=text)
    node = cls(**fields)
    node.set_content(text)
    return node


def result_to_node(result: QueryResult) -> BaseNode:
    """The node a query result stands for (a node this store wrote, or a memory hybridmem wrote itself:
    then a ``TextNode`` whose id is the chunk id and whose ``ref_doc_id`` is the memory's id)."""
    return _node(result.metadata, result.text, result.doc_id, result.chunk_id)


def _score(result: QueryResult, mode: str) -> float:
    """The similarity LlamaIndex shows: a single leg's own score (dense cosine, BM25), else RRF."""
    leg = {"vector": "dense", "bm25": "bm25"}.get(mode)
    return float(result.scores.get(leg, result.rrf_score)) if leg else float(result.rrf_score)


def _scored_nodes(results: Sequence[QueryResult], mode: str) -> list[tuple[BaseNode, float]]:
    """One node per document (a document a Memory with chunking split is a node once: its best chunk)."""
    seen: set[str] = set()
    out = []
    for r in results:
        if r.doc_id not in seen:
            seen.add(r.doc_id)
            out.append((result_to_node(r), _score(r, mode)))
    return out
