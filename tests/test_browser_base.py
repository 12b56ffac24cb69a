"""The offline CDN and the page router, against real npm tarballs and real Chromium."""

import asyncio
import os
import pwd
import subprocess
import sys

import pytest

from showcase.browser.cdn import OfflineCdn, integrity_of
from showcase.browser.launch import launch_browser
from showcase.browser.seal import BROWSER_USER, seal_error
from showcase.browser.page import PAGE_URL, open_page
from showcase.errors import InfraError
from showcase.task import NpmPackage, load_task


def test_cdn_serves_import_map_urls_from_tarballs():
    task = load_task("voxel")
    cdn = OfflineCdn(task.npm)
    for url in task.import_map.values():
        if url.endswith("/"):
            url += "controls/OrbitControls.js"
        body, ctype = cdn.lookup(url)
        assert ctype == "text/javascript" and len(body) > 1000, url
    assert cdn.lookup("https://cdn.jsdelivr.net/npm/three@0.169.0/build/three.module.js") is None
    assert cdn.lookup("https://cdn.jsdelivr.net/npm/three@0.170.0/build/nope.js") is None


def test_tarball_with_wrong_integrity_is_refused(tmp_path):
    task = load_task("voxel")
    pkg = next(p for p in task.npm if p.name == "simplex-noise")
    src = OfflineCdn([pkg]).npm_dir / pkg.tarball
    bad = tmp_path / pkg.tarball
    bad.write_bytes(src.read_bytes() + b"x")
    assert integrity_of(bad) != pkg.integrity
    with pytest.raises(InfraError, match="integrity"):
        OfflineCdn([NpmPackage(**pkg.model_dump())], npm_dir=tmp_path)


PAGE = b"""<!doctype html><html><head>
<script type="importmap">{"imports":{"three":"https://cdn.jsdelivr.net/npm/three@0.170.0/build/three.module.js"}}</script>
</head><body><script type="module">
import * as THREE from 'three';
window.rev = THREE.REVISION;
fetch('https://example.com/x').catch(() => {});
window.ready = true;
</script></body></html>"""


def test_page_gets_three_offline_and_outside_requests_are_blocked():
    async def go():
        async with launch_browser() as browser:
            s = await open_page(browser, PAGE, OfflineCdn(load_task("voxel").npm))
            await s.page.goto(PAGE_URL, timeout=30000)
            await s.page.wait_for_function("window.ready === true", timeout=30000)
            rev = await s.page.evaluate("window.rev")
            await asyncio.sleep(0.3)
            return rev, s.events

    rev, events = asyncio.run(go())
    assert rev == "170"
    assert [u for _, u in events.blocked_requests] == ["https://example.com/x"]
    assert any("example.com" in m for m in events.all_errors())


def test_doctor_shows_the_browser_running_sealed():
    """`showcase doctor` launches a browser and reports what /proc shows of it."""
    env = dict(os.environ, COLUMNS="400")
    out = subprocess.run([sys.executable, "-m", "showcase.cli", "doctor", "--no-fill-cache"],
                         capture_output=True, text=True, timeout=180, env=env)
    row = next((line for line in out.stdout.splitlines() if "browser seal" in line), "")
    uid = pwd.getpwnam(BROWSER_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
    assert f"uid {uid};" in row and "Chromium sandbox on" in row, out.stdout + out.stderr
    assert "network: own namespace" in row and "upstream key in its environment: no" in row
    assert "WebGL 2 on" in row
    share = next((line for line in out.stdout.splitlines() if "check CPU share" in line), "")
    assert "showcase-check" in share and "100x the default" in share, out.stdout


def test_launch_error_from_the_seal_is_one_line_with_its_reason():
    assert seal_error("Browser closed.\n[pid=1][err] showcase-seal: unshare --net failed\nmore") == "unshare --net failed"
    assert seal_error("Browser closed.\nsomething else") is None
