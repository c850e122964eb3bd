"""`make setup`'s Chromium step: nothing to do when present, apt-get as root, a clear error otherwise."""
from __future__ import annotations

import pytest

from labs.view import install


def test_present_means_nothing_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install.shutil, "which", lambda name: "/usr/bin/chromium")
    monkeypatch.setattr(install, "install", lambda packages: pytest.fail("must not install"))
    assert install.main() == 0


def test_missing_as_root_installs_debians_package(monkeypatch: pytest.MonkeyPatch) -> None:
    installed: list[list[str]] = []
    present = {"apt-get": "/usr/bin/apt-get"}
    monkeypatch.delenv("STREAMLAB_CHROMIUM", raising=False)
    monkeypatch.setattr(install.shutil, "which", present.get)
    monkeypatch.setattr(install.os, "geteuid", lambda: 0)

    def apt(packages: list[str]) -> None:
        installed.append(packages)
        present["chromium"] = "/usr/bin/chromium"
    monkeypatch.setattr(install, "install", apt)
    assert install.main() == 0 and installed == [["chromium"]]


def test_missing_without_root_says_how(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("STREAMLAB_CHROMIUM", raising=False)
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    monkeypatch.setattr(install.os, "geteuid", lambda: 1000)
    assert install.main() == 1
    assert "apt-get install chromium" in capsys.readouterr().err
