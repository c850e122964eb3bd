"""starlette: an SSE relay as the AI gateways' own relays are written, Starlette under uvicorn with an
httpx upstream client, one `mode` per way such a relay forwards (`modes.py`, `relay_app.py`)."""
