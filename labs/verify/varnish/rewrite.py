"""Rewrite a VCL config to run here, in front of the lab's server (see labs.verify.rewrite).

Edits on the user's own text (labs/verify/edits.py): every backend's `.host` becomes 127.0.0.1 and
its `.port` the lab's (a unix-socket `.path` backend becomes that too); health checks go (`.probe`
attributes and `probe` declarations, inside `/* */` so every line keeps its number); every
`include` names its copy in the run folder. `import`s, `std.log` and every sub stay as written.
The listen address is not in VCL: it is varnishd's `-a` flag (proxies/varnish/kind.py), a free
loopback port. For `loopback-only` the run's shared-memory log (`-n` in the run folder) is read
while it runs: `varnishlog -d -g raw -i BackendOpen` prints the address of each backend connection.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.edits import MARK, TextEdits
from labs.verify.rewrite import Rewritten
from labs.verify.varnish.config import Backend, Vcl, VclFile, parse
from proxies.binaries import find_binary
from proxies.kind import find_executable
from proxies.varnish.kind import KIND as VARNISH, WORK_FOLDER, check, compiler_message
from server.processes import free_port

LOOPBACK = "127.0.0.1"
CHECK_TIMEOUT_S = 60
COMPILER_WHERE = re.compile(r"\('([^']+)' Line (\d+) Pos (\d+)\)")


def rewrite(vcl: Vcl, lab_port: int, folder: Path, listen_port: int | None = None) -> Rewritten:
    written = {file.path: _target(vcl, file, folder) for file in vcl.files}
    files: dict[str, tuple[str, str, Path]] = {}
    notes: list[str] = []
    for file in vcl.files:
        edits = TextEdits(file.text)
        for backend in vcl.backends.values():
            if backend.token.file == file.path:
                _backend(edits, backend, lab_port, notes)
        for probe in vcl.probes:
            if probe.file == file.path:
                end = _block_end(file.text, probe.at)
                _comment_out(edits, file.text, _keyword_start(file.text, probe.at, "probe"), end,
                             "health checks off (they would probe the lab's server)")
        for line, name, target in file.includes:
            edits.replace(line, "include", f'include "{written[target]}"')
        files[str(file.path)] = (file.text, edits.apply(), written[file.path])
    if vcl.probes or any(".probe" in b.attrs for b in vcl.backends.values()):
        notes.append("health checks (probes) off: the lab's server is the only backend")
    notes.append("the listen address is varnishd's -a flag: 127.0.0.1 on a free port here")
    rewritten = Rewritten("varnish", folder, written[vcl.entry], listen_port=listen_port or free_port(),
                          files=files, notes=list(dict.fromkeys(notes)))
    # Read when it runs, by the release that runs it (its series is chosen after the rewrite).
    rewritten.contacted = lambda: contacted(folder / WORK_FOLDER, rewritten.series)
    return rewritten


def _target(vcl: Vcl, file: VclFile, folder: Path) -> Path:
    if file.path == vcl.entry:
        return folder / file.path.name
    try:
        return folder / file.path.resolve().relative_to(vcl.entry.resolve().parent)
    except ValueError:
        return folder / "included" / file.path.name


def _backend(edits: TextEdits, backend: Backend, lab_port: int, notes: list[str]) -> None:
    attrs = backend.attrs
    if "host" not in attrs and "path" not in attrs:
        return
    if "path" in attrs:
        value, attr = attrs["path"]
        edits.replace(attr.line, ".path", f'.host = "{LOOPBACK}"; .port = "{lab_port}"')
        notes.append(f"backend {backend.name}: its unix socket ({backend.attr('path')}) is the lab's server here")
    for name, new in (("host", f'"{LOOPBACK}"'), ("port", f'"{lab_port}"')):
        if name in attrs:
            _, attr = attrs[name]
            edits.replace(attr.line, f".{name}", f".{name} = {new}")
        elif "path" not in attrs:
            edits.insert_in_block(backend.token.line, backend.name, [f".{name} = {new};  # {MARK}"])
    if "probe" in attrs:
        value, attr = attrs["probe"]
        text = edits.original
        start = text.rindex(".", 0, attr.at + 1)
        end = value[-1].at + len(value[-1].text) if value else attr.at
        if value and value[0].text == "{":
            end = _block_end(text, value[0].at)
        semicolon = re.match(r"\s*;", text[end:])
        _comment_out(edits, text, start, end + (semicolon.end() if semicolon else 0),
                     "health check off (it would probe the lab's server)")


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


def addresses(main: Path) -> list[tuple[str, str]]:
    """(where, host) for every backend address the rewritten VCL names."""
    vcl = parse(main)
    return [(f"backend {b.name} ({b.token.where()})", b.attr("host") or b.attr("path") or "")
            for b in vcl.backends.values()]


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
        rewritten = rewrite(vcl, 8000, folder, listen_port=1)
        rewritten.write()
        try:
            result = subprocess.run([binary, *check(str(rewritten.main), f"{folder}/"),
                                     *VARNISH.release_args(VARNISH.release(series))], cwd=folder,
                                    capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise UnusableInput("varnishd -C did not finish", file=str(vcl.entry)) from None
        if result.returncode == 0:
            return
        message, file, line = compile_error(rewritten, compiler_message(result.stderr + result.stdout))
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
