"""Who may call the API, and which jobs ``POST /jobs`` accepts.

* Two bearer tokens: the read token (``service.api_read_token``) opens the read endpoints,
  the write token (``service.api_token``) opens everything. No credentials: 401; a wrong
  token, or none configured for that kind of access: 403. Tokens are compared in constant
  time, every configured one, so the answer's timing says nothing about which was close.
* ``POST /jobs`` registers files the service will read with its own rights, so it accepts
  only paths under ``[api] allowed_roots`` (symbolic links resolved before the check), and
  only the partitions and job ids ``[api]`` allows. A refusal is a 403 naming the field.
"""

from __future__ import annotations

import fnmatch
import os
import secrets
from collections.abc import Iterator, Sequence

from fastapi import HTTPException
from fastapi.security import HTTPAuthorizationCredentials

from trainmedic.api.models import JobRegistration
from trainmedic.service.config.sections import ApiConfig


def check_token(
    credentials: HTTPAuthorizationCredentials | None,
    accepted: Sequence[str],
    what: str,
) -> None:
    """401/403 unless ``credentials`` carry one of the ``accepted`` tokens."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    if not accepted:
        raise HTTPException(403, f"{what} are disabled: no token configured for them")
    given = credentials.credentials.encode()
    matches = [secrets.compare_digest(given, token.encode()) for token in accepted]
    if not any(matches):
        raise HTTPException(403, "invalid bearer token")


def _paths(body: JobRegistration) -> Iterator[tuple[str, str]]:
    for index, path in enumerate(body.log_paths):
        yield f"log_paths[{index}]", path
    for node, path in body.kernel_logs.items():
        yield f"kernel_logs[{node}]", path
    if body.checkpoint_dir:
        yield "checkpoint_dir", body.checkpoint_dir


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def admit_registration(body: JobRegistration, api: ApiConfig) -> None:
    """Raise HTTPException (403, or 422 for a path that is no absolute path) unless
    ``[api]`` allows this job, its partition and every path it names."""
    if api.allowed_jobs and not any(fnmatch.fnmatchcase(body.job_id, p) for p in api.allowed_jobs):
        raise HTTPException(403, f"job_id: {body.job_id!r} is not in [api] allowed_jobs")
    if api.allowed_partitions and body.partition not in api.allowed_partitions:
        raise HTTPException(
            403, f"partition: {body.partition!r} is not in [api] allowed_partitions"
        )
    roots = [os.path.realpath(root) for root in api.allowed_roots]
    configured = ", ".join(api.allowed_roots) or "none configured"
    for field, path in _paths(body):
        if not path.startswith("/") or "\x00" in path:
            raise HTTPException(422, f"{field}: {path[:200]!r} is not an absolute path")
        if not _under(os.path.realpath(path), roots):
            raise HTTPException(
                403, f"{field}: {path[:200]!r} is not under [api] allowed_roots ({configured})"
            )
