"""The package index agentscope's releases are listed from and installed from.

Listing and installing must ask the same index, so the gate works out the
indexes once, the way uv would (its environment variables, then its user
and system ``uv.toml``; pip's ``PIP_INDEX_URL`` and ``PIP_EXTRA_INDEX_URL``
are honoured too, since uv does not read them), lists releases from them
through the simple repository API (PEP 691 JSON, or PEP 503 HTML), and hands
the same indexes to every uv install (:meth:`Indexes.uv_arguments`). No pip
is needed.
"""
from __future__ import annotations

import base64
import json
import os
import re
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

PYPI = "https://pypi.org/simple"

#: Seconds to wait for the index (uv's own default HTTP timeout).
TIMEOUT = float(os.environ.get("UV_HTTP_TIMEOUT", "30"))

_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class IndexUnreachable(Exception):
    """The index could not be asked (one line saying why)."""


@dataclass(frozen=True)
class Indexes:
    """The default index and the extra ones, in uv's order of preference
    (extras first, the default last)."""

    default: str
    extra: tuple[str, ...] = ()
    every_index: bool = False  # uv's ``unsafe-*`` strategies: all indexes count

    def in_order(self) -> tuple[str, ...]:
        return (*self.extra, self.default)

    def uv_arguments(self) -> list[str]:
        """What makes a ``uv pip install`` use exactly these indexes."""
        arguments = ["--default-index", self.default]
        for url in self.extra:
            arguments += ["--index", url]
        return arguments


def _split(text: str | None) -> list[str]:
    """A space-separated list of URLs (``name=url`` entries keep the URL)."""
    urls = []
    for item in (text or "").split():
        name, _, url = item.partition("=")
        urls.append(url if url and "://" in url and "://" not in name else item)
    return urls


def _uv_config(environ) -> dict:
    """Index settings of the user's and the system's ``uv.toml`` (the user's
    win), or of ``$UV_CONFIG_FILE`` alone."""
    if environ.get("UV_NO_CONFIG"):
        return {}
    if environ.get("UV_CONFIG_FILE"):
        files = [Path(environ["UV_CONFIG_FILE"])]
    else:
        user = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "uv" / "uv.toml"
        system = [Path(d) / "uv" / "uv.toml"
                  for d in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")]
        files = [user, *system, Path("/etc/uv/uv.toml")]
    merged: dict = {}
    for path in reversed(files):  # the first file wins
        try:
            merged.update(tomllib.loads(path.read_text(encoding="utf-8")))
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return merged


def configured(environ=None) -> Indexes:
    """The indexes uv would use, from ``environ`` (default: this process')."""
    environ = os.environ if environ is None else environ
    config = _uv_config(environ)
    declared = [i for i in config.get("index") or [] if not i.get("explicit")]
    default = (
        environ.get("UV_DEFAULT_INDEX")
        or environ.get("UV_INDEX_URL")
        or environ.get("PIP_INDEX_URL")
        or next((i.get("url") for i in declared if i.get("default")), None)
        or config.get("index-url")
        or PYPI
    )
    extra = [
        *_split(environ.get("UV_INDEX")),
        *_split(environ.get("UV_EXTRA_INDEX_URL")),
        *_split(environ.get("PIP_EXTRA_INDEX_URL")),
        *(i["url"] for i in declared if i.get("url") and not i.get("default")),
        *(config.get("extra-index-url") or []),
    ]
    strategy = environ.get("UV_INDEX_STRATEGY") or config.get("index-strategy") or ""
    return Indexes(
        default=default.rstrip("/"),
        extra=tuple(dict.fromkeys(u.rstrip("/") for u in extra if u.rstrip("/") != default)),
        every_index=strategy.startswith("unsafe"),
    )


def versions(project: str, indexes: Indexes) -> list[Version]:
    """Every version of ``project`` with a file that is not yanked, from the
    first index that has the project (every index under uv's ``unsafe-*``
    strategies); :class:`IndexUnreachable` if no index could be asked."""
    found: set[Version] = set()
    problems = []
    for url in indexes.in_order():
        try:
            listed = _versions_on(url, canonicalize_name(project))
        except IndexUnreachable as failed:
            problems.append(str(failed))
            continue
        if listed is None:
            continue
        found |= listed
        if not indexes.every_index:
            return sorted(found)
    if not found and problems:
        raise IndexUnreachable("; ".join(problems))
    return sorted(found)


def _versions_on(index: str, project: str) -> set[Version] | None:
    """The versions ``index`` lists for ``project`` (``None``: not there)."""
    scheme, netloc, path, query, fragment = urlsplit(f"{index}/{project}/")
    headers = {"Accept": _ACCEPT}
    if "@" in netloc:  # credentials in the URL: sent as basic auth
        userinfo, netloc = netloc.rsplit("@", 1)
        headers["Authorization"] = "Basic " + base64.b64encode(
            unquote(userinfo).encode()
        ).decode()
    url = urlunsplit((scheme, netloc, path, query, fragment))
    if scheme == "file":
        url += "index.html"
    shown = urlunsplit((scheme, netloc, path, "", ""))
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=TIMEOUT) as answer:
            kind = answer.headers.get("Content-Type", "")
            body = answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as refused:
        if refused.code == 404:
            return None
        raise IndexUnreachable(f"{shown}: HTTP {refused.code} {refused.reason}") from None
    except (urllib.error.URLError, OSError) as failed:
        reason = getattr(failed, "reason", failed)
        if scheme == "file" and isinstance(reason, FileNotFoundError) and (
            Path(unquote(path)).parent.is_dir()  # the index is there, the project not
        ):
            return None
        raise IndexUnreachable(f"{shown}: {reason}") from None
    if "json" in kind:
        files = [(f["filename"], bool(f.get("yanked"))) for f in json.loads(body)["files"]]
    else:
        files = [
            (name, "data-yanked" in attributes)
            for attributes, name in re.findall(r"<a\b([^>]*)>\s*([^<\s]+)\s*</a>", body)
        ]
    return {v for name, yanked in files if not yanked and (v := _version_of(name))}


def _version_of(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
