"""One lab server for every verify run of the session (verify_config(server=...) shares it)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

USER_CONFIGS = Path(__file__).resolve().parent.parent / "data" / "user-configs"


def user_config_cases() -> list[tuple[str, dict]]:
    return [(d.name, json.loads((d / "expected.json").read_text()))
            for d in sorted(USER_CONFIGS.iterdir()) if (d / "expected.json").is_file()]


@pytest.fixture(scope="session")
def verify_server(model_dir):
    from labs.verify import lab_server
    with lab_server() as server:
        yield server
