"""LiteLLM as an app hop (proxies.apps.kind): its own venv's `litellm` with a config written for the run."""
from __future__ import annotations

import json
from pathlib import Path

from proxies.apps.kind import AppImage, AppKind
from proxies.apps.launch import REPO_ROOT, WARM_UP, Launch, require
from proxies.apps.litellm.settings import LitellmSettings

LITELLM_VENV = REPO_ROOT / ".venvs" / "litellm"  # proxies.apps.install makes it
# LiteLLM refuses to start without a master key; this one never leaves loopback.
LITELLM_KEY = "sk-streamlab-local"


def launch(settings: LitellmSettings, workdir: Path, python: str) -> Launch:
    litellm = LITELLM_VENV / "bin" / "litellm"
    require(litellm, "The LiteLLM proxy")
    named = [settings.named_model] if settings.named_model else []
    config = {
        # Every model name the client asks for goes to the upstream's OpenAI-compatible API: a
        # named entry first, then the wildcard for any other name.
        "model_list": [{"model_name": name, "litellm_params": {
            "model": f"openai/{name}", "api_base": f"{settings.upstream}/v1", "api_key": "none"}}
            for name in (*named, "*")],
        "general_settings": {"master_key": LITELLM_KEY},
    }
    litellm_settings: dict[str, object] = {}
    if settings.keepalive_ping_s is not None:
        litellm_settings["sse_keepalive_ping_interval_seconds"] = settings.keepalive_ping_s
    if settings.messages_upstream == "chat":
        litellm_settings["use_chat_completions_url_for_anthropic_messages"] = True
    if litellm_settings:
        config["litellm_settings"] = litellm_settings
    return Launch(
        [str(litellm), "--config", str(workdir / "litellm.yaml"), "--host", settings.listen_host,
         "--port", str(settings.listen_port), "--num_workers", "1"],
        # Its cost map from the package, not the network; no telemetry; the key it insists on.
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MASTER_KEY": LITELLM_KEY,
             "LITELLM_TELEMETRY": "False", "LITELLM_LOG": "ERROR", "NO_PROXY": "*"},
        # JSON is YAML: what LiteLLM reads is exactly what the report shows.
        files={"litellm.yaml": json.dumps(config, indent=2)}, cwd=workdir,
        ready_headers={"Authorization": f"Bearer {LITELLM_KEY}"},
        # Its first completion pays for lazy imports and its upstream client: measured 0.8 s
        # idle (60 ms after), several seconds on a loaded machine, enough for a proxy's read
        # timeout in front of it to cut before the headers. The server answers a 404 for the
        # unknown model; the runs count the server's metrics from after this. Its Anthropic
        # Messages bridge pays its own: the first /v1/messages measured 3.4 s slower than the next.
        warm_up=WARM_UP, warm_up_paths=("/v1/chat/completions", "/v1/messages"))


def versions() -> dict[str, str]:
    """The litellm distribution in its venv (read from the folder: its Python is not the lab's)."""
    found = sorted(LITELLM_VENV.glob("lib/python*/site-packages/litellm-*.dist-info"))
    version = found[-1].name.removeprefix("litellm-").removesuffix(".dist-info") if found else "not installed"
    return {"litellm": version, "venv": str(LITELLM_VENV)}


KIND = AppKind(
    settings=LitellmSettings, launch=launch, versions=versions, needs=("litellm",),
    # The venv comes with the mounted repository; the system libraries its extensions load do not.
    image=AppImage(library_folders=lambda: [str(LITELLM_VENV)] if LITELLM_VENV.is_dir() else []))
