"""What the gate costs: the same requests direct to an upstream and through the gate, in one run.

The scripted upstream (tests/gate_upstream.py) and the gate (`showcase gate`, with a sampling
file, an answer limit and bodies kept, as in a run) each run in their own process; this process
is the client. Requests alternate direct / gated so drift on a shared machine hits both alike.

    .venv/bin/python bench/gate_overhead.py [--small 300] [--streams 100] [--big 30] [--concurrent 16]

Prints p50/p99 of each path, the added time (gated - direct) and the ratio.
"""

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
MSG = [{"role": "user", "content": "build a voxel world"}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port} after {timeout_s} s")


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) a process has used so far, in ms: the gate's cost, whatever the load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def report(name: str, direct: list[float], gated: list[float]) -> dict:
    row = {"case": name, "n": len(direct)}
    for q in (50, 99):
        d, g = pct(direct, q), pct(gated, q)
        row[f"direct_p{q}_ms"] = round(d, 3)
        row[f"gate_p{q}_ms"] = round(g, 3)
        row[f"added_p{q}_ms"] = round(g - d, 3)
        row[f"ratio_p{q}"] = round(g / d, 2) if d else None
    print(f"{name:<28} n={len(direct):<4} direct p50 {row['direct_p50_ms']:8.3f} ms  gate p50 {row['gate_p50_ms']:8.3f} ms  "
          f"added p50 {row['added_p50_ms']:7.3f} ms (x{row['ratio_p50']})  |  p99 direct {row['direct_p99_ms']:8.3f} "
          f"gate {row['gate_p99_ms']:8.3f} added {row['added_p99_ms']:7.3f} ms", flush=True)
    return row


def timed_post(client: httpx.Client, url: str, body: bytes) -> float:
    start = time.perf_counter()
    response = client.post(url, content=body, headers={"content-type": "application/json"})
    response.read()
    assert response.status_code == 200, response.text[:200]
    return (time.perf_counter() - start) * 1000


def first_byte(client: httpx.Client, url: str, body: bytes) -> float:
    start = time.perf_counter()
    with client.stream("POST", url, content=body, headers={"content-type": "application/json"}) as response:
        chunks = response.iter_raw()
        next(chunks)
        elapsed = (time.perf_counter() - start) * 1000
        for _ in chunks:
            pass
    return elapsed


def paired(n: int, fn, direct_url: str, gate_url: str, body: bytes, client: httpx.Client) -> tuple[list[float], list[float]]:
    for _ in range(5):  # warm connections and code paths
        fn(client, direct_url, body), fn(client, gate_url, body)
    direct, gated = [], []
    for i in range(n):
        order = ((direct, direct_url), (gated, gate_url)) if i % 2 else ((gated, gate_url), (direct, direct_url))
        for out, url in order:
            out.append(fn(client, url, body))
    return direct, gated


async def concurrent(url: str, body: bytes, clients: int, per_client: int) -> tuple[list[float], float]:
    """`clients` concurrent clients, `per_client` requests each: latencies and requests per second."""
    latencies: list[float] = []

    async def one(client: httpx.AsyncClient) -> None:
        for _ in range(per_client):
            start = time.perf_counter()
            response = await client.post(url, content=body, headers={"content-type": "application/json"})
            assert response.status_code == 200
            latencies.append((time.perf_counter() - start) * 1000)

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(limits=limits, trust_env=False, timeout=60) as client:
        await one(client)  # warm
        latencies.clear()
        start = time.perf_counter()
        await asyncio.gather(*(one(client) for _ in range(clients)))
        wall = time.perf_counter() - start
    return latencies, clients * per_client / wall


def concurrent_rounds(direct: str, gated: str, body: bytes, clients: int, per_client: int, rounds: int = 4):
    """Direct and gated batches alternate, so a change of load on a shared machine hits both."""
    lat_d, lat_g, rps_d, rps_g = [], [], [], []
    for n in range(rounds):
        for url, lat, rps in ((direct, lat_d, rps_d), (gated, lat_g, rps_g))[:: 1 if n % 2 == 0 else -1]:
            got, per_s = asyncio.run(concurrent(url, body, clients, per_client))
            lat.extend(got)
            rps.append(per_s)
    return lat_d, lat_g, statistics.median(rps_d), statistics.median(rps_g)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=300, help="small non-streamed requests per path")
    parser.add_argument("--streams", type=int, default=100, help="streamed requests per path (first byte)")
    parser.add_argument("--big", type=int, default=30, help="1 MB requests per path")
    parser.add_argument("--concurrent", type=int, default=16, help="concurrent clients")
    parser.add_argument("--per-client", type=int, default=10, help="requests per concurrent client per round (4 rounds)")
    parser.add_argument("--json", action="store_true", help="also print the rows as one JSON document")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="showcase-gate-bench-"))
    up_port, gate_port = free_port(), free_port()
    (work / "sampling.json").write_text(json.dumps({"temperature": 0.6, "chat_template_kwargs": {"enable_thinking": True}}))
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'tests'}:{REPO / 'src'}"}
    upstream = subprocess.Popen(
        [sys.executable, "-c", "import uvicorn, gate_upstream; uvicorn.run(gate_upstream.ScriptedUpstream().app, "
         f"host='127.0.0.1', port={up_port}, log_level='warning', access_log=False)"], env=env)
    gate = subprocess.Popen(
        [sys.executable, "-m", "showcase.cli", "gate", "--upstream", f"http://127.0.0.1:{up_port}/v1",
         "--model", "served-model", "--listen", f"tcp:127.0.0.1:{gate_port}", "--sampling-file",
         str(work / "sampling.json"), "--answer-limit", "4096", "--log-dir", str(work / "log"), "--no-probe", "--json"],
        env=env, stdout=subprocess.DEVNULL)
    rows = []
    try:
        wait_port(up_port)
        wait_port(gate_port)
        direct = f"http://127.0.0.1:{up_port}/v1/chat/completions"
        gated = f"http://127.0.0.1:{gate_port}/v1/chat/completions"
        small = json.dumps({"model": "m", "messages": MSG}).encode()
        stream = json.dumps({"model": "m", "messages": MSG, "stream": True}).encode()
        big = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * (1 << 20)}]}).encode()
        print(f"gate overhead, {os.cpu_count()} CPUs, python {sys.version.split()[0]}; records in {work / 'log'}")
        print(f"load average before: {os.getloadavg()[0]:.2f} (latency figures mean little when it exceeds the CPUs)")

        def gate_cpu(row: dict, before: tuple[float, float], requests: int) -> None:
            # CPU per request of the gate, against the upstream's (a uvicorn + Starlette app doing
            # a similar amount of HTTP work) as the reference measured in the same run.
            gate_ms = (cpu_ms(gate.pid) - before[0]) / requests
            up_ms = (cpu_ms(upstream.pid) - before[1]) / (2 * requests)  # it serves both paths
            row["gate_cpu_ms_per_request"] = round(gate_ms, 3)
            row["upstream_cpu_ms_per_request"] = round(up_ms, 3)
            print(f"{'':<28} CPU per request: gate {gate_ms:.3f} ms, upstream {up_ms:.3f} ms (x{gate_ms / up_ms:.2f})")

        def cpu_now() -> tuple[float, float]:
            return cpu_ms(gate.pid), cpu_ms(upstream.pid)

        with httpx.Client(trust_env=False, timeout=30) as client:
            for name, n, fn, body in (("small chat request", args.small, timed_post, small),
                                      ("stream first byte", args.streams, first_byte, stream),
                                      ("1 MB request body", args.big, timed_post, big)):
                before = cpu_now()
                rows.append(report(name, *paired(n, fn, direct, gated, body, client)))
                gate_cpu(rows[-1], before, n + 5)
        before = cpu_now()
        lat_d, lat_g, rps_d, rps_g = concurrent_rounds(direct, gated, small, args.concurrent, args.per_client)
        row = report(f"{args.concurrent} concurrent clients", lat_d, lat_g)
        gate_cpu(row, before, len(lat_g) + 4 * args.per_client)  # + one warm-up client per round
        row.update(direct_rps=round(rps_d, 1), gate_rps=round(rps_g, 1))
        print(f"{'':<28} throughput direct {rps_d:.0f} req/s, gate {rps_g:.0f} req/s (x{rps_g / rps_d:.2f})")
        rows.append(row)
        lines = (work / "log" / "gate.log").read_text().count("\n")
        print(f"gate.log holds {lines} lines; load average after: {os.getloadavg()[0]:.2f}")
    finally:
        for proc in (gate, upstream):
            proc.terminate()
        for proc in (gate, upstream):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
