"""A hostile YAML corpus, and a worker process that reads each of its files as a commit would.

The corpus (:func:`corpus`) is generated deterministically from a seed: byte flips and
truncations of real files (the sample repo's and the prometheus-operator manifests of
``../shared/corpus``), deep nesting of every block and flow form, huge scalars, bad numbers,
alias bombs, odd tags, bad UTF-8, NUL bytes, byte order marks, CRLF, very long lines and merge
keys. Each :class:`Case` is one file with a role (runtime, channel, module, manifest, default
configuration or settings): it replaces that file in a small valid repo, which is then read and
validated in memory by the real loader and validator (``read_repo`` + ``validate_repo``, the
path of ``reconciler validate`` and of the daemon).

:func:`run_corpus` runs the cases in worker processes (``python tests/support/hostile_corpus.py
worker``) so that a crash (a segfault in libyaml) or a hang is observed from outside and pinned on
its file: the worker announces each case before reading it and reports it after. Used by
``tests/config/test_hostile_yaml.py`` (CI) and ``bench/hostile_yaml_bench.py`` (the report).
"""

from __future__ import annotations

import hashlib
import json
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.source.tree import Entry

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

SAMPLE = ROOT / "sample-repo"
PROMETHEUS = ROOT.parent / "shared" / "corpus" / "prometheus-operator"
SEED = 11
#: Where each role's file sits in the base repo.
ROLES = {
    "settings": "reconciler.yaml",
    "channel": "channels/regular.yaml",
    "runtime": "runtimes/rt.yaml",
    "module": "modules/keda/module.yaml",
    "manifest": "modules/keda/1.0.0/manifest.yaml",
    "default": "modules/keda/1.1.0/default.yaml",
}
_API = "apiVersion: reconciler.dev/v1alpha1\n"
BASE_TEXTS = {
    "reconciler.yaml": _API + "kind: Settings\nmetadata:\n  name: hostile\nspec: {}\n",
    "channels/regular.yaml": _API + "kind: Channel\nmetadata:\n  name: regular\n"
    "spec:\n  modules:\n    keda: 1.0.0\n",
    "runtimes/rt.yaml": _API + "kind: Runtime\nmetadata:\n  name: rt\nspec:\n  channel: regular\n"
    "  cluster:\n    inCluster: true\n  modules:\n    - name: keda\n",
}


@dataclass(frozen=True, slots=True)
class Case:
    """One hostile file: its name, role, bytes and, when certain, a text its refusal has."""

    name: str
    role: str
    data: bytes
    expect: str | None = None


# -- the base repo, in memory --------------------------------------------------------------------


def base_files() -> dict[str, bytes]:
    """The small valid repo every case is put into (keda from the sample repo)."""
    files = {path: text.encode() for path, text in BASE_TEXTS.items()}
    for path in ("module.yaml", "1.0.0/manifest.yaml", "1.1.0/manifest.yaml", "1.1.0/default.yaml"):
        files[f"modules/keda/{path}"] = (SAMPLE / "modules" / "keda" / path).read_bytes()
    return files


class MemoryTree:
    """A :class:`~reconciler.source.tree.SourceTree` over a dict of files."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.folders = {"/".join(p.split("/")[:i]) for p in files for i in range(p.count("/") + 1)}

    def entries(self, folder: str) -> list[Entry]:
        from reconciler.source.tree import Entry

        prefix = f"{folder}/" if folder else ""
        names: dict[str, bool] = {}
        for path in self.files:
            if path.startswith(prefix):
                name, _, rest = path[len(prefix) :].partition("/")
                names[name] = names.get(name, False) or bool(rest)
        return [Entry(name, is_dir) for name, is_dir in sorted(names.items())]

    def is_dir(self, path: str) -> bool:
        return path in self.folders

    def is_file(self, path: str) -> bool:
        return path in self.files

    def size(self, path: str) -> int:
        return len(self.files[path])

    def read(self, path: str) -> bytes:
        return self.files[path]

    def inside(self, path: str) -> bool:
        """A path climbing out of the in-memory repository is outside it."""
        depth = 0
        for part in path.split("/"):
            depth += -1 if part == ".." else part not in ("", ".")
            if depth < 0:
                return False
        return True

    def escapes(self, path: str, boundary: str) -> bool:
        return False

    def identity(self, path: str) -> str | None:
        return hashlib.sha1(self.files[path], usedforsecurity=False).hexdigest()


# -- generation ----------------------------------------------------------------------------------


def real_files() -> list[tuple[str, str, bytes]]:
    """(name, role, bytes) of the real files flipped and truncated: the sample repo's and the
    prometheus-operator manifests (small and large)."""
    found: list[tuple[str, str, bytes]] = []
    for path in sorted(SAMPLE.rglob("*.yaml")):
        relative = path.relative_to(SAMPLE).as_posix()
        found.append((f"sample/{relative}", _role_of(relative), path.read_bytes()))
    for path in sorted(PROMETHEUS.rglob("*.yaml")):
        relative = path.relative_to(PROMETHEUS).as_posix()
        found.append((f"prometheus/{relative}", "manifest", path.read_bytes()))
    return found


def _role_of(relative: str) -> str:
    if relative.startswith("runtimes/"):
        return "runtime"
    if relative == "reconciler.yaml":
        return "settings"
    if relative.endswith("module.yaml"):
        return "module"
    return "default" if relative.endswith("default.yaml") else "manifest"


def corpus(seed: int = SEED) -> list[Case]:
    """Every case, in a fixed order (the same seed gives the same bytes)."""
    rng = random.Random(seed)
    real = real_files()
    small = [f for f in real if len(f[2]) < 50_000]
    large = [f for f in real if len(f[2]) >= 50_000]
    families: list[Callable[[], Iterator[Case]]] = [
        lambda: _flips(rng, small, 18),
        lambda: _flips(rng, large, 1),
        lambda: _truncations(rng, small, 8),
        lambda: _truncations(rng, large, 1),
        _nesting,
        _huge_scalars,
        _bad_numbers,
        _alias_bombs,
        _tags,
        lambda: _encodings(rng, small),
        _long_lines,
        _merge_keys,
        lambda: _splices(rng, small, 300),
    ]
    return [case for family in families for case in family()]


_HOSTILE_BYTES = b"-?:[]{},&*!|>%@`'\"#\t\r\n\x00\xff\xfe\xef\xbb\xbf\\ "


def _flips(rng: random.Random, files: list[tuple[str, str, bytes]], per: int) -> Iterator[Case]:
    for name, role, data in files:
        for n in range(per):
            changed = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                _mutate(rng, changed)
            yield Case(f"flip/{name}#{n}", role, bytes(changed))


def _mutate(rng: random.Random, data: bytearray) -> None:
    at = rng.randrange(len(data)) if data else 0
    how = rng.randrange(5)
    if how == 0 and data:
        data[at] ^= 1 << rng.randrange(8)
    elif how == 1 and data:
        data[at] = rng.choice(_HOSTILE_BYTES)
    elif how == 2 and data:
        del data[at : at + rng.randint(1, 16)]
    elif how == 3:
        data[at:at] = bytes([rng.choice(_HOSTILE_BYTES)]) * rng.randint(1, 4)
    else:
        data[at:at] = data[at : at + rng.randint(1, 64)]  # a duplicated run


def _truncations(
    rng: random.Random, files: list[tuple[str, str, bytes]], per: int
) -> Iterator[Case]:
    for name, role, data in files:
        for n in range(per):
            yield Case(f"truncate/{name}#{n}", role, data[: rng.randrange(len(data))])


_ROLE_CYCLE = ("runtime", "manifest", "channel", "module", "default", "settings")
_DEEP = "nesting deeper than"
#: Every nesting form, as (name, text of ``depth`` levels).
_FORMS: list[tuple[str, Callable[[int], str]]] = [
    ("block-sequence", lambda n: "- " * n + "x\n"),
    ("complex-key", lambda n: "? " * n + "x\n"),
    ("complex-key-value", lambda n: "? x\n: " + "- " * (n - 1) + "x\n"),
    ("key-sequence", lambda n: "? - " * (n // 2) + "x\n"),
    ("indented-mapping", lambda n: "".join(" " * i + "a:\n" for i in range(n)) + " " * n + "x\n"),
    ("indented-sequence", lambda n: "".join(" " * i + "-\n" for i in range(n)) + " " * n + "x\n"),
    ("indentless", lambda n: "".join("  " * i + "- a:\n" for i in range(n // 2)) + "x\n"),
    ("flow-sequence", lambda n: "[" * n + "]" * n + "\n"),
    ("flow-mapping", lambda n: "{a: " * n + "x" + "}" * n + "\n"),
    ("flow-pair", lambda n: "[a: " * (n // 2) + "x" + "]" * (n // 2) + "\n"),
    ("flow-in-block", lambda n: "- " * (n // 2) + "[" * (n // 2) + "]" * (n // 2) + "\n"),
    ("unclosed-flow", lambda n: "[" * n + "\n"),
    ("tagged", lambda n: "".join(" " * i + f"- &a{i} !!seq\n" for i in range(n)) + "x\n"),
    ("complex-flow-key", lambda n: "{? " * n + "x" + "}" * n + "\n"),
]

_INDENTED = ("indented-mapping", "indented-sequence", "tagged", "indentless")


def _nesting() -> Iterator[Case]:
    index = 0
    for form, make in _FORMS:
        for depth in (150, 199, 205, 1_000, 20_000, 100_000):
            if form in _INDENTED and depth > 3_000:
                continue  # n levels of indentation take n * n / 2 bytes
            text = make(depth)
            for wrap in ("root", "spec"):
                body = text if wrap == "root" else _under_spec(text)
                expect = _DEEP if depth >= 1_000 else None
                role = _ROLE_CYCLE[index % len(_ROLE_CYCLE)]
                index += 1
                yield Case(f"nesting/{form}/{depth}/{wrap}", role, body.encode(), expect)


def _under_spec(text: str) -> str:
    indented = "".join("    " + line for line in text.splitlines(keepends=True))
    return f"{_API}kind: Runtime\nmetadata:\n  name: rt\nspec:\n  x:\n{indented}"


def _huge_scalars() -> Iterator[Case]:
    big = "a" * 1_000_000
    bodies = {
        "plain": f"a: {big}\n",
        "single-quoted": f"a: '{big}'\n",
        "double-quoted": 'a: "' + "\\u00e9\\x41" * 150_000 + '"\n',
        "literal": "a: |\n" + ("  " + "b" * 1_000 + "\n") * 1_000,
        "folded": "a: >\n" + ("  " + "c " * 500 + "\n") * 1_000,
        "key": f"{'k' * 200_000}: 1\n",
        "complex-key": f"? {'k' * 200_000}\n: 1\n",
        "many-keys": "".join(f"k{i:06d}: 1\n" for i in range(50_000)),
        "many-items": "".join("- {}\n" for _ in range(50_000)),
        "spec-unknown-keys": _under_spec("").replace("  x:\n", "")
        + "".join(f"  k{i:05d}: 1\n" for i in range(40_000)),
        "days": _under_spec("").replace("  x:\n", "  maintenanceWindow:\n    days:\n")
        + "".join(f"      - {{d: {i}}}\n" for i in range(5_000)),
        "misspelled-required": _under_spec("").replace("  x:\n", "  modules:\n")
        + "    - nme: x\n" * 20_000,
        "secret-multiline": "token: |\n" + "  " + "z" * 500_000 + "\n",
    }
    for n, (name, body) in enumerate(bodies.items()):
        yield Case(f"huge/{name}", _ROLE_CYCLE[n % len(_ROLE_CYCLE)], body.encode())


_BAD_NUMBERS = [
    ("0x_", None),
    ("0b_", None),
    ("+0b_", None),
    ("-0x_", None),
    ("0o_", None),
    ("._", None),
    ("-._", None),
    ("!!float ._", "not a valid number"),
    ("1_", None),
    ("0_", None),
    ("1__000", None),
    ("0b1_", None),
    ("0x_F", None),
    ("1" * 5_000, None),
    ("-" + "9" * 5_000, None),
    ("0x" + "f" * 5_000, None),
    ("0b" + "1" * 20_000, None),
    ("1" + ":00" * 3_000, None),
    ("1" * 4_300, None),
    ("1" * 100_000 + ".5", None),
    ("1e99999", None),
    (".inf", "JSON cannot carry"),
    ("-.Inf", "JSON cannot carry"),
    ("+.INF", "JSON cannot carry"),
    (".NaN", "JSON cannot carry"),
    (".nan", "JSON cannot carry"),
    (".iNf", None),
    ("!!int abc", "not a valid integer"),
    ("!!int ''", "not a valid integer"),
    ("!!float x", "not a valid number"),
    ("!!float ''", "not a valid number"),
    ("!!bool maybe", "not a valid boolean"),
    ("!!int 0x_", "not a valid integer"),
    ("!!int " + "7" * 6_000, "not a valid integer"),
    ("190:20:30", None),
    ("1_2:3_0", None),
]


def _bad_numbers() -> Iterator[Case]:
    for n, (token, expect) in enumerate(_BAD_NUMBERS):
        for place, body in (
            ("value", f"a: {token}\n"),
            ("item", f"- {token}\n"),
            ("flow", f"{{a: [{token}]}}\n"),
            ("replicas", _under_spec("").replace("  x:\n", f"  replicas: {token}\n")),
        ):
            role = _ROLE_CYCLE[n % len(_ROLE_CYCLE)]
            yield Case(f"number/{place}/{n}", role, body.encode(), expect)


def _billion_laughs(levels: int, width: int = 10) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def _alias_bombs() -> Iterator[Case]:
    bodies = {f"laughs-{n}": _billion_laughs(n) for n in (3, 5, 6, 7, 9, 12)}
    bodies.update({f"wide-{n}": _billion_laughs(3, n) for n in (50, 200)})
    bodies["recursive-seq"] = "a: &a [*a]\n"
    bodies["recursive-map"] = "a: &a {b: *a}\n"
    bodies["recursive-merge"] = "a: &a\n  <<: *a\n"
    bodies["undefined"] = "a: *nope\n"
    bodies["redefined"] = "a: &x 1\nb: &x 2\nc: *x\n"
    merge = ["m0: &m0 {" + ", ".join(f"k{i}: {i}" for i in range(50)) + "}"]
    for level in range(1, 8):
        merge.append(f"m{level}: &m{level} " + "[" + ", ".join([f"*m{level - 1}"] * 10) + "]")
    bodies["merge-bomb"] = "\n".join(merge) + "\nz:\n  <<: *m7\n"
    bodies["alias-key"] = "a: &k key\n*k : 1\n"
    bodies["many-anchors"] = "".join(f"a{i}: &a{i} {i}\n" for i in range(20_000))
    bodies["many-aliases"] = "a: &a x\nb: [" + ", ".join(["*a"] * 200_000) + "]\n"
    for n, (name, body) in enumerate(bodies.items()):
        expect = "alias bomb" if name in ("laughs-7", "laughs-9", "laughs-12") else None
        yield Case(f"alias/{name}", _ROLE_CYCLE[n % len(_ROLE_CYCLE)], body.encode(), expect)


_TAGS = [
    "!!python/object:os.system {}",
    "!!python/object/apply:os.system ['id']",
    "!!python/object/new:subprocess.Popen [['id']]",
    "!!python/name:os.system ''",
    "!!python/module:os ''",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!!pairs [a: 1]",
    "!!timestamp 2024-13-45",
    "!!str [1]",
    "!!map [1]",
    "!!seq {a: 1}",
    "!!null x",
    "!<tag:yaml.org,2002:str> x",
    "!<tag:example.com,2000:x> x",
    "!custom x",
    "! x",
    "!!value x",
    "!!merge x",
    "!vault |\n  secret",
    "!e!x y",
    "!" + "t" * 10_000 + " x",
]


def _tags() -> Iterator[Case]:
    for n, tag in enumerate(_TAGS):
        role = _ROLE_CYCLE[n % len(_ROLE_CYCLE)]
        yield Case(f"tag/value/{n}", role, f"a: {tag}\n".encode())
        yield Case(f"tag/key/{n}", role, f"? {tag}\n: 1\n".encode())
        yield Case(
            f"tag/directive/{n}", role, f"%TAG !e! tag:e.com,2000:\n---\na: {tag}\n".encode()
        )


def _encodings(rng: random.Random, files: list[tuple[str, str, bytes]]) -> Iterator[Case]:
    for name, role, data in files:
        at = rng.randrange(len(data))
        yield Case(
            f"utf8/{name}", role, data[:at] + bytes([rng.choice((0x80, 0xC3, 0xFF))]) + data[at:]
        )
        yield Case(f"nul/{name}", role, data[:at] + b"\x00" + data[at:])
        yield Case(f"bom/{name}", role, b"\xef\xbb\xbf" + data)
        yield Case(f"bom-inside/{name}", role, data[:at] + b"\xef\xbb\xbf" + data[at:])
        yield Case(f"crlf/{name}", role, data.replace(b"\n", b"\r\n"))
        yield Case(f"cr/{name}", role, data.replace(b"\n", b"\r"))
        yield Case(f"nel/{name}", role, data.replace(b"\n", "\u2028".encode()))
        yield Case(f"control/{name}", role, data[:at] + bytes([rng.randrange(1, 32)]) + data[at:])
        yield Case(f"surrogate/{name}", role, data[:at] + b"\xed\xa0\x80" + data[at:])
        yield Case(f"tabs/{name}", role, data.replace(b"  ", b"\t"))


def _long_lines() -> Iterator[Case]:
    bodies = {
        "one-line-flow": "{" + ", ".join(f"k{i}: v" for i in range(50_000)) + "}\n",
        "comment": "# " + "c" * 2_000_000 + "\na: 1\n",
        "spaces": "a: 1" + " " * 2_000_000 + "\n",
        "indent": " " * 1_000_000 + "a: 1\n",
        "dashes": "-" * 1_000_000 + "\n",
        "colons": ":" * 1_000_000 + "\n",
        "questions": "?" * 1_000_000 + "\n",
        "document-markers": "---\n" * 200_000,
        "directives": "%YAML 1.1\n" * 1_000 + "---\na: 1\n",
        "simple-key-1025": "k" * 1_025 + ": 1\n",
        "quotes": "'" * 1_000_001 + "\n",
    }
    for n, (name, body) in enumerate(bodies.items()):
        yield Case(f"long/{name}", _ROLE_CYCLE[n % len(_ROLE_CYCLE)], body.encode())


_MERGES = [
    "b: &b {x: 1}\nc:\n  <<: *b\n",
    "b: &b {x: 1}\nc:\n  <<: *b\n  <<: *b\n",
    "c:\n  <<: 5\n",
    "c:\n  <<: [1, 2]\n",
    "c:\n  <<: {x: 1}\n",
    "c:\n  <<: [{x: 1}, {x: 2}]\n",
    "c:\n  <<:\n    - <<: {y: 1}\n",
    "c: {<<: null}\n",
    "<<: {apiVersion: v1, kind: Secret, metadata: {name: s}, data: {a: b}}\n",
    "b: &b [1]\nc:\n  <<: *b\n",
    "c:\n  '<<': {x: 1}\n",
    "c:\n  !!merge <<: {x: 1}\n",
    "b: &b {x: 1}\nc:\n  << : *b\n  x: 2\n",
    "c:\n  <<: &self {x: 1}\n  y: *self\n",
]


def _merge_keys() -> Iterator[Case]:
    for n, body in enumerate(_MERGES):
        for role in ("runtime", "manifest", "default"):
            yield Case(f"merge/{n}/{role}", role, body.encode())
            yield Case(f"merge-spec/{n}/{role}", role, _under_spec(body).encode())


_SNIPPETS = [
    "- - - - - - x",
    "? ? ? ? x",
    "[[[[[[[[",
    "{{{{",
    "a: 0x_",
    "a: " + "9" * 5_000,
    "*x",
    "&x &y a",
    "!!python/object:os.system {}",
    "<<: *x",
    "\t- a",
    "'unterminated",
    '"\\xzz"',
    "%YAML 9.9",
    "--- !x",
    "|-9",
    "a: b: c",
    "? - ? - ? - x",
    "\x00",
    "\ufeff",
]


def _splices(rng: random.Random, files: list[tuple[str, str, bytes]], count: int) -> Iterator[Case]:
    for n in range(count):
        name, role, data = files[rng.randrange(len(files))]
        lines = data.split(b"\n")
        at = rng.randrange(len(lines) + 1)
        snippet = rng.choice(_SNIPPETS)
        indent = b" " * rng.choice((0, 2, 4, 6))
        lines[at:at] = [indent + snippet.encode() * rng.choice((1, 1, 2, 50, 300))]
        yield Case(f"splice/{name}#{n}", role, b"\n".join(lines))


# -- the worker ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    """What reading one case gave: its diagnostics (path, line, column, rule, message; the first
    twenty and their count), an error with its traceback, or a crash or hang seen by the parent."""

    index: int
    name: str
    seconds: float = 0.0
    diagnostics: list[list[Any]] = field(default_factory=list)
    diagnostic_count: int = 0
    error: str | None = None
    crash: str | None = None


def work(seed: int, indexes: list[int], file_budget: float) -> Iterator[str]:
    """Lines a worker prints: ``start <i>`` before each case, then its outcome as JSON. Each
    case is read as a whole commit by ``load_repo`` (the path of ``reconciler validate`` and
    of the daemon), the base repo's files parsed once (by the loader's cache)."""
    from reconciler.config.schema import SchemaChecker
    from reconciler.source.loader import ReadOptions, load_repo
    from reconciler.source.schemas import load_schemas

    cases = corpus(seed)
    checker = SchemaChecker(load_schemas())
    fields = getattr(ReadOptions, "__dataclass_fields__", {})
    options = ReadOptions(file_time_budget=file_budget) if "file_time_budget" in fields else None
    cache: dict[Any, Any] = {}
    base = base_files()
    for index in indexes:
        case = cases[index]
        yield f"start {index}"
        outcome = Outcome(index, case.name)
        started = time.perf_counter()
        try:
            tree = MemoryTree({**base, ROLES[case.role]: case.data})
            validation = load_repo("repo", options, checker, tree=tree, cache=cache)
            found = [[d.path, d.line, d.column, d.rule, d.message] for d in validation.diagnostics]
            outcome.diagnostic_count, outcome.diagnostics = len(found), found[:20]
        except Exception:  # what the corpus looks for: any exception is a failure
            outcome.error = traceback.format_exc()[-2_000:]
        outcome.seconds = time.perf_counter() - started
        yield json.dumps(asdict(outcome))


def _worker_main(args: list[str]) -> int:
    """The worker process: ``SEED FILE_BUDGET [CODE_DIR]``, case numbers on stdin. CODE_DIR
    reads the corpus with another checkout's ``reconciler`` (the benchmark's "before")."""
    if len(args) > 2:
        sys.path.insert(0, args[2])
    indexes = [int(i) for i in sys.stdin.read().split()]
    for line in work(int(args[0]), indexes, float(args[1])):
        print(line, flush=True)
    return 0


# -- the parent ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """How to run the corpus."""

    seed: int = SEED
    workers: int = 2
    batch: int = 200
    file_budget: float = 10.0
    #: A case without an answer after this long is a hang: its worker is killed.
    case_timeout: float = 60.0
    #: Another checkout's code to run instead of this one (``None``: this one).
    code: Path | None = None
    #: The numbers of the cases to read (``None``: every case of the corpus).
    only: tuple[int, ...] | None = None


def run_corpus(run: Run | None = None) -> list[Outcome]:
    """Every case's outcome (of the cases ``run.only`` names, when given), read by
    ``run.workers`` processes at a time, ``run.batch`` cases each. A worker that dies (a signal,
    a crash) or stops answering is recorded as a crash of its current case, and the rest of its
    batch goes on in a new worker."""
    run = run or Run()
    chosen = list(run.only) if run.only is not None else list(range(len(corpus(run.seed))))
    batches = [chosen[i : i + run.batch] for i in range(0, len(chosen), run.batch)]
    with ThreadPoolExecutor(run.workers) as pool:
        results = list(pool.map(lambda b: _run_batch(run, b), batches))
    return sorted((o for r in results for o in r), key=lambda o: o.index)


def _run_batch(run: Run, indexes: list[int]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    while indexes:
        done, crashed = _one_worker(run, indexes)
        outcomes.extend(done)
        finished = {o.index for o in done}
        if crashed is not None:
            outcomes.append(crashed)
            finished.add(crashed.index)
        remaining = [i for i in indexes if i not in finished]
        if remaining == indexes:  # the worker read nothing at all: do not loop forever
            outcomes.extend(Outcome(i, "?", crash="the worker did not start") for i in indexes)
            break
        indexes = remaining
    return outcomes


def _one_worker(run: Run, indexes: list[int]) -> tuple[list[Outcome], Outcome | None]:
    command = [sys.executable, str(Path(__file__)), "worker", str(run.seed), str(run.file_budget)]
    command += [str(run.code)] if run.code is not None else []
    with (
        tempfile.TemporaryFile("w+") as errors,
        subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
        ) as process,
    ):
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(" ".join(map(str, indexes)))
        process.stdin.close()
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_forward, args=(process.stdout, lines), daemon=True)
        reader.start()
        done, current, hung = _collect(lines, run.case_timeout)
        if hung:
            process.kill()
        status = process.wait()
        reader.join()
        errors.seek(0)
        stderr = errors.read()
    if current is None:
        return done, None
    why = "hang: no answer, killed" if hung else f"exit status {status}: {stderr[-600:]}"
    return done, Outcome(current, corpus(run.seed)[current].name, crash=why)


def _forward(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _collect(
    lines: queue.Queue[str | None], timeout: float
) -> tuple[list[Outcome], int | None, bool]:
    """The outcomes a worker printed, the case it was on when it stopped, whether it hung."""
    done: list[Outcome] = []
    current: int | None = None
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            return done, current, True
        if line is None:
            return done, current, False
        if line.startswith("start "):
            current = int(line.split()[1])
        elif line.startswith("{"):
            done.append(Outcome(**json.loads(line)))
            current = None


# -- the report ----------------------------------------------------------------------------------


def summary(outcomes: list[Outcome], cases: list[Case]) -> dict[str, Any]:
    """Corpus size, what happened to the files, the slowest file."""
    slowest = max(outcomes, key=lambda o: o.seconds)
    return {
        "files": len(cases),
        "bytes": sum(len(c.data) for c in cases),
        "accepted": sum(1 for o in outcomes if o.diagnostic_count == 0 and _clean(o)),
        "refused": sum(1 for o in outcomes if o.diagnostic_count > 0 and _clean(o)),
        "crashes": sum(1 for o in outcomes if o.crash is not None),
        "tracebacks": sum(1 for o in outcomes if o.error is not None),
        "over_budget": sum(1 for o in outcomes if any("s budget" in d[4] for d in o.diagnostics)),
        "total_seconds": sum(o.seconds for o in outcomes),
        "slowest": {"name": slowest.name, "seconds": slowest.seconds},
    }


def _clean(outcome: Outcome) -> bool:
    return outcome.crash is None and outcome.error is None


def main(argv: list[str]) -> int:
    """``python tests/support/hostile_corpus.py worker SEED FILE_BUDGET [CODE_DIR]`` (case numbers
    on stdin); the report is ``bench/hostile_yaml_bench.py``."""
    if argv[:1] == ["worker"]:
        return _worker_main(argv[1:])
    print(main.__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
