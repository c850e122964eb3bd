"""streamlab's OpenAI-compatible streaming model server.

By job, each package importing only those after it (pyproject.toml's import contracts):
tools/ (model builder, benchmarks), http/ (the edge), stream/ (one reply), engine/ (token ids),
text/ (tokenizer, prompts, detokenizer, stops). At the top: the entry point (`python -m server`),
its config and knobs, the metrics and errors every layer uses, and the process helpers the labs
and proxies import (processes, launcher, signals, locations, ...).
"""
