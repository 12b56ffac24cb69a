"""The gate against a hostile agent and a hostile upstream: one test per way it was made to give.

Each case is what was done to the gate before it had bounds: a huge body with a wrong key, one
64 MiB event without its blank line, an endless stream, paths beyond what an agent needs, a
stream still running at the hard stop. Clients are the openai SDK, curl, httpx and a raw socket;
the upstream is the scripted one (tests/gate_upstream.py), whose `.received` shows what got through.
"""

import fcntl
import json
import socket
import struct
import termios
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gate_upstream import KEY, MODEL, MSG, UpstreamTimeouts, rig, said, scripted, upstream, wait_until  # noqa: E402,F401

from showcase.gate.config import GateLimits
from showcase.gate.log import read_log

MiB = 1 << 20


def _status_kib(pid: int, field: str) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(field + ":"):
            return int(row.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _queued_still(sock: socket.socket) -> bool:
    """Whether the bytes waiting unread on `sock` stopped growing (for half a second)."""
    def queued() -> int:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]

    before = queued()
    time.sleep(0.5)
    return before > 0 and queued() == before


def _push_body(port: int, head: bytes, total: int, chunked: bool = False) -> tuple[int, bytes]:
    """Send a request head, then up to `total` body bytes until the gate stops taking them.

    Returns (bytes the gate took, its answer). A reader thread collects the answer meanwhile,
    so it is kept even when the gate closes the connection under the sender."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    answer = bytearray()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                answer.extend(data)
        except OSError:
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    piece = b"\0" * MiB
    try:
        sock.sendall(head)
        while sent < total:
            if chunked:
                sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            else:
                sock.sendall(piece)
            sent += len(piece)
    except OSError:  # the gate closed the connection: what it did not take was never read
        pass
    reader.join(30)
    sock.close()
    return sent, bytes(answer)


@pytest.fixture(scope="module")
def gate_process(upstream, tmp_path_factory):
    """`showcase gate` in its own process, so its memory is its own to measure."""
    tmp = tmp_path_factory.mktemp("gate-process")
    proc = subprocess.Popen(
        [sys.executable, "-m", "showcase.cli", "gate", "--upstream", upstream.url, "--model", MODEL, "--no-probe",
         "--key", KEY, "--listen", "tcp:127.0.0.1:0", "--log-dir", str(tmp / "log"), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        where = json.loads(proc.stdout.readline())
        yield proc, where["tcp_port"], tmp / "log"
    finally:
        proc.terminate()
        proc.wait(20)


def test_huge_body_with_wrong_key_is_never_read_nor_kept(gate_process, upstream):
    proc, port, log_dir = gate_process
    before = len(upstream.received)
    httpx.get(f"http://127.0.0.1:{port}/v1/models", headers={"authorization": f"Bearer {KEY}"}, timeout=20)
    rss_kib = _status_kib(proc.pid, "VmRSS")
    total = 300 * MiB
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gate\r\nAuthorization: Bearer wrong\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % total)
    sent, answer = _push_body(port, head, total)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "invalid_api_key"
    assert sent < total // 2  # the gate hung up instead of taking the rest
    # The same without a length (chunked): refused from the head alone too.
    chunked = head.replace(b"Content-Length: %d" % total, b"Transfer-Encoding: chunked")
    sent, answer = _push_body(port, chunked, total, chunked=True)
    assert answer.startswith(b"HTTP/1.1 401") and sent < total // 2
    grown_mib = (_status_kib(proc.pid, "VmHWM") - rss_kib) / 1024
    assert grown_mib < 32, f"the gate's peak memory grew {grown_mib:.0f} MiB for bodies it refused"
    assert len(upstream.received) == before + 1  # only the models request
    assert wait_until(lambda: len(read_log(log_dir / "gate.log")) >= 3)
    refused = [l for l in read_log(log_dir / "gate.log") if l.status == 401]
    assert len(refused) == 2 and all(l.blocked and l.bytes_in == 0 for l in refused)
    kept = [p for p in (log_dir / "bodies").iterdir() if p.name.startswith((refused[0].id, refused[1].id))]
    assert [p.name.split(".", 1)[1] for p in kept] == ["response.json"] * 2  # the gate's own answer, no more
    assert all(p.stat().st_size < 1000 for p in kept)


def test_body_over_the_cap_is_413_without_reading_on(gate_process, upstream):
    proc, port, log_dir = gate_process
    before = len(upstream.received)
    rss_kib = _status_kib(proc.pid, "VmRSS")
    total = 300 * MiB
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gate\r\nAuthorization: Bearer " + KEY.encode() +
            b"\r\nContent-Type: application/json\r\n")
    sent, answer = _push_body(port, head + b"Content-Length: %d\r\n\r\n" % total, total)
    assert answer.startswith(b"HTTP/1.1 413") and sent < total // 2
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_too_large"
    sent, answer = _push_body(port, head + b"Transfer-Encoding: chunked\r\n\r\n", total, chunked=True)
    assert answer.startswith(b"HTTP/1.1 413") and sent < total // 2  # read up to the 32 MiB cap, no further
    grown_mib = (_status_kib(proc.pid, "VmHWM") - rss_kib) / 1024
    assert grown_mib < 100, f"the gate's peak memory grew {grown_mib:.0f} MiB for bodies over its 32 MiB cap"
    assert len(upstream.received) == before


def test_body_cap_in_the_api_error_format(rig, upstream):
    r = rig(settings={"limits": GateLimits(max_request_bytes=MiB)})
    before = len(upstream.received)
    with pytest.raises(openai.APIStatusError) as caught:
        r.sdk().chat.completions.create(model="x", messages=[{"role": "user", "content": "y" * (2 * MiB)}])
    assert caught.value.status_code == 413 and caught.value.code == "request_too_large"
    assert r.sdk().chat.completions.create(model="x", messages=MSG).choices[0].message.content == "hello"
    assert len(upstream.received) == before + 1
    refused, ok = r.lines(2)
    assert refused.blocked and refused.blocked_why == f"body over {MiB} bytes"
    assert refused.bodies == [f"bodies/{refused.id}.response.json"]  # its own answer; the body was not kept
    assert r.stats(2).blocked_why == {f"body over {MiB} bytes": 1}


def test_a_64_mib_event_without_its_end_stalls_nothing_else(gate_process, upstream):
    """The stream is cut at the per-event cap; other requests are answered all along."""
    proc, port, log_dir = gate_process
    base = f"http://127.0.0.1:{port}/v1"
    auth = {"authorization": f"Bearer {KEY}"}
    got: dict = {}

    def big() -> None:
        with httpx.stream("POST", f"{base}/chat/completions", json={"model": "x", "messages": said("bigevent"), "stream": True},
                          headers=auth, timeout=60) as response:
            got["body"] = response.read()
        got["ended"] = time.monotonic()

    streams_before = len(upstream.sent)
    thread = threading.Thread(target=big)
    thread.start()
    assert wait_until(lambda: len(upstream.sent) > streams_before and upstream.sent[-1] > 0, 20)
    answered = []
    for _ in range(10):  # each must come back within its own bound while the big event flows
        assert httpx.get(f"{base}/models", headers=auth, timeout=10).status_code == 200
        answered.append(time.monotonic())
    thread.join(60)
    assert not thread.is_alive()
    events = [e for e in got["body"].split(b"\n\n") if e]
    error = json.loads(events[0].removeprefix(b"data: "))["error"]
    assert error["code"] == "event_too_large" and events[-1] == b"data: [DONE]"
    assert len(got["body"]) < 4096  # half an event never reaches the client
    [line] = [l for l in read_log(log_dir / "gate.log") if l.error and "event" in l.error]
    assert line.shortened and "answer cut" in line.shortened_why and str(8 * MiB) in line.shortened_why


def test_a_64_mib_event_passes_in_linear_time_when_the_cap_allows(rig, upstream):
    """With the cap raised, the whole event goes through while small requests keep being answered."""
    r = rig(settings={"limits": GateLimits(max_event_bytes=128 * MiB, max_answer_bytes=128 * MiB),
                      "upstream_timeout_s": UpstreamTimeouts(stall_s=30, first_byte_s=30)})
    got: dict = {}

    def big() -> None:
        with httpx.stream("POST", f"{r.base}/chat/completions", json={"model": "x", "messages": said("bigevent"), "stream": True},
                          headers={"authorization": f"Bearer {KEY}"}, timeout=60) as response:
            got["body"] = response.read()
        got["ended"] = time.monotonic()

    streams_before = len(upstream.sent)
    thread = threading.Thread(target=big)
    thread.start()
    assert wait_until(lambda: len(upstream.sent) > streams_before and upstream.sent[-1] > 0, 20)
    first_small = None
    for _ in range(5):
        assert r.sdk().models.list().data[0].id == MODEL  # the SDK's own 10 s bound
        first_small = first_small or time.monotonic()
    thread.join(120)
    assert not thread.is_alive()
    event, done = got["body"].split(b"\n\n")[:2]
    assert len(json.loads(event.removeprefix(b"data: "))["pad"]) == 64 * MiB and done == b"data: [DONE]"
    assert first_small < got["ended"]  # answered while the event was still on its way
    big_line = [l for l in r.lines(6) if l.stream][0]
    assert big_line.error is None and big_line.bytes_out == len(got["body"])
    # 64 MiB is over the per-body storage cap: not kept, and the line says why.
    assert big_line.bodies_not_kept and "cap on one stored body" in big_line.bodies_not_kept[-1]


def test_an_endless_stream_is_cut_at_the_time_cap(rig):
    r = rig(settings={"limits": GateLimits(answer_s=2)})  # the stall bound (1.5 s) never fires: it sends
    with pytest.raises(openai.APIError, match="2 s cap on one answer"):
        for _ in r.sdk().chat.completions.create(model="x", messages=said("endless"), stream=True):
            pass
    out = subprocess.run(["curl", "-sN", "--unix-socket", str(r.server.socket_path), "http://gate/v1/responses",
                          "-H", f"Authorization: Bearer {KEY}", "-H", "Content-Type: application/json",
                          "-d", json.dumps({"model": "x", "input": scripted("hi", "endless"), "stream": True})],
                         capture_output=True, timeout=30)
    events = [e for e in out.stdout.split(b"\n\n") if e]
    assert events[-1].startswith(b"event: error\ndata: ")
    assert json.loads(events[-1].split(b"data: ", 1)[1])["code"] == "answer_too_long"
    assert all(e.startswith(b"data: {") for e in events[:-1]) and len(events) > 5  # whole events, then the error
    lines = r.lines(2)
    assert all(l.shortened and "answer cut" in l.shortened_why and "2 s cap" in l.shortened_why for l in lines)
    assert r.stats(2).shortened == 2


def test_answers_are_cut_at_the_byte_cap(rig):
    r = rig(settings={"limits": GateLimits(max_answer_bytes=MiB)})
    with pytest.raises(openai.APIError, match=f"{MiB}-byte cap"):
        for _ in r.sdk().chat.completions.create(model="x", messages=said("flood"), stream=True):
            pass
    with pytest.raises(openai.APIStatusError) as caught:
        r.sdk().chat.completions.create(model="x", messages=said("huge", size=2 * MiB))
    assert caught.value.status_code == 502 and caught.value.code == "answer_too_large"
    flood, huge = r.lines(2)
    assert flood.bytes_out < MiB + 4096 and flood.shortened and huge.shortened
    assert "answer cut" in huge.shortened_why and huge.status == 502


def test_paths_and_methods_beyond_an_agents_needs_never_reach_the_upstream(rig, upstream):
    r = rig()
    sdk = r.sdk()
    before = len(upstream.received)
    with pytest.raises(openai.NotFoundError, match="not served"):
        sdk.files.list()
    with pytest.raises(openai.NotFoundError, match="not served"):
        sdk.batches.create(completion_window="24h", endpoint="/v1/chat/completions", input_file_id="file-1")
    with pytest.raises(openai.APIStatusError) as caught:
        sdk.models.delete("x")
    assert caught.value.status_code == 405 and caught.value.code == "method_not_allowed"
    with pytest.raises(openai.NotFoundError):
        sdk.embeddings.create(model="x", input="abc")
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "-H", f"Authorization: Bearer {KEY}",
                          f"http://127.0.0.1:{r.server.tcp_port}/v1/chat/completions"], capture_output=True, text=True, timeout=20)
    body, code = out.stdout.rsplit("\n", 1)
    assert code == "405" and json.loads(body)["error"]["code"] == "method_not_allowed"
    assert len(upstream.received) == before
    lines = r.lines(5)
    assert [(l.method, l.blocked_why) for l in lines] == [
        ("GET", "path not served"), ("POST", "path not served"), ("DELETE", "method not allowed"),
        ("POST", "path not served"), ("GET", "method not allowed")]
    assert r.stats(5).blocked_why == {"path not served": 3, "method not allowed": 2}


def test_a_stream_running_at_the_hard_stop_is_cut(rig, upstream):
    r = rig(settings={"upstream_timeout_s": UpstreamTimeouts(stall_s=30, first_byte_s=30)})
    sdk = r.sdk()
    flowing = sdk.chat.completions.create(model="x", messages=said("endless"), stream=True)
    waiting = sdk.responses.create(model="x", input=scripted("hi", "hold"), stream=True)
    next(iter(flowing))
    next(iter(waiting))
    pending: dict = {}

    def slow() -> None:  # a non-streamed answer whose headers are still awaited
        try:
            sdk.chat.completions.create(model="x", messages=said("slow"))
        except openai.APIStatusError as exc:
            pending["error"] = exc

    before = len(upstream.received)
    thread = threading.Thread(target=slow)
    thread.start()
    assert wait_until(lambda: len(upstream.received) > before)
    r.gate.hard_stop()  # from this thread, as the run does
    with pytest.raises(openai.APIError, match="hard stop"):
        for _ in flowing:
            pass
    events = list(waiting)  # without the cut: silence for a minute, then the stall error at 30 s
    assert events[-1].type == "error" and events[-1].code == "run_over"
    thread.join(20)
    assert pending["error"].status_code == 403 and pending["error"].code == "run_over"
    lines = [l for l in r.lines(3)]
    assert len(lines) == 3 and all(l.shortened and "hard stop" in l.shortened_why for l in lines)
    assert all(l.error and l.error.startswith("answer cut") for l in lines)


def test_the_hard_stop_by_the_clock_cuts_a_flowing_stream(rig):
    r = rig()
    stream = r.sdk().chat.completions.create(model="x", messages=said("endless"), stream=True)
    next(iter(stream))
    r.clock.now += 7200  # the run's hard_stop_after_s
    with pytest.raises(openai.APIError, match="hard stop"):
        for _ in stream:
            pass
    [line] = r.lines(1)
    assert line.shortened and "hard stop" in line.shortened_why


def test_stored_bodies_have_caps_of_their_own(rig):
    r = rig(settings={"limits": GateLimits(max_stored_body_bytes=4000, max_stored_bytes=6000)})
    sdk = r.sdk()
    sdk.chat.completions.create(model="x", messages=[{"role": "user", "content": "y" * 5000}])
    for _ in range(4):
        sdk.chat.completions.create(model="x", messages=[{"role": "user", "content": "z" * 2000}])
    lines = r.lines(5)
    assert not any(name.endswith("request.json") for name in lines[0].bodies)
    assert "cap on one stored body" in lines[0].bodies_not_kept[0] and lines[0].bodies  # its answer is kept
    assert any("cap on all stored bodies" in why for l in lines[1:] for why in l.bodies_not_kept)
    assert r.gate.flush_records()
    kept = sum(p.stat().st_size for p in (r.log_dir / "bodies").iterdir())
    assert kept <= 6000 and all((r.log_dir / name).exists() for l in lines for name in l.bodies)
    stats = r.stats(5)
    assert stats.bodies_kept_bytes == kept and stats.bodies_not_kept == sum(len(l.bodies_not_kept) for l in lines)


async def test_the_backend_connects_to_a_unix_socket_upstream(upstream, tmp_path):
    """connect_unix_socket and sleep belong to the gate's own network backend (httpcore calls them)."""
    import httpcore

    from showcase.gate.server import AppServer
    from showcase.gate.transport import AsyncioBackend

    with AppServer(upstream.app, [f"unix:{tmp_path}/up.sock"]):
        backend = AsyncioBackend()
        await backend.sleep(0.01)
        async with httpcore.AsyncConnectionPool(uds=str(tmp_path / "up.sock"), network_backend=backend) as pool:
            response = await pool.request("GET", "http://upstream/v1/models")
        assert json.loads(response.content)["data"][0]["id"] == MODEL
        with pytest.raises(httpcore.ConnectError):
            await backend.connect_unix_socket(str(tmp_path / "none.sock"), timeout=2)


def test_a_client_that_stops_reading_is_cut_at_the_hard_stop(rig, upstream):
    """Its stream fills the socket buffers and the gate's send waits: the hard stop still ends it."""
    r = rig(settings={"upstream_timeout_s": UpstreamTimeouts(stall_s=30, first_byte_s=30)})
    body = json.dumps({"model": "x", "messages": said("flood"), "stream": True}).encode()
    sock = socket.create_connection(("127.0.0.1", r.server.tcp_port), timeout=30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gate\r\nAuthorization: Bearer " + KEY.encode() +
                     b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert wait_until(lambda: upstream.received and b"[script:flood]" in json.dumps(upstream.last()["body"]).encode())
        assert wait_until(lambda: _queued_still(sock), 20)  # every buffer on the way is full: the gate waits to send
        assert not (r.log_dir / "gate.log").read_text()  # the answer is still under way
        r.gate.hard_stop()
        [line] = r.lines(1)  # recorded within the bound, not after the flood's minute (or never)
        assert line.shortened and "hard stop" in line.shortened_why and line.bytes_out < 64 * MiB
        # Nearly always the gate was waiting to send: that wait is what the hard stop ended. (If
        # the hard stop caught it waiting on the upstream, the error event still fit the buffer.)
        assert line.client_gone == ("stopped reading" in line.shortened_why)
    finally:
        sock.close()


def test_a_client_gone_while_sending_its_body_is_no_gate_fault(rig, upstream):
    r = rig()
    before = len(upstream.received)
    with socket.create_connection(("127.0.0.1", r.server.tcp_port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gate\r\nAuthorization: Bearer " + KEY.encode() +
                     b"\r\nContent-Length: 1000\r\n\r\n" + b"{" * 10)
    [line] = r.lines(1)
    assert line.client_gone and "gate fault" not in (line.error or "") and r.stats(1).errors == 0
    assert line.not_completed and line.not_completed_why == "the client left while sending its body"
    assert r.stats(1).not_completed == 1
    assert len(upstream.received) == before


def test_a_body_still_arriving_at_the_hard_stop_is_cut_and_never_completed(rig, upstream):
    """An upload the agent never finishes: cut at the hard stop, answered, and said as never completed."""
    from showcase.gate.log import stats_from_log
    from showcase.run.summary import unfinished_run_sentences

    r = rig()
    before = len(upstream.received)
    sent = b'{"model": "x", "messages": ['
    sock = socket.create_connection(("127.0.0.1", r.server.tcp_port), timeout=10)
    try:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gate\r\nAuthorization: Bearer " + KEY.encode() +
                     b"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + sent)
        assert wait_until(lambda: len(r.gate._live) == 1)  # the gate is reading the body
        r.gate.hard_stop()
        answer = b""
        while data := sock.recv(65536):  # the gate answers and closes, not waiting for the rest
            answer += data
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "run_over"
    [line] = r.lines(1)
    assert line.not_completed and line.not_completed_why == "its body was still arriving at the hard stop"
    assert (line.status, line.bytes_in, line.blocked, line.error) == (403, len(sent), False, None)
    stats = r.stats(1)
    assert (stats.requests, stats.not_completed, stats.errors, stats.blocked) == (1, 1, 0, 0)
    rebuilt = stats_from_log(r.log_dir / "gate.log")
    assert (rebuilt.requests, rebuilt.not_completed, rebuilt.errors) == (1, 1, 0)
    assert unfinished_run_sentences(None, stats).endswith(
        "1 request, 1 never completed, no error, none blocked, none shortened (0 prompt tokens, 0 answer tokens).")
    assert len(upstream.received) == before


def test_a_long_answer_is_bounded_by_the_run_not_by_a_fixed_clock(rig):
    """A steady 3 s stream passes whole under a run's gate (no answer bound of its own; the hard stop
    is hours away), and is cut where a fixed bound shorter than it is set (as `showcase gate` has)."""
    r = rig()
    assert r.gate.config.limits.answer_s is None
    started = time.monotonic()
    chunks = list(r.sdk().chat.completions.create(model="x", messages=said("long", seconds=3), stream=True))
    assert time.monotonic() - started >= 3 and chunks[-1].choices[0].finish_reason == "stop"
    [line] = r.lines(1)
    assert not line.shortened and line.error is None and line.finish_reason == "stop"
    fixed = rig(settings={"limits": GateLimits(answer_s=1)})
    with pytest.raises(openai.APIError, match="1 s cap on one answer"):
        for _ in fixed.sdk().chat.completions.create(model="x", messages=said("long", seconds=3), stream=True):
            pass


def test_requests_at_once_are_bounded_and_the_next_is_served_when_one_ends(rig, upstream):
    """Three streams held open by the upstream fill a cap of three: a fourth request is answered
    429 `too_many_requests` at once (never queued, never forwarded), counted as blocked with why;
    once the streams end, a request is served again."""
    r = rig(settings={"limits": GateLimits(max_requests_at_once=3),
                      "upstream_timeout_s": UpstreamTimeouts(stall_s=30, first_byte_s=30)})  # held, not cut
    auth = {"authorization": f"Bearer {KEY}"}
    body = {"model": "x", "messages": said("hold"), "stream": True}
    with httpx.Client(timeout=30) as client:
        held = [client.stream("POST", f"{r.base}/chat/completions", json=body, headers=auth) for _ in range(3)]
        streams = [h.__enter__() for h in held]
        try:
            reading = [stream.iter_bytes() for stream in streams]  # kept: a dropped iterator closes its stream
            for chunks in reading:
                next(chunks)  # each is under way: its first event arrived
            sent_before = len(upstream.received)
            started = time.monotonic()
            refused = httpx.post(f"{r.base}/chat/completions", json={"model": "x", "messages": MSG}, headers=auth,
                                 timeout=30)
            assert time.monotonic() - started < 5
            assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_requests", refused.text
            assert len(upstream.received) == sent_before, "a request over the cap reached the upstream"
        finally:
            for h in held:
                h.__exit__(None, None, None)
    assert wait_until(lambda: len(r.gate._live) == 0, 10), "the held streams never ended"
    served = httpx.post(f"{r.base}/chat/completions", json={"model": "x", "messages": MSG}, headers=auth, timeout=30)
    assert served.status_code == 200, served.text
    blocked = [line for line in r.lines(5) if line.blocked]
    assert [line.blocked_why for line in blocked] == ["requests at once over the cap"]
