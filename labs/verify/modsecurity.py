"""Whether ModSecurity inspects an event stream's response body, from its directives in the order
its rules set reads them (Apache's levels, or nginx's rules files): shared by both readers.
ModSecurity's defaults (its reference manual, v2 and v3 alike) apply where nothing sets one."""
from __future__ import annotations

import re
from typing import Iterable

from labs.verify.model import Setting
from labs.verify.rules import SSE

DEFAULTS = {"secruleengine": "off", "secresponsebodyaccess": "off", "secresponsebodymimetype": "text/plain text/html"}
# What reads a file named relative to the rule's own file (the OWASP rule set's `@pmFromFile
# scanners-user-agents.data`, modsecurity.conf's `SecUnicodeMapFile unicode.mapping`): each such file
# is copied beside the rule's copy (measured: without them httpd refused Debian's rule set, "Could
# not open phrase file").
DATA_FILES = re.compile(r"(?:@(?:pmFromFile|pmf|ipMatchFromFile|ipMatchF)|^\s*SecUnicodeMapFile)\s+([^\s\"'/][^\s\"']*)",
                        re.MULTILINE | re.IGNORECASE)
# The directives the judgement reads (lower-case, as both readers key them).
READ = frozenset({*DEFAULTS, "secresponsebodymimetypesclear"})


def judged(directives: Iterable[tuple[str, list[str], str]], where: str) -> Setting:
    """The "ModSecurity" setting from (directive lowercased, its arguments, file:line), in order:
    reads-sse or passes-sse, placed at the directive that decided it (else `where`). The first
    `SecResponseBodyMimeType` replaces the default list, later ones add to it;
    `SecResponseBodyMimeTypesClear` empties it; the last of the others wins."""
    found = dict(DEFAULTS)
    types, listed = found["secresponsebodymimetype"].split(), False
    for key, args, place in directives:
        if key == "secresponsebodymimetypesclear":
            types, where, listed = [], place, True
        elif key == "secresponsebodymimetype":
            kept = types if listed else []
            types, where, listed = [*kept, *(t.lower() for t in args if t.lower() not in kept)], place, True
        elif key in found and args:
            found[key] = args[0].lower()
            where = place if key == "secresponsebodyaccess" else where
    reads = found["secruleengine"] != "off" and found["secresponsebodyaccess"] == "on" and SSE in types
    text = (f"SecRuleEngine {found['secruleengine']}, SecResponseBodyAccess {found['secresponsebodyaccess']}, "
            f"SecResponseBodyMimeType {' '.join(types) or '(none)'}")
    return Setting("ModSecurity", "reads-sse" if reads else "passes-sse", text, where)
