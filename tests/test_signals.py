"""her_rl/run/signals.py: signals outside training become Stopped, StopSignals notes them during training, and
Stage.stopped_line says what a stop left on disk."""

import signal
from pathlib import Path

import pytest

from her_rl.folder import rundir
from her_rl.run.signals import ABORTED, CAUGHT, Stage, StopSignals, Stopped, early_stops, resume_command


def _noted(signum, frame):  # a handler of the test's own, to see it handed back
    _noted.calls.append(signum)


_noted.calls = []


@pytest.fixture(autouse=True)
def handlers():
    """Known handlers for the caught signals during each test (a background job inherits SIGINT=SIG_IGN),
    and the ones found before it afterwards."""
    before = {sig: signal.getsignal(sig) for sig in CAUGHT}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _noted)
    signal.signal(signal.SIGHUP, _noted)
    _noted.calls.clear()
    try:
        yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


def test_caught_signals():
    assert set(CAUGHT) == {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


# early_stops --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_early_stops_turns_a_signal_into_stopped(sig):
    reached = False
    with pytest.raises(Stopped) as info:
        with early_stops():
            signal.raise_signal(sig)
            for _ in range(1000):  # the handler runs between bytecodes, well before this ends
                pass
            reached = True
    assert not reached
    assert info.value.signum == sig and str(info.value) == f"stopped by signal {sig}"
    assert isinstance(info.value, KeyboardInterrupt)  # code that cleans up on Ctrl-C does so here too
    assert _noted.calls == []


def test_early_stops_hands_back_the_previous_handlers():
    with early_stops():
        for sig in CAUGHT:
            assert signal.getsignal(sig) not in (_noted, signal.default_int_handler)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is _noted and signal.getsignal(signal.SIGHUP) is _noted
    signal.raise_signal(signal.SIGTERM)  # the test's own handler again: no Stopped
    assert _noted.calls == [signal.SIGTERM]


def test_early_stops_hands_back_the_previous_handlers_after_a_stop():
    with pytest.raises(Stopped):
        with early_stops():
            signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is _noted and signal.getsignal(signal.SIGHUP) is _noted


def test_early_stops_hands_back_the_handlers_after_another_exception():
    with pytest.raises(ZeroDivisionError):
        with early_stops():
            1 / 0
    assert signal.getsignal(signal.SIGTERM) is _noted and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_signal_stays_ignored():
    """``nohup her-run``: the hangup must neither stop it nor be un-ignored afterwards."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with early_stops():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        signal.raise_signal(signal.SIGHUP)  # ignored: nothing happens
        with pytest.raises(Stopped) as info:  # the other signals still stop
            signal.raise_signal(signal.SIGTERM)
            for _ in range(1000):
                pass
        assert info.value.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # still, while the stop unwinds
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is _noted


# Stage.stopped_line -------------------------------------------------------------------------------------------------

def _stage(name, folder=None, sweep=None):
    stage = Stage()
    stage.name, stage.folder, stage.sweep = name, folder, sweep
    return stage


def test_a_new_stage_is_at_the_checks():
    stage = Stage()
    assert (stage.name, stage.folder, stage.sweep) == ("checks", None, None)
    assert stage.stopped_line(15) == "stopped by signal 15 before training started; nothing was written"


def test_stopped_line_of_the_stages_without_a_run_folder():
    assert _stage("load").stopped_line(2) == "stopped by signal 2 during the load= evaluation"
    assert _stage("done").stopped_line(1) == "stopped by signal 1 as her-run was ending"
    assert _stage("job").stopped_line(15) == ("stopped by signal 15 before training started; "
                                              "no run file was written")
    assert _stage("sweep").stopped_line(15) == "stopped by signal 15 during the sweep"


def test_stopped_line_of_a_job_whose_folder_is_still_empty_removes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "outputs" / "her_dqn-bitflip" / "run"
    folder.mkdir(parents=True)
    line = _stage("job", folder).stopped_line(15)
    assert line == "stopped by signal 15 before training started; nothing was written"
    assert not (tmp_path / "outputs").exists()  # the empty parents Hydra made go too, up to the working folder
    assert tmp_path.exists()


def test_stopped_line_of_a_job_with_a_checkpoint(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / rundir.CHECKPOINT).write_bytes(b"saved")
    line = _stage("job", folder).stopped_line(15)
    assert line == (f"stopped by signal 15; run folder {folder} keeps its last checkpoint: her-run resume=true "
                    f"hydra.run.dir={folder} continues it")
    assert (folder / rundir.CHECKPOINT).read_bytes() == b"saved"


def test_the_continue_line_is_quoted_for_a_shell_and_names_a_user_modules_env(tmp_path):
    assert resume_command(Path("runs/a b")) == "her-run resume=true 'hydra.run.dir=runs/a b'"
    assert resume_command(Path("it's"), "FetchPush-v4") == """her-run resume=true 'hydra.run.dir=it'"'"'s'"""
    assert resume_command(Path("r"), "my.envs:Grid-v0", "auto") == "her-run resume=auto hydra.run.dir=r env.id=my.envs:Grid-v0"
    folder = tmp_path / "with space"
    folder.mkdir()
    (folder / rundir.CONFIG).write_text("seed: 0\n")
    stage = _stage("job", folder)
    stage.env_id = "mod:X-v0"
    assert stage.stopped_line(2).endswith(f"her-run resume=auto 'hydra.run.dir={folder}' env.id=mod:X-v0 starts it again")


def test_stopped_line_of_a_job_before_its_first_checkpoint(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / rundir.CONFIG).write_text("seed: 0\n")
    line = _stage("job", folder).stopped_line(2)
    assert line == (f"stopped by signal 2 before the run's first checkpoint; run folder {folder} holds none: "
                    f"her-run resume=auto hydra.run.dir={folder} starts it again")
    assert (folder / rundir.CONFIG).exists()


def test_stopped_line_of_a_sweep_removes_an_empty_job_folder_below_the_sweep(tmp_path):
    sweep = tmp_path / "multirun" / "2024"
    folder = sweep / "seed=1"
    folder.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("x\n")
    line = _stage("sweep", folder, sweep).stopped_line(15)
    assert line == (f"stopped by signal 15 during the sweep in {sweep}; her-run -m with the same overrides, "
                    f"resume=auto and hydra.sweep.dir={sweep} continues it")
    assert not folder.exists() and sweep.exists()


def test_stopped_line_of_a_sweep_keeps_a_job_folder_with_files(tmp_path):
    sweep = tmp_path / "sweep"
    folder = sweep / "seed=0"
    folder.mkdir(parents=True)
    (folder / rundir.CHECKPOINT).write_bytes(b"saved")
    assert _stage("sweep", folder, sweep).stopped_line(1).startswith(f"stopped by signal 1 during the sweep in {sweep};")
    assert (folder / rundir.CHECKPOINT).exists()


# StopSignals --------------------------------------------------------------------------------------------------------

def test_stop_signals_notes_signals_instead_of_raising():
    with StopSignals() as signals:
        assert signals.signum is None and signals.received == []
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGHUP)
        signal.raise_signal(signal.SIGTERM)
    assert signals.received == [signal.SIGTERM, signal.SIGHUP, signal.SIGTERM]
    assert signals.signum == signal.SIGTERM  # the first one
    assert _noted.calls == []


def test_a_first_ctrl_c_is_noted_and_a_second_aborts():
    with pytest.raises(KeyboardInterrupt) as info:
        with StopSignals() as signals:
            signal.raise_signal(signal.SIGINT)
            assert signals.received == [signal.SIGINT]
            signal.raise_signal(signal.SIGINT)
            for _ in range(1000):
                pass
            pytest.fail("the second Ctrl-C did not abort")
    assert str(info.value) == ABORTED
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handed back, not os._exit


def test_stop_signals_hands_back_the_previous_handlers():
    with StopSignals():
        assert signal.getsignal(signal.SIGTERM) is not _noted
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is _noted and signal.getsignal(signal.SIGHUP) is _noted
    signal.raise_signal(signal.SIGHUP)
    assert _noted.calls == [signal.SIGHUP]


def test_stop_signals_keeps_an_ignored_signal_ignored():
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with StopSignals() as signals:
        signal.raise_signal(signal.SIGHUP)
    assert signals.received == []


def test_end_run_without_a_signal_returns(tmp_path, capsys):
    signals = StopSignals()
    assert signals.end_run(tmp_path, 100, saved=True) is None
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("saved, what", [(True, "checkpoint saved"), (False, "checkpoint NOT saved")])
def test_end_run_after_a_signal_exits_128_plus_it(tmp_path, capsys, monkeypatch, saved, what):
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    with StopSignals() as signals:
        signal.raise_signal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info:
        signals.end_run(tmp_path, 12345, saved=saved)
    assert info.value.code == 128 + signal.SIGTERM
    out = capsys.readouterr().out
    assert out == (f"stopped by signal {int(signal.SIGTERM)} at env step 12,345 ({what}); continue with: "
                   f"her-run resume=true hydra.run.dir={tmp_path}\n")
    assert list(tmp_path.iterdir()) == []  # not preempted under submitit: no requeue marker


def test_a_stop_that_the_iteration_outlives_by_the_grace_leaves_at_once(monkeypatch):
    """A slow env step cannot hold a stop: past the grace after the first signal, training is left the
    way a stop outside training is (the last checkpoint on disk stays the one to resume from)."""
    import time

    from her_rl.run import signals as module

    monkeypatch.setattr(module, "GRACE_S", 0.3)
    started = time.monotonic()
    with pytest.raises(Stopped) as info:
        with StopSignals() as stops:
            signal.raise_signal(signal.SIGTERM)
            time.sleep(10)  # an env step that takes long: interrupted, not waited for
    assert info.value.signum == signal.SIGTERM and stops.received == [signal.SIGTERM]
    assert time.monotonic() - started < 5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_stop_whose_iteration_ends_in_time_has_no_deadline_after(monkeypatch):
    import time

    from her_rl.run import signals as module

    monkeypatch.setattr(module, "GRACE_S", 0.3)
    with StopSignals() as stops:
        signal.raise_signal(signal.SIGTERM)
        stops.iteration_ended()
        time.sleep(0.6)  # the last checkpoint's write
    assert stops.received == [signal.SIGTERM]


def test_a_slow_env_call_is_said_once_while_it_runs(capsys):
    import threading
    import time

    from her_rl.envs.checks import IN_CALL
    from her_rl.run.trainer import _watch_slow_calls

    done = threading.Event()
    watch = threading.Thread(target=_watch_slow_calls, args=(done, 0.5))
    IN_CALL.update(env="my_envs:Arm-v0", method="step", since=time.monotonic())
    try:
        watch.start()
        time.sleep(2.5)
    finally:
        IN_CALL["since"] = None
        done.set()
        watch.join()
    err = capsys.readouterr().err
    assert err.count("her-run: warning: env my_envs:Arm-v0: one step (of all its copies in turn) has taken more than "
                     "0 s so far") == 1, err
