"""Serving: a model behind an OpenAI-compatible server, and the tools behind MCP.

`server` builds and runs the `vllm serve` command, `profiles` holds each model family's
flags, `adapters` hot-loads LoRA adapters into a running server, `mcp_server` offers the
tool runtime over MCP, and `cli` is `modelwright serve` and `modelwright mcp`.
"""
