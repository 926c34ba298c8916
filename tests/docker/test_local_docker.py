"""The tiny benchmark end to end under ZenML's `local_docker` orchestrator: every step in its own container
from the project's image (docker/build.sh), the LLM a fake OpenAI server and the shared LLM cache a real
PostgreSQL, both on the Docker bridge address, the database password reaching the steps only through a
ZenML secret.

- the run completes and scores exactly as the same config does under the local orchestrator;
- a container killed in the middle of an answer step loses nothing: run again, no call that had finished
  before the kill is made again.

Kept out of `make test` (marker `docker`); `make test-docker` builds the image and runs them. They skip,
saying why, when Docker, the image or PostgreSQL is missing, except with RAGBENCH_REQUIRE_DOCKER=1 (set by
`make test-docker`), where that is a failure.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.postgres_server import postgres_server, unavailable_reason
from tests.projects import write_keyword_topics

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("RAGBENCH_IMAGE", "ragbench:local")
# ZenML's local_docker runs steps on Docker's default bridge; the host is its gateway
BRIDGE = os.environ.get("RAGBENCH_DOCKER_BRIDGE", "172.17.0.1")
# a named volume holding the models the steps provision, so only the first run ever downloads them
MODEL_VOLUME = os.environ.get("RAGBENCH_MODEL_VOLUME", "ragbench-test-models")
SECRET = "ragbench-db"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
RUN_TIMEOUT_S = 1800


def _unusable(reason: str) -> None:
    """Skip, or fail when the caller said these tests must run (`make test-docker`)."""
    if os.environ.get("RAGBENCH_REQUIRE_DOCKER") == "1":
        pytest.fail(f"RAGBENCH_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _docker_unavailable_reason() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client (make test-docker installs Docker)"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        return "the Docker daemon is not reachable (make test-docker starts it)"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=60).returncode:
        return f"no image {IMAGE} (build it with docker/build.sh)"
    with socket.socket() as probe:
        try:
            probe.bind((BRIDGE, 0))
        except OSError as error:
            return f"cannot bind the Docker bridge address {BRIDGE}: {error}"
    return unavailable_reason()


def _docker(*args: str, timeout: float = 60) -> str:
    return subprocess.run(
        ["docker", *args], check=True, capture_output=True, text=True, timeout=timeout
    ).stdout


def reply(request: dict) -> str:
    """Reader: a short answer citing passage 1; judge: a top verdict."""
    if not request.get("response_format"):
        return f"About {last_user_text(request).rsplit('Question:', 1)[-1].strip()} [1]."
    return json.dumps({"reasoning": "matches", "score": 5})


class Responder:
    """`reply`, except that once `hold_after` reader calls were answered, later reader calls wait until
    `release` is set: the answer step is then stuck with some answers made and stored, others not."""

    def __init__(self) -> None:
        self.hold_after: int | None = None
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.reader_calls = 0
        self.answered: list[str] = []  # reader prompts answered while holding was on, in order

    def __call__(self, request: dict) -> str:
        if request.get("response_format"):
            return reply(request)
        with self._lock:
            self.reader_calls += 1
            hold = self.hold_after is not None and self.reader_calls > self.hold_after
        if hold:
            self.release.wait(timeout=600)
        elif self.hold_after is not None:
            with self._lock:
                self.answered.append(last_user_text(request))
        return reply(request)


@dataclass
class Stacks:
    env: dict[str, str]  # for run.py: the test's ZenML store, no active stack chosen
    docker_stack: str  # stack ids
    local_stack: str


@pytest.fixture(scope="module")
def docker_ready() -> Iterator[None]:
    """Docker, the image, the bridge and PostgreSQL are there; afterwards the containers the runs left
    (ZenML's local_docker does not remove them) are removed."""
    if (reason := _docker_unavailable_reason()) is not None:
        _unusable(reason)
    before = set(_docker("ps", "-aq", "--no-trunc").split())
    yield
    left = [c for c in _docker("ps", "-aq", "--no-trunc").split() if c not in before]
    if left:
        subprocess.run(["docker", "rm", "-f", *left], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def postgres(docker_ready) -> Iterator[tuple[str, str]]:
    with postgres_server(host=BRIDGE) as (url, password):
        yield url, password


@pytest.fixture(scope="module")
def server(docker_ready) -> Iterator[tuple[FakeOpenAIServer, Responder]]:
    responder = Responder()
    with FakeOpenAIServer(responder=responder, host=BRIDGE) as fake:
        yield fake, responder
        responder.release.set()


@pytest.fixture(scope="module")
def stacks(docker_ready, postgres, tmp_path_factory) -> Stacks:
    """A fresh ZenML store with a local_docker stack (local image builder, default artifact store) and the
    database password as the secret the config names."""
    root = tmp_path_factory.mktemp("zenml")
    env = {
        **os.environ,
        "ZENML_CONFIG_PATH": str(root / "config"),
        "ZENML_ANALYTICS_OPT_IN": "false",
        "ZENML_LOGGING_VERBOSITY": "INFO",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "OPENAI_API_KEY": "sk-test-DUMMY",
    }
    env.pop("ZENML_ACTIVE_STACK_ID", None)
    env.pop("PGPASSWORD", None)  # the steps get it from the secret only
    script = (
        "import json, sys\n"
        "from zenml.client import Client\n"
        "from zenml.enums import StackComponentType as T\n"
        "client = Client()\n"
        "client.create_stack_component('ragbench_docker', 'local_docker', T.ORCHESTRATOR, {})\n"
        "client.create_stack_component('ragbench_builder', 'local', T.IMAGE_BUILDER, {})\n"
        "stack = client.create_stack('ragbench_docker', {T.ORCHESTRATOR: 'ragbench_docker', "
        "T.ARTIFACT_STORE: 'default', T.IMAGE_BUILDER: 'ragbench_builder'})\n"
        f"client.create_secret({SECRET!r}, {{'PGPASSWORD': sys.stdin.read()}})\n"
        "print(json.dumps([str(stack.id), str(client.get_stack('default').id)]))\n"
    )
    (root / "register.py").write_text(script)  # a file: ZenML wants a main module with a path
    done = subprocess.run(
        [sys.executable, str(root / "register.py")],
        input=postgres[1],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    docker_stack, local_stack = json.loads(done.stdout.strip().splitlines()[-1])
    return Stacks(env=env, docker_stack=docker_stack, local_stack=local_stack)


def write_config(root: Path, name: str, base_url: str, body: str) -> Path:
    path = root / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        "knowledge_base: {kind: folder, path: kb}\n"
        "eval_cases: cases.jsonl\n"
        "retrieval: {metrics_k: 1}\n"
        f"generation: {{reader: {{api_base: {base_url}, max_retries: 0}}}}\n"
        f"evaluation: {{judge: {{api_base: {base_url}, max_retries: 0}}, rubrics: [correctness]}}\n"
        "output_dir: out\n" + body
    )
    return path


def docker_orchestration(cache_url: str) -> str:
    """The part of a config that runs the steps in containers and shares the LLM cache in PostgreSQL."""
    return (
        f"llm_cache_url: {cache_url}\n"
        "orchestration:\n"
        f"  docker: {{parent_image: '{IMAGE}', skip_build: false}}\n"
        f"  orchestrator: {{run_args: {{volumes: {{{MODEL_VOLUME}: {{bind: /models, mode: rw}}}}}}}}\n"
        f"  secrets: [{SECRET}]\n"
        "  environment: {HF_HUB_OFFLINE: '1', HF_DATASETS_OFFLINE: '1'}\n"
        "  model_cache: /models/models\n"
    )


def start_run(
    root: Path, config: Path, stacks: Stacks, stack: str, *args: str
) -> tuple[subprocess.Popen, Path]:
    """run.py on `config` with the given stack active, its output in a log file beside the config."""
    log = root / f"{config.stem}-{time.time_ns()}.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "run.py"), "--config", str(config), *args],
            cwd=root,
            env={**stacks.env, "ZENML_ACTIVE_STACK_ID": stack},
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return process, log


def finish(process: subprocess.Popen, log: Path, timeout: float = RUN_TIMEOUT_S) -> tuple[int, str]:
    """Wait for a run.py process (killed after `timeout`): its exit code and the tail of its log."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return process.returncode, log.read_text()[-6000:]


def run_to_end(root: Path, config: Path, stacks: Stacks, stack: str, *args: str) -> tuple[str, float]:
    started = time.monotonic()
    code, tail = finish(*start_run(root, config, stacks, stack, *args))
    assert code == 0, f"run.py --config {config.name} exited {code}:\n{tail}"
    return tail, time.monotonic() - started


def outputs(root: Path, name: str) -> Path:
    """The output folder of the config's newest run."""
    folders = sorted((root / "out").glob(f"rag_benchmark-{name}-*"), key=lambda p: p.stat().st_mtime)
    assert folders, f"no outputs of {name} under {root / 'out'}"
    return folders[-1]


# columns and metrics that measure time (or say what came from a cache), not what was answered or scored
TIMING = (
    "index_build_s",
    "chunks_per_s",
    "search_ms_per_query",
    "exact_search_ms_per_query",
    "latency_mean_s",
    "latency_p95_s",
    "reused",
)


def scores(folder: Path) -> tuple[list[dict], list[dict]]:
    """results.csv without its timing columns, and case_values.csv without its timing metrics, with the
    cell ids (which hash only result-changing settings) as they are."""
    rows = list(csv.DictReader(io.StringIO((folder / "results.csv").read_text())))
    table = [
        {k: v for k, v in row.items() if k not in TIMING and not k.startswith("latency")} for row in rows
    ]
    cases = [
        row
        for row in csv.DictReader(io.StringIO((folder / "case_values.csv").read_text()))
        if not row["metric"].startswith("latency") and row["metric"] not in TIMING
    ]
    return table, sorted(cases, key=lambda r: (r["cell"], r["metric"], r["case"]))


def test_a_tiny_run_under_local_docker_scores_as_under_the_local_orchestrator(
    stacks, server, postgres, tmp_path
):
    fake, _ = server
    write_keyword_topics(tmp_path, 4)
    grid = f"grid: {{chunk_size: 64, embedding_model: {MINILM}, top_k: 2, top_n: 1, "
    grid += "reader: openai/fake-reader, judge: openai/fake-judge}\n"
    in_docker = write_config(tmp_path, "docker-tiny", fake.base_url, grid + docker_orchestration(postgres[0]))
    # the same benchmark under the local orchestrator, with its own LLM cache: every answer made anew
    local = write_config(tmp_path, "local-tiny", fake.base_url, grid + "llm_cache_dir: llm-local\n")

    calls_before = fake.request_count
    _, docker_s = run_to_end(tmp_path, in_docker, stacks, stacks.docker_stack)
    docker_calls = fake.request_count - calls_before
    _, local_s = run_to_end(tmp_path, local, stacks, stacks.local_stack, "--no-cache")
    local_calls = fake.request_count - calls_before - docker_calls
    print(f"\ntiny run: local_docker {docker_s:.1f} s, local orchestrator {local_s:.1f} s")

    # the steps did run in containers: ZenML built its image on ours and started one container per step
    containers = _docker("ps", "-a", "--no-trunc", "--format", "{{.Image}} {{.Command}}").splitlines()
    assert any("answer_" in line for line in containers), containers[:5]
    assert docker_calls == local_calls > 0  # the same calls made, through the bridge and on the host

    docker_table, docker_cases = scores(outputs(tmp_path, "docker-tiny"))
    local_table, local_cases = scores(outputs(tmp_path, "local-tiny"))
    assert len(docker_table) == 1 and docker_table[0]["answers_produced"] == "4"
    assert docker_table[0]["correctness_0to1"] not in ("", None)
    assert docker_table == local_table
    assert docker_cases == local_cases and docker_cases


def _cached_answers(cache_url: str, password: str, model: str) -> int:
    import psycopg

    url = cache_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, password=password, connect_timeout=5) as conn:
        try:
            row = conn.execute(
                "SELECT count(*) FROM ragbench_llm_results WHERE model = %s", (model,)
            ).fetchone()
        except psycopg.errors.UndefinedTable:  # no step has opened the cache yet
            return 0
    return int(row[0]) if row else 0


def _answer_container() -> str | None:
    for line in _docker("ps", "--no-trunc", "--format", "{{.ID}} {{.Command}}").splitlines():
        if "answer_" in line:
            return line.split()[0]
    return None


def test_a_container_killed_mid_answer_step_repeats_no_finished_call(stacks, server, postgres, tmp_path):
    fake, responder = server
    reader, cases, hold_after = "openai/kill-reader", 6, 3
    write_keyword_topics(tmp_path, cases)
    grid = f"grid: {{chunk_size: 64, embedding_model: {MINILM}, top_k: 2, top_n: 1, reader: {reader}, "
    grid += "judge: []}\n"
    config = write_config(tmp_path, "docker-kill", fake.base_url, grid + docker_orchestration(postgres[0]))

    def reader_prompts() -> Counter:
        return Counter(last_user_text(r) for r in fake.requests if r.get("model") == "kill-reader")

    responder.release.clear()
    responder.answered.clear()
    responder.reader_calls = 0
    responder.hold_after = hold_after
    first, first_log = start_run(tmp_path, config, stacks, stacks.docker_stack)
    killed = None
    try:
        # wait until the answer step has made and stored exactly `hold_after` answers and is stuck on the
        # rest (the fake server holds them), then kill its container: no sleep races the step
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline and first.poll() is None:
            if (
                responder.reader_calls > hold_after
                and _cached_answers(*postgres, reader) >= hold_after
                and (killed := _answer_container()) is not None
            ):
                _docker("kill", killed)
                break
            time.sleep(0.5)
        assert killed is not None, f"never saw the answer step hold; run.py ended {first.poll()}"
    finally:
        responder.hold_after = None
        responder.release.set()
        code, tail = finish(first, first_log, timeout=600)
    assert code != 0, f"the run whose answer step was killed did not fail:\n{tail}"
    answered = list(responder.answered)
    assert len(answered) == hold_after and _cached_answers(*postgres, reader) == hold_after
    before = reader_prompts()

    _, resumed_s = run_to_end(tmp_path, config, stacks, stacks.docker_stack)
    print(f"\nresumed run under local_docker: {resumed_s:.1f} s")
    after = reader_prompts()
    assert len(after) == cases  # every case asked at least once
    for prompt in answered:  # a call that finished before the kill is never made again
        assert after[prompt] == 1, (prompt[-80:], after[prompt])
    # the calls cut off by the kill were made again, the others not at all
    assert sum(after.values()) - sum(before.values()) == cases - hold_after
    table, _ = scores(outputs(tmp_path, "docker-kill"))
    assert table[0]["answers_produced"] == str(cases) and table[0]["reader_failures"] == "0"
