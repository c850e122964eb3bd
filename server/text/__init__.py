"""Text in and out of token ids: the tokenizer read without transformers, the prompt encoder,
the detokenizer and the stop sequences. Pure: no HTTP, no engine, no server state."""
