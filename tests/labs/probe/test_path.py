"""The probe's input: URLs, the headers each request carries, the check names; no network here."""
from __future__ import annotations

import pytest

from labs import __main__ as labs_main
from labs.findings import UnusableInput
from labs.probe.path import Path, check_url, entry_root
from labs.probe.run import CHECK_NAMES, select


@pytest.mark.parametrize("url, message", [
    ("127.0.0.1:8080/v1", "not an http"),
    ("http:///v1", "names no host"),
    ("http://127.0.0.1:99999/v1", "invalid port"),
    ("http://127.0.0.1:8080/v1?x=1", "no query"),
])
def test_bad_urls_are_refused_with_the_reason(url, message):
    with pytest.raises(UnusableInput, match=message):
        check_url(url)


def test_the_lab_endpoints_sit_next_to_v1():
    assert check_url("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"
    assert entry_root("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"
    assert entry_root("http://127.0.0.1:8080/llm/v1") == "http://127.0.0.1:8080/llm"


def test_the_lab_token_goes_to_a_canary_only_and_the_key_to_every_entry():
    env = {"KEY": "sk-test", "STREAMLAB_LAB_TOKEN": "lab-secret"}
    path = Path.from_args(["http://127.0.0.1:8080/v1"], api_key_env="KEY", environ=env)
    assert path.headers() == {"Authorization": "Bearer sk-test"}  # origin not known yet: no token
    path.origin = "streamlab"
    assert path.headers("probe-1") == {"Authorization": "Bearer sk-test", "X-Lab-Token": "lab-secret",
                                       "X-Request-Id": "probe-1"}


def test_a_missing_key_variable_and_a_repeated_url_are_unusable():
    with pytest.raises(UnusableInput, match="KEY: that environment variable is not set"):
        Path.from_args(["http://127.0.0.1:8080/v1"], api_key_env="KEY", environ={})
    with pytest.raises(UnusableInput, match="twice"):
        Path.from_args(["http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/"], environ={})


def test_checks_are_chosen_by_name_or_by_kind():
    assert select(None) == set(CHECK_NAMES)
    assert select(["idle-timeout"]) == {"idle-timeout-before-headers", "idle-timeout-after-headers",
                                        "idle-timeout-mid-stream"}
    assert select(["buffering", "total-timeout"]) == {"buffering", "total-timeout"}


def test_probe_is_a_labs_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        labs_main.main(["probe", "--help"])
    assert exit_.value.code == 0
    assert "--max-silence" in capsys.readouterr().out
