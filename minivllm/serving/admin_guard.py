"""Who may use ``/admin/*`` (the endpoints that read or change the engine at runtime), and within what bounds.

Not part of vLLM (its scheduler settings are fixed at start-up). The demo server binds 127.0.0.1, but a
page in the instructor's own browser can still reach it, so every admin request must pass, in order:

* ``--disable-admin`` is not set (else 404, as if the routes did not exist);
* its ``Host`` header names an allowed host: localhost names by default, ``--allowed-hosts`` widens it
  (``*`` allows any). This stops DNS rebinding: a page of evil.example whose name now points at
  127.0.0.1 sends ``Host: evil.example``;
* its ``Origin`` header, when a browser sends one, names an allowed host too;
* a ``POST`` is ``application/json``: a cross-site form or ``text/plain`` POST (the kinds a browser
  sends without asking first) is refused with 415, and a JSON one from another site needs a CORS
  preflight, which this server never grants;
* with ``--admin-token T``, it carries ``Authorization: Bearer T`` (the demo page passes
  ``?admin_token=T`` from its own address).

Values are bounded by what the server started with (:class:`AdminLimits`), so no request can make a
step arbitrarily long or admit more requests than the KV cache was sized for.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request

from minivllm.serving.protocol import APIError

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass
class AdminLimits:
    """Allowed ranges of the runtime scheduler settings: (low, high) inclusive."""

    max_num_batched_tokens: tuple[int, int]
    max_num_seqs: tuple[int, int]
    long_prefill_token_threshold: tuple[int, int]

    @classmethod
    def from_start(cls, max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int) -> AdminLimits:
        """Budgets up to max(start budget, max_model_len) (chunking off needs max_model_len), at most the
        start's max_num_seqs, thresholds 0..max_model_len."""
        return cls((1, max(max_num_batched_tokens, max_model_len)), (1, max_num_seqs), (0, max_model_len))

    def check(self, changes: dict[str, Any]) -> None:
        """Raise APIError naming the first setting of the wrong type or out of range."""
        for name, value in changes.items():
            if name == "enable_chunked_prefill":
                if not isinstance(value, bool):
                    raise APIError(f"enable_chunked_prefill must be true or false, got {value!r}.", name)
                continue
            low, high = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise APIError(f"{name} must be an integer in [{low}, {high}] on this server, got {value!r}.", name)


@dataclass
class AdminGuard:
    """The checks of the module docstring; ``check(request)`` raises APIError or returns."""

    enabled: bool = True
    token: str | None = None
    allowed_hosts: tuple[str, ...] = field(default=LOCAL_HOSTS)

    def host_allowed(self, host: str | None) -> bool:
        if "*" in self.allowed_hosts:
            return True
        return host is not None and host.lower() in self.allowed_hosts

    def check(self, request: Request) -> None:
        if not self.enabled:
            raise APIError(
                "The admin endpoints are disabled on this server (--disable-admin).", status=404, code="not_found"
            )
        host = urlsplit(f"//{request.headers.get('host', '')}").hostname
        if not self.host_allowed(host):
            allowed = list(self.allowed_hosts)
            raise APIError(
                f"Host {host!r} is not allowed to use /admin; allowed: {allowed} (start the server "
                "with --allowed-hosts to add one).",
                status=403,
                code="forbidden",
            )
        origin = request.headers.get("origin")
        if origin is not None and not self.host_allowed(urlsplit(origin).hostname):
            raise APIError(f"Origin {origin!r} is not allowed to use /admin.", status=403, code="forbidden")
        if request.method == "POST":
            media = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                raise APIError(
                    f"/admin takes application/json bodies only, got {media or 'none'!r}.",
                    status=415,
                    code="unsupported_media_type",
                )
        self.check_token(request)

    def check_token(self, request: Request) -> None:
        """With ``--admin-token T``: 401 unless the request carries ``Authorization: Bearer T``."""
        if self.token is not None:
            sent = request.headers.get("authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {self.token}".encode()):
                raise APIError(
                    "This server's /admin and /demo/chats need 'Authorization: Bearer <admin token>' (--admin-token).",
                    status=401,
                    code="unauthorized",
                )


def allowed_hosts(extra: str | None, bind_host: str) -> tuple[str, ...]:
    """Localhost names, the address the server binds (unless a wildcard) and ``--allowed-hosts`` a,b,c."""
    hosts = list(LOCAL_HOSTS)
    if bind_host not in ("0.0.0.0", "::", ""):
        hosts.append(bind_host.strip("[]").lower())
    hosts += [h.strip().lower() for h in (extra or "").split(",") if h.strip()]
    return tuple(dict.fromkeys(hosts))
