"""The open-file limit: every stream holds a socket, so the soft RLIMIT_NOFILE caps concurrency.

Shells often start processes with a soft limit of 1024 (or less) under a much higher hard limit.
When the server runs out, accept() fails with EMFILE and requests get 500s or resets
(`server-fd-limit`: with `ulimit -n 512`, 161 of 1,000 streams failed). A process may raise its
own soft limit up to the hard limit without privileges, so the server does that at start-up.
"""
from __future__ import annotations

import logging

try:
    import resource
except ImportError:  # pragma: no cover - not on Windows
    resource = None  # type: ignore[assignment]

log = logging.getLogger("server.limits")

# Below this many descriptors a few thousand concurrent streams cannot be served.
LOW_FD_LIMIT = 4096


def raise_fd_limit(keep: bool = False) -> int | None:
    """Raise the soft open-file limit to the hard limit (unless `keep`); returns the soft limit
    in force afterwards, and warns in one line when it is low."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if not keep and (hard == resource.RLIM_INFINITY or soft < hard):
        # An infinite hard limit cannot be the soft one on Linux (nr_open caps it): take 1M.
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        else:
            log.info("open-file limit raised from %d to %d (hard limit)", soft, target)
            soft = target
    else:
        log.info("open-file limit %s at %d (hard limit %s)",
                 "kept (--keep-fd-limit)" if keep else "already", soft,
                 "unlimited" if hard == resource.RLIM_INFINITY else hard)
    if soft < LOW_FD_LIMIT:
        log.warning("open-file limit is %d: fewer than ~%d concurrent streams will fit before "
                    "accept() fails with EMFILE; raise it with `ulimit -n` (hard limit %s)",
                    soft, soft - 32, "unlimited" if hard == resource.RLIM_INFINITY else hard)
    return soft
