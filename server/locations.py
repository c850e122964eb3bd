"""Where the packages find the model and put their outputs: from a checkout, or installed.

    checkout()             # the source checkout these packages run from, or None (site-packages)
    default_model_dir()    # <checkout>/.models/tiny, else $XDG_CACHE_HOME/streamlab/models/tiny
    reports_dir()          # <checkout>/reports, else ./reports under the current folder

From a checkout everything stays where the Makefile puts it (`make setup` builds .models/tiny).
Installed with pip there is no checkout to write into: the model is built on first use into the
user's cache folder (`python -m server` says so), and reports go under the folder the command
runs in, as any command-line tool's output would. Files the packages ship (templates, static
files) lie beside their modules in either case; the server's two, the corpus and the tiny model's
tokenizer, lie in server/ and are named here, since the text, the engine and the model builder
all read them.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # the checkout, or site-packages
# The text the tiny model's tokenizer is trained on and the synthetic engine replays: English,
# Japanese, emoji with skin tones and ZWJ sequences.
CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
# The tiny model's own tokenizer (`python -m server.tools.model_builder --tokenizer-only` writes
# it), so that a base install without transformers has one: server/text/fast_tokenizer.py reads it.
SHIPPED_TOKENIZER = Path(__file__).resolve().parent / "tokenizer"


@functools.lru_cache(maxsize=1)
def checkout() -> Path | None:
    """The checkout's root when these packages run from one (an editable install included)."""
    pyproject = PACKAGE_ROOT / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    return PACKAGE_ROOT if 'name = "streamlab"' in text else None


def cache_dir() -> Path:
    """The user's cache folder for streamlab (XDG: $XDG_CACHE_HOME, else ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "streamlab"


def default_model_dir(size: str = "tiny") -> Path:
    """Where the offline model of this size lives (built by `python -m server.tools.model_builder`)."""
    root = checkout()
    return root / ".models" / size if root is not None else cache_dir() / "models" / size


def corpus_files(corpus_dir: Path = CORPUS_DIR) -> list[Path]:
    """The corpus's files in sorted order: a tokenizer trained on them is the same each time."""
    files = sorted(corpus_dir.glob("*.txt"))
    if not files:
        raise FileNotFoundError(f"no corpus files in {corpus_dir}")
    return files


def reports_dir() -> Path:
    """Where the labs write their reports unless told otherwise (--out)."""
    root = checkout()
    return root / "reports" if root is not None else Path.cwd() / "reports"
