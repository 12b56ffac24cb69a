"""Sandbox benchmark: start to first answer, exec round trip, relay latency, image build cold/cached.

Each figure is printed beside a reference measured in the same run (ratios, not absolute claims):
- start -> first command answered   vs  `docker run --rm IMAGE true` (the engine's own floor)
- exec round trip                    vs  `docker exec CONTAINER true` through the CLI
- relay request (in the sandbox)     vs  the same request straight to the gate's socket (in the sandbox)
- image: cached lookup; with --cold a fresh base (debootstrap + import) and a fresh layer.

    .venv/bin/python bench/sandbox_start.py [--rounds 5] [--cold] [--json]
"""

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker

from showcase.harness import load_harness
from showcase.sandbox import image as image_mod
from showcase.sandbox.base import SandboxSpec
from showcase.sandbox.conformance import StandInGate
from showcase.sandbox.docker import DockerSandbox

IN_SANDBOX = r"""
import http.client, json, socket, statistics, time
class UnixConn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect("/gate/gate.sock")
def timed(make, n):
    out = []
    for _ in range(n):
        t = time.perf_counter(); c = make(); c.request("GET", "/v1/models"); c.getresponse().read(); c.close()
        out.append(time.perf_counter() - t)
    return out
n = %d
timed(lambda: http.client.HTTPConnection("127.0.0.1", 8765), 5); timed(lambda: UnixConn("gate"), 5)  # warm up
relay = timed(lambda: http.client.HTTPConnection("127.0.0.1", 8765), n)
direct = timed(lambda: UnixConn("gate"), n)
print(json.dumps({"relay_ms": statistics.median(relay) * 1e3, "direct_ms": statistics.median(direct) * 1e3}))
"""


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1e3, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="sandbox starts to time")
    parser.add_argument("--execs", type=int, default=20, help="exec round trips to time")
    parser.add_argument("--requests", type=int, default=100, help="HTTP requests per path for the relay figure")
    parser.add_argument("--cold", action="store_true", help="also build a fresh base and layer (minutes of CPU)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    figures: dict[str, float | str] = {}
    t = time.perf_counter()
    image = image_mod.ensure_image(None)
    figures["image_cached_lookup_ms"] = round((time.perf_counter() - t) * 1e3, 1)

    with tempfile.TemporaryDirectory(prefix="showcase-bench-") as tmp_name:
        tmp = Path(tmp_name)
        tmp.chmod(0o755)
        with StandInGate(tmp / "gate") as gate:
            spec = SandboxSpec(image=image, workdir_host=tmp / "work", gate_dir_host=gate.dir, labels={"showcase.purpose": "bench"})
            starts, engine_floor = [], []
            for _ in range(args.rounds):
                t = time.perf_counter()
                subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True, capture_output=True)
                engine_floor.append(time.perf_counter() - t)
                box = DockerSandbox()
                t = time.perf_counter()
                box.start(spec)
                answer = box.exec(["echo", "ready"], timeout_s=30)
                starts.append(time.perf_counter() - t)
                assert answer.stdout == "ready\n"
                box.kill()
                box.remove()
            figures["start_to_first_answer_ms"] = median_ms(starts)
            figures["ref_docker_run_true_ms"] = median_ms(engine_floor)

            with DockerSandbox() as box:
                box.start(spec)
                execs, cli = [], []
                for _ in range(args.execs):
                    t = time.perf_counter()
                    box.exec(["true"], timeout_s=30)
                    execs.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    subprocess.run(["docker", "exec", box.container_id, "true"], check=True)
                    cli.append(time.perf_counter() - t)
                figures["exec_round_trip_ms"] = median_ms(execs)
                figures["ref_docker_exec_cli_ms"] = median_ms(cli)
                out = box.exec(["python3", "-c", IN_SANDBOX % args.requests], timeout_s=300)
                relay = json.loads(out.stdout)
                figures["relay_request_ms"] = round(relay["relay_ms"], 2)
                figures["ref_direct_gate_request_ms"] = round(relay["direct_ms"], 2)

    if args.cold:
        client = docker.from_env()
        image_mod.BASE_RECIPE = f"bench-{uuid.uuid4().hex[:8]}"  # a hash no image has: a real cold build
        t = time.perf_counter()
        base = image_mod.ensure_base()
        figures["base_build_cold_s"] = round(time.perf_counter() - t, 1)
        figures["base_size_mb"] = round(client.images.get(base).attrs["Size"] / 1e6)
        with tempfile.TemporaryDirectory() as hdir:
            folder = Path(hdir) / "bench"
            folder.mkdir()
            (folder / "harness.toml").write_text('id = "bench"\nversion = "1"\n[launch]\ncommand = ["true"]\n')
            (folder / "agent.py").write_text(f"# {uuid.uuid4()}\n")
            t = time.perf_counter()
            layer = image_mod.ensure_image(load_harness("bench", root=Path(hdir)), base=base)
            figures["layer_build_cold_s"] = round(time.perf_counter() - t, 1)
            t = time.perf_counter()
            image_mod.ensure_image(load_harness("bench", root=Path(hdir)), base=base)
            figures["layer_cached_lookup_ms"] = round((time.perf_counter() - t) * 1e3, 1)
        client.images.remove(layer, force=True)
        client.images.remove(base, force=True)

    figures["ratio_start_vs_docker_run"] = round(figures["start_to_first_answer_ms"] / figures["ref_docker_run_true_ms"], 2)
    figures["ratio_exec_vs_docker_exec_cli"] = round(figures["exec_round_trip_ms"] / figures["ref_docker_exec_cli_ms"], 2)
    figures["ratio_relay_vs_direct"] = round(figures["relay_request_ms"] / figures["ref_direct_gate_request_ms"], 2)
    figures["relay_added_ms"] = round(figures["relay_request_ms"] - figures["ref_direct_gate_request_ms"], 2)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        width = max(map(len, figures))
        for key, value in figures.items():
            print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
