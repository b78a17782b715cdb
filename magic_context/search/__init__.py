"""Unified search over what a session folded away (issue #12, knowledge-layer.md §3–§5).

`text` turns messages into searchable text and queries into FTS5 expressions, `indexer` keeps the
index in step after each historian publish, `lanes` score each source, `engine` merges them,
`format` renders the agent's result text, `embed` holds the embedding providers and `git` the
commit index. Nothing here is imported by the transform hot path (a test enforces it).
"""
