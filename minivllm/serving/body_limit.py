"""A bound on the size of a request body, enforced before the body is read (ASGI middleware).

vLLM leaves this to the web server in front of it; minivllm's server faces students' scripts
directly, so one 30 MB prompt must be refused in well under a second, without the event loop (and
every other stream) waiting for it to be parsed and tokenized. A ``Content-Length`` over the bound is
answered 413 without parsing (the bytes are read and dropped, so that the client, still sending, gets the
answer rather than a reset); a body sent without one (chunked) is counted as it arrives and refused at the
first byte past the bound.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException

DEFAULT_MAX_BODY_BYTES = 8 * 2**20
MAX_DISCARDED_BYTES = 256 * 2**20  # past this, an oversized body is cut off rather than read to its end


def too_large_message(limit: int) -> str:
    return f"The request body is larger than this server's limit of {limit} bytes (--max-request-body-bytes)."


class BodySizeLimit:
    """``app = BodySizeLimit(app, max_bytes)``: 413, in the OpenAI error shape, for larger bodies."""

    def __init__(self, app: Any, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_request_body_bytes must be at least 1, got {max_bytes}.")
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._discard_body(receive)  # a client still sending would see a reset, not the answer
            await self._refuse(send)
            return
        received = 0

        async def counted() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:  # FastAPI re-raises an HTTPException from the body read
                    raise HTTPException(413, too_large_message(self.max_bytes))
            return message

        await self.app(scope, counted, send)

    @staticmethod
    async def _discard_body(receive: Any, at_most: int = MAX_DISCARDED_BYTES) -> None:
        """Read what the client sends and drop it (no parsing, nothing kept), up to ``at_most`` bytes."""
        seen = 0
        while seen <= at_most:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                return
            seen += len(message.get("body", b""))

    async def _refuse(self, send: Any) -> None:
        error = {
            "message": too_large_message(self.max_bytes),
            "type": "invalid_request_error",
            "param": None,
            "code": "request_too_large",
        }
        body = json.dumps({"error": error}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
