"""``her-run load=RUN_DIR video=true`` holds its output folder and ``videos/`` by identity while it
records: either deleted, moved or replaced by a link between episodes (or during one) stops the
recording with one line and exit 5, and nothing is written into the folder a link leads to.

The swap is made from inside the recording (after the n-th episode's file is finished, or at the
n-th frame), so each case happens at the same point every time."""

import shutil
from pathlib import Path

import pytest

pytest.importorskip("imageio", reason='the video extra is not installed (pip install -e ".[video]")')
pytest.importorskip("imageio_ffmpeg", reason='the video extra is not installed (pip install -e ".[video]")')

import her_rl  # noqa: E402
from her_rl.errors import OutputError  # noqa: E402
from her_rl.saved import video  # noqa: E402
from test_adversarial import snapshot  # noqa: E402  (a folder tree with a hash of each file)

SMALL = ["algo=her_dqn", "env=bitflip", "n=4", "progress=false", "eval.episodes=2"]  # 4-step episodes


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("video_identity") / "run"
    her_rl.train([*SMALL, "budget.env_steps=200"], out_dir=out)
    return out


@pytest.fixture
def home(tmp_path, trained):
    """A copy of the run with an earlier recording in ``videos/`` (two episodes), and a user's folder
    ``mine`` with files of the same names, and an empty one ``blank``."""
    shutil.copytree(trained, tmp_path / "run")
    (tmp_path / "run" / "videos").mkdir()
    for i in range(2):
        (tmp_path / "run" / "videos" / f"episode-{i}.mp4").write_bytes(b"an earlier recording %d" % i)
    mine = tmp_path / "mine"
    (mine / "videos").mkdir(parents=True)
    (mine / "notes.txt").write_text("my notes\n")
    (mine / "episode-0.mp4").write_bytes(b"my own video")
    (tmp_path / "blank").mkdir()
    return tmp_path


def swap_at(monkeypatch, method: str, call: int, swap) -> None:
    """Run ``swap()`` once, right after the ``call``-th call (from 1) of ``video._Writer.<method>``."""
    original, calls = getattr(video._Writer, method), []

    def hooked(self, *args):
        result = original(self, *args)
        calls.append(method)
        if len(calls) == call:
            swap()
        return result

    monkeypatch.setattr(video._Writer, method, hooked)


def one_line(p, code=5) -> str:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("her-run: error: "), p.stderr
    return lines[0]


def partials(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.partial.*"))


CASES = {  # name: (what is swapped, the swap, what the line says)
    "videos for a link": ("videos", lambda h: ((h / "run/videos").rename(h / "moved"),
                                               (h / "run/videos").symlink_to(h / "mine")),
                          "videos folder run/videos was moved to {home}/moved and a link put in its place"),
    "videos for a link to a videos folder": ("videos", lambda h: ((h / "run/videos").rename(h / "moved"),
                                                                  (h / "run/videos").symlink_to(h / "mine/videos")),
                                             "videos folder run/videos was moved to {home}/moved and a link"),
    "videos deleted": ("videos", lambda h: shutil.rmtree(h / "run/videos"), "videos folder run/videos was deleted"),
    "videos for another folder": ("videos", lambda h: ((h / "run/videos").rename(h / "moved"),
                                                       (h / "run/videos").mkdir()),
                                  "videos folder run/videos was moved to {home}/moved during"),
    "run folder for a link": ("run", lambda h: ((h / "run").rename(h / "moved"), (h / "run").symlink_to(h / "mine")),
                              "output folder run was moved to {home}/moved and a link put in its place"),
    "run folder deleted": ("run", lambda h: shutil.rmtree(h / "run"), "output folder run was deleted"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_folder_swapped_between_episodes_stops_the_recording_and_writes_nothing_through_it(
        her_run_here, home, monkeypatch, case):
    what, swap, says = CASES[case]
    before = snapshot(home / "mine")
    earlier = snapshot(home / "run" / "videos")
    swap_at(monkeypatch, "close", 1, lambda: swap(home))  # after episode 0 of 3
    line = one_line(her_run_here(["load=run", "video=true", "video.episodes=3"], home))
    assert says.format(home=home) in line, line
    assert "during the recording: recording stopped after 1 of 3 episodes without writing there" in line, line
    assert snapshot(home / "mine") == before
    moved = home / "moved"
    if moved.exists():  # the held folder, wherever it went: no temporary file left, earlier videos as they were
        assert partials(moved) == []
        if what == "videos":
            assert snapshot(moved) == earlier


@pytest.mark.parametrize("fmt", ["mp4", "gif"])
def test_videos_swapped_during_the_last_episode_are_not_renamed_into_the_link(her_run_here, home, monkeypatch, fmt):
    """ffmpeg (or the GIF's bytes) writes the file opened in the held folder, whatever its path leads to
    meanwhile; the check before the renames stops the recording."""
    before = snapshot(home / "mine")

    def swap():
        (home / "run/videos").rename(home / "moved")
        (home / "run/videos").symlink_to(home / "mine")

    swap_at(monkeypatch, "append", 2, swap)  # the reset frame and one step of the only episode
    line = one_line(her_run_here(["load=run", "video=true", "video.episodes=1", f"video.format={fmt}"], home))
    assert "videos folder run/videos was moved to" in line and "stopped after 1 of 1 episodes" in line, line
    assert snapshot(home / "mine") == before
    assert partials(home / "moved") == [] and sorted(p.name for p in (home / "moved").iterdir()) == [
        "episode-0.mp4", "episode-1.mp4"]


def test_a_new_output_folder_swapped_for_a_link_leaves_an_empty_target_in_place(her_run_here, home, monkeypatch):
    """A folder load= made itself is removed again when the recording fails, but only while its path
    still leads to it: never the (empty) folder a link put there leads to."""
    def swap():
        (home / "new").rename(home / "moved")
        (home / "new").symlink_to(home / "blank")

    swap_at(monkeypatch, "close", 1, swap)
    line = one_line(her_run_here(["load=run", "video=true", "video.episodes=2", "hydra.run.dir=new"], home))
    assert "output folder new was moved to" in line and "stopped after 1 of 2 episodes" in line, line
    assert (home / "blank").is_dir() and not any((home / "blank").iterdir())
    assert partials(home / "moved") == []


def test_an_untouched_recording_replaces_the_earlier_one_through_the_held_folder(her_run_here, home):
    p = her_run_here(["load=run", "video=true", "video.episodes=1", "video.format=gif"], home)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["run/videos/episode-0.gif"]
    # mp4s of another format stay; gifs past the count would go
    assert sorted(x.name for x in (home / "run/videos").iterdir()) == ["episode-0.gif", "episode-0.mp4",
                                                                        "episode-1.mp4"]
    assert (home / "run/videos/episode-0.gif").read_bytes()[:6] == b"GIF89a"


def test_record_from_python_holds_its_folder_too(home, monkeypatch):
    """Without a run folder's lock (``video.record`` called from Python) ``videos/`` itself is held."""
    before = snapshot(home / "mine")

    def swap():
        (home / "out/videos").rename(home / "moved")
        (home / "out/videos").symlink_to(home / "mine")

    swap_at(monkeypatch, "close", 1, swap)
    policy = her_rl.load(home / "run")
    with pytest.raises(OutputError, match="videos folder .*out/videos was moved to .*moved and a link put in its "
                                          "place during the recording: recording stopped after 1 of 2 episodes"):
        video.record(policy, home / "out" / "videos", episodes=2)
    assert snapshot(home / "mine") == before and partials(home / "moved") == []
