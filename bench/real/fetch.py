"""Rebuild the real-code corpus listed in ``bench/real/projects.toml``.

    python3 bench/real/fetch.py [--corpus DIR] [--mirrors DIR] [--only OWNER/NAME ...]

Each project's files are written as ``<corpus>/<owner>__<name>/<path>`` (default corpus:
``bench/real/corpus/``, git-ignored; fetched code is never committed). Sources, per project:

* ``--mirrors DIR``: a bare git directory for ``owner/name`` under DIR, in a folder named
  ``owner+name`` (any suffix; the git directory may sit inside it, e.g. ``owner+name/repo``);
* otherwise ``git clone --filter=blob:none --no-checkout`` of the public repository into a
  scratch folder, then a checkout of the pinned commit limited to the selected paths.

Selection: paths of the commit's tree matching one of ``include`` and none of ``exclude``
(``**`` spans folders, ``*`` and ``?`` stay within one), ending in ``.py`` or ``.ipynb``, whose
code mentions ``torch`` (for notebooks: the code cells) and that are under 4 MiB (the mirrors
leave out larger files, mostly notebooks full of outputs, so they are left out either way). Then at most ``cap`` files per project
(``[defaults].cap``, 80, or the project's own ``cap``): when there are more, the files kept are
those first in the order of the SHA-256 of their path, so the cut is deterministic and spread
across the project's folders rather than keeping the alphabetically first ones.

``<corpus>/MANIFEST.tsv`` lists every file (project, path, kind py|ipynb, bytes, sha256); the
totals are printed. Python 3.10+ standard library only (``tomli`` is used on 3.10 if present).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
DEFAULT_PROJECTS = HERE / "projects.toml"
DEFAULT_CORPUS = HERE / "corpus"
REMOTE = "https://github.com/{repo}.git"
SUFFIXES = (".py", ".ipynb")
MAX_BYTES = 4 * 1024 * 1024  # larger files (notebooks full of outputs) are left out
MANIFEST_HEADER = ("project", "path", "kind", "bytes", "sha256")


@dataclass
class Project:
    repo: str
    commit: str
    include: list[str]
    exclude: list[str] = field(default_factory=list)
    cap: int = 80
    kind: str = ""
    why: str = ""

    @property
    def folder(self) -> str:
        owner, name = self.repo.split("/")
        return f"{owner}__{name}"


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a path glob: ``**/`` is zero or more folders, a trailing ``**`` anything,
    ``*`` any run within one path segment, ``?`` one character but ``/``."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def load_projects(path: Path) -> list[Project]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    cap = int(data.get("defaults", {}).get("cap", 80))
    projects = []
    seen = set()
    for entry in data.get("project", []):
        p = Project(
            repo=entry["repo"],
            commit=entry["commit"],
            include=list(entry["include"]),
            exclude=list(entry.get("exclude", [])),
            cap=int(entry.get("cap", cap)),
            kind=entry.get("kind", ""),
            why=entry.get("why", ""),
        )
        if not re.fullmatch(r"[0-9a-f]{40}", p.commit):
            raise SystemExit(f"{path}: {p.repo}: commit must be 40 hex digits")
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", p.repo):
            raise SystemExit(f"{path}: {p.repo}: repo must be owner/name")
        if p.repo.lower() in seen:
            raise SystemExit(f"{path}: {p.repo} is listed twice")
        seen.add(p.repo.lower())
        projects.append(p)
    return projects


def git(git_dir: Path, *args: str, data: bytes | None = None) -> bytes:
    result = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        input=data,
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args[:3])} failed: {result.stderr.decode(errors='replace').strip()}"
        )
    return result.stdout


def find_mirror(mirrors: Path, repo: str) -> Path | None:
    """The bare git directory for ``repo`` under ``mirrors`` (folder ``owner+name*``)."""
    owner, name = repo.split("/")
    prefix = f"{owner}+{name}".lower()
    candidates = sorted(
        d
        for d in mirrors.iterdir()
        if d.is_dir()
        and d.name.lower().startswith(prefix)
        and (len(d.name) == len(prefix) or not d.name[len(prefix)].isalnum())
    )
    for folder in candidates:
        for sub in (folder, *sorted(folder.iterdir())):
            if sub.is_dir() and (sub / "HEAD").is_file() and (sub / "objects").is_dir():
                return sub
            if sub.is_dir() and (sub / ".git" / "HEAD").is_file():
                return sub / ".git"
    return None


def tree_paths(git_dir: Path, commit: str) -> dict[str, str]:
    """path -> blob id of every file of the commit."""
    out = git(git_dir, "ls-tree", "-r", "-z", "--full-tree", commit)
    paths = {}
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, oid = meta.split()
        if kind == b"blob" and mode != b"120000":  # no symlinks
            paths[name.decode("utf-8", "surrogateescape")] = oid.decode()
    return paths


def select(project: Project, paths: list[str]) -> list[str]:
    includes = [glob_regex(g) for g in project.include]
    excludes = [glob_regex(g) for g in project.exclude]
    return sorted(
        p
        for p in paths
        if p.endswith(SUFFIXES)
        and any(r.match(p) for r in includes)
        and not any(r.match(p) for r in excludes)
    )


def mentions_torch(path: str, data: bytes) -> bool:
    if path.endswith(".ipynb"):
        try:
            nb = json.loads(data.decode("utf-8"))
            cells = nb.get("cells", []) if isinstance(nb, dict) else []
            code = "".join(
                "".join(c.get("source", ""))
                if isinstance(c.get("source"), list)
                else str(c.get("source", ""))
                for c in cells
                if isinstance(c, dict) and c.get("cell_type") == "code"
            )
        except (UnicodeDecodeError, ValueError, AttributeError):
            code = data.decode("utf-8", "replace")  # kept: torchdoctor reports it as unreadable
        return "torch" in code
    return b"torch" in data


def apply_cap(project: Project, paths: list[str]) -> list[str]:
    if len(paths) <= project.cap:
        return paths
    ranked = sorted(paths, key=lambda p: hashlib.sha256(p.encode()).hexdigest())
    return sorted(ranked[: project.cap])


def read_blobs(git_dir: Path, oids: list[str]) -> list[bytes | None]:
    """Contents of the blobs, in order, with one ``git cat-file --batch``; None for a blob the
    git directory lacks (mirrors may leave out large files)."""
    out = git(git_dir, "cat-file", "--batch", data="".join(f"{o}\n" for o in oids).encode())
    blobs: list[bytes | None] = []
    pos = 0
    for oid in oids:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if header[-1:] == [b"missing"]:
            blobs.append(None)
            pos = end + 1
            continue
        if len(header) != 3 or header[1] != b"blob":
            raise RuntimeError(f"unexpected object for {oid}: {header!r}")
        size = int(header[2])
        blobs.append(out[end + 1 : end + 1 + size])
        pos = end + 1 + size + 1
    return blobs


def from_mirror(git_dir: Path, project: Project) -> dict[str, bytes | None]:
    try:
        git(git_dir, "cat-file", "-e", f"{project.commit}^{{commit}}")
    except RuntimeError:
        raise RuntimeError(f"commit {project.commit} is not in {git_dir}") from None
    tree = tree_paths(git_dir, project.commit)
    chosen = select(project, list(tree))
    return dict(zip(chosen, read_blobs(git_dir, [tree[p] for p in chosen]), strict=True))


def from_clone(project: Project, scratch: Path, remote: str) -> dict[str, bytes | None]:
    url = remote.format(repo=project.repo)
    work = scratch / project.folder
    run = {"capture_output": True, "check": False}
    r = subprocess.run(
        ["git", "clone", "--quiet", "--filter=blob:none", "--no-checkout", url, str(work)], **run
    )
    if r.returncode != 0:
        raise RuntimeError(f"git clone {url} failed: {r.stderr.decode(errors='replace').strip()}")
    git_dir = work / ".git"
    try:
        git(git_dir, "cat-file", "-e", f"{project.commit}^{{commit}}")
    except RuntimeError:  # not on a fetched branch: ask for the commit itself
        git(git_dir, "fetch", "--quiet", "--filter=blob:none", "origin", project.commit)
    tree = tree_paths(git_dir, project.commit)
    chosen = select(project, list(tree))
    if chosen:
        # One checkout of just those paths fetches their blobs in one batch.
        spec = "".join(f"{p}\0" for p in chosen).encode()
        r = subprocess.run(
            [
                "git",
                "-C",
                str(work),
                "checkout",
                "--quiet",
                project.commit,
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                "--",
            ],
            input=spec,
            capture_output=True,
            check=False,
        )
        if r.returncode != 0:
            raise RuntimeError(f"git checkout failed: {r.stderr.decode(errors='replace').strip()}")
    files: dict[str, bytes | None] = {p: (work / p).read_bytes() for p in chosen}
    shutil.rmtree(work, ignore_errors=True)
    return files


def keep(files: dict[str, bytes | None]) -> tuple[dict[str, bytes], int]:
    """The files under MAX_BYTES (a blob a mirror lacks counts as over it: mirrors leave out
    files of 4 MiB and more, so both sources give the same corpus), and how many were left."""
    kept = {p: d for p, d in files.items() if d is not None and len(d) < MAX_BYTES}
    return kept, len(files) - len(kept)


def write_project(corpus: Path, project: Project, files: dict[str, bytes]) -> list[tuple]:
    kept = apply_cap(project, sorted(p for p, data in files.items() if mentions_torch(p, data)))
    root = corpus / project.folder
    shutil.rmtree(root, ignore_errors=True)
    rows = []
    for path in kept:
        data = files[path]
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        kind = "ipynb" if path.endswith(".ipynb") else "py"
        rows.append((project.folder, path, kind, len(data), hashlib.sha256(data).hexdigest()))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", type=Path, default=DEFAULT_PROJECTS)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--mirrors", type=Path, help="folder of bare git dirs named owner+name")
    parser.add_argument("--remote", default=REMOTE, help="clone URL template (default: GitHub)")
    parser.add_argument("--only", nargs="+", metavar="OWNER/NAME", help="rebuild these only")
    args = parser.parse_args(argv)

    projects = load_projects(args.projects)
    if args.only:
        wanted = {r.lower() for r in args.only}
        unknown = wanted - {p.repo.lower() for p in projects}
        if unknown:
            parser.error(f"not in {args.projects}: {', '.join(sorted(unknown))}")
        todo = [p for p in projects if p.repo.lower() in wanted]
    else:
        todo = projects
    corpus: Path = args.corpus
    corpus.mkdir(parents=True, exist_ok=True)
    manifest = corpus / "MANIFEST.tsv"
    previous: list[tuple] = []
    if args.only and manifest.exists():
        redo = {p.folder for p in todo}
        lines = manifest.read_text(encoding="utf-8").splitlines()[1:]
        previous = [tuple(line.split("\t")) for line in lines if line.split("\t")[0] not in redo]
    elif not args.only:
        # A full rebuild: drop project folders no longer listed.
        listed = {p.folder for p in projects}
        for entry in corpus.iterdir():
            if entry.is_dir() and "__" in entry.name and entry.name not in listed:
                shutil.rmtree(entry)

    start = time.monotonic()
    rows: list[tuple] = list(previous)
    failed = []
    with tempfile.TemporaryDirectory(prefix="torchdoctor-real-") as tmp:
        for project in todo:
            t0 = time.monotonic()
            try:
                git_dir = find_mirror(args.mirrors, project.repo) if args.mirrors else None
                if args.mirrors and git_dir is None:
                    print(
                        f"{project.repo}: no mirror under {args.mirrors}; cloning", file=sys.stderr
                    )
                if git_dir is not None:
                    files = from_mirror(git_dir, project)
                else:
                    files = from_clone(project, Path(tmp), args.remote)
            except (RuntimeError, OSError) as exc:
                failed.append(project.repo)
                print(f"{project.repo}: FAILED: {exc}", file=sys.stderr)
                continue
            small, big = keep(files)
            got = write_project(corpus, project, small)
            rows.extend(got)
            nb = sum(1 for r in got if r[2] == "ipynb")
            note = f", {big} of 4 MiB or more left out" if big else ""
            print(
                f"{project.repo:<48} {len(got):>4} files ({nb:>3} notebooks; "
                f"{len(files)} matched{note})  {time.monotonic() - t0:.1f}s",
                flush=True,
            )
    rows.sort(key=lambda r: (r[0], r[1]))
    with manifest.open("w", encoding="utf-8", newline="\n") as f:
        f.write("\t".join(MANIFEST_HEADER) + "\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
    n_nb = sum(1 for r in rows if r[2] == "ipynb")
    n_projects = len({r[0] for r in rows})
    size = sum(int(r[3]) for r in rows)
    print(
        f"\n{n_projects} projects, {len(rows)} files ({len(rows) - n_nb} .py, {n_nb} notebooks), "
        f"{size / 1e6:.1f} MB in {corpus} ({time.monotonic() - start:.1f}s)"
    )
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GIT_TERMINAL_PROMPT", "0")
    sys.exit(main())
