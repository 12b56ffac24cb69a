"""The in-container relay, run here on the host against the stand-in gate: streaming, concurrency,
a clear 502 when the gate is down. (Inside a real sandbox: tests/test_sandbox_conformance.py.)"""

import concurrent.futures
import http.client
import http.server
import json
import socket
import socketserver
import subprocess
import sys
import threading

import httpx
import pytest

from showcase.sandbox.base import RELAY_ON_HOST
from showcase.sandbox.conformance import StandInGate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def relay(tmp_path):
    port = free_port()
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    proc = subprocess.Popen([sys.executable, str(RELAY_ON_HOST), "--listen", f"127.0.0.1:{port}",
                             "--socket", str(gate_dir / "gate.sock")], stdout=subprocess.PIPE, text=True)
    try:
        assert "relay ready" in proc.stdout.readline()
        yield port, gate_dir
    finally:
        proc.terminate()
        proc.wait(10)


def get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", path, headers={"Authorization": "Bearer k"})
    resp = conn.getresponse()
    return resp.status, resp.read()


def test_relay_streams_before_the_stream_ends(relay):
    port, gate_dir = relay
    with StandInGate(gate_dir):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/stream")
        resp = conn.getresponse()
        # The gate holds the second event until /ack arrives: reading the first proves no buffering.
        assert resp.fp.readline() == b"data: one\n"
        assert get(port, "/ack")[0] == 200
        rest = resp.read()
    assert b"data: two" in rest and b"no-ack" not in rest


def test_relay_serves_many_connections_at_once(relay):
    port, gate_dir = relay
    with StandInGate(gate_dir) as gate:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda _: get(port, "/v1/models"), range(48)))
    assert [status for status, _ in answers] == [200] * 48
    assert all(json.loads(body)["authorization"] == "Bearer k" for _, body in answers)
    assert len(gate.requests) == 48


def test_relay_answers_502_when_the_gate_is_down(relay):
    port, _ = relay
    status, body = get(port, "/v1/models")
    assert status == 502
    assert "gate unreachable" in json.loads(body)["error"]["message"]


def test_relay_passes_large_bodies_both_ways(relay, tmp_path):
    port, gate_dir = relay
    # an echo server standing in for the gate: what goes in must come back byte for byte
    path = gate_dir / "gate.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    payload = bytes(range(256)) * 20000  # 5 MB

    def echo():
        conn, _ = server.accept()
        while data := conn.recv(1 << 16):
            conn.sendall(data)
        conn.close()

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        pool.submit(echo)
        client = socket.create_connection(("127.0.0.1", port), 10)
        client.settimeout(20)
        sender = pool.submit(client.sendall, payload)
        got = bytearray()
        while len(got) < len(payload):
            chunk = client.recv(1 << 16)
            assert chunk, "relay closed early"
            got.extend(chunk)
        sender.result(10)
        client.shutdown(socket.SHUT_WR)  # half-close reaches the gate, whose close reaches us
        assert client.recv(10) == b""
        client.close()
    server.close()
    assert bytes(got) == payload


class _SSEChat(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _chunk(content: str, finish: str | None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class _SSEHandler(http.server.BaseHTTPRequestHandler):
    """Streamed chat completions; the second chunk waits until the client says it saw the first."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/ack":
            self.server.ack.set()
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(_chunk("Hel", None))
        self.wfile.flush()
        acked = self.server.ack.wait(15)
        self.wfile.write(_chunk("lo" if acked else " (relay buffered)", "stop"))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def test_openai_sdk_streams_through_the_relay(relay):
    from openai import OpenAI

    port, gate_dir = relay
    server = _SSEChat(str(gate_dir / "gate.sock"), _SSEHandler)
    server.ack = threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-x", max_retries=0, timeout=30)
        pieces = []
        for event in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True):
            pieces.append(event.choices[0].delta.content)
            if len(pieces) == 1:  # the first chunk is here while the server still holds the second
                client.post("/ack", body={}, cast_to=httpx.Response)
    finally:
        server.shutdown()
        server.server_close()
    assert "".join(pieces) == "Hello"
