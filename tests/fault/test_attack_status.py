"""`tierbot status` pointed at a port another program answers must say so, not crash."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bot.cli import main

BODIES = {"/truncated": b'{"channels": [', "/list": b"[1, 2]", "/empty": b"{}"}


class _Other(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = BODIES[self.path.split("/status")[0]]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def other_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Other)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path", list(BODIES))
def test_status_from_a_port_that_is_not_tierbot_exits_1_with_one_line(
    other_server: str, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cut-short JSON, a JSON list or an empty object at /status: exit 1 and one line
    saying the URL did not answer with tierbot's status, no traceback."""
    url = other_server + path
    assert main(["status", "--url", url]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tierbot: {url}/status did not answer with tierbot's status"), err
    assert len(err.splitlines()) == 1
