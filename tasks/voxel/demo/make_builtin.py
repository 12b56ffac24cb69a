"""Generate the demo conversations from the readable page sources in pages/.

    python3 tasks/voxel/demo/make_builtin.py   # writes builtin.json, mini-swe-agent.json, builtin-clock.json

builtin.json is a replay script (showcase.replay.ReplayScript) for the builtin agent: four versions
of game.html, a `shot` after each, version 3 deliberately broken (a wrong property name that
throws on the first frame, so window.ready never comes) and fixed in version 4.
mini-swe-agent.json does the same job the way mini-swe-agent 2.4.6 works: one `bash` tool call
per turn (a heredoc writes the page), and it ends with a command whose first output line is
COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT (that is how mini-swe-agent knows the task is done).

generic.json plays the same versions through any agent: its calls are `@write` and `@shell`,
which the replay model turns into whatever shell or file-writing tool the agent offers (found
by schema), and it ends with a plain answer without tool calls, which is how most agents finish
a turn. generic-clock.json is its never-ending twin for the clock's tests.

Paths are relative on purpose: the agents run in /work, tests run them in a temporary folder.
"""

import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGES = HERE / "pages"


def page(n: int) -> str:
    return (PAGES / f"v{n}.html").read_text()


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def turn(content: str | None, *calls: dict) -> dict:
    t: dict = {"content": content}
    if calls:
        t["tool_calls"] = list(calls)
    return t


def builtin_script() -> dict:
    return {
        "model": "replay-builtin",
        "description": "Windmill Isle: four versions of a three.js voxel island; v3 breaks, the shot shows it, v4 fixes it.",
        "turns": [
            turn("I'll build \"Windmill Isle\", a voxel island at golden hour, with three.js from the import map. "
                 "First a look at the machine.",
                 call("shell", command="pwd && ls -la && python3 --version && node --version; "
                                       "command -v shot.sh || echo 'shot.sh not found'")),
            turn("Version 1: the island's height map as instanced cubes, a slow orbit tour, OrbitControls, "
                 "and window.scene / window.ready.",
                 call("write_file", path="game.html", content=page(1))),
            turn("Let me check that it loads.", call("shot", path="game.html")),
            turn("It loads. Version 2: one face-culled voxel mesh for terrain and trees (far lighter in software "
                 "rendering), a wavy sea, a windmill with turning sails and drifting clouds.",
                 call("write_file", path="game.html", content=page(2))),
            turn(None, call("shot", path="game.html")),
            turn("Version 3: a lighthouse with a sweeping beam, a small village, boats sailing round the island "
                 "and seagulls.",
                 call("write_file", path="game.html", content=page(3))),
            turn(None, call("shot", path="game.html")),
            turn("The check shows a page error: \"Cannot read properties of undefined (reading 'rotation')\". The "
                 "seagull wings are stored as `l` and `r`, but the animation loop reads `u.left`, so the first "
                 "frame throws and window.ready is never set. Fixing that, and polishing: the tour now visits "
                 "highlights with captions and picks up smoothly after a drag, and the chimneys smoke.",
                 call("write_file", path="game.html", content=page(4))),
            turn(None, call("shot", path="game.html")),
            turn("The page loads without errors. A last look at the file.",
                 call("shell", command="ls -la game.html && grep -c 'window.ready = true' game.html")),
            turn("DONE /work/game.html"),
        ],
        "final": turn("DONE /work/game.html"),
    }


def clock_script() -> dict:
    """An agent that never finishes by itself: for tests and demos of the clock (finish-now, hard stop).

    It writes version 1, then keeps answering a `shell` call `sleep 5` until a request's last user
    message contains "finish now" (the gate appends tasks/voxel/finish-now.txt from inject-after-s
    on); then it writes the final version and says DONE. Without the gate it runs until it is stopped.
    """
    return {
        "model": "replay-builtin-clock",
        "description": "Writes v1, then waits (sleep 5 calls) for the gate's finish-now message, then writes v4 and says DONE.",
        "turns": [
            turn("Version 1 first.", call("write_file", path="game.html", content=page(1))),
            {**turn("Asked to finish: writing the final version.", call("write_file", path="game.html", content=page(4))),
             "until_user_contains": "finish now",
             "filler": turn("Still polishing.", call("shell", command="sleep 5"))},
            turn("DONE /work/game.html"),
        ],
        "final": turn("DONE /work/game.html"),
    }


def mini_swe_agent_script() -> dict:
    submit = turn("The page is written and checked; submitting.",
                  call("bash", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"))
    final = page(4)
    assert "\nHTML_EOF\n" not in final  # the heredoc delimiter must not occur in the page
    return {
        "model": "replay-mini-swe-agent",
        "description": "Windmill Isle written in one bash heredoc, checked, then submitted (mini-swe-agent 2.4.6 tool-call mode).",
        "turns": [
            turn("Let me look at the working directory first.", call("bash", command="pwd && ls -la")),
            turn("I'll write the whole page, a three.js voxel island with a tour and mouse controls, in one heredoc.",
                 call("bash", command=f"cat > game.html <<'HTML_EOF'\n{final}HTML_EOF\nls -la game.html")),
            turn("Now check that it loads without console errors.",
                 call("bash", command="if command -v shot.sh >/dev/null; then shot.sh game.html; "
                                      "else echo 'shot.sh not available'; grep -c 'window.ready = true' game.html; fi")),
            submit,
        ],
        # mini-swe-agent needs a tool call in every answer; if it ever asks again, submit again.
        "final": submit,
    }


SHOT = ("if command -v shot.sh >/dev/null; then shot.sh game.html; "
        "else echo 'shot.sh not available'; grep -c 'window.ready = true' game.html; fi")


def generic_script() -> dict:
    return {
        "model": "replay-generic",
        "description": "Windmill Isle in four versions through whatever tools the agent offers; v3 breaks, the check "
                       "shows it, v4 fixes it.",
        "side_answer": "Windmill Isle",
        "turns": [
            turn("I'll build \"Windmill Isle\", a voxel island at golden hour, with three.js from the import map. "
                 "First a look at the machine.", call("@shell", command="pwd && ls -la && node --version")),
            turn("Version 1: the island's height map as instanced cubes, a slow orbit tour and OrbitControls.",
                 call("@write", path="game.html", content=page(1))),
            turn("Let me check that it loads.", call("@shell", command=SHOT)),
            turn("It loads. Version 2: one face-culled voxel mesh, a wavy sea, a windmill and drifting clouds.",
                 call("@write", path="game.html", content=page(2))),
            turn("Version 3: a lighthouse, a village, boats and seagulls.",
                 call("@write", path="game.html", content=page(3))),
            turn("Checking it.", call("@shell", command=SHOT)),
            turn("The seagull wings are stored as `l` and `r`, but the loop reads `u.left`: the first frame throws. "
                 "Fixing that in version 4, with a captioned tour and smoking chimneys.",
                 call("@write", path="game.html", content=page(4))),
            turn("Checking the fix.", call("@shell", command=SHOT)),
            turn("DONE /work/game.html"),
        ],
        "final": turn("DONE /work/game.html"),
    }


def generic_clock_script() -> dict:
    """generic.json's agent that never finishes by itself, for the hard stop and finish-now."""
    return {
        "model": "replay-generic-clock",
        "description": "Writes v1, then waits (sleep 5 commands) for the gate's finish-now message, then writes v4.",
        "side_answer": "Windmill Isle",
        "turns": [
            turn("Version 1 first.", call("@write", path="game.html", content=page(1))),
            {**turn("Asked to finish: writing the final version.", call("@write", path="game.html", content=page(4))),
             "until_user_contains": "finish now",
             "filler": turn("Still polishing.", call("@shell", command="sleep 5"))},
            turn("DONE /work/game.html"),
        ],
        "final": turn("DONE /work/game.html"),
    }


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    write_json(HERE / "builtin.json", builtin_script())
    write_json(HERE / "mini-swe-agent.json", mini_swe_agent_script())
    write_json(HERE / "builtin-clock.json", clock_script())
    write_json(HERE / "generic.json", generic_script())
    write_json(HERE / "generic-clock.json", generic_clock_script())
    print(f"wrote builtin.json, mini-swe-agent.json, builtin-clock.json, generic.json and generic-clock.json in {HERE}")
