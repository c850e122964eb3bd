"""The wild corpus's own integrity: every tests/data/wild/<slug>/wild.json is complete and points at
its files. It checks the data only; it runs neither verify nor any proxy."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labs.findings.kinds import FINDING_KINDS
from labs.verify.readers import PROXIES

WILD = Path(__file__).resolve().parents[1] / "data" / "wild"
SLUGS = sorted(p.name for p in WILD.iterdir() if p.is_dir())
# SPDX ids of licences that permit redistribution (the corpus's rule); LicenseRef-* is SPDX's own form.
SPDX = {"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "MPL-2.0", "ISC", "Unlicense", "CC0-1.0",
        "GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0-only", "GPL-3.0-or-later", "AGPL-3.0-only",
        "AGPL-3.0-or-later", "LGPL-2.1-only", "LGPL-3.0-only"}
HEX40 = re.compile(r"[0-9a-f]{40}")
SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)+")


def load(slug: str) -> dict:
    return json.loads((WILD / slug / "wild.json").read_text(encoding="utf-8"))


def test_the_corpus_is_big_and_varied_enough():
    assert len(SLUGS) >= 30
    assert len({load(s)["source"]["repo"] for s in SLUGS}) >= 15


@pytest.mark.parametrize("slug", SLUGS)
def test_entry_metadata_is_complete(slug):
    assert SLUG.fullmatch(slug), "slug: <project>-<short-name>, lowercase with dashes"
    meta = load(slug)
    assert set(meta) >= {"source", "proxy", "entry", "shape", "rendered", "route", "expected",
                         "reasons", "constructs", "notes"}
    src = meta["source"]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", src["repo"])
    assert HEX40.fullmatch(src["commit"])
    assert src["licence"] in SPDX or src["licence"].startswith("LicenseRef-")
    assert src["path"] and not src["path"].startswith("/")
    assert src["url"] == f"https://github.com/{src['repo']}/blob/{src['commit']}/{src['path']}"
    assert meta["proxy"] in PROXIES
    assert meta["shape"] in {"main", "site"}
    route = meta["route"]
    assert route["path"].startswith("/") and route["why"]
    assert route["host"] is None or isinstance(route["host"], str)
    assert isinstance(meta["constructs"], list) and meta["constructs"]
    assert isinstance(meta["notes"], str)


@pytest.mark.parametrize("slug", SLUGS)
def test_every_kind_has_an_expectation_and_a_reason(slug):
    meta = load(slug)
    assert list(meta["expected"]) == list(FINDING_KINDS)
    assert set(meta["expected"].values()) <= {"fault", "clean"}
    assert set(meta["reasons"]) == set(FINDING_KINDS)
    for kind, reason in meta["reasons"].items():
        assert isinstance(reason, str) and len(reason) > 20, kind
        assert "{{" not in reason and "}}" not in reason, kind


@pytest.mark.parametrize("slug", SLUGS)
def test_entry_exists_and_rendered_files_keep_their_original(slug):
    meta = load(slug)
    folder = WILD / slug
    entry = folder / meta["entry"]
    assert entry.is_file() and entry.resolve().is_relative_to(folder.resolve())
    original = folder / "original"
    if meta["rendered"] is None:
        assert not original.exists(), "original/ is only for rendered templates"
    else:
        assert isinstance(meta["rendered"], str) and meta["rendered"]
        assert original.is_dir() and any(original.iterdir())


@pytest.mark.parametrize("slug", SLUGS)
def test_file_line_references_point_inside_the_files(slug):
    meta = load(slug)
    for reason in meta["reasons"].values():
        for name, line in re.findall(r"([\w./-]+\.(?:conf|yaml|yml|python|golang|hybrid|jinja2|Caddyfile)|Caddyfile):(\d+)", reason):
            path = WILD / slug / name
            if path.is_file():  # a repository path named in prose (e.g. docs/...) is not ours
                assert 1 <= int(line) <= len(path.read_bytes().splitlines()), (name, line)


def test_the_readme_table_lists_every_slug():
    readme = (WILD / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", readme, flags=re.M))
    assert listed == set(SLUGS)


HELD_OUT = [s for s in SLUGS if "first_result" in load(s)]


def test_the_held_out_set_is_big_enough():
    assert len(HELD_OUT) >= 10 and len(SLUGS) - len(HELD_OUT) >= 30  # the in-sample set stays as it was


@pytest.mark.parametrize("slug", HELD_OUT)
def test_a_held_out_config_keeps_its_first_verify_run_kind_by_kind(slug):
    meta = load(slug)
    first = meta["first_result"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["date"])
    command = first["command"]  # the agreement test's full run: default checks, the entry's route
    assert command.startswith(f".venv/bin/python -m labs verify tests/data/wild/{slug}/{meta['entry']} ")
    assert f"--proxy {meta['proxy']}" in command and f"--path {meta['route']['path']}" in command
    assert "--quick" not in command and "--check" not in command
    assert list(first["kinds"]) == list(FINDING_KINDS)
    for kind, said in first["kinds"].items():
        want = meta["expected"][kind]
        other = "disagrees (found, expected clean)" if want == "clean" else "disagrees (missed, expected fault)"
        assert said in {f"agrees ({want})", other, "not measured"}, kind
    if "error" not in first:
        found = {k for k, said in first["kinds"].items() if said in ("agrees (fault)", "disagrees (found, expected clean)")}
        assert set(first["found"]) == found
