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
from showcase.host.untrusted import Refused, read_regular, write_new
from showcase.run.watcher import Watcher
from showcase.sandbox.space import MAX_DEPTH

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


def _holds(path: Path, needle: bytes) -> bool:
    """Does the file hold needle? Only its data is read (a sparse file's holes are zeros)."""
    with open(path, "rb") as handle:
        fd, size, pos = handle.fileno(), os.fstat(handle.fileno()).st_size, 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # no data after pos
                return False
            end = os.lseek(fd, start, os.SEEK_HOLE)
            handle.seek(max(0, start - len(needle)))
            tail = b""
            while handle.tell() < end:
                chunk = tail + handle.read(min(1 << 22, end - handle.tell()))
                if needle in chunk:
                    return True
                tail = chunk[-len(needle):]
            pos = end
    return False


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Regular files under root (links not followed) whose bytes hold needle."""
    hits = []
    for folder, dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            if _holds(path, needle):
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


@pytest.mark.browser
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


# --------------------------------------------------------------------------------- whole runs

SHOWCASE = [sys.executable, "-m", "showcase.cli"]


def _demo_page() -> str:
    from showcase.paths import TASKS_DIR

    return (TASKS_DIR / "voxel" / "demo" / "pages" / "v1.html").read_text()


def shell(command: str) -> dict:
    return {"name": "shell", "arguments": {"command": command}}


def turn(content: str, *calls: dict) -> dict:
    return {"content": content, "tool_calls": list(calls)}


def run_watched(args: list[str], env: dict, timeout: float) -> tuple[subprocess.CompletedProcess, int]:
    """Run showcase as its own process; return it and its peak resident memory (VmHWM, bytes)."""
    proc = subprocess.Popen(SHOWCASE + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            try:
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]) * 1024)
            except OSError:
                return
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate(timeout=timeout)
    sampler.join(5)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), peak[0]


# What a terminal acts on: set its title (OSC ... BEL), clear the screen, turn text red.
TERMINAL_ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"
DEEP = 300  # folders in a chain; the run's space keeps MAX_DEPTH of them


def attack_script(secret_path: Path, host_folder: Path) -> dict:
    """A Latin-1 page with terminal escapes in its title that loads, then every link, FIFO and size
    attack on the host's reads of /work and /logs, entries named with terminal escapes and a folder
    chain deeper than the space keeps; the run ends with a 1 GiB sparse game.html."""
    # Written as Python escapes: the command the agent runs holds no control character itself.
    escapes = TERMINAL_ESCAPES.encode("unicode_escape").decode()
    latin1 = (
        f"python3 -c \"d=open('good.html','rb').read().replace(b'<title>', b'<title>Caf\\xe9 {escapes}', 1); "
        "open('game.html','wb').write(d)\""
    )
    odd_names = (
        f"python3 -c \"import os; e='{escapes}'; os.mkfifo(e + 'fifo'); os.symlink('{secret_path}', e + 'link'); "
        f"os.makedirs('/'.join(['deep'] + ['d'] * {DEEP - 1}))\""
    )
    page_attacks = "; ".join([
        f"ln -sf {secret_path} game.html", "sleep 7",
        "ln -sf /proc/self/environ game.html", "sleep 7",
        "rm -f game.html", "ln -s game.html game.html", "sleep 7",
        "rm -f game.html", "mkfifo game.html", "sleep 7",
        "rm -f game.html", "ln -s /dev/zero game.html", "sleep 7",
        "rm -f game.html", "truncate -s 1G game.html", "sleep 7",
        "ls -la",
    ])
    shot_race = "; ".join([
        f"ln -s {host_folder} shots", "shot.sh good.html > shot0.txt 2>&1", "rm shots",
        "mkdir -p sub", "cp good.html sub/environ",
        # ready after 6 s: shot2 is still waiting for its turn when sub is swapped, however fast the host
        "printf '<!doctype html><title>slow</title><script>setTimeout(() => { window.ready = true }, 6000)</script>' > slow.html",
        "(shot.sh slow.html > shot1.txt 2>&1 &)", "sleep 1",
        "(shot.sh sub/environ > shot2.txt 2>&1 &)", "sleep 1",
        "mv sub sub.old", "ln -s /proc/self sub",
        "for i in $(seq 240); do grep -q . shot2.txt 2>/dev/null && grep -q screenshot shot1.txt && break; sleep 0.5; done",
        "cat shot0.txt shot1.txt shot2.txt",
    ])
    logs = "; ".join([
        "truncate -s 64G /logs/huge.log", f"ln -s {secret_path} /logs/secret.log", "mkfifo /logs/fifo.log",
        "ln -s /dev/zero /logs/zero.log", "ls -la /logs",
    ])
    return {
        "model": "replay-attacks",
        "turns": [
            turn("A page.", {"name": "write_file", "arguments": {"path": "good.html", "content": _demo_page()}}),
            turn("Latin-1.", shell(latin1)),
            turn("Odd names, a deep chain.", shell(odd_names)),
            turn("Now the host's page reads.", shell(page_attacks)),
            turn("Now shot.sh.", shell(shot_race)),
            turn("Now /logs.", shell(logs)),
        ],
        "final": {"content": "DONE"},
    }


@pytest.mark.docker
@pytest.mark.browser
def test_a_run_under_every_file_attack(docker_engine, tmp_path, secret_file):
    """One run, every attack on the host's reads and writes of /work and /logs (they do not
    interfere): the secret (a root-only host file, and the upstream key in showcase's own
    environment) lands in no file of the run folder, the Latin-1 page before the attacks counts,
    each refusal (and each entry the run's space left out, the cut folder chain among them) is an
    event and a line of run-info and the report, terminal escapes in the title and in file names
    reach neither the report nor the console raw, memory stays bounded, the container's memory
    peak and the shot.sh requests are counted, and `finalize` run again gives the same files."""
    from showcase.replay import ReplayServer

    secret_path, secret = secret_file
    host_folder = tmp_path / "host-folder"
    host_folder.mkdir()
    run = tmp_path / "attacked"
    key = secret.decode()  # also the upstream key: /proc/self/environ of showcase holds it
    with ReplayServer(attack_script(secret_path, host_folder)) as server:
        proc, peak = run_watched(
            ["run", "--upstream", server.base_url, "--model", "replay-attacks", "--out", str(run),
             "--limit-s", "600", "--no-clip"],
            env={"SHOWCASE_UPSTREAM_KEY": key}, timeout=1200,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    agent_log = (run / "agent.log").read_text(errors="replace")
    info = json.loads((run / "run-info.json").read_text())
    report = (run / "report.html").read_text()
    assert info["agent_end"] == "done", agent_log[-3000:]
    for name in ("check.json", "report.html", "final-choice.json", "screenshot.png"):
        assert (run / name).is_file(), name

    assert files_holding(run, secret) == []
    assert list(host_folder.iterdir()) == []
    print(f"showcase peak resident memory: {peak / 2**20:.0f} MiB")
    assert peak < 700 * 1024 * 1024, f"showcase peaked at {peak / 2**20:.0f} MiB"

    # The Latin-1 page is the one version, and it counts (the final file was refused).
    versions = sorted((run / "versions").glob("*.html"))
    assert len(versions) == 1 and b"Caf\xe9 " in versions[0].read_bytes()
    # Beside it at most the load check's own picture of it: nothing the agent named lands there.
    assert {p.name for p in (run / "versions").iterdir()} - {versions[0].name} <= {"0001.png"}
    choice = json.loads((run / "final-choice.json").read_text())
    assert choice["n"] == 1 and choice["rule"] == "last_version_that_loads", choice
    assert json.loads((run / "check.json").read_text())["items"][0]["passed"] is True

    refused = info["refused_entries"]
    shown = TERMINAL_ESCAPES.encode("unicode_escape").decode()  # '\\x1b]0;pwned\\x07...': seen, not acted on
    for line in ("game.html was a link: not kept", "game.html was a FIFO: not kept",
                 "game.html was larger than 16 MiB: not kept", "sub/environ was a link: not kept",
                 f"work/{shown}fifo was a FIFO: not kept", f"work/{shown}link was a link: not kept",
                 "work/sub was a link: not kept", "agent/fifo.log was a FIFO: not kept"):
        assert line in refused, refused
        assert line in report
    assert "shots was a link: not kept" in refused, refused
    # The chain is cut where the space stops copying, and said so (not only in events.jsonl).
    chain = [line for line in refused if f"a folder deeper than {MAX_DEPTH} levels" in line]
    assert len(chain) == 1 and chain[0].startswith("work/deep/d/d/") and chain[0] in report, refused
    assert (run / "work" / "deep").is_dir() and not (run / "work" / "deep" / ("d/" * MAX_DEPTH)).exists()
    # Terminal escapes: the JSON keeps the exact title; no page or person sees them raw.
    assert TERMINAL_ESCAPES in info["world_title"], info["world_title"]
    assert "\x1b" not in report and shown in report
    assert "\x1b" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert "\x1b" not in (run / "run-info.json").read_text()  # JSON writes it as \u001b
    # The container's memory peak was read before its cgroup went; shot.sh's three calls were each answered.
    assert info["container_limits"]["peak_memory_bytes"] > 16 << 20, info["container_limits"]
    assert info["shot_requests"] == {"asked": 3, "answered": 3, "busy": 0, "dropped": 0}, info["shot_requests"]
    assert "shot.sh requests: 3 asked, 3 answered" in report
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert len([e for e in events if e["event"] == "entry_refused"]) == len(refused)
    # shot.sh said what it refused; the check before the swap worked and kept its screenshot.
    said = {n: (run / "work" / n).read_text() for n in ("shot0.txt", "shot1.txt", "shot2.txt")}
    assert "screenshot: shots was a link: not kept" in said["shot0.txt"], said
    assert "loads without errors: yes" in said["shot1.txt"] and "/work/shots/shot-002.png" in said["shot1.txt"], said
    assert "not checked: sub/environ was a link: not kept" in said["shot2.txt"], said
    assert sorted(p.name for p in (run / "work" / "shots").iterdir()) == ["shot-002.png"]

    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    again = subprocess.run(SHOWCASE + ["finalize", str(run), "--no-clip"], capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "\x1b" not in again.stdout + again.stderr
    after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert sorted(after) == sorted(before)
    for name in ("versions.jsonl", "final-choice.json", "run-info.json", "events.jsonl"):
        assert after[name] == before[name], name
    assert files_holding(run, secret) == []


@pytest.mark.docker
@pytest.mark.browser
def test_a_run_whose_only_page_is_not_html(docker_engine, tmp_path):
    """A page that is no HTML at all did not load; being the only one, it is scored as it is, and
    the run ends with its check, run-info and report. Credentials in the upstream URL are kept
    nowhere in the run folder."""
    from showcase.replay import ReplayServer

    run = tmp_path / "not-html"
    script = {
        "model": "replay-text",
        "turns": [turn("Text.", {"name": "write_file", "arguments": {"path": "game.html", "content": "just words, no tags"}})],
        "final": {"content": "DONE"},
    }
    with ReplayServer(script) as server:
        url = server.base_url.replace("http://", "http://alice:hunter2pass@")
        proc, _ = run_watched(["run", "--upstream", url, "--model", "replay-text", "--out", str(run),
                               "--limit-s", "300", "--no-clip"], env={}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("check.json", "run-info.json", "report.html"):
        assert (run / name).is_file(), name
    versions = [json.loads(line) for line in (run / "versions.jsonl").read_text().splitlines()]
    checked = [v for v in versions if v["event"] == "load_checked"]
    assert checked and checked[0]["loaded_without_errors"] is False
    assert "not an HTML file" in checked[0]["load_errors"][0]
    choice = json.loads((run / "final-choice.json").read_text())
    assert choice["rule"] == "final_file_none_loads"
    for needle in (b"hunter2pass", b"alice:"):
        assert files_holding(run, needle) == [], needle


@pytest.mark.parametrize("flag,value", [("--limit-s", "nan"), ("--limit-s", "inf"), ("--limit-s", "-5"),
                                        ("--inject-after-s", "nan"), ("--answer-limit", "0")])
def test_limits_must_be_finite_and_positive(tmp_path, flag, value):
    out = tmp_path / "x"
    proc = subprocess.run(SHOWCASE + ["run", "--upstream", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(out),
                                      flag, value], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and flag in proc.stderr and "finite" in proc.stderr, proc.stderr
    assert not out.exists()


def test_refusals_are_recorded_once_each_and_bounded(tmp_path):
    """shot.sh can name any number of made-up files: events.jsonl gains a bounded number of lines,
    and a second recorder over the same run (finalize) adds none it already has."""
    from showcase.runfolder.artefacts import RunLayout
    from showcase.run.orchestrate import MAX_REFUSALS, EventLog, _refusal_recorder, read_events

    layout = RunLayout(tmp_path / "run")
    layout.make()
    log = EventLog(layout.events_log, time.monotonic())
    record = _refusal_recorder(layout, log)
    record("game.html", "a link")
    record("game.html", "a link")
    record("game.html", "a FIFO")
    assert [e.detail["text"] for e in read_events(layout)] == ["game.html was a link: not kept",
                                                               "game.html was a FIFO: not kept"]
    _refusal_recorder(layout, log)("game.html", "a link")
    assert len(read_events(layout)) == 2
    for i in range(3 * MAX_REFUSALS):
        record(f"made-up-{i}" + "x" * 5000, "a link")
    events = read_events(layout)
    assert len(events) == MAX_REFUSALS + 1
    assert "more entries were refused" in events[-1].detail["text"]
    assert layout.events_log.stat().st_size < 100 * 1024


def test_shot_reads_no_more_than_a_small_request(shot_server):
    """shot.sh sends a file name: a 256 MiB body is answered 413 once past the cap and never held."""
    import resource

    from showcase.run.shot import MAX_REQUEST_BYTES

    work, url, _ = shot_server
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10

    def endless():
        for _ in range(4096):
            yield b" " * 65536

    answer = httpx.post(url, content=endless(), timeout=120)
    assert answer.status_code == 413 and "request over" in answer.json()["error"]["message"]
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10) - peak_before
    assert grew < 64 << 20, f"the endpoint held the body ({grew >> 20} MiB more at peak)"
    assert MAX_REQUEST_BYTES <= 1 << 20
    assert not (work / "shots").exists()
