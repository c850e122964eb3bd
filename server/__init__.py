"""streamlab's OpenAI-compatible streaming model server."""
