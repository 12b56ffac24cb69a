#!/usr/bin/env python3
"""showcase's own small coding agent: an OpenAI chat-completions tool-calling loop.

Python standard library only, because it runs inside the sealed sandbox (Debian 12's python3.11,
no pip packages). The model gets four tools: `shell`, `write_file`, `read_file` and `shot`.
The loop ends when the model answers without tool calls (normally "DONE /work/game.html"), at
--max-steps, when the endpoint refuses (HTTP 4xx: the gate's hard stop), or when the endpoint
stays unreachable after a bounded number of retries.

Exit codes: 0 the model finished, 3 the endpoint refused, 4 the endpoint was unreachable (or
answered nonsense), 5 the step limit was reached, 1 or 2 bad arguments (2 is argparse's).

stdout gets one short line per step (the run keeps it as the agent log); every step is also
appended as one JSON line to $SHOWCASE_TRAJECTORY (default /tmp/trajectory.jsonl).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SYSTEM_PROMPT = """You are an autonomous coding agent working alone on a Linux machine.
Use the tools to inspect the machine, write files and test your work; nobody will answer questions.
Write whole files with write_file (prefer it over shell heredocs for large files).
Run `shot` on a page to load it in a headless browser: it saves a screenshot and prints console errors.
When the task is complete, answer with a final message without any tool call."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a bash command (bash -lc) in the working directory. Output (stdout and stderr "
            "together) is truncated; long-running commands are killed at the timeout.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "the bash command"}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a whole text file (created or replaced; parent folders are created).",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "file path, relative to the working directory or absolute"},
                    "content": {"type": "string", "description": "the complete new content"},
                },
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file, optionally a range of lines.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "offset": {"type": "integer", "description": "first line to return, 1-based (default 1)"},
                    "limit": {"type": "integer", "description": "how many lines to return (default 400)"},
                },
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "shot",
            "description": "Load an HTML page in a headless browser: saves a screenshot beside it and prints "
            "console errors and load problems.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "the HTML file, e.g. game.html"}},
                "required": ["path"],
            },
        },
    },
]

# HTTP statuses worth retrying: the endpoint is busy or briefly broken. Any other 4xx means the
# endpoint refuses us (hard stop, blocked, bad request) and retrying would only repeat that.
RETRY_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}


class EndpointRefused(Exception):
    """The endpoint answered with a status that retrying will not change."""


class EndpointUnreachable(Exception):
    """Network errors (or retryable statuses) persisted through every retry."""


def log(msg):
    print(msg, flush=True)  # flushed: stdout is a pipe the run reads live


def one_line(text, limit=100):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip_text(text, limit):
    """Keep the head and the tail: errors are usually at the end, context at the start."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def raw_arguments(message):
    """Each tool call's arguments exactly as the model sent them."""
    return [((c or {}).get("function") or {}).get("arguments", "") for c in message.get("tool_calls") or []]


def normalize_calls(calls, step):
    """Tool calls in the exact form the API accepts back in the history.

    Servers differ (a missing id or type); and arguments that are not valid JSON (an answer cut
    at the token limit) make strict APIs refuse the whole next request. Such arguments are
    wrapped as valid JSON; the tool result tells the model what went wrong.
    """
    out = []
    for i, call in enumerate(calls):
        fn = (call or {}).get("function") or {}
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args)
        try:
            json.loads(args)
        except ValueError:
            args = json.dumps({"invalid_arguments": args[:2000]})
        out.append({"id": (call or {}).get("id") or f"call_{step}_{i}", "type": "function",
                    "function": {"name": str(fn.get("name", "")), "arguments": args}})
    return out


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def stop_on_sigterm(signum, frame):
    # Turn the run's SIGTERM into SystemExit, so `finally` blocks kill a running command's group.
    raise SystemExit(128 + signum)


class Agent:
    def __init__(self, args):
        self.args = args
        self.base_url = args.base_url.rstrip("/")
        self.workdir = os.path.abspath(args.workdir)
        self.trajectory = args.trajectory
        self.t0 = time.monotonic()

    # ---------- talking to the model ----------

    def chat(self, messages):
        """One chat-completions request, with bounded retries and exponential backoff."""
        body = json.dumps({"model": self.args.model, "messages": messages, "tools": TOOLS}).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.args.api_key}"}
        delay = self.args.backoff_s
        for attempt in range(1, self.args.retries + 2):
            req = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.args.request_timeout) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                detail = one_line(exc.read().decode("utf-8", "replace"), 300)
                if exc.code not in RETRY_STATUSES:
                    raise EndpointRefused(f"HTTP {exc.code}: {detail}") from None
                problem = f"HTTP {exc.code}: {detail}"
            except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
                problem = one_line(getattr(exc, "reason", None) or exc, 200)
            if attempt > self.args.retries:
                raise EndpointUnreachable(f"{problem} (gave up after {attempt} tries)")
            log(f"  request failed ({problem}); retry {attempt}/{self.args.retries} in {delay:.1f} s")
            time.sleep(delay)
            delay = min(delay * 2, self.args.backoff_max_s)

    # ---------- tools ----------

    def resolve(self, path):
        return os.path.normpath(os.path.join(self.workdir, os.path.expanduser(path)))

    def run_process(self, argv, env=None):
        """Run argv in its own process group; at the timeout kill the whole group.

        Output goes to a temporary file, not a pipe: a background process the command leaves
        running (a web server, say) would keep a pipe open and hang us, a file does not.
        """
        with tempfile.TemporaryFile() as out:
            start = time.monotonic()
            proc = subprocess.Popen(
                argv, cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group, so a kill reaches grandchildren too
            )
            try:
                code = proc.wait(timeout=self.args.command_timeout)
                note = f"[exit code {code}]"
            except subprocess.TimeoutExpired:
                kill_group(proc)
                note = f"[killed: timed out after {self.args.command_timeout:g} s]"
            finally:
                if proc.poll() is None:  # we are being stopped mid-command (SIGTERM): take the command along
                    kill_group(proc)
            elapsed = time.monotonic() - start
            # Read a bounded amount even if the command wrote gigabytes.
            size = out.seek(0, os.SEEK_END)
            limit = self.args.output_limit
            if size <= limit:
                out.seek(0)
                text = out.read().decode("utf-8", "replace")
            else:
                out.seek(0)
                head = out.read(limit // 2).decode("utf-8", "replace")
                out.seek(size - limit // 2)
                tail = out.read().decode("utf-8", "replace")
                text = f"{head}\n[... {size - limit} bytes omitted ...]\n{tail}"
        return f"{text.rstrip()}\n{note} ({elapsed:.1f} s)".lstrip()

    def tool_shell(self, command):
        # A login shell gives the usual environment, but Debian's /etc/profile resets PATH, which
        # would hide tools the run put on ours (shot.sh in /opt/tools): restore it first.
        return self.run_process(["bash", "-lc", 'export PATH="$SHOWCASE_AGENT_PATH"\n' + command],
                                env={**os.environ, "SHOWCASE_AGENT_PATH": os.environ.get("PATH", os.defpath)})

    def tool_write_file(self, path, content):
        target = self.resolve(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # Temp file in the same folder, then rename: a watcher on the host only ever sees whole files.
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(target))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(content)
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; the host side must be able to read it
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return f"wrote {target} ({len(content.encode('utf-8'))} bytes, {content.count(chr(10)) + 1} lines)"

    def tool_read_file(self, path, offset=1, limit=400):
        target = self.resolve(path)
        with open(target, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        first = max(1, int(offset or 1))
        chosen = lines[first - 1 : first - 1 + max(1, int(limit or 400))]
        body = "\n".join(chosen)
        header = f"{target}: lines {first}-{first + len(chosen) - 1} of {len(lines)}"
        return clip_text(f"{header}\n{body}", self.args.output_limit)

    def tool_shot(self, path):
        shot = shutil.which("shot.sh")
        if not shot:
            return "shot.sh is not available on this machine (not on PATH); check the page another way."
        return self.run_process([shot, path])

    def run_tool(self, name, raw_args):
        """Run one tool call; every failure becomes a message for the model, never a crash."""
        try:
            args = json.loads(raw_args) if isinstance(raw_args, str) and raw_args.strip() else (raw_args or {})
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as exc:
            return False, f"error: the arguments are not a valid JSON object ({exc}); send them again"
        fn = getattr(self, f"tool_{name}", None) if name in {"shell", "write_file", "read_file", "shot"} else None
        if fn is None:
            return False, f"error: unknown tool {name!r}; the tools are shell, write_file, read_file, shot"
        try:
            return True, fn(**args)
        except TypeError as exc:
            return False, f"error: bad arguments for {name}: {exc}"
        except OSError as exc:
            return False, f"error: {exc}"

    # ---------- the loop ----------

    def compact(self, messages):
        """Elide the content of old write_file calls once the history grows past --history-chars.

        Every version of a page stays in the history as the arguments of its write_file call; a long
        run would carry dozens of copies to the model on every request. Only the latest
        --keep-writes stay whole; the file itself is always one read_file away. Nothing happens
        below the threshold, so short runs (and upstream prompt caches) are left alone.
        """
        if sum(len(json.dumps(m)) for m in messages) <= self.args.history_chars:
            return 0
        writes = [c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []
                  if (c.get("function") or {}).get("name") == "write_file"]
        elided = 0
        for call in writes[: max(0, len(writes) - self.args.keep_writes)]:
            try:
                args = json.loads(call["function"]["arguments"])
            except (ValueError, TypeError, KeyError):
                continue
            if isinstance(args, dict) and isinstance(args.get("content"), str) and not args.get("elided"):
                size = len(args["content"].encode("utf-8"))
                call["function"]["arguments"] = json.dumps({
                    "path": args.get("path"), "elided": True,
                    "content": f"[{size} bytes written here; elided from the history to save context, read the file to see it]"})
                elided += 1
        return elided

    def record(self, entry):
        try:
            with open(self.trajectory, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        except OSError as exc:  # a lost trajectory line must not end the run
            log(f"  trajectory not written ({exc})")

    def run(self, prompt):
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
        log(f"agent: model {self.args.model} at {self.base_url}, workdir {self.workdir}, max {self.args.max_steps} steps")
        for step in range(1, self.args.max_steps + 1):
            elided = self.compact(messages)
            if elided:
                log(f"  history: elided the content of {elided} old write_file call(s)")
            t_req = time.monotonic()
            try:
                response = self.chat(messages)
            except EndpointRefused as exc:
                log(f"[step {step}] stopped: the endpoint refused the request ({exc})")
                return 3
            except EndpointUnreachable as exc:
                log(f"[step {step}] stopped: the endpoint is unreachable ({exc})")
                return 4
            request_s = time.monotonic() - t_req
            try:
                choice = response["choices"][0]
                message = choice.get("message") or {}
            except (KeyError, IndexError, TypeError):
                log(f"[step {step}] stopped: the answer has no choices: {one_line(response, 200)}")
                return 4
            content = message.get("content") or ""
            calls = normalize_calls(message.get("tool_calls") or [], step)
            usage = response.get("usage") or {}
            # Keep only what the API accepts back; extra fields some servers add are dropped.
            kept = {"role": "assistant", "content": message.get("content")}
            if calls:
                kept["tool_calls"] = calls
            messages.append(kept)
            tokens = f"{usage.get('prompt_tokens', '?')}+{usage.get('completion_tokens', '?')} tok"
            elapsed = time.monotonic() - self.t0
            log(f"[step {step}] {elapsed:.0f}s  model {request_s:.1f}s {tokens}" + (f"  {one_line(content, 80)}" if content else ""))
            entry = {
                "step": step, "time": time.time(), "elapsed_s": round(elapsed, 3), "request_s": round(request_s, 3),
                "usage": usage, "finish_reason": choice.get("finish_reason"),
                "content": content, "tool_calls": calls, "tool_results": [],
            }
            if not calls:
                entry["end"] = "answered"
                self.record(entry)
                log(f"agent: finished after {step} steps: {one_line(content, 200)}")
                return 0
            for call, raw in zip(calls, raw_arguments(message)):
                name = call["function"]["name"]
                t_tool = time.monotonic()
                ok, result = self.run_tool(name, raw)
                result = clip_text(result, self.args.output_limit)
                log(f"  {name}({one_line(raw, 70)}) -> {one_line(result.splitlines()[-1] if result else '', 70)} [{time.monotonic() - t_tool:.1f}s]")
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
                entry["tool_results"].append({"id": call["id"], "name": name, "ok": ok, "output": clip_text(result, 4000)})
            self.record(entry)
        log(f"agent: stopped at the step limit ({self.args.max_steps})")
        return 5


def parse_args(argv=None):
    env = os.environ.get
    p = argparse.ArgumentParser(description="showcase's builtin tool-calling agent (stdlib only).")
    p.add_argument("--prompt-file", required=True, help="file with the task prompt (sent as the first user message)")
    p.add_argument("--model", default=env("OPENAI_MODEL"), help="model name (default: $OPENAI_MODEL)")
    p.add_argument("--base-url", default=env("OPENAI_BASE_URL"), help="API base ending in /v1 (default: $OPENAI_BASE_URL)")
    p.add_argument("--api-key", default=env("OPENAI_API_KEY", ""), help="API key (default: $OPENAI_API_KEY)")
    p.add_argument("--workdir", default=env("SHOWCASE_WORKDIR") or ("/work" if os.path.isdir("/work") else os.getcwd()),
                   help="where commands run and relative paths point (default: /work if it exists, else .)")
    p.add_argument("--trajectory", default=env("SHOWCASE_TRAJECTORY", "/tmp/trajectory.jsonl"), help="JSON-lines step log")
    p.add_argument("--max-steps", type=int, default=int(env("SHOWCASE_MAX_STEPS", "300")))
    p.add_argument("--command-timeout", type=float, default=float(env("SHOWCASE_COMMAND_TIMEOUT", "180")),
                   help="seconds before a shell or shot command's process group is killed")
    p.add_argument("--request-timeout", type=float, default=float(env("SHOWCASE_REQUEST_TIMEOUT", "1800")),
                   help="seconds to wait for one model answer (long answers take long)")
    p.add_argument("--retries", type=int, default=int(env("SHOWCASE_RETRIES", "6")), help="retries of a failed request")
    p.add_argument("--backoff-s", type=float, default=float(env("SHOWCASE_BACKOFF_S", "2")), help="first retry delay")
    p.add_argument("--backoff-max-s", type=float, default=60.0, help="longest retry delay")
    p.add_argument("--output-limit", type=int, default=16000, help="characters of tool output kept for the model")
    p.add_argument("--history-chars", type=int, default=int(env("SHOWCASE_HISTORY_CHARS", "400000")),
                   help="above this many characters of history, old write_file contents are elided")
    p.add_argument("--keep-writes", type=int, default=2, help="latest write_file calls always kept whole")
    args = p.parse_args(argv)
    if not args.model:
        p.error("no model: pass --model or set OPENAI_MODEL")
    if not args.base_url:
        p.error("no endpoint: pass --base-url or set OPENAI_BASE_URL")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        with open(args.prompt_file, encoding="utf-8") as f:
            prompt = f.read()
    except OSError as exc:
        print(f"agent: cannot read the prompt file: {exc}", file=sys.stderr)
        return 1
    if not os.path.isdir(args.workdir):
        print(f"agent: working directory {args.workdir} does not exist", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        return Agent(args).run(prompt)
    except SystemExit as exc:
        log(f"agent: stopped by a signal (exit {exc.code})")
        raise


if __name__ == "__main__":
    sys.exit(main())
