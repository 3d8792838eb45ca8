"""Videos of a trained agent: greedy episodes of the run's single env, drawn as ``rgb_array`` frames
and written as MP4 (imageio with imageio-ffmpeg) or GIF.

``her-run load=RUN_DIR video=true`` calls :func:`record` with the run's policy
(:func:`her_rl.saved.policy.load`); anything with ``predict(observation, deterministic=True) -> (action, _)``
and ``make_env(render_mode=...)`` works. The ``video`` keys and their checks are
:mod:`her_rl.config.checks`'s.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import math
import os
import re
import stat
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from her_rl.config.checks import VIDEO_DEFAULTS
from her_rl.errors import OutputError, VideoError, one_line
from her_rl.folder.rundir import RunLock

FORMATS = ("mp4", "gif")
INSTALL = 'pip install -e ".[video]"'
MIN_SIDE = 200  # tiny renders are scaled up (nearest neighbour) to at least this many pixels ...
MAX_SIDE = 1920  # ... unless that would make the longer side wider than this
BLOCK = 16  # H.264 (yuv420p) wants sides in multiples of the macro block; imageio would resize otherwise
DEFAULT_FPS = 30  # for envs whose metadata has no render_fps
MAX_STEPS = 10_000  # a cap per episode, for envs without a time limit
STALE = re.compile(r"\.episode-\d+\.partial\.\w+")  # a recording's temporary files, until it ends


def offscreen() -> None:
    """Draw without a window: pygame (classic control) to a dummy display, MuJoCo (Fetch) through EGL
    on a Linux machine without a display. Must run before MuJoCo is imported, i.e. before the env is
    made or a policy loaded; variables already set are left alone (``MUJOCO_GL=osmesa``)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("MUJOCO_GL", "egl")


def _imageio():
    try:
        import imageio.v2 as imageio  # optional extra: video
    except ImportError:
        imageio = None
    if imageio is None or importlib.util.find_spec("imageio_ffmpeg") is None:  # MP4s need its ffmpeg binary
        raise VideoError(f"recording videos needs imageio and imageio-ffmpeg: {INSTALL}")
    return imageio


def fit_frame(frame: Any) -> np.ndarray:
    """An ``H x W x 3`` uint8 image, scaled up by a whole factor (nearest neighbour) when small and
    padded (edge pixels) to sides that are multiples of :data:`BLOCK`."""
    image = np.asarray(frame)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] not in (3, 4) or min(image.shape[:2]) < 1:
        raise ValueError(f"a frame must be an H x W x 3 image, got shape {image.shape}")
    image = image[:, :, :3]
    if image.dtype != np.uint8:
        scale = 255.0 if np.issubdtype(image.dtype, np.floating) and image.max(initial=0) <= 1.0 else 1.0
        image = np.clip(image * scale, 0, 255).astype(np.uint8)
    h, w = image.shape[:2]
    factor = max(1, min(math.ceil(MIN_SIDE / min(h, w)), MAX_SIDE // max(h, w)))
    if factor > 1:
        image = image.repeat(factor, axis=0).repeat(factor, axis=1)
    pad_h, pad_w = -image.shape[0] % BLOCK, -image.shape[1] % BLOCK
    if pad_h or pad_w:
        image = np.pad(image, ((pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2), (0, 0)),
                       mode="edge")
    return image


def _env_name(env) -> str:
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__


def _cannot(env, modes: list[str]) -> VideoError:
    return VideoError(f"env '{_env_name(env)}' cannot render rgb_array frames (its render modes: "
                      f"{', '.join(map(str, modes)) if modes else 'none'}); videos need an env that draws images")


def _render(env) -> np.ndarray:
    """One fitted frame, or a VideoError that says why the env cannot be recorded."""
    modes = list(getattr(env, "metadata", {}).get("render_modes") or [])
    if modes and "rgb_array" not in modes:  # gymnasium's checker would fail with an AssertionError
        raise _cannot(env, modes)
    try:
        frame = env.render()
    except Exception as exc:  # noqa: BLE001  (renderers fail with many types: missing GL, pygame, ...)
        raise VideoError(f"env '{_env_name(env)}' failed to render an rgb_array frame: {one_line(exc)[:300]}") from None
    if frame is None or isinstance(frame, (str, list)):
        raise _cannot(env, modes)
    try:
        return fit_frame(frame)
    except ValueError as exc:
        raise VideoError(f"env '{_env_name(env)}' rendered no image: {exc}") from None


def _make_env(policy):
    try:
        with warnings.catch_warnings():  # the unsupported mode is refused in _render, in one line
            warnings.filterwarnings("ignore", message=".*not in the possible render_modes")
            return policy.make_env(render_mode="rgb_array")
    except Exception as exc:  # noqa: BLE001  (gymnasium and env constructors raise many types)
        raise VideoError(f"cannot make the run's env with render_mode='rgb_array': {one_line(exc)[:300]}") from None


class _Held:
    """The videos folder, held by an open descriptor from the moment it is taken: every file is made,
    renamed and removed through it (``dir_fd``), so a link put in place of the folder (or of the run
    folder above it) is never written through; :meth:`check` tells, between episodes and before the
    renames, that its path no longer leads to it. ``lock``: the run folder's, which must be the parent."""

    def __init__(self, folder: Path, lock: RunLock | None = None):
        self.path, self.lock, self.fd, self.made = folder, lock, -1, False
        if lock is None:  # a Python caller's own folder: links above it are the caller's
            folder.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDONLY | os.O_DIRECTORY
        try:
            self.parent = os.open(folder.parent, flags | (os.O_NOFOLLOW if lock is not None else 0))
        except OSError:
            if lock is None or lock.lost() is None:
                raise
            raise OutputError(f"{self._parent_lost()} before the recording: nothing was written there") from None
        try:
            if lock is not None and not lock.holds(self.parent):
                raise OutputError(f"{self._parent_lost()} before the recording: nothing was written there")
            try:
                os.mkdir(folder.name, dir_fd=self.parent)
                self.made = True
            except FileExistsError:
                pass
            try:
                self.fd = os.open(folder.name, flags | os.O_NOFOLLOW, dir_fd=self.parent)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise VideoError(f"cannot record into {folder}: it is a symbolic link or not a folder; "
                                 "move it away") from None
        except BaseException:
            os.close(self.parent)
            raise
        held = os.fstat(self.fd)
        self.identity = (held.st_dev, held.st_ino)

    def _parent_lost(self) -> str:
        lost = self.lock.lost() if self.lock is not None else None
        return f"output folder {self.path.parent} " + (lost[0] if lost else "was replaced")

    def lost(self) -> str | None:
        """How the path stopped leading to the held folder (or the run folder to the locked one), else None."""
        if self.lock is not None and self.lock.lost() is not None:
            return self._parent_lost()
        try:
            here = os.lstat(self.path)
            if (here.st_dev, here.st_ino) == self.identity:
                return None
        except OSError:  # gone, or a path through a link that leads nowhere
            pass
        try:
            now = os.readlink(f"/proc/self/fd/{self.fd}")
        except OSError:
            now = None
        if os.fstat(self.fd).st_nlink == 0 or (now or "").endswith(" (deleted)"):
            return f"videos folder {self.path} was deleted"
        link = " and a link put in its place" if os.path.islink(self.path) else ""
        return f"videos folder {self.path} " + (f"was moved to {now}{link}" if now else "was replaced or removed")

    def check(self, done: int, episodes: int) -> None:
        """Before a write: stop with one line (exit 5) if the folder is no longer where it was taken."""
        why = self.lost()
        if why is not None:
            raise OutputError(f"{why} during the recording: recording stopped after {done} of {episodes} episodes "
                              "without writing there; none of its videos were kept")

    def create(self, name: str) -> int:
        """A new empty file in the folder, open for writing (a link or file left under the name is removed)."""
        self.remove(name)
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=self.fd)

    def remove(self, name: str) -> None:
        try:
            if not stat.S_ISDIR(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode):
                os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def sync(self) -> None:
        os.fsync(self.fd)  # the renames themselves survive a power cut

    def discard(self, names: list[str]) -> None:
        """After a failure: this recording's temporary files go, and the folder if this call made it and
        it is still in place and empty."""
        try:  # never in place of the error that ended the recording
            for name in names:
                self.remove(name)
            if self.made and self.lost() is None and not self.names():
                os.rmdir(self.path.name, dir_fd=self.parent)
        except OSError:
            pass

    def close(self) -> None:
        for fd in (self.fd, self.parent):
            if fd >= 0:
                os.close(fd)
        self.fd = self.parent = -1


def _target(fd: int, fallback: Path) -> str:
    """A path ffmpeg (another process) opens the file ``fd`` by: the descriptor itself through /proc,
    which no rename or link can redirect; elsewhere the file's path, checked just before."""
    path = f"/proc/{os.getpid()}/fd/{fd}"
    return path if os.path.exists(path) else str(fallback)


class _Writer:
    """One episode into a new temporary file of the held folder: MP4 frames stream to ffmpeg, which
    writes the open file; GIF frames are kept and encoded at the end (pillow), then written through it."""

    def __init__(self, folder: _Held, name: str, fmt: str, fps: float):
        self.fmt, self.fps, self.target = fmt, fps, folder.path / name
        self.fd = folder.create(name)
        self.frames: list[np.ndarray] = []
        self.stream = None

    def append(self, frame: np.ndarray) -> None:
        if self.fmt != "mp4":
            self.frames.append(frame)
            return
        if self.stream is None:
            import imageio_ffmpeg  # optional extra: video

            self.stream = imageio_ffmpeg.write_frames(
                _target(self.fd, self.target), (frame.shape[1], frame.shape[0]), fps=self.fps, codec="libx264",
                macro_block_size=BLOCK, ffmpeg_log_level="error", output_params=["-f", "mp4"])
            self.stream.send(None)
        self.stream.send(np.ascontiguousarray(frame))

    def close(self, finished: bool = True) -> None:
        """Finish the file and flush it to disk; not ``finished`` (the episode failed): only end ffmpeg.
        The descriptor is closed in any case."""
        try:
            if not finished:
                with contextlib.suppress(Exception):  # the episode's own error is the one reported
                    if self.stream is not None:
                        self.stream.close()
                return
            if self.stream is not None:
                self.stream.close()
                if os.fstat(self.fd).st_size == 0:  # ffmpeg tells its failures only on its stderr
                    raise OSError(errno.EIO, f"ffmpeg wrote nothing into {self.target}")
            elif self.frames:
                import imageio.v3 as iio  # optional extra: video

                data = memoryview(iio.imwrite("<bytes>", np.stack(self.frames), extension=".gif",
                                              duration=1000.0 / self.fps, loop=0))
                while data:
                    data = data[os.write(self.fd, data):]
            os.fsync(self.fd)
        finally:
            os.close(self.fd)


def record(policy, folder: str | Path, episodes: int = VIDEO_DEFAULTS["episodes"], seed: int = 0,
           fps: float | None = None, fmt: str = "mp4", max_steps: int = MAX_STEPS,
           lock: RunLock | None = None) -> list[Path]:
    """Record ``episodes`` greedy episodes (episode ``i`` reset with ``seed + i``) into
    ``folder/episode-<i>.<fmt>``; returns their paths.

    Files of an earlier recording are overwritten, and its ``episode-<i>`` files past ``episodes``
    removed, so the folder holds exactly this recording. An env that cannot draw rgb_array frames
    is a :class:`VideoError`, raised before anything is written. The folder is held by identity while
    it is recorded into (``lock``: the run folder's lock, which must hold ``folder``'s parent): one
    deleted, moved or replaced by a link meanwhile is an :class:`OutputError` and no file is written
    through the link.
    """
    if fmt not in FORMATS:
        raise VideoError(f"video.format={fmt!r} is not allowed: it must be one of {', '.join(FORMATS)}")
    _imageio()
    offscreen()
    env = _make_env(policy)
    folder, episodes = Path(folder), int(episodes)
    held: _Held | None = None
    partial: list[str] = []
    try:
        obs, _ = env.reset(seed=int(seed))
        frame = _render(env)  # checked before the folder is made: a refused env writes nothing
        rate = float(fps or getattr(env, "metadata", {}).get("render_fps") or DEFAULT_FPS)
        if folder.is_symlink():
            raise VideoError(f"cannot record into {folder}: it is a symbolic link; move it away")
        held = _Held(folder, lock)
        for stale in held.names():  # a recording killed before it could clean up
            if STALE.fullmatch(stale):
                held.remove(stale)
        for i in range(episodes):
            held.check(i, episodes)
            if i > 0:
                obs, _ = env.reset(seed=int(seed) + i)
                frame = _render(env)
            partial.append(f".episode-{i}.partial.{fmt}")
            writer = _Writer(held, partial[-1], fmt, rate)
            try:
                writer.append(frame)
                for _ in range(int(max_steps)):
                    action, _ = policy.predict(obs, deterministic=True)
                    obs, _, terminated, truncated, _ = env.step(action)
                    writer.append(_render(env))
                    if terminated or truncated:
                        break
            except BaseException:
                writer.close(finished=False)
                raise
            writer.close()
        held.check(episodes, episodes)
        names = [f"episode-{i}.{fmt}" for i in range(episodes)]
        for src, dst in zip(partial, names):
            held.replace(src, dst)  # a link at dst is replaced, never written through
        for old in held.names():  # a longer earlier recording's extra episodes
            found = re.fullmatch(rf"episode-(\d+)\.{fmt}", old)
            if found and int(found.group(1)) >= episodes:
                held.remove(old)
        held.sync()
    except BaseException:
        if held is not None:
            held.discard(partial)
        raise
    finally:
        env.close()
        if held is not None:
            held.close()
    return [folder / name for name in names]


def shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


__all__ = ["FORMATS", "VideoError", "fit_frame", "offscreen", "record", "shown"]
