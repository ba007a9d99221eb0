"""Adapters for agent frameworks (each an optional extra): LangGraph's ``BaseStore``, LangChain's
``VectorStore`` and ``BaseRetriever``, LlamaIndex's vector store and retriever. They reach the core
through :class:`hybridmem.Memory` only (docs/integrations.md)."""
