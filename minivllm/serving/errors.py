"""The OpenAI error body as an exception (vLLM's ``ErrorResponse``, ``vllm/entrypoints/openai/protocol.py``)."""

from __future__ import annotations

from typing import Any


class APIError(Exception):
    """An error that becomes an OpenAI-style JSON body: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        message: str,
        param: str | None = None,
        status: int = 400,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.headers = message, param, status, headers
        self.code = code or {404: "model_not_found"}.get(status, self.type)

    @property
    def type(self) -> str:
        return "invalid_request_error" if 400 <= self.status < 500 else "server_error"

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
