"""litellm: the LiteLLM proxy in its own venv (`.venvs/litellm`), one model routed to the upstream."""
