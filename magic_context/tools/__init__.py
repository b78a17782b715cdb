"""The agent tools (ctx_reduce, ctx_expand, ctx_note, ctx_memory, ctx_search) as engine functions."""
