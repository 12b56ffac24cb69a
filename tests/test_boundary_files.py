"""What the agent leaves is hostile: the host reads none of it through a link, blocks on none of
it, copies nothing past the page cap, and goes on after each refusal.

First the parts on a real folder (the real watcher with real inotify, the real shot.sh endpoint
with real Chromium behind real HTTP), then whole runs with a scripted agent in a real container.
"""

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from showcase.gate.server import AppServer
from showcase.run.shot import SHOT_PATH, shot_route
from showcase.run.untrusted import Refused, read_regular, write_new
from showcase.run.watcher import Watcher

GOOD = b"<!doctype html><html><head><title>ok</title></head><body><script>window.ready = true</script></body></html>"


def page(i: int) -> bytes:
    return GOOD.replace(b"<title>ok", f"<title>v{i}".encode())


def wait_for(predicate, timeout_s: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Regular files under root (links not followed) whose bytes hold needle."""
    hits = []
    for folder, dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            if needle in path.read_bytes():
                hits.append(str(path.relative_to(root)))
    return hits


@pytest.fixture
def secret_file(tmp_path):
    """A root-only host file holding a random secret (as /etc/shadow would)."""
    secret = secrets.token_hex(16)
    path = tmp_path / "host-secret"
    path.write_text(f"SECRET={secret}\n")
    path.chmod(0o600)
    return path, secret.encode()


def make_sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)  # 1 GiB that takes no disk: reading it whole would take 1 GiB of memory


def write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def replace_entry(path: Path, make) -> None:
    if path.is_dir() and not path.is_symlink():
        os.rmdir(path)
    elif os.path.lexists(path):
        path.unlink()
    make()


# --------------------------------------------------------------------------------- the reader


def test_reader_refuses_every_odd_entry(tmp_path, secret_file):
    secret_path, _ = secret_file
    work = tmp_path / "work"
    work.mkdir()
    (work / "dir").mkdir()
    (work / "ok.html").write_bytes(GOOD)
    (work / "link.html").symlink_to(secret_path)
    (work / "loop.html").symlink_to("loop.html")
    os.mkfifo(work / "fifo.html")
    (work / "zero.html").symlink_to("/dev/zero")
    make_sparse(work / "big.html", 1 << 30)
    (work / "via").symlink_to("/proc/self")
    cases = {
        "link.html": "a link", "loop.html": "a link", "fifo.html": "a FIFO", "zero.html": "a link",
        "big.html": "larger than 16 MiB", "dir": "a folder", "via/environ": "a link", "../work/ok.html": "outside",
    }
    started = time.monotonic()
    for name, reason in cases.items():
        with pytest.raises(Refused) as refused:
            read_regular(work, name)
        assert reason in str(refused.value), (name, str(refused.value))
    assert time.monotonic() - started < 10  # nothing blocked (a FIFO opened for reading would)
    assert read_regular(work, "ok.html") == GOOD
    with pytest.raises(FileNotFoundError):
        read_regular(work, "gone.html")
    with pytest.raises(Refused, match="larger than 1 KiB"):
        read_regular(work, "ok.html" if len(GOOD) > 1024 else "big.html", cap=1024)


def test_host_writes_never_follow_a_link(tmp_path):
    work, elsewhere = tmp_path / "work", tmp_path / "host-folder"
    work.mkdir()
    elsewhere.mkdir()
    (work / "shots").symlink_to(elsewhere)
    with pytest.raises(Refused, match="a link"):
        write_new(work, "shots", "shot-001.png", b"png")
    (work / "shots").unlink()
    (work / "shots").mkdir()
    (work / "shots" / "shot-001.png").symlink_to(elsewhere / "planted")
    with pytest.raises(Refused, match="already there"):
        write_new(work, "shots", "shot-001.png", b"png")
    assert write_new(work, "shots", "shot-002.png", b"png").read_bytes() == b"png"
    assert list(elsewhere.iterdir()) == []


# --------------------------------------------------------------------------------- the watcher


def test_watcher_refuses_odd_entries_keeps_going_and_stops(tmp_path, secret_file):
    """Every odd entry as game.html in turn, each followed by a real page: every page is kept,
    every odd entry is told once with its reason, the secret is copied nowhere, and the stop
    (with a FIFO in place) is bounded."""
    secret_path, secret = secret_file
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    refused: list[tuple[str, str]] = []
    watcher = Watcher(work, run, quiet_read_s=0.3, on_refused=lambda name, why: refused.append((name, why))).start()
    target = work / "game.html"
    attacks = [
        ("a link", lambda: target.symlink_to(secret_path)),
        ("a link", lambda: target.symlink_to("/proc/self/environ")),
        ("a link", lambda: target.symlink_to("game.html")),  # ELOOP
        ("a FIFO", lambda: os.mkfifo(target)),
        ("a link", lambda: target.symlink_to("/dev/zero")),
        ("larger than 16 MiB", lambda: make_sparse(target, 1 << 30)),
        ("a folder", lambda: target.mkdir()),
    ]
    try:
        write(target, page(0))
        wait_for(lambda: len(watcher.versions) == 1, what="the first page")
        for i, (reason, attack) in enumerate(attacks, start=1):
            replace_entry(target, attack)
            wait_for(lambda: (("game.html", reason) in refused), what=f"refusal {i}: {reason}")
            replace_entry(target, lambda: write(target, page(i)))
            wait_for(lambda: len(watcher.versions) == i + 1, what=f"the page after attack {i}")
        target.unlink()  # a vanished file is no version and no fault
        replace_entry(target, lambda: os.mkfifo(target))
        time.sleep(0.5)
    finally:
        started = time.monotonic()
        versions = watcher.stop(timeout_s=20)
        stop_s = time.monotonic() - started
    assert stop_s < 20, f"the stop took {stop_s:.1f} s with a FIFO in place"
    assert len(versions) == len(attacks) + 1
    assert [v.size for v in versions] == [len(page(i)) for i in range(len(attacks) + 1)]
    assert sorted(set(refused)) == sorted(refused), "each refusal is told once"
    assert {why for _, why in refused} == {r for r, _ in attacks}
    assert watcher.final_sha256 is None  # the FIFO at the end is no final file
    assert files_holding(run, secret) == []


# --------------------------------------------------------------------------------- shot.sh's endpoint


@pytest.fixture
def shot_server(tmp_path):
    from showcase.run.orchestrate import _quick_check_dict

    work = tmp_path / "work"
    work.mkdir()
    refused: list[tuple[str, str]] = []
    app = Starlette(
        routes=[shot_route(work, _quick_check_dict(None), on_refused=lambda n, w: refused.append((n, w)))]
    )
    server = AppServer(app, ["tcp:127.0.0.1:0"]).start()
    try:
        yield work, f"http://127.0.0.1:{server.tcp_port}{SHOT_PATH}", refused
    finally:
        server.stop()


def shot(url: str, name: str) -> dict:
    return httpx.post(url, json={"file": name}, timeout=180).json()


def test_shot_reads_what_it_checks_when_it_checks_it(shot_server, tmp_path):
    """The file named is opened through the folder handle only once the check's lock is held: a
    folder swapped for a link to /proc/self while shot.sh waits is refused, not read."""
    work, url, refused = shot_server
    (work / "game.html").write_bytes(GOOD)
    (work / "sub").mkdir()
    (work / "sub" / "environ").write_bytes(GOOD)
    first: dict = {}
    busy = threading.Thread(target=lambda: first.update(shot(url, "game.html")))
    busy.start()
    time.sleep(0.5)  # the first check holds the lock for seconds (browser start, ready, settle)
    second: dict = {}
    waiting = threading.Thread(target=lambda: second.update(shot(url, "/work/sub/environ")))
    waiting.start()
    time.sleep(0.5)
    os.rename(work / "sub", work / "sub.old")
    (work / "sub").symlink_to("/proc/self")
    busy.join(180)
    waiting.join(180)
    assert first.get("loads") is True and first["screenshot"] == "/work/shots/shot-001.png", first
    assert "a link" in second["error"]["message"], second
    assert ("sub/environ", "a link") in refused
    assert sorted(p.name for p in (work / "shots").iterdir()) == ["shot-001.png"]

    (work / "shots").rename(work / "shots.old")
    elsewhere = tmp_path / "host-folder"
    elsewhere.mkdir()
    (work / "shots").symlink_to(elsewhere)
    third = shot(url, "game.html")
    assert third["screenshot"] is None and "a link" in third["screenshot_refused"], third
    assert list(elsewhere.iterdir()) == []
    (work / "game.html").unlink()
    (work / "game.html").symlink_to("/proc/self/environ")
    assert "a link" in shot(url, "game.html")["error"]["message"]
