"""Security headers on every HTTP answer of the API and the console (docs/dev/security.md).

- every answer: `X-Content-Type-Options: nosniff`, `Referrer-Policy: same-origin`,
  `X-Frame-Options: DENY`; over HTTPS, `Strict-Transport-Security` (a year);
- a Content-Security-Policy: the console's pages load only their own scripts and styles (htmx
  from /static; inline style attributes allowed), images and audio from themselves or `data:`
  (app answers), and no page may frame them (`frame-ancestors 'none'`); every other answer (JSON)
  gets `default-src 'none'`; the interactive API docs (`/api/docs`, which load Swagger UI from
  its CDN) only the framing rule.

A header the answer already carries is left as it is. A pure ASGI layer: it touches only the
start of each answer, long polls included.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONSOLE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; media-src 'self' data: blob:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)
API_CSP = "default-src 'none'; frame-ancestors 'none'"
DOCS_CSP = "frame-ancestors 'none'"
HSTS = "max-age=31536000"
COMMON = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
)


def policy(path: str, content_type: bytes) -> str:
    """The Content-Security-Policy of an answer to `path` of `content_type`."""
    if path.startswith("/api/docs"):
        return DOCS_CSP
    if content_type.startswith(b"text/html"):
        return CONSOLE_CSP
    return API_CSP


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        https = scope.get("scheme") == "https"
        path = str(scope.get("path", ""))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                have = {name.lower() for name, _ in headers}
                kind = next((v for n, v in headers if n.lower() == b"content-type"), b"")
                extra = [*COMMON, (b"content-security-policy", policy(path, kind).encode())]
                if https:
                    extra.append((b"strict-transport-security", HSTS.encode()))
                headers += [(n, v) for n, v in extra if n not in have]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
