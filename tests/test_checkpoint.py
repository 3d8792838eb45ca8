"""Checkpoint files (her_rl/folder/checkpoint.py): a file that cannot be loaded safely is one line naming
the file and why, for resume and load= alike; a failed save keeps the previous checkpoint; atomic
writes leave no temporary files."""

import errno
import io
import os
import pickle

import numpy as np
import pytest
import torch

import her_rl
from her_rl.folder import atomic, checkpoint
from her_rl.errors import CheckpointError
from her_rl.errors import OutputError
from her_rl.run.runner import main

FAST = ["n=4", "progress=false", "eval.every_iterations=1000", "eval.stop_when_solved=false", "eval.episodes=5"]


def train(out, *extra, budget=300):
    return main([*FAST, f"budget.env_steps={budget}", *extra], out_dir=out)


def snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


class _Evil:
    marker = None

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.fixture(scope="module")
def real_checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("real") / "run"
    train(out, budget=100)
    return (out / "checkpoint.pt").read_bytes()


def _bad_file(kind, path, real):
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(real[: len(real) // 2])
    elif kind == "random":
        path.write_bytes(np.random.default_rng(0).bytes(5000))
    elif kind == "malicious":
        evil = _Evil()
        evil.marker = path.parent.parent / "pwned"
        torch.save({"agent": evil, "runner": {}, "rng": {}, "config": {}}, path, pickle_protocol=2)
    elif kind == "raw_pickle":
        path.write_bytes(pickle.dumps({"agent": {}, "runner": {}, "rng": {}, "config": {}}))
    elif kind == "foreign":
        torch.save({"state_dict": {"w": torch.ones(2)}}, path)
    elif kind == "agent_of_another_algo":
        state = torch.load(io.BytesIO(real), weights_only=True)
        state["agent"] = {"policy": {}}
        torch.save(state, path)
    elif kind in TAMPERED:
        state = torch.load(io.BytesIO(real), weights_only=True)
        TAMPERED[kind](state)
        torch.save(state, path)


def _set(entry, key, value):
    def tamper(state):
        state[entry][key] = value
    return tamper


def _replace(entry, value):
    def tamper(state):
        state[entry] = value
    return tamper


TAMPERED = {  # a real checkpoint with one entry edited: each is refused before anything is written
    "empty_runner": (_replace("runner", {}), "its runner entry has no env_steps"),
    "negative_steps": (_set("runner", "env_steps", -5), "its runner entry has env_steps=-5; it must be an integer >= 0"),
    "text_steps": (_set("runner", "iteration", "7"), "its runner entry has iteration='7'"),
    "bool_steps": (_set("runner", "episodes", True), "its runner entry has episodes=True"),
    "nan_wall": (_set("runner", "wall_time_s", float("nan")), "its runner entry has wall_time_s=nan"),
    "solved_later": (_set("runner", "solved_at_env_steps", 10**9), "says it solved at env step 1000000000"),
    "eval_text": (_set("runner", "eval", "good"), "its runner entry has eval='good'"),
    "rng_missing": (_replace("rng", {}), "its rng entry cannot be restored (KeyError"),
    "rng_numpy": (_set("rng", "numpy", [1, 2]), "its rng entry cannot be restored"),
    "rng_torch": (_set("rng", "torch", torch.zeros(3)), "its rng entry cannot be restored"),
    "rng_python": (_set("rng", "python", [3, [1, 2], None]), "its rng entry cannot be restored"),
    "empty_agent": (_replace("agent", {}), "its agent entry is empty"),
    "config_value": (lambda state: state["config"]["algo"].update(lr=-1.0),
                     "its saved config is not valid (algo.lr=-1.0 is not allowed"),
    "config_key": (lambda state: state["config"].update(evil={"_target_": "os.system"}),
                   "its saved config is not valid (unknown config key 'evil'"),
}


KINDS = {
    "empty": "the file is empty",
    "truncated": "not a readable torch file",
    "random": "not a readable torch file",
    "malicious": "it refers to io.open; only tensors and plain containers are loaded",
    "raw_pickle": "not a readable torch file",
    "foreign": "not a her-rl checkpoint",
    "agent_of_another_algo": "does not fit algo 'her_dqn'",
    **{kind: why for kind, (_, why) in TAMPERED.items()},
}
TAMPERED = {kind: tamper for kind, (tamper, _) in TAMPERED.items()}


@pytest.mark.parametrize("mode", ["resume", "load"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_bad_checkpoint_files_are_one_line_naming_file_and_why(tmp_path, real_checkpoint, kind, mode):
    out = tmp_path / "run"
    out.mkdir()
    path = out / "checkpoint.pt"
    _bad_file(kind, path, real_checkpoint)
    before = snapshot(out)
    overrides = ["resume=true", "progress=false"] if mode == "resume" else [f"load={path}"]
    with pytest.raises(CheckpointError) as err:
        her_rl.train(overrides, out_dir=out if mode == "resume" else None)
    text = str(err.value)
    assert text.startswith(f"cannot load checkpoint {path}: ") and KINDS[kind] in text
    assert "weights_only=False" not in text and "\n" not in text
    assert snapshot(out) == before and not (tmp_path / "pwned").exists()


def test_missing_load_path_is_one_line(tmp_path):
    with pytest.raises(CheckpointError, match=r"cannot load checkpoint .*nope\.pt: no such file$"):
        her_rl.train([f"load={tmp_path / 'nope.pt'}"])


def test_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    train(out)
    before = (out / "checkpoint.pt").read_bytes()
    for leftover in ("checkpoint.pt.killed1.tmp", "config.yaml.killed2.tmp", "results.json.killed3.tmp"):
        (out / leftover).write_bytes(b"left by a killed write")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    capsys.readouterr()
    with pytest.raises(OutputError, match="could not write the final checkpoint .*; the checkpoint at env step 300 "
                                          "is kept .*; results.json was not written") as failed:
        main(["resume=true", "budget.env_steps=700", "checkpoint.every_s=0", "progress=false"], out_dir=out)
    assert failed.value.exit_code == 5
    assert (out / "checkpoint.pt").read_bytes() == before
    assert not list(out.glob("*.tmp")) and not (out / "results.json").exists()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "could not write checkpoint" in line]
    assert len(warnings) == 2  # the first failure of the streak, and the final save
    assert all("No space left on device" in w and "the previous checkpoint (env step 3" in w for w in warnings)


def test_a_disk_that_fills_inside_torch_save_is_the_disk_error_and_keeps_the_previous_file(tmp_path, monkeypatch):
    """A full disk mid-write makes torch's writer raise a RuntimeError while handling the OSError;
    the save reports the OSError (what the runner turns into one warning line)."""
    path = tmp_path / "checkpoint.pt"
    checkpoint.save({"w": torch.zeros(10)}, path)
    before = path.read_bytes()
    real_fdopen = os.fdopen

    class FillingFile(io.RawIOBase):
        def __init__(self, f):
            self.f, self.room = f, 200

        def writable(self):
            return True

        def write(self, data):
            if len(data) > self.room:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.room -= len(data)
            return self.f.write(data)

        def fileno(self):
            return self.f.fileno()

        def close(self):
            self.f.close()
            super().close()

    monkeypatch.setattr(checkpoint.os, "fdopen", lambda fd, mode: FillingFile(real_fdopen(fd, mode)))
    with pytest.raises(OSError) as err:
        checkpoint.save({"w": torch.arange(100_000.0)}, path)
    assert err.type is not RuntimeError and err.value.errno == errno.ENOSPC
    assert path.read_bytes() == before and not list(tmp_path.glob("*.tmp"))


def test_atomic_text_writes_use_unique_temp_files(tmp_path, monkeypatch):
    temps, replace = [], os.replace

    def spy(src, dst):
        temps.append(os.path.basename(src))
        replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    for text in ("a", "b"):
        atomic.write_atomic_text(tmp_path / "results.json", text)
    assert len(set(temps)) == 2 and (tmp_path / "results.json").read_text() == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


@pytest.mark.parametrize("version", ["2.9.2", None])
def test_a_stable_baselines3_model_is_named_as_one_with_how_to_evaluate_it(tmp_path, version):
    import zipfile

    path = tmp_path / "sac_fetch.zip"
    with zipfile.ZipFile(path, "w") as archive:  # the members SB3's BaseAlgorithm.save writes
        archive.writestr("data", "{}")
        archive.writestr("policy.pth", b"\0")
        archive.writestr("pytorch_variables.pth", b"\0")
        if version:
            archive.writestr("_stable_baselines3_version", version)
    with pytest.raises(CheckpointError) as caught:
        checkpoint.load(path)
    assert "a Stable-Baselines3 model" in str(caught.value) and "evaluate_policy" in str(caught.value)
    assert ("saved by Stable-Baselines3 2.9.2" in str(caught.value)) == bool(version)
