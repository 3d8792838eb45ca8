"""Videos of a trained agent: greedy episodes of the run's single env, drawn as ``rgb_array`` frames
and written as MP4 (imageio with imageio-ffmpeg) or GIF.

``her-run load=RUN_DIR video=true`` calls :func:`record` with the run's policy
(:func:`her_rl.run.policy.load`); anything with ``predict(observation, deterministic=True) -> (action, _)``
and ``make_env(render_mode=...)`` works. The ``video`` keys and their checks are
:mod:`her_rl.config.video`'s.
"""

from __future__ import annotations

import importlib.util
import math
import re
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from her_rl.config.video import DEFAULTS
from her_rl.errors import ConfigError, one_line

FORMATS = ("mp4", "gif")
INSTALL = 'pip install -e ".[video]"'
MIN_SIDE = 200  # tiny renders are scaled up (nearest neighbour) to at least this many pixels ...
MAX_SIDE = 1920  # ... unless that would make the longer side wider than this
BLOCK = 16  # H.264 (yuv420p) wants sides in multiples of the macro block; imageio would resize otherwise
DEFAULT_FPS = 30  # for envs whose metadata has no render_fps
MAX_STEPS = 10_000  # a cap per episode, for envs without a time limit


class VideoError(ConfigError):
    """The env cannot be recorded, or the writer is missing: one line, exit status 2."""


def offscreen() -> None:
    """Draw without a window: pygame (classic control) to a dummy display, MuJoCo (Fetch) through EGL
    on a Linux machine without a display. Must run before MuJoCo is imported, i.e. before the env is
    made or a policy loaded; variables already set are left alone (``MUJOCO_GL=osmesa``)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("MUJOCO_GL", "egl")


def _imageio():
    try:
        import imageio.v2 as imageio
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


class _Writer:
    """MP4 frames stream to ffmpeg; GIF frames are kept and written at the end (pillow)."""

    def __init__(self, imageio, path: Path, fmt: str, fps: float):
        self.imageio, self.path, self.fmt, self.fps = imageio, path, fmt, fps
        self.frames: list[np.ndarray] = []
        self.stream = None
        if fmt == "mp4":
            self.stream = imageio.get_writer(path, format="FFMPEG", mode="I", fps=fps, codec="libx264",
                                             macro_block_size=BLOCK, ffmpeg_log_level="error")

    def append(self, frame: np.ndarray) -> None:
        if self.stream is not None:
            self.stream.append_data(frame)
        else:
            self.frames.append(frame)

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        elif self.frames:
            import imageio.v3 as iio

            iio.imwrite(self.path, np.stack(self.frames), extension=".gif", duration=1000.0 / self.fps, loop=0)


def record(policy, folder: str | Path, episodes: int = DEFAULTS["episodes"], seed: int = 0,
           fps: float | None = None, fmt: str = "mp4", max_steps: int = MAX_STEPS) -> list[Path]:
    """Record ``episodes`` greedy episodes (episode ``i`` reset with ``seed + i``) into
    ``folder/episode-<i>.<fmt>``; returns their paths.

    Files of an earlier recording are overwritten, and its ``episode-<i>`` files past ``episodes``
    removed, so the folder holds exactly this recording. An env that cannot draw rgb_array frames
    is a :class:`VideoError`, raised before anything is written.
    """
    if fmt not in FORMATS:
        raise VideoError(f"video.format={fmt!r} is not allowed: it must be one of {', '.join(FORMATS)}")
    imageio = _imageio()
    offscreen()
    env = _make_env(policy)
    folder, made_folder = Path(folder), not Path(folder).exists()
    partial: list[Path] = []
    try:
        obs, _ = env.reset(seed=int(seed))
        frame = _render(env)  # checked before the folder is made: a refused env writes nothing
        rate = float(fps or getattr(env, "metadata", {}).get("render_fps") or DEFAULT_FPS)
        if folder.is_symlink():
            raise VideoError(f"cannot record into {folder}: it is a symbolic link; move it away")
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob(".episode-*.partial.*"):  # a recording killed before it could clean up
            if stale.is_symlink() or stale.is_file():
                stale.unlink()
        for i in range(int(episodes)):
            if i > 0:
                obs, _ = env.reset(seed=int(seed) + i)
                frame = _render(env)
            partial.append(folder / f".episode-{i}.partial.{fmt}")
            partial[-1].unlink(missing_ok=True)  # a link left under this name is not written through
            writer = _Writer(imageio, partial[-1], fmt, rate)
            try:
                writer.append(frame)
                for _ in range(int(max_steps)):
                    action, _ = policy.predict(obs, deterministic=True)
                    obs, _, terminated, truncated, _ = env.step(action)
                    writer.append(_render(env))
                    if terminated or truncated:
                        break
            finally:
                writer.close()
    except BaseException:
        for path in partial:
            path.unlink(missing_ok=True)
        if made_folder and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        raise
    finally:
        env.close()
    paths = [folder / f"episode-{i}.{fmt}" for i in range(len(partial))]
    for src, dst in zip(partial, paths):
        _fsync(src)
        os.replace(src, dst)  # a link at dst is replaced, never written through
    for old in folder.glob(f"episode-*.{fmt}"):  # a longer earlier recording's extra episodes
        found = re.fullmatch(rf"episode-(\d+)\.{fmt}", old.name)
        if found and int(found.group(1)) >= len(paths):
            old.unlink()
    return paths


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


__all__ = ["FORMATS", "VideoError", "fit_frame", "offscreen", "record", "shown"]
