"""logger=[tensorboard,wandb,mlflow] against the real packages, without the network: W&B in offline mode
(its run files in the run folder, read back in this process by :func:`wandb_file`: a ``.wandb`` file
is W&B's own protobuf ``Record`` messages in LevelDB's log format) and MLflow against a real tracking
server this module starts on 127.0.0.1 (a free port, a SQLite store in a temp folder), read back with
``MlflowClient().get_metric_history``.

Each tracker must hold every scalar of ``metrics.jsonl`` at the same steps, the config and the final
results, also after kills and ``resume=true`` (every step once, none missing); a missing package is
one line with exit 2 before anything is written; a tracking server that is down, at the start or
mid-run, is one warning line and the run finishes with its files intact. A sweep's jobs share one W&B
group and one MLflow parent run, found again when the sweep is rerun in its folder.

Every run is a forked child of this process (the imports already paid for), except the missing-package
runs, which need an interpreter of their own."""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("wandb")
pytest.importorskip("mlflow")

from her_rl.folder import checkpoint  # noqa: E402
from her_rl.folder.metrics import METRICS, WALL_CLOCK_TAGS, _lines  # noqa: E402
from her_rl.run.runner import main  # noqa: E402

# about 25 iterations of her_dqn; an evaluation every 3rd, a checkpoint before every next one
ARGS = ["algo=her_dqn", "env=bitflip", "n=4", "algo.hidden=[32,32]", "progress=false", "eval.episodes=4",
        "eval.every_iterations=3", "eval.stop_when_solved=false", "checkpoint.every_s=0", "budget.env_steps=320"]
SERVER_WAIT_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def offline(tmp_path_factory):
    """W&B offline, its own config and cache folders in a temp folder; MLflow's server starts now (it
    takes seconds) while the first tests run."""
    home = tmp_path_factory.mktemp("trackers")
    saved = dict(os.environ)
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_CONFIG_DIR=str(home / "wandb-config"),
                      WANDB_CACHE_DIR=str(home / "wandb-cache"), WANDB_DATA_DIR=str(home / "wandb-data"),
                      MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT="true", MLFLOW_HTTP_REQUEST_MAX_RETRIES="0")
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("mlflow")), "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}",
         "--artifacts-destination", str(home / "artifacts")],
        cwd=home, stdin=subprocess.DEVNULL, stdout=open(home / "server.log", "wb"), stderr=subprocess.STDOUT,
        start_new_session=True, env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    yield {"uri": f"http://127.0.0.1:{port}", "process": server, "log": home / "server.log"}
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait()
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def mlflow_uri(offline):
    """The tracking server's address, once it answers."""
    deadline = time.monotonic() + SERVER_WAIT_S
    while True:
        assert offline["process"].poll() is None, offline["log"].read_text()[-2000:]
        try:
            urllib.request.urlopen(offline["uri"] + "/health", timeout=2)
            return offline["uri"]
        except OSError:
            assert time.monotonic() < deadline, "the MLflow server did not start: " + offline["log"].read_text()[-2000:]
            time.sleep(0.3)


def in_child(log: Path, body) -> int:
    """``body()`` (it returns the exit status) in a forked child, its output appended to ``log``; the
    child's exit status (-9: SIGKILLed)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.stdout = open(1, "w", buffering=1, closefd=False)
            sys.stderr = open(2, "w", buffering=1, closefd=False)
            code = body()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def forked(folder: Path, args: list[str], hook=None) -> int:
    """``main(args)`` in ``folder`` in a forked child (``hook`` first); its exit status (-9: SIGKILLed)
    and its output in ``folder.parent/<folder>.log``."""
    def body() -> int:
        if hook is not None:
            hook()
        main(args, out_dir=folder)
        return 0
    return in_child(folder.parent / f"{folder.name}.log", body)


def forked_cli(cwd: Path, argv: list[str], log: Path) -> int:
    """The ``her-run`` command ``argv`` (her-run's ``main``, Hydra and all) in a forked child in ``cwd``;
    its exit status, its output in ``log``."""
    def body() -> int:
        from her_rl import cli

        os.chdir(cwd)
        sys.argv = ["her-run", *argv]
        try:
            cli.main()
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        return 0
    return in_child(log, body)


def kill_at_save(k: int, trackers_stop_at: int | None = None):
    """SIGKILL while the k-th checkpoint is written (its lines, and the line after, in metrics.jsonl);
    ``trackers_stop_at``: from the checkpoint of that number on, the trackers get no line (as lines
    still queued when a run dies), so they hold fewer steps than the checkpoint covers."""
    def hook():
        from her_rl.run import trackers

        original, calls = checkpoint.save, []
        forward = trackers.Trackers.line

        def save(obj, path):
            calls.append(path)
            if len(calls) == k:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(obj, path)

        def line(self, values):
            if trackers_stop_at is None or len(calls) < trackers_stop_at:
                forward(self, values)

        checkpoint.save = save
        trackers.Trackers.line = line
    return hook


def expected_lines(folder: Path) -> list[dict]:
    return [line for _, line in _lines(folder / METRICS)]


def wandb_file(path: Path) -> list[dict]:
    """The records of a ``.wandb`` file, read in this process (``wandb leet inspect`` costs about a second
    a file, most of it an interpreter's start). The file is LevelDB's log format after a 7-byte header
    (``:W&B``, 0xBEE1, version 0): 32 KiB blocks of chunks, each a 7-byte header (checksum, not checked
    here; length; type: 1 whole, 2 first, 3 middle, 4 last) and its bytes; a record is W&B's protobuf
    ``Record``. Each is given as a dict holding what the tests read: ``type``, and for history
    ``{"step": {"num"}, "item": {key: value}}``, for config and summary ``{"update": {key: value}}``,
    for run ``{"run_group", "run_id"}``."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:7] == b":W&B" + struct.pack("<HB", 0xBEE1, 0), data[:7]
    block, records, pending, at = 32768, [], b"", 7
    while at + 7 <= len(data):
        if block - at % block < 7:  # a block's tail too short for a chunk header is padding
            at += block - at % block
            continue
        _, length, kind = struct.unpack_from("<IHB", data, at)
        chunk, at = data[at + 7:at + 7 + length], at + 7 + length
        if kind == 0 and length == 0:  # zeros: the rest of the block is padding
            at += -at % block
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(_record(record))
    return records


def _record(record) -> dict:
    kind = record.WhichOneof("record_type")
    out: dict = {"type": kind}

    def items(entries) -> dict:  # a nested key as "a.b"
        return {".".join(entry.nested_key) or entry.key: json.loads(entry.value_json) for entry in entries}

    if kind == "history":
        out["history"] = {"step": {"num": record.history.step.num}, "item": items(record.history.item)}
    elif kind in ("config", "summary"):
        value = items(getattr(record, kind).update)
        if kind == "config":  # each key's value as {"value": ...}
            value = {k: v.get("value", v) if isinstance(v, dict) else v for k, v in value.items()}
        out[kind] = {"update": value}
    elif kind == "run":
        out["run"] = {"run_group": record.run.run_group, "run_id": record.run.run_id}
    return out


def wandb_history(folder: Path) -> tuple[list[dict], dict, dict]:
    """Every history row of the folder's W&B run files (all its offline segments, in order), the config
    and the summary."""
    rows, config, summary = [], {}, {}
    for path in sorted((folder / "wandb").glob("offline-run-*/run-*.wandb")):
        for record in wandb_file(path):
            if record["type"] == "history":
                item = record["history"]["item"]
                rows.append({"step": int(record["history"]["step"]["num"]),
                             **{k: v for k, v in item.items() if not k.startswith("_")}})
            elif record["type"] == "config":
                config.update(record["config"].get("update") or {})
            elif record["type"] == "summary":
                summary.update(record["summary"].get("update") or {})
    return rows, config, summary


def mlflow_history(uri: str, folder: Path) -> tuple[dict[str, list[tuple[int, float]]], object]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    run = client.get_run(json.loads((folder / "trackers.json").read_text())["mlflow"]["run_id"])
    return {key: [(m.step, m.value) for m in sorted(client.get_metric_history(run.info.run_id, key),
                                                        key=lambda m: (m.step, m.timestamp))]
            for key in run.data.metrics}, run


def by_tag(rows: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)], in the order logged; wall-clock tags keep their steps, not their values."""
    out: dict[str, list] = {}
    for row in rows:
        for tag, value in row.items():
            if tag not in ("step", "wall_time") and value is not None:
                out.setdefault(tag, []).append((row["step"], None if tag in WALL_CLOCK_TAGS else float(value)))
    return out


def without_clock(history: dict[str, list[tuple[int, float]]]) -> dict[str, list]:
    return {tag: [(s, None if tag in WALL_CLOCK_TAGS else float(v)) for s, v in points]
            for tag, points in history.items() if not tag.startswith("results/")}


def check_results(folder: Path, numbers: dict) -> None:
    results = json.loads((folder / "results.json").read_text())
    for key, value in results.items():
        if isinstance(value, (int, float)) and value is not None:
            assert numbers[f"results/{key}"] == pytest.approx(float(value)), key


@pytest.mark.parametrize("name", ["wandb", "mlflow"])
def test_a_missing_package_is_one_line_naming_the_extra(tmp_path, her_run, name):
    """Exit 2 before anything is written (the run folder is never made). The package is hidden by a
    module of its name that fails to import, ahead of it on the path."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / f"{name}.py").write_text(f"raise ModuleNotFoundError(\"No module named '{name}'\")\n")
    env = {**os.environ, "PYTHONPATH": str(hide), "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}
    done = subprocess.run([her_run, *ARGS, f"logger=[tensorboard,{name}]", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f'pip install -e ".[{name}]"' in lines[0] and f"logger={name}" in lines[0], lines
    assert not (tmp_path / "run").exists()


def test_killed_twice_and_resumed_both_trackers_hold_every_step_once(tmp_path, mlflow_uri):
    """The issue's target: W&B and MLflow hold every scalar of metrics.jsonl at its steps, the config and
    the final results, after a kill with the trackers behind the checkpoint (the lines they lack are
    sent on resume) and a kill with them ahead of it (the steps they hold are not sent again)."""
    folder = tmp_path / "run"
    args = [*ARGS, "logger=[tensorboard,wandb,mlflow]", f"mlflow.tracking_uri={mlflow_uri}", "wandb.tags=[test]"]
    assert forked(folder, args, kill_at_save(6, trackers_stop_at=3)) == -signal.SIGKILL
    behind = checkpoint.load(folder / "checkpoint.pt")["runner"]["env_steps"]
    assert forked(folder, ["resume=true", "progress=false"], kill_at_save(4)) == -signal.SIGKILL
    ahead = checkpoint.load(folder / "checkpoint.pt")["runner"]["env_steps"]
    assert 0 < behind < ahead
    assert forked(folder, ["resume=true", "progress=false"]) == 0, (tmp_path / "run.log").read_text()
    log = (tmp_path / "run.log").read_text()
    assert "warning" not in log, log
    expected = by_tag(expected_lines(folder))
    assert len(expected["eval/success_rate"]) > 5 and len(expected["charts/SPS"]) > 20

    rows, config, summary = wandb_history(folder)
    steps = [row["step"] for row in rows]
    assert steps == sorted(set(steps))  # every step once, in order, across the run's three segments
    assert by_tag(rows) == expected
    assert config["algo"]["name"] == "her_dqn" and config["n"] == 4 and config["logger"] == ["tensorboard", "wandb", "mlflow"]
    check_results(folder, summary)
    assert len(list((folder / "wandb").glob("offline-run-*"))) == 3
    assert {path.name.rsplit("-", 1)[1] for path in (folder / "wandb").glob("offline-run-*")} == \
        {json.loads((folder / "trackers.json").read_text())["wandb"]["id"]}  # one W&B run, resumed

    history, run = mlflow_history(mlflow_uri, folder)
    for tag, points in history.items():
        assert [s for s, _ in points] == sorted({s for s, _ in points}), tag  # no step twice
    assert without_clock(history) == expected
    check_results(folder, {k: v[-1][1] for k, v in history.items() if k.startswith("results/")})
    assert run.data.params["algo.name"] == "her_dqn" and run.data.params["budget.env_steps"] == "320"
    assert run.info.status == "FINISHED" and run.data.tags["her_rl.run_folder"] == str(folder)


def test_a_tracking_server_down_is_one_warning_and_the_run_finishes(tmp_path, mlflow_uri):
    """Down at the start (nothing listens on the port), and going down mid-run (a proxy to the real
    server closes after a few lines): one warning line each, the run's files as without a tracker."""
    dead = free_port()
    start = tmp_path / "start"
    assert forked(start, [*ARGS, "logger=[tensorboard,mlflow]", f"mlflow.tracking_uri=http://127.0.0.1:{dead}"]) == 0
    warnings = [line for line in (tmp_path / "start.log").read_text().splitlines() if "warning" in line]
    assert len(warnings) == 1 and "logger mlflow could not start" in warnings[0], warnings
    assert not (start / "trackers.json").exists()
    assert (start / "results.json").is_file() and len(expected_lines(start)) > 20 and (start / "tb").is_dir()

    proxy = Proxy(mlflow_uri)
    mid = tmp_path / "mid"
    cut = threading.Thread(target=proxy.close_when, args=(lambda: len(_safe_lines(mid)) >= 8,), daemon=True)
    cut.start()
    assert forked(mid, [*ARGS, "logger=[mlflow]", f"mlflow.tracking_uri={proxy.uri}"]) == 0
    cut.join(5)
    warnings = [line for line in (tmp_path / "mid.log").read_text().splitlines() if "warning" in line]
    assert len(warnings) == 1 and "logger mlflow failed" in warnings[0], (tmp_path / "mid.log").read_text()
    assert (mid / "results.json").is_file() and len(expected_lines(mid)) > 20 and (mid / "trackers.json").is_file()
    assert not (mid / "tb").exists()  # logger=[mlflow]: no TensorBoard


def _safe_lines(folder: Path) -> list:
    try:
        return (folder / METRICS).read_text().splitlines()
    except OSError:
        return []


class Proxy:
    """A TCP proxy to the tracking server, on a port of its own, that stops (closing every connection and
    refusing new ones) once ``close_when``'s test holds: a server that goes down mid-run."""

    def __init__(self, target: str):
        host, port = target.rsplit("/", 1)[-1].split(":")
        self.target = (host, int(port))
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.uri = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: list[socket.socket] = [self.listener]
        self.down = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.down:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass

    def close_when(self, ready) -> None:
        deadline = time.monotonic() + 120
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.down = True
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def test_a_sweeps_jobs_share_a_wandb_group_and_an_mlflow_parent_run(tmp_path, mlflow_uri):
    """``her-run -m n=3,4``: each job's MLflow run is a child (``mlflow.parentRunId``) of one parent run
    named for the sweep folder, each job's W&B run is in the group named for it. Rerun in the same
    folder (``resume=auto``, a larger budget, one job more) the sweep finds the same parent run rather
    than making a second: the new job is its child too, the resumed runs stay its children and in the
    group. Each sweep is her-run's ``main`` in a forked child (Hydra's basic launcher: the jobs run in
    that process). On the joblib launcher, whose jobs run in interpreters of their own and get the
    parent run from the environment, the rerun took some 20 s more (their imports): left to a manual
    check."""
    from mlflow.tracking import MlflowClient

    sweep = tmp_path / "sweep"
    common = [*ARGS[:-1], "eval.every_iterations=100", "logger=[wandb,mlflow]", f"mlflow.tracking_uri={mlflow_uri}",
              "mlflow.experiment=sweeps", f"hydra.sweep.dir={sweep}"]
    for i, extra in enumerate((["n=3,4", "budget.env_steps=64"],
                               ["n=3,4,5", "budget.env_steps=96", "resume=auto"])):
        log = tmp_path / f"sweep-{i}.log"
        assert forked_cli(tmp_path, ["-m", *common, *extra], log) == 0, log.read_text()
        assert "warning" not in log.read_text(), log.read_text()
    jobs = {n: sweep / f"n={n}" for n in (3, 4, 5)}
    for folder in jobs.values():
        assert json.loads((folder / "results.json").read_text())["env_steps"] >= 96, folder

    client = MlflowClient(mlflow_uri)
    experiment = client.get_experiment_by_name("sweeps").experiment_id
    parents = client.search_runs([experiment], "tags.`her_rl.sweep_parent` != ''")
    assert [p.info.run_name for p in parents] == [sweep.name] and parents[0].info.status == "FINISHED"
    runs = {n: client.get_run(json.loads((folder / "trackers.json").read_text())["mlflow"]["run_id"])
            for n, folder in jobs.items()}
    assert {n: run.data.tags.get("mlflow.parentRunId") for n, run in runs.items()} == \
        {n: parents[0].info.run_id for n in jobs}
    assert {run.data.tags["her_rl.sweep"] for run in runs.values()} == {str(sweep)}
    assert len(client.search_runs([experiment])) == 4  # the parent and one run per job, resumed ones included

    groups = {}
    for n, folder in jobs.items():
        for path in sorted((folder / "wandb").glob("offline-run-*/run-*.wandb")):
            groups[(n, path.parent.name)] = [r["run"]["run_group"] for r in wandb_file(path) if r["type"] == "run"]
    assert len(groups) == 5  # n=3 and n=4 twice (run, then resumed), n=5 once
    assert set(map(tuple, groups.values())) == {(sweep.name,)}, groups
