"""LLM providers behind one protocol: offline (default), OpenAI-compatible, Anthropic."""
