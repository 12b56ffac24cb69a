"""The checker's Chromium is sealed: a hostile page reaches no host port, and runs unprivileged.

Listeners on the host (TCP and UDP, on 127.0.0.1 and on the host's own non-loopback address)
count whatever arrives while a page tries fetch, an <img>, WebSockets (ws:// and wss://) and
WebRTC aimed at them. The same page in a plain Chromium on the host network reaches them, so a
seal that stopped working would fail here.
"""

import asyncio
import os
import secrets
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from showcase.browser import seal
from showcase.browser.cdn import OfflineCdn
from showcase.browser.launch import CHROMIUM, launch_browser
from showcase.browser.page import PAGE_URL, open_page
from showcase.errors import InfraError
from showcase.task import load_task

pytestmark = pytest.mark.browser


def host_address() -> str:
    """The host's own first global IPv4 address (traffic to it never leaves this machine)."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True, timeout=10).stdout
    for line in out.splitlines():
        return line.split()[3].split("/")[0]
    pytest.fail("the host has no global IPv4 address to listen on")


class Listeners:
    """TCP and UDP sockets on each address; a thread records every connection and datagram."""

    def __init__(self, addresses: list[str]):
        self.hits: list[str] = []
        self.sel = selectors.DefaultSelector()
        self.ports: dict[tuple[str, str], int] = {}
        for addr in addresses:
            tcp = socket.create_server((addr, 0))
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp.bind((addr, 0))
            for kind, s in (("tcp", tcp), ("udp", udp)):
                s.setblocking(False)
                self.sel.register(s, selectors.EVENT_READ, (kind, addr))
                self.ports[(kind, addr)] = s.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.sel.select(0.1):
                kind, addr = key.data
                try:
                    if kind == "tcp":
                        conn, peer = key.fileobj.accept()
                        conn.close()
                    else:
                        _, peer = key.fileobj.recvfrom(65536)
                except OSError:
                    continue
                self.hits.append(f"{kind} {addr}:{self.ports[(kind, addr)]} from {peer[0]}")

    def __enter__(self) -> "Listeners":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(5)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()


def attack_page(ports: dict[tuple[str, str], int]) -> bytes:
    """Every way out a page has, each attempt bounded; window.done when all have settled."""
    tcp = [(a, p) for (k, a), p in ports.items() if k == "tcp"]
    udp = [(a, p) for (k, a), p in ports.items() if k == "udp"]
    js = ["const tries = [];", "const settle = (p) => Promise.race([p, new Promise(r => setTimeout(r, 4000))]);"]
    for addr, port in tcp:
        js += [
            f"tries.push(settle(fetch('http://{addr}:{port}/f', {{mode: 'no-cors'}}).catch(() => {{}})));",
            f"tries.push(settle(new Promise(r => {{ const i = new Image(); i.onload = i.onerror = r; i.src = 'http://{addr}:{port}/i.png'; document.body.append(i); }})));",
        ]
        for scheme in ("ws", "wss"):
            js.append(
                f"tries.push(settle(new Promise(r => {{ const w = new WebSocket('{scheme}://{addr}:{port}/w'); w.onopen = w.onerror = w.onclose = r; }})));"
            )
    for addr, port in udp:
        # A real offer/answer between two local peers, then a host candidate aimed at the listener:
        # ICE sends its STUN checks there if it has any UDP socket and route.
        js.append(f"""tries.push(settle((async () => {{
  const a = new RTCPeerConnection(), b = new RTCPeerConnection();
  a.createDataChannel('x');
  await a.setLocalDescription(await a.createOffer());
  await b.setRemoteDescription(a.localDescription);
  await b.setLocalDescription(await b.createAnswer());
  await a.setRemoteDescription(b.localDescription);
  await a.addIceCandidate({{candidate: 'candidate:1 1 udp 2122260223 {addr} {port} typ host', sdpMid: '0', sdpMLineIndex: 0}});
  await new Promise(r => setTimeout(r, 3000));
}})().catch(e => {{ window.rtcError = String(e); }})));""")
    js.append("Promise.allSettled(tries).then(() => { window.done = true; window.ready = true; });")
    return ("<!doctype html><html><body><p>hello</p><script>\n" + "\n".join(js) + "\n</script></body></html>").encode()


async def _wait_done(page) -> None:
    await page.wait_for_function("window.done === true", timeout=30000)
    await asyncio.sleep(1.0)  # let any late packet land before the listeners are read


def run_attack(where: str) -> tuple[list[str], str | None]:
    addresses = ["127.0.0.1", host_address()]
    with Listeners(addresses) as listeners:
        html = attack_page(listeners.ports)

        async def go() -> str | None:
            if where == "plain":
                # The control: Chromium as it ran before the seal, on the host's network.
                async with async_playwright() as pw:
                    browser = await pw.chromium.launch(executable_path=CHROMIUM)
                    try:
                        page = await browser.new_page()
                        await page.set_content(html.decode())
                        await _wait_done(page)
                        return await page.evaluate("window.rtcError || null")
                    finally:
                        await browser.close()
            async with launch_browser() as browser:
                if where == "sealed":  # no router at all: only the seal stands between
                    page = await browser.new_page()
                    await page.set_content(html.decode())
                else:  # the checker's own page session, as check and shot.sh open it
                    s = await open_page(browser, html, OfflineCdn(load_task("voxel").npm))
                    page = s.page
                    await page.goto(PAGE_URL, timeout=30000)
                await _wait_done(page)
                return await page.evaluate("window.rtcError || null")

        rtc_error = asyncio.run(go())
        return list(listeners.hits), rtc_error


def test_plain_chromium_reaches_every_listener():
    """The control: without the seal this page reaches TCP and UDP on both addresses."""
    hits, rtc_error = run_attack("plain")
    assert rtc_error is None
    for kind in ("tcp", "udp"):
        for addr in ("127.0.0.1", host_address()):
            assert any(h.startswith(f"{kind} {addr}:") for h in hits), (kind, addr, hits)


@pytest.mark.parametrize("where", ["sealed", "checked"])
def test_sealed_page_reaches_no_host_port(where):
    hits, _ = run_attack(where)
    assert hits == []


def _browser_pid(marker: str) -> int:
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes()
                # /usr/bin/chromium is Debian's wrapper script; the browser is the process without --type=.
                if marker.encode() in cmd and b"--type=" not in cmd and os.readlink(f"/proc/{d}/exe").endswith("/chromium"):
                    return int(d)
            except OSError:
                continue
    pytest.fail(f"no Chromium process carries {marker}")


def _status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].split()[0] if field != "Uid" else line.split()[2]
    return ""


@pytest.mark.parametrize("renderer,gl", [("swiftshader", "SwiftShader"), ("llvmpipe", "llvmpipe")])
def test_browser_runs_unprivileged_sandboxed_keyless_with_webgl2(renderer, gl, monkeypatch):
    key = secrets.token_hex(16)
    monkeypatch.setenv("SHOWCASE_UPSTREAM_KEY", key)
    marker = f"--showcase-test={uuid.uuid4().hex}"
    user_uid = seal.browser_account()[0] if os.geteuid() == 0 else os.geteuid()

    async def go():
        async with launch_browser(renderer, [marker]) as browser:
            page = await browser.new_page()
            got = await page.evaluate("""(() => {
                const g = document.createElement('canvas').getContext('webgl2');
                if (!g) return null;
                g.clearColor(0, 1, 0, 1); g.clear(g.COLOR_BUFFER_BIT);
                const px = new Uint8Array(4); g.readPixels(0, 0, 1, 1, g.RGBA, g.UNSIGNED_BYTE, px);
                const info = g.getExtension('WEBGL_debug_renderer_info');
                return [g.getParameter(info.UNMASKED_RENDERER_WEBGL), Array.from(px)];
            })()""")
            pid = _browser_pid(marker)
            tree = seal.process_tree(pid)
            renderers = [p for p in tree if seal.proc_type(p) == "renderer"]
            rows = {p: (int(_status(p, "Uid")), int(_status(p, "Seccomp")), os.readlink(f"/proc/{p}/ns/pid"),
                        Path(f"/proc/{p}/environ").read_bytes()) for p in tree}
            driver = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            driver_env = Path(f"/proc/{driver}/environ").read_bytes()
            return got, pid, renderers, rows, os.readlink(f"/proc/{pid}/ns/net"), seal.seal_facts(pid), driver_env

    got, pid, renderers, rows, netns, facts, driver_env = asyncio.run(go())
    assert key.encode() in driver_env, "the control: Playwright's driver, which starts Chromium, holds the key"
    assert got is not None and gl in got[0] and got[1] == [0, 255, 0, 255], got
    assert renderers, "no renderer process seen"
    assert all(uid == user_uid != 0 for uid, *_ in rows.values()), {p: r[0] for p, r in rows.items()}
    assert all(rows[p][1] == 2 for p in renderers), "renderers must run under seccomp-bpf"
    assert all(rows[p][2] != rows[pid][2] for p in renderers), "renderers must have their own pid namespace"
    assert not any(key.encode() in env or b"SHOWCASE_UPSTREAM_KEY" in env for *_, env in rows.values())
    assert netns != os.readlink("/proc/self/ns/net")
    assert facts.sealed, facts.line()


def test_flags_that_turn_the_sandbox_off_are_dropped():
    marker = f"--showcase-test={uuid.uuid4().hex}"

    async def go():
        async with launch_browser("swiftshader", [marker, "--no-sandbox", "--single-process"]) as browser:
            page = await browser.new_page()
            await page.goto("about:blank")
            pid = _browser_pid(marker)
            return Path(f"/proc/{pid}/cmdline").read_bytes(), seal.seal_facts(pid)

    cmdline, facts = asyncio.run(go())
    assert b"--no-sandbox" not in cmdline and b"--single-process" not in cmdline
    assert facts.sealed, facts.line()


def test_feature_lists_are_joined_and_a_new_page_builds_no_browser_ui():
    """Chromium keeps only the last --disable-features: the launcher joins Playwright's list, ours
    and a caller's into one. A new page then starts no top-chrome WebUI renderer (the omnibox
    popup, about a second of CPU per page), and its renderers stay near idle."""
    marker = f"--showcase-test={uuid.uuid4().hex}"

    def cpu_s(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def go():
        async with launch_browser("llvmpipe", [marker, "--disable-features=CallerFeature"]) as browser:
            used = []
            for _ in range(2):
                context = await browser.new_context()
                page = await context.new_page()
                await page.goto("about:blank")
                await asyncio.sleep(2.0)  # the omnibox WebUI loaded within ~1 s of a page opening
                pid = _browser_pid(marker)
                renderers = [p for p in seal.process_tree(pid) if seal.proc_type(p) == "renderer"]
                cmdlines = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in renderers}
                used.append(sum(cpu_s(p) for p in renderers))
                await context.close()
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split(), cmdlines, used

    cmdline, renderers, used = asyncio.run(go())
    lists = [a for a in cmdline if a.startswith(b"--disable-features=")]
    assert len(lists) == 1, lists
    features = lists[0].split(b"=", 1)[1].split(b",")
    assert {b"CallerFeature", b"WebUIOmniboxPopup", b"WebUIOmniboxAimPopup"} <= set(features), features
    assert len(features) > 3, "Playwright's own list was lost"
    assert renderers and not any(b"--top-chrome-webui" in c for c in renderers.values()), renderers
    # CPU time, not wall time: a busy machine does not add to it. With the WebUI it was 0.8-1.1 s.
    assert max(used) < 0.5, used


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become the browser user")
def test_launcher_seals_for_a_non_root_user():
    """Started by an ordinary user, the launcher makes its own user and network namespace: a
    synchronous XHR to a host listener reaches nothing, while the same Chromium without it does."""
    uid, gid = seal.browser_account()
    with tempfile.TemporaryDirectory() as folder:
        _non_root(Path(folder), uid, gid)


def _non_root(tmp_path: Path, uid: int, gid: int) -> None:
    launcher = tmp_path / "launcher"
    launcher.write_text(seal.LAUNCHER)
    launcher.chmod(0o755)
    tmp_path.chmod(0o755)
    with Listeners(["127.0.0.1", host_address()]) as listeners:
        xhr = "".join(
            f"try {{ const x = new XMLHttpRequest(); x.open('GET', 'http://{a}:{p}/x', false); x.send(); }} catch (e) {{}}"
            for (k, a), p in listeners.ports.items() if k == "tcp"
        )
        page = f"data:text/html,<script>{xhr}</script><p>done</p>"

        def dump(*cmd: str) -> str:
            udd = Path(tmp_path / f"udd-{len(listeners.hits)}-{uuid.uuid4().hex[:6]}")
            udd.mkdir()
            os.chown(udd, uid, gid)
            env = {"PATH": "/usr/bin:/bin", "HOME": str(udd), "SHOWCASE_SEAL_CHROMIUM": CHROMIUM}
            out = subprocess.run(
                ["runuser", "-u", seal.BROWSER_USER, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                 *cmd, "--headless", f"--user-data-dir={udd}", "--dump-dom", page],
                capture_output=True, text=True, timeout=60,
            )
            return out.stdout

        assert "<p>done</p>" in dump(str(launcher))
        sealed_hits = list(listeners.hits)
        assert "<p>done</p>" in dump(CHROMIUM)  # the control: Chromium's own sandbox alone
        control_hits = list(listeners.hits)
    assert sealed_hits == []
    assert len(control_hits) >= 2, control_hits


@pytest.mark.skipif(os.geteuid() != 0, reason="as root the browser user is required; others use their own namespaces")
def test_missing_browser_user_is_a_one_line_infrastructure_error_never_an_unsealed_browser(tmp_path):
    page = Path(__file__).parent / "pages" / "good.html"
    env = dict(os.environ, SHOWCASE_BROWSER_USER="showcase-no-such-user")
    out = subprocess.run([sys.executable, "-m", "showcase.cli", "check", str(page), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 3, out.stderr
    assert "showcase-no-such-user" in out.stderr and "scripts/setup.sh" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "o" / "check.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="as root the profile is handed to the browser user")
def test_a_profile_the_browser_user_cannot_reach_is_a_clear_infrastructure_error(monkeypatch):
    with tempfile.TemporaryDirectory() as private:  # 0700, root's: Playwright makes the profile inside
        monkeypatch.setenv("TMPDIR", private)

        async def go():
            async with launch_browser():
                pass

        with pytest.raises(InfraError, match="TMPDIR any user can enter"):
            asyncio.run(go())
