"""Re-record the command outputs README.md and the docs show, from real runs, into the pages.

    .venv/bin/python docs/record_outputs.py          # every one (the starter run: ~10 min, local models)
    .venv/bin/python docs/record_outputs.py NAME ... # some (init and the dry run take seconds)
    .venv/bin/python docs/record_outputs.py --list   # the recordings and the pages that show them

A shown output sits in a page between two HTML comments, invisible on the site and on the code host:

    <!-- recorded: starter-run summary -->
    ...the block this script writes, ending in a dated line naming this command...
    <!-- /recorded -->

`starter-run` names the recording, `summary` the part shown (`full`: the command, kept ZenML lines and
the summary; `summary`: from the results table on). Each recording runs in a new folder with a new ZenML
store and a new LLM cache (the packaged models are reused from their cache), exactly as a user's first
run would. `tests/system/test_recorded_outputs.py` runs the same commands today (the LLM calls against a
fake server) and fails when the structure a page shows (columns, blocks, warnings, the sampled case ids)
is no longer what the code prints: re-record then.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from ragbench.cache_home import CACHE_ENV_VAR
from ragbench.models.provision import MODEL_CACHE_ENV_VAR, cache_root

ROOT = Path(__file__).resolve().parent.parent

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(
    r"(?P<open><!-- recorded: (?P<name>[\w-]+) (?P<part>full|summary) -->\n)"
    r"(?P<body>.*?)(?P<close><!-- /recorded -->)",
    re.DOTALL,
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ZENML_KEPT = re.compile(r"^(Step index_\S+ has finished in|Pipeline run has finished in)")


@dataclass(frozen=True)
class Recording:
    """One shown output: the `run.py` invocations, in one fresh folder holding `files`, of which the last
    one is shown (the earlier ones set it up); `caption` says what it is, under the block."""

    name: str
    invocations: tuple[tuple[str, ...], ...]
    caption: str
    keep: Callable[[list[str]], list[str]]
    files: tuple[str, ...] = ()  # copied from the checkout into the folder first


def keep_all(lines: list[str]) -> list[str]:
    return lines


def keep_table(lines: list[str]) -> list[str]:
    """From the table on: ZenML's start-up lines (a new store's) are not the command's output."""
    return lines[_table_start(lines) :]


def _table_start(lines: list[str]) -> int:
    start = next((i for i, line in enumerate(lines) if line.startswith("cell ")), None)
    if start is None:
        raise RuntimeError("the command printed no table:\n" + "\n".join(lines[-40:]))
    return start


def keep_run(lines: list[str]) -> list[str]:
    """A benchmark run's output as a page shows it: ZenML's lines cut to the index step's and the
    pipeline's time, each gap marked `...`; then the summary from the results table on."""
    start = _table_start(lines)
    kept = ["..."]
    for line in lines[:start]:
        if _ZENML_KEPT.match(line):
            kept += [line, "..."]
    return [*kept[:-1], "", *lines[start:]]


RECORDINGS = {
    recording.name: recording
    for recording in (
        Recording(
            "starter-init",
            (("init", "my.yaml"),),
            "the starter config written into an empty folder",
            keep_all,
        ),
        Recording(
            "starter-dry-run",
            (("init", "my.yaml"), ("--config", "my.yaml", "--dry-run")),
            "the starter config as written, on a new ZenML store; ZenML's start-up lines cut",
            keep_table,
        ),
        Recording(
            "starter-run",
            (("init", "my.yaml"), ("--config", "my.yaml")),
            "the starter config as written, its first run on a new ZenML store and a new LLM cache, the "
            "local models already downloaded, on 2 cores, nothing else running; "
            "ZenML's own lines cut",
            keep_run,
        ),
        Recording(
            "hosted-dry-run",
            (("--config", "hosted_openai.yaml", "--dry-run"),),
            "configs/hosted_openai.yaml copied into an empty folder, no OPENAI_API_KEY set, on a new ZenML "
            "store; ZenML's start-up lines cut",
            keep_table,
            files=("configs/hosted_openai.yaml",),
        ),
    )
}


def run_recording(
    recording: Recording, folder: Path, extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> list[str]:
    """Run the recording's invocations in `folder` (a new ZenML store and LLM cache inside it, no provider
    key of this machine's environment; `env` may add one) and return
    the last one's output lines as shown: colours and progress bars gone, the folder and the checkout
    written `…`. `extra_args` are added to each invocation but `init` (the tests point the LLMs at a fake
    server with them)."""
    for file in recording.files:
        shutil.copy(ROOT / file, folder / Path(file).name)
    inherited = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
    environment = {
        **inherited,
        **(env or {}),
        "ZENML_CONFIG_PATH": str(folder / ".zenml"),
        "ZENML_LOGGING_VERBOSITY": "INFO",
        CACHE_ENV_VAR: str(folder / ".cache"),
        MODEL_CACHE_ENV_VAR: str(cache_root()),  # this machine's models, read before the cache moves
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "300",
    }
    output = ""
    for invocation in recording.invocations:
        args = invocation if invocation[0] == "init" else (*invocation, *extra_args)
        done = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), *args],
            cwd=folder,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one stream, in the order a terminal shows it
            text=True,
            check=False,
        )
        output = done.stdout
        if done.returncode != 0:
            raise RuntimeError(f"run.py {' '.join(args)} exited {done.returncode}:\n{output[-4000:]}")
    shown = [f"$ run.py {' '.join(recording.invocations[-1])}"]
    return shown + recording.keep(clean(output, folder))


def clean(output: str, folder: Path) -> list[str]:
    """Output lines without colours, progress bars or this machine's paths."""
    lines = []
    for raw in _ANSI.sub("", output).splitlines():
        line = raw.rsplit("\r", 1)[-1].rstrip()
        if re.search(r"\|\s*\d+/\d+ \[", line):  # a tqdm bar
            continue
        lines.append(
            line.replace(str(folder.resolve()), "…").replace(str(folder), "…").replace(str(ROOT), "…")
        )
    return lines


def part_of(lines: list[str], part: str) -> list[str]:
    """`full`: every shown line; `summary`: from the results table on (the run's summary alone)."""
    if part == "full":
        return lines
    return lines[_table_start(lines) :]


def render(recording: Recording, part: str, lines: list[str], recorded_on: str) -> str:
    """The block a page holds: the output as an indented code block, then its date and command."""
    body = "\n".join(f"    {line}".rstrip() for line in part_of(lines, part))
    command = f".venv/bin/python docs/record_outputs.py {recording.name}"
    return f"{body}\n\n(Recorded on {recorded_on} by `{command}`: {recording.caption}.)\n"


def shown_blocks(pages: list[Path] = PAGES) -> list[tuple[Path, str, str, str]]:
    """Every recorded block in the pages: (page, recording name, part, the block's text)."""
    return [
        (page, match["name"], match["part"], match["body"])
        for page in pages
        for match in BLOCK.finditer(page.read_text(encoding="utf-8"))
    ]


def shown_lines(block: str) -> list[str]:
    """The output lines a block shows: its indented code, without the caption."""
    code = block.split("\n(Recorded on ", 1)[0]
    return [line[4:] for line in code.strip("\n").splitlines()]


def write_pages(name: str, lines: list[str], recorded_on: str, pages: list[Path] = PAGES) -> list[Path]:
    """Put a recording into every page that shows it; those pages."""
    recording, showing = RECORDINGS[name], []
    for page in pages:
        text = page.read_text(encoding="utf-8")

        def replaced(match: re.Match) -> str:
            if match["name"] != name:
                return match.group(0)
            block = "\n" + render(recording, match["part"], lines, recorded_on) + "\n"
            return match["open"] + block + match["close"]

        new = BLOCK.sub(replaced, text)
        if any(match["name"] == name for match in BLOCK.finditer(text)):
            showing.append(page)
        if new != text:
            page.write_text(new, encoding="utf-8")
    return showing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="recordings to make (default: every one)")
    parser.add_argument("--list", action="store_true", help="list the recordings and where they are shown")
    args = parser.parse_args(argv)
    if args.list:
        for page, name, part, _ in shown_blocks():
            print(f"{name:16} {part:8} {page.relative_to(ROOT)}")
        return 0
    unknown = sorted(set(args.names) - set(RECORDINGS))
    if unknown:
        parser.error(f"unknown recording(s) {', '.join(unknown)}; known: {', '.join(RECORDINGS)}")
    for name in args.names or list(RECORDINGS):
        with tempfile.TemporaryDirectory(prefix=f"record-{name}-") as folder:
            lines = run_recording(RECORDINGS[name], Path(folder))
        showing = write_pages(name, lines, date.today().isoformat())
        print(f"{name}: written into {', '.join(str(p.relative_to(ROOT)) for p in showing) or 'no page'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
