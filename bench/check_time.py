"""Benchmark (not a test): wall time of one browser check on a light and a heavy page.

Light: ~2k cubes as separate meshes (~24k triangles). Heavy: ~50k instanced cubes (~600k
triangles). Each is checked 3 times in a row; the median wall time is printed with its ratio to
the floor: the method's own observation time (two 5 s tour windows + four ~1 s control steps:
14 s) spent with a browser launched, a page open and closed again, measured in the same run, so a
busy machine slows both alike. Goals: light <= 1.3x the floor (18 s), heavy <= 45 s.

    .venv/bin/python bench/check_time.py [--runs 3]
"""

import argparse
import asyncio
import statistics
import time

from showcase.browser.launch import launch_browser
from showcase.host import cpu_share
from showcase.check.rubric import load_rubric
from showcase.check.runner import check_page

NOMINAL_OBSERVATION_S = 2 * 5.0 + 4 * 1.0

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{margin:0;overflow:hidden}}#t{{position:fixed;left:10px;top:8px;color:#fff;font:16px sans-serif}}</style>
<script type="importmap">{{"imports":{{"three":"https://cdn.jsdelivr.net/npm/three@0.170.0/build/three.module.js","three/addons/":"https://cdn.jsdelivr.net/npm/three@0.170.0/examples/jsm/"}}}}</script>
</head><body><div id="t">{title}: drag to orbit, scroll to zoom.</div><script type="module">
import * as THREE from 'three';
import {{ OrbitControls }} from 'three/addons/controls/OrbitControls.js';
const renderer = new THREE.WebGLRenderer();
renderer.setSize(innerWidth, innerHeight);
document.body.appendChild(renderer.domElement);
const scene = new THREE.Scene();
scene.background = new THREE.Color(0x88bbee);
const camera = new THREE.PerspectiveCamera(60, innerWidth / innerHeight, 0.1, 1000);
scene.add(new THREE.HemisphereLight(0xffffff, 0x446644, 2));
const N = {n}, side = Math.ceil(Math.sqrt(N)), geo = new THREE.BoxGeometry(0.9, 0.9, 0.9);
{build}
const spinner = new THREE.Mesh(new THREE.BoxGeometry(4, 4, 4), new THREE.MeshLambertMaterial({{ color: 0xff5500 }}));
spinner.position.y = 12; scene.add(spinner);
const controls = new OrbitControls(camera, renderer.domElement);
let touring = true;
controls.addEventListener('start', () => {{ touring = false; }});
renderer.setAnimationLoop((t) => {{
  if (touring) {{ const a = t * 0.0002; camera.position.set(Math.cos(a) * side * 0.8, side * 0.4, Math.sin(a) * side * 0.8); camera.lookAt(0, 0, 0); }}
  else controls.update();
  spinner.rotation.y += 0.02;
  renderer.render(scene, camera);
}});
window.scene = scene;
window.ready = true;
</script></body></html>"""

SEPARATE = """for (let i = 0; i < N; i++) {
  const m = new THREE.Mesh(geo, new THREE.MeshLambertMaterial({ color: new THREE.Color().setHSL((i % 17) / 17, 0.6, 0.5) }));
  m.position.set((i % side) - side / 2, Math.sin(i * 0.3), Math.floor(i / side) - side / 2);
  scene.add(m);
}"""

INSTANCED = """const inst = new THREE.InstancedMesh(geo, new THREE.MeshLambertMaterial({ color: 0x66aa55 }), N);
const m4 = new THREE.Matrix4();
for (let i = 0; i < N; i++) inst.setMatrixAt(i, m4.makeTranslation((i % side) - side / 2, Math.sin(i * 0.05) * 2, Math.floor(i / side) - side / 2));
scene.add(inst);"""


def page(title: str, n: int, build: str) -> bytes:
    return PAGE.format(title=title, n=n, build=build).encode()


async def one(html: bytes):
    t = time.monotonic()
    report = await check_page(html, page_name="bench")
    return time.monotonic() - t, report


async def floor() -> float:
    """Launch, open a page, 14 s of observation doing nothing, close: what no check can undercut."""
    t = time.monotonic()
    rubric = load_rubric()
    with cpu_share.raised(rubric.cpu_weight_factor):  # as a check's browser runs
        async with launch_browser(rubric.renderer) as browser:
            page = await browser.new_page()
            await page.goto("about:blank")
            await asyncio.sleep(NOMINAL_OBSERVATION_S)
            await page.close()
    return time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    pages = {
        "light (2,000 cubes)": page("Light Bench", 2000, SEPARATE),
        "heavy (50,000 instanced cubes)": page("Heavy Bench", 50000, INSTANCED),
    }
    print(f"load average at the start: {_loadavg()}")
    floors = [asyncio.run(floor()) for _ in range(args.runs)]
    floor_s = statistics.median(floors)
    print(f"floor (launch + page + 14 s + close): median {floor_s:.1f} s; runs: {', '.join(f'{w:.1f}' for w in floors)}")
    print(f"{'page':32} {'median s':>9} {'÷floor':>7} {'÷observed':>10} {'fps':>6} {'triangles':>10} {'total':>6} {'foreign cores':>14}")
    for name, html in pages.items():
        runs = [asyncio.run(one(html)) for _ in range(args.runs)]
        walls = [w for w, _ in runs]
        med = statistics.median(walls)
        r = runs[walls.index(med)][1]
        fps = next(i for i in r.items if i.id == "5").figures.get("fps")
        tris = next(i for i in r.items if i.id == "6a").figures.get("triangles")
        print(f"{name:32} {med:9.1f} {med / floor_s:7.2f} {med / max(r.observed_seconds, 0.1):10.2f} "
              f"{fps!s:>6} {tris!s:>10} {r.total:6.1f} {r.foreign_cpu_cores!s:>14}")
        print(f"{'':32} runs: {', '.join(f'{w:.1f}' for w in walls)}; phases of the median run: {r.phases}")
    print(f"load average at the end: {_loadavg()}")


def _loadavg() -> str:
    """The machine's 1, 5 and 15 minute load averages: the figures above are only read with them."""
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
