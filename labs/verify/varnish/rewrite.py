"""Rewrite a VCL config to run here, in front of the lab's server (see labs.verify.rewrite).

Edits on the user's own text (labs/verify/edits.py): every backend's `.host` becomes 127.0.0.1 and
its `.port` the lab's (a unix-socket `.path` backend becomes that too); health checks go (`.probe`
attributes and `probe` declarations, inside `/* */` so every line keeps its number); every
`include` names its copy in the run folder. `import`s, `std.log` and every sub stay as written.
The edits are a table (labs/verify/plan.py): `HANDLERS` per directive (`backend.host`, `probe`,
`include`), what is kept as written declared in `KEPT`; built in memory, written by the pipeline.
The listen address is not in VCL: it is varnishd's `-a` flag (proxies/varnish/kind.py), a free
loopback port. For `loopback-only` the run's shared-memory log (`-n` in the run folder) is read
while it runs: `varnishlog -d -g raw -i BackendOpen` prints the address of each backend connection.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from labs.findings import UnusableInput
from labs.verify.edits import MARK, TextEdits
from labs.verify.plan import RunPlan, handler_for, reason
from labs.verify.rewrite import Rewritten
from labs.verify.varnish.config import Backend, Token, Vcl, VclFile, backends_in
from proxies.binaries import find_binary
from proxies.kind import find_executable
from proxies.varnish.kind import KIND as VARNISH, WORK_FOLDER, check
from server.processes import free_port

LOOPBACK = "127.0.0.1"
CHECK_TIMEOUT_S = 60
COMPILER_WHERE = re.compile(r"\('([^']+)' Line (\d+) Pos (\d+)\)")


@dataclass(frozen=True)
class Directive:
    """One directive of the config, named as HANDLERS and KEPT spell it (`backend.host`, `probe`)."""

    name: str
    file: Path | None  # the file it is in (None: the whole config's: `vcl`, `import`)
    backend: Backend | None = None  # a backend's, and its attributes'
    at: Token | None = None  # a probe's or a sub's name
    include: tuple[int, str, Path] | None = None  # (line, as written, the file it reads)


@dataclass
class _Run:
    """What the rewrite needs on its walk and what it noticed."""

    plan: RunPlan
    written: dict[Path, Path]  # each file -> its copy in the run folder
    notes: list[str] = field(default_factory=list)
    probes: bool = False
    backends: tuple[str, ...] = ()  # in declaration order: under `verify --mcp` backend k is replica k

    def port_of(self, backend: Backend | None) -> int:
        """The port a backend gets: the lab's server's, or its replica's (RunPlan.pool_ports)."""
        index = self.backends.index(backend.name) if backend is not None and backend.name in self.backends else 0
        return self.plan.upstream_port(index)


def rewrite(vcl: Vcl, plan: RunPlan, listen_port: int | None = None) -> Rewritten:
    """The config as it runs here, in memory: each file's copy with its directives' handlers applied."""
    run = _Run(plan, {file.path: _target(vcl, file, plan.folder) for file in vcl.files}, backends=tuple(vcl.backends))
    edits = {file.path: TextEdits(file.text) for file in vcl.files}
    for directive in entries(vcl):
        handler = handler_for(HANDLERS, directive.name)
        if handler is not None and directive.file is not None:
            handler(edits[directive.file], directive, run)
    files = {str(file.path): (file.text, edits[file.path].apply(), run.written[file.path]) for file in vcl.files}
    notes = [*run.notes, *([reason("health-check")] if run.probes else []), reason("varnish-listen")]
    rewritten = Rewritten("varnish", plan.folder, run.written[vcl.entry], listen_port=listen_port or free_port(),
                          files=files, notes=list(dict.fromkeys(notes)))
    # Read when it runs, by the release that runs it (its series is chosen after the rewrite).
    rewritten.contacted = lambda: contacted(plan.folder / WORK_FOLDER, rewritten.series)
    return rewritten


def entries(vcl: Vcl) -> Iterator[Directive]:
    """Every directive of the config, file by file."""
    if vcl.version:
        yield Directive("vcl", None)
    yield from (Directive("import", None) for _ in vcl.imports)
    for file in vcl.files:
        for backend in vcl.backends.values():
            if backend.token.file == file.path:
                yield Directive("backend", file.path, backend)
                yield from (Directive(f"backend.{attr}", file.path, backend) for attr in backend.attrs)
        yield from (Directive("probe", file.path, at=probe) for probe in vcl.probes if probe.file == file.path)
        yield from (Directive("include", file.path, include=include) for include in file.includes)
    yield from (Directive("sub", name.file, at=name) for names in vcl.sub_tokens.values() for name in names)


def _target(vcl: Vcl, file: VclFile, folder: Path) -> Path:
    if file.path == vcl.entry:
        return folder / file.path.name
    try:
        return folder / file.path.resolve().relative_to(vcl.entry.resolve().parent)
    except ValueError:
        return folder / "included" / file.path.name


def _port_added(edits: TextEdits, directive: Directive, run: _Run) -> None:
    """A backend by host name without a port (80) gets the lab's."""
    backend = directive.backend
    assert backend is not None
    if "host" in backend.attrs and "port" not in backend.attrs:
        edits.insert_in_block(backend.token.line, backend.name, [f'.port = "{run.port_of(backend)}";  # {MARK}'])


def _host(edits: TextEdits, directive: Directive, run: _Run) -> None:
    _, attr = directive.backend.attrs["host"]  # type: ignore[union-attr]
    edits.replace(attr.line, ".host", f'.host = "{LOOPBACK}"')


def _port(edits: TextEdits, directive: Directive, run: _Run) -> None:
    _, attr = directive.backend.attrs["port"]  # type: ignore[union-attr]
    edits.replace(attr.line, ".port", f'.port = "{run.port_of(directive.backend)}"')


def _unix_socket(edits: TextEdits, directive: Directive, run: _Run) -> None:
    backend = directive.backend
    assert backend is not None
    _, attr = backend.attrs["path"]
    edits.replace(attr.line, ".path", f'.host = "{LOOPBACK}"; .port = "{run.port_of(backend)}"')
    run.notes.append(f"backend {backend.name} ({backend.attr('path')}): {reason('unix-socket')}")


def _backend_probe(edits: TextEdits, directive: Directive, run: _Run) -> None:
    value, attr = directive.backend.attrs["probe"]  # type: ignore[union-attr]
    text = edits.original
    start = text.rindex(".", 0, attr.at + 1)
    end = value[-1].at + len(value[-1].text) if value else attr.at
    if value and value[0].text == "{":
        end = _block_end(text, value[0].at)
    semicolon = re.match(r"\s*;", text[end:])
    _comment_out(edits, text, start, end + (semicolon.end() if semicolon else 0), reason("health-check"))
    run.probes = True


def _probe(edits: TextEdits, directive: Directive, run: _Run) -> None:
    text, at = edits.original, directive.at.at  # type: ignore[union-attr]
    _comment_out(edits, text, _keyword_start(text, at, "probe"), _block_end(text, at), reason("health-check"))
    run.probes = True


def _include(edits: TextEdits, directive: Directive, run: _Run) -> None:
    line, _, target = directive.include  # type: ignore[misc]
    edits.replace(line, "include", f'include "{run.written[target]}"')


Handler = Callable[[TextEdits, Directive, _Run], None]
HANDLERS: dict[str, Handler] = {
    "backend": _port_added, "backend.host": _host, "backend.port": _port, "backend.path": _unix_socket,
    "backend.probe": _backend_probe, "probe": _probe, "include": _include,
}
# Kept as written: the subs verify runs (labs/verify/varnish/vcl.py), the vmods they import, and
# the backend attributes it judges or that run the same here.
KEPT = frozenset({"vcl", "import", "sub", *(f"backend.{attr}" for attr in (
    "connect_timeout", "first_byte_timeout", "between_bytes_timeout", "max_connections", "host_header",
    "proxy_header", "preamble", "authority", "via"))})


def _keyword_start(text: str, at: int, keyword: str) -> int:
    return text.rindex(keyword, 0, at)


def _block_end(text: str, at: int) -> int:
    """The offset after the `}` closing the first `{` from `at` (strings and comments skipped)."""
    index, depth = text.index("{", at), 0
    while index < len(text):
        char = text[index]
        if char == '"':
            index = text.index('"', index + 1)
        elif char == "#" or text.startswith("//", index):
            index = text.find("\n", index)
            index = len(text) if index < 0 else index
            continue
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return len(text)


def _comment_out(edits: TextEdits, text: str, start: int, end: int, why: str) -> None:
    """Inside `/* */` (so the lines keep their numbers), or line by line when it holds `*/`."""
    old = text[start:end]
    if "*/" not in old:
        edits.replace_span(start, end, f"/* {MARK}: {why}: {old} */")
    else:
        edits.replace_span(start, end, "\n".join(f"# {line}" for line in old.split("\n")))


def addresses(rewritten: Rewritten) -> list[tuple[str, str]]:
    """(where, host) for every backend address the rewritten VCL names, read from its text."""
    return [(f"backend {b.name} ({b.token.where()})", b.attr("host") or b.attr("path") or "")
            for _, new, path in rewritten.files.values() for b in backends_in(path, new).values()]


def contacted(workdir: Path, series: str | None = None) -> set[str]:
    """`host:port` of every backend connection still in the run's shared-memory log, read by the
    varnishlog of the release that wrote it (`series`, None: the current one)."""
    # an unpacked release's own, else Debian's varnish package's, beside varnishd
    varnishlog = VARNISH.release(series).program("varnishlog") or find_executable("varnishlog")
    if varnishlog is None or not workdir.is_dir():
        return set()
    try:
        result = subprocess.run([varnishlog, "-n", str(workdir), "-d", "-g", "raw", "-i", "BackendOpen"],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    # `  3 BackendOpen  b 21 boot.api 127.0.0.1 8000 127.0.0.1 50598 connect`: the backend's address
    return {f"{m[1]}:{m[2]}" for m in re.finditer(r"BackendOpen\s+b\s+\d+\s+\S+\s+(\S+)\s+(\d+)", result.stdout)}


def checked(vcl: Vcl, series: str | None = None) -> None:
    """Varnish's own compiler (the release's that runs it, `series`; None: the current one) on the
    VCL pointed at loopback (no host name of the user's resolved); its message is the user's error,
    at the user's file and line."""
    binary = find_binary("varnish", series)
    if binary is None:
        raise UnusableInput(f"varnishd is needed to read VCL ({VARNISH.binary.install_hint})", file=str(vcl.entry))
    with tempfile.TemporaryDirectory(prefix="streamlab-vcl-") as scratch:
        folder = Path(scratch)
        rewritten = rewrite(vcl, RunPlan(8000, folder), listen_port=1)
        rewritten.write()
        try:
            result = subprocess.run([binary, *check(str(rewritten.main), f"{folder}/"),
                                     *VARNISH.release_args(VARNISH.release(series))], cwd=folder,
                                    capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise UnusableInput("varnishd -C did not finish", file=str(vcl.entry)) from None
        refusal = VARNISH.check_refusal(result.returncode, result.stderr + result.stdout)  # the one reading
        if refusal is None:
            return
        message, file, line = compile_error(rewritten, refusal)
        raise UnusableInput(f"varnish rejected the config:\n{message}", file=file, line=line)


def compile_error(rewritten: Rewritten, output: str) -> tuple[str, str | None, int | None]:
    """The compiler's `('FILE' Line N Pos M)` made the user's `file:line`."""
    found: list[tuple[str, int | None]] = []

    def where(match: re.Match[str]) -> str:
        file, line = rewritten.user_location(match[1], int(match[2]))
        found.append((file, line))
        return f"({file}:{line} column {match[3]})"
    lines = [line for line in output.strip().splitlines() if not line.startswith("Could not delete")]
    message = COMPILER_WHERE.sub(where, "\n".join(lines)).replace(str(rewritten.folder) + "/", "")
    file, line = found[0] if found else (None, None)
    return message, file, line
