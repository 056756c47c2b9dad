"""The server's start and end as an operator sees them in the terminal (§11.9).

* At start-up the page's address is printed once uvicorn listens (the real port, also for ``--port 0``);
  never with the admin token in it (the terminal is projected in a lecture).
* The access log leaves out the polls (``/admin/state`` and the other read-only endpoints a page or a
  scraper calls every second: 531 of 567 lines of a rehearsal) unless they fail, and never shows a secret:
  ``admin_token=`` in a query string is written as ``admin_token=***``.
* SIGTERM (or ``should_exit``): uvicorn stops accepting connections, the engine refuses new requests, the ones
  in flight get ``SHUTDOWN_GRACE_S`` to finish, then each ends in the OpenAI error shape ("server shutting
  down", 503: a stream gets its error event and ``[DONE]``, a plain request a JSON error). Every connection
  has then answered before uvicorn's own graceful-shutdown timeout, so nothing is cancelled mid-body.

Mirrors what ``vllm serve`` prints and does (``vllm/entrypoints/openai/api_server.py``: the route list, the
uvicorn server, ``--disable-uvicorn-access-log``), with minivllm's additions said here.
"""

from __future__ import annotations

import logging
import re
import socket
from typing import Any

import uvicorn

from minivllm.serving.async_engine import AsyncEngine

logger = logging.getLogger("minivllm.entrypoints")

SHUTDOWN_GRACE_S = 2.0  # requests in flight at SIGTERM may finish within this; the rest end with an error
GRACEFUL_SHUTDOWN_S = 5  # uvicorn's own bound (timeout_graceful_shutdown): later than the grace, so never hit
QUIET_PATHS = ("/admin/state", "/admin/trace", "/admin/scheduling", "/health", "/metrics", "/v1/models")
SECRET_QUERY = re.compile(r"((?:^|[?&])admin_token=)[^&#\s]*")


def redact(path: str) -> str:
    """``path`` with the value of any ``admin_token`` query parameter replaced by ``***``."""
    return SECRET_QUERY.sub(r"\1***", path)


class AccessLogFilter(logging.Filter):
    """On ``uvicorn.access``: drops successful polls of ``QUIET_PATHS`` (GET), redacts secrets in the rest.
    uvicorn's access record has ``args`` = (client, method, path with query, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        client, method, path, version, status = args
        if method == "GET" and isinstance(status, int) and status < 400:
            if str(path).split("?", 1)[0] in QUIET_PATHS:
                return False
        record.args = (client, method, redact(str(path)), version, status)
        return True


def install_access_log_filter() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogFilter) for f in access.filters):
        access.addFilter(AccessLogFilter())


def page_address(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


class Server(uvicorn.Server):
    """uvicorn's server, with the start-up address and the engine's part of the shutdown."""

    def __init__(self, config: uvicorn.Config, engine: AsyncEngine, admin_token: bool) -> None:
        super().__init__(config)
        self.engine, self.admin_token = engine, admin_token

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.servers and self.servers[0].sockets:
            port = self.servers[0].sockets[0].getsockname()[1]
            address = page_address(self.config.host, port)
            token = " (add ?admin_token=<your --admin-token> to the address)" if self.admin_token else ""
            logger.info("the demo page: %s%s; the OpenAI API: %sv1", address, token, address)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connection; uvicorn's shutdown closes them again (a no-op)
        ended = await self.engine.close(SHUTDOWN_GRACE_S)
        if ended:
            logger.info("shutting down: %d request(s) still in flight ended with 'server shutting down'", ended)
        await super().shutdown(sockets)
        logger.info("minivllm serve stopped cleanly")


def build(app: Any, engine: AsyncEngine, admin_token: bool, **settings: Any) -> Server:
    install_access_log_filter()
    return Server(uvicorn.Config(app, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, **settings), engine, admin_token)
