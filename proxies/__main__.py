"""python -m proxies render PROXY --variant NAME | export [--check] [--k8s DIR] | variants [PROXY]"""
from __future__ import annotations

import argparse
import sys

from pathlib import Path

from proxies.export import FIXED_DIR, export, exports, proven_text, stale_files, with_lab_certificate
from proxies.kubernetes import export as kubernetes
from proxies.kubernetes.export import K8S_DIR
from proxies.kubernetes.validate import ManifestInvalid
from proxies.binaries import BinaryProblem
from proxies.kinds import PROXY_NAMES, kind_of
from proxies.rendering import render
from proxies.validation import ConfigInvalid, validate
from proxies.variants import UnknownVariant, variant, variant_names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proxies", description="streamlab proxy configs")
    commands = parser.add_subparsers(dest="command", required=True)
    render_cmd = commands.add_parser("render", help="print one rendered config")
    render_cmd.add_argument("proxy", choices=PROXY_NAMES)
    render_cmd.add_argument("--variant", default="fixed", help="variant name (default: fixed)")
    render_cmd.add_argument("--no-validate", action="store_true", help="skip the binary's check")
    render_cmd.add_argument("--proxy-version", metavar="X.Y",
                            help="the release it is rendered for and checked by (default: the current one)")
    export_cmd = commands.add_parser("export", help=f"rewrite {FIXED_DIR} from the fixed variants")
    export_cmd.add_argument("--check", action="store_true",
                            help="write nothing; exit 1 when the files differ from a fresh export")
    export_cmd.add_argument("--k8s", metavar="DIR", type=Path,
                            help="write only the Kubernetes manifests (ingress-nginx, Gateway API with Envoy "
                                 f"Gateway, Traefik's CRDs), validated, into DIR (the repository's: {K8S_DIR})")
    list_cmd = commands.add_parser("variants", help="list the known variants")
    list_cmd.add_argument("proxy", nargs="?", choices=PROXY_NAMES)
    args = parser.parse_args(argv)

    try:
        if args.command == "render":
            try:
                settings = variant(args.proxy, args.variant)
            except UnknownVariant as exc:
                print(f"error: {exc}", file=sys.stderr)
                if ":" in args.variant:  # the old `SCENARIO:VARIANT` names
                    print("a scenario's config: python -m labs render SCENARIO --variant broken|fixed",
                          file=sys.stderr)
                return 2
            try:
                settings = settings.with_(version=kind_of(args.proxy).release(args.proxy_version).series)
            except ValueError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            # An exported variant prints as its file in proxies/fixed/ (header included), proven
            # by each release it claims.
            exported = next((export for export in exports().values() if export.proxy == args.proxy
                             and export.variant == args.variant and settings.version in export.series), None)
            if exported is not None:
                sys.stdout.write(exported.text() if args.no_validate else proven_text(exported))
            else:
                if not args.no_validate:
                    # A TLS config's certificate paths are checked when it runs (a missing file is
                    # an error then); the binary checks the text with the lab's certificate there.
                    validate(with_lab_certificate(settings))
                sys.stdout.write(render(settings))
        elif args.command == "export" and args.k8s is not None:
            if args.k8s.exists() and not args.k8s.is_dir():
                print(f"error: {args.k8s} is not a folder", file=sys.stderr)
                return 2
            for path in kubernetes.write(args.k8s):
                print(f"wrote {path}")
        elif args.command == "export":
            if args.check:
                stale = stale_files() + kubernetes.stale()
                for path in stale:
                    print(f"{path} differs from a fresh export; run `python -m proxies export`",
                          file=sys.stderr)
                return 1 if stale else 0
            for path in export() + kubernetes.write():
                print(f"wrote {path}")
        else:
            for proxy in [args.proxy] if args.proxy else PROXY_NAMES:
                print(f"{proxy}: {', '.join(variant_names(proxy))}")
    except (ConfigInvalid, BinaryProblem, ManifestInvalid) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
