"""Resolution (reconciler.core.resolve): which modules a runtime gets, at which version, and why.

Resolution is pure, so these tests build the model directly: that also lets them hand the
resolver repos the validator would refuse, to check the problems it reports.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from reconciler.core.diagnostics import Pointer
from reconciler.core.model import (
    Channel,
    ClusterAccess,
    ConfigRepo,
    Module,
    ModuleRef,
    ModuleVersion,
    Runtime,
    Settings,
    Strategy,
)
from reconciler.core.resolve import (
    RESOLUTIONS,
    Inclusion,
    Resolution,
    ResolvedModule,
    VersionSource,
    order_by_dependencies,
    resolve_runtime,
)


def _module(
    name: str,
    versions: Sequence[str] = ("1.0.0", "2.0.0", "3.0.0"),
    *,
    depends_on: Sequence[str] = (),
    mandatory: bool = False,
) -> Module:
    return Module(
        name=name,
        namespace=f"{name}-system",
        operator_kind="Deployment",
        operator_name=f"{name}-operator",
        versions={v: ModuleVersion(v, ()) for v in versions},
        depends_on=tuple(depends_on),
        mandatory=mandatory,
    )


def _repo(modules: Sequence[Module], channels: Mapping[str, Mapping[str, str]]) -> ConfigRepo:
    return ConfigRepo(
        Settings(),
        {},
        {m.name: m for m in modules},
        {name: Channel(name, dict(served)) for name, served in channels.items()},
    )


def _runtime(*refs: ModuleRef, channel: str = "regular") -> Runtime:
    return Runtime("rt", channel, ClusterAccess(context="c"), tuple(refs))


def _resolve(repo: ConfigRepo, *refs: ModuleRef, channel: str = "regular") -> Resolution:
    return resolve_runtime(repo, _runtime(*refs, channel=channel))


def _one(resolution: Resolution, name: str) -> ResolvedModule:
    found = resolution.module(name)
    assert found is not None, [m.name for m in resolution.modules]
    return found


#: Module m has versions 1, 2 and 3; regular serves 1, fast serves 2; no channel serves 3.
PRECEDENCE = _repo([_module("m")], {"regular": {"m": "1.0.0"}, "fast": {"m": "2.0.0"}})


# -- versions: pin > module channel > runtime channel --------------------------------------------


@pytest.mark.parametrize(
    ("ref", "version", "source", "channel", "origin"),
    [
        (ModuleRef("m"), "1.0.0", VersionSource.RUNTIME_CHANNEL, "regular", "channel regular"),
        (
            ModuleRef("m", channel="fast"),
            "2.0.0",
            VersionSource.MODULE_CHANNEL,
            "fast",
            "channel fast (module override)",
        ),
        (
            ModuleRef("m", channel="fast", version="3.0.0"),
            "3.0.0",
            VersionSource.PIN,
            None,
            "pinned",
        ),
        (ModuleRef("m", version="1.0.0"), "1.0.0", VersionSource.PIN, None, "pinned"),
    ],
    ids=["runtime-channel", "module-channel", "pin-over-module-channel", "pin-over-runtime"],
)
def test_pin_beats_module_channel_beats_runtime_channel(
    ref: ModuleRef, version: str, source: VersionSource, channel: str | None, origin: str
) -> None:
    resolution = _resolve(PRECEDENCE, ref)

    assert resolution.problems == ()
    resolved = _one(resolution, "m")
    assert (resolved.version, resolved.source, resolved.channel) == (version, source, channel)
    assert resolved.origin() == origin
    assert resolved.inclusion is Inclusion.LISTED
    assert resolved.reason() == "listed"


def test_the_runtime_channel_is_the_default_of_every_module() -> None:
    resolution = _resolve(PRECEDENCE, ModuleRef("m"), channel="fast")

    assert _one(resolution, "m").version == "2.0.0"
    assert _one(resolution, "m").origin() == "channel fast"


def test_the_strategy_of_the_entry_is_kept() -> None:
    resolution = _resolve(PRECEDENCE, ModuleRef("m", strategy=Strategy.IGNORE))

    assert _one(resolution, "m").strategy is Strategy.IGNORE


# -- mandatory modules ---------------------------------------------------------------------------

MANDATORY = _repo(
    [_module("app"), _module("base", mandatory=True), _module("extra")],
    {"regular": {"app": "1.0.0", "base": "2.0.0", "extra": "1.0.0"}},
)


def test_mandatory_modules_are_added_to_every_runtime() -> None:
    resolution = _resolve(MANDATORY, ModuleRef("app"))

    assert [m.name for m in resolution.modules] == ["app", "base"]
    base = _one(resolution, "base")
    assert (base.inclusion, base.version, base.source) == (
        Inclusion.MANDATORY,
        "2.0.0",
        VersionSource.RUNTIME_CHANNEL,
    )
    assert base.reason() == "mandatory"
    assert base.strategy is Strategy.CREATE_AND_DELETE


def test_a_runtime_listing_nothing_still_gets_mandatory_modules() -> None:
    assert [m.name for m in _resolve(MANDATORY).modules] == ["base"]


def test_a_listed_mandatory_module_keeps_its_entry() -> None:
    resolution = _resolve(MANDATORY, ModuleRef("base", version="3.0.0"))

    base = _one(resolution, "base")
    assert (base.inclusion, base.version, base.source) == (
        Inclusion.LISTED,
        "3.0.0",
        VersionSource.PIN,
    )
    assert [m.name for m in resolution.modules] == ["base"]


# -- dependencies (C5) ---------------------------------------------------------------------------

DEPENDENCIES = _repo(
    [
        _module("web", depends_on=["api"]),
        _module("api", depends_on=["db", "cache"]),
        _module("worker", depends_on=["db"]),
        _module("db"),
        _module("cache"),
    ],
    {
        "regular": {"web": "1.0.0", "api": "1.0.0", "worker": "1.0.0", "db": "1.0.0"}
        | {"cache": "1.0.0"},
        "fast": {"web": "2.0.0", "api": "2.0.0", "worker": "2.0.0", "db": "2.0.0"}
        | {"cache": "2.0.0"},
    },
)


def test_dependencies_are_added_with_who_requires_them() -> None:
    resolution = _resolve(DEPENDENCIES, ModuleRef("web"))

    assert sorted(m.name for m in resolution.modules) == ["api", "cache", "db", "web"]
    api = _one(resolution, "api")
    assert (api.inclusion, api.required_by) == (Inclusion.DEPENDENCY, ("web",))
    assert api.reason() == "dependency of web"
    assert _one(resolution, "db").required_by == ("api",)  # transitively
    assert _one(resolution, "cache").required_by == ("api",)
    assert resolution.problems == ()


def test_a_dependency_shared_by_two_modules_names_both() -> None:
    resolution = _resolve(DEPENDENCIES, ModuleRef("worker"), ModuleRef("web"))

    db = _one(resolution, "db")
    assert db.required_by == ("api", "worker")
    assert db.reason() == "dependency of api, worker"


def test_a_dependency_gets_its_own_version_not_its_dependents_channel() -> None:
    resolution = _resolve(DEPENDENCIES, ModuleRef("web", channel="fast"))

    assert _one(resolution, "web").version == "2.0.0"
    api = _one(resolution, "api")
    assert (api.version, api.source, api.channel) == (
        "1.0.0",
        VersionSource.RUNTIME_CHANNEL,
        "regular",
    )


def test_a_listed_dependency_keeps_its_own_entry_and_version() -> None:
    resolution = _resolve(DEPENDENCIES, ModuleRef("web"), ModuleRef("db", version="3.0.0"))

    db = _one(resolution, "db")
    assert (db.inclusion, db.version, db.required_by) == (Inclusion.LISTED, "3.0.0", ())


def test_a_dependency_of_a_pinned_module_gets_the_runtime_channel_version() -> None:
    resolution = _resolve(DEPENDENCIES, ModuleRef("web", version="3.0.0"), channel="fast")

    api = _one(resolution, "api")
    assert (api.version, api.source, api.inclusion) == (
        "2.0.0",
        VersionSource.RUNTIME_CHANNEL,
        Inclusion.DEPENDENCY,
    )


def test_a_listed_dependency_keeps_its_own_strategy() -> None:
    ref = ModuleRef("db", version="3.0.0", strategy=Strategy.IGNORE)

    db = _one(_resolve(DEPENDENCIES, ModuleRef("web"), ref), "db")

    assert (db.version, db.inclusion, db.strategy) == ("3.0.0", Inclusion.LISTED, Strategy.IGNORE)


def test_a_dependency_the_channel_does_not_serve_is_a_problem_naming_the_dependent() -> None:
    repo = _repo(
        [_module("app", depends_on=["lib"]), _module("lib")], {"regular": {"app": "1.0.0"}}
    )

    resolution = _resolve(repo, ModuleRef("app"))

    assert [(p.rule, p.pointer, p.module, p.channel) for p in resolution.problems] == [
        ("C2", ("spec", "channel"), "lib", "regular")
    ]
    assert "a dependency of app" in resolution.problems[0].message
    assert [m.name for m in resolution.modules] == ["app"]


# -- order ---------------------------------------------------------------------------------------


def _assert_dependencies_first(resolution: Resolution, repo: ConfigRepo) -> None:
    names = [m.name for m in resolution.modules]
    for position, name in enumerate(names):
        for dep in repo.modules[name].depends_on:
            assert names.index(dep) < position, f"{name} before its dependency {dep}: {names}"


def test_modules_come_after_their_dependencies() -> None:
    resolution = _resolve(DEPENDENCIES, ModuleRef("web"), ModuleRef("worker"))

    assert len(resolution.modules) == 5
    _assert_dependencies_first(resolution, DEPENDENCIES)
    assert resolution.modules[-1].name == "web"  # everything else comes before it


def test_independent_modules_come_by_name_not_as_listed() -> None:
    repo = _repo(
        [_module(n) for n in ("zeta", "alpha", "mid")],
        {"regular": {"zeta": "1.0.0", "alpha": "1.0.0", "mid": "1.0.0"}},
    )

    resolution = _resolve(repo, ModuleRef("zeta"), ModuleRef("mid"), ModuleRef("alpha"))

    assert [m.name for m in resolution.modules] == ["alpha", "mid", "zeta"]


def test_a_chain_listed_backwards_comes_forwards() -> None:
    repo = _repo(
        [_module("a"), _module("b", depends_on=["a"]), _module("c", depends_on=["b"])],
        {"regular": {"a": "1.0.0", "b": "1.0.0", "c": "1.0.0"}},
    )

    resolution = _resolve(repo, ModuleRef("c"), ModuleRef("b"), ModuleRef("a"))

    assert [m.name for m in resolution.modules] == ["a", "b", "c"]


def test_dependency_order_then_names() -> None:
    names = ("zeta", "app", "mesh", "alpha")
    repo = _repo(
        [
            _module("zeta"),
            _module("app", depends_on=["zeta", "mesh"]),
            _module("mesh", depends_on=["zeta"]),
            _module("alpha"),
        ],
        {"regular": {n: "1.0.0" for n in names}},
    )

    resolution = _resolve(repo, *(ModuleRef(n) for n in ("app", "alpha", "mesh", "zeta")))

    assert [m.name for m in resolution.modules] == ["alpha", "zeta", "mesh", "app"]


def test_order_puts_cycle_members_last_by_name() -> None:
    catalog = {
        "x": _module("x", depends_on=["y"]),
        "y": _module("y", depends_on=["x"]),
        "free": _module("free"),
    }
    modules = [
        ResolvedModule(n, "1.0.0", VersionSource.PIN, None, Inclusion.LISTED) for n in catalog
    ]

    assert [m.name for m in order_by_dependencies(modules, catalog)] == ["free", "x", "y"]


# -- problems carry the JSON pointer of their field ----------------------------------------------

PROBLEMS = _repo(
    [_module("serverless", ("1.9.0", "1.10.0", "2.0.0")), _module("istio")],
    {"regular": {"serverless": "1.9.0", "istio": "1.0.0"}, "fast": {"istio": "2.0.0"}},
)


@pytest.mark.parametrize(
    ("refs", "pointer", "module", "text"),
    [
        (
            [ModuleRef("istio"), ModuleRef("serverles")],
            ("spec", "modules", 1, "name"),
            "serverles",
            "module 'serverles' does not exist; did you mean 'serverless'?",
        ),
        (
            [ModuleRef("istio", channel="fsat")],
            ("spec", "modules", 0, "channel"),
            "istio",
            "channel 'fsat' does not exist; did you mean 'fast'?",
        ),
        (
            [ModuleRef("istio"), ModuleRef("serverless", version="1.2.0")],
            ("spec", "modules", 1, "version"),
            "serverless",
            "module 'serverless' has no version 1.2.0 (versions: 1.9.0, 1.10.0, 2.0.0)",
        ),
        (
            [ModuleRef("serverless", channel="fast")],
            ("spec", "modules", 0),
            "serverless",
            "channel 'fast' serves no version of module 'serverless'",
        ),
    ],
    ids=["unknown-module", "unknown-module-channel", "unknown-version", "not-served"],
)
def test_problems_point_at_the_runtime_field_that_causes_them(
    refs: list[ModuleRef], pointer: Pointer, module: str, text: str
) -> None:
    resolution = _resolve(PROBLEMS, *refs)

    assert len(resolution.problems) == 1, resolution.problems
    problem = resolution.problems[0]
    assert (problem.rule, problem.pointer, problem.module) == ("C2", pointer, module)
    assert problem.message.startswith(text)
    assert resolution.module(module) is None
    # the runtime's other modules still resolve
    listed_ok = {r.name for r in refs} - {module}
    assert {m.name for m in resolution.modules} == listed_ok


def test_an_unknown_runtime_channel_is_reported_once_at_spec_channel() -> None:
    resolution = _resolve(PROBLEMS, ModuleRef("istio"), ModuleRef("serverless"), channel="regualr")

    assert [(p.rule, p.pointer, p.channel) for p in resolution.problems] == [
        ("C2", ("spec", "channel"), "regualr")
    ]
    assert resolution.problems[0].message == (
        "channel 'regualr' does not exist; did you mean 'regular'?"
    )
    assert resolution.modules == ()


def test_a_module_channel_override_resolves_even_when_the_runtime_channel_is_unknown() -> None:
    resolution = _resolve(PROBLEMS, ModuleRef("istio", channel="fast"), channel="nope")

    assert [p.pointer for p in resolution.problems] == [("spec", "channel")]
    assert _one(resolution, "istio").version == "2.0.0"


def test_a_resolution_without_the_module_answers_none() -> None:
    assert _resolve(PROBLEMS, ModuleRef("istio")).module("serverless") is None


# -- remembered by the repo ----------------------------------------------------------------------


def test_a_repo_remembers_its_resolutions_and_a_changed_repo_or_runtime_resolves_anew() -> None:
    repo = _repo([_module("m")], {"regular": {"m": "1.0.0"}, "fast": {"m": "2.0.0"}})
    runtime = _runtime(ModuleRef("m"))

    first = resolve_runtime(repo, runtime)
    assert resolve_runtime(repo, runtime) is first  # the brake and every stage ask again

    moved = _runtime(ModuleRef("m"), channel="fast")  # same name, another runtime: a new commit
    assert _one(resolve_runtime(repo, moved), "m").version == "2.0.0"
    bumped = replace(repo, channels={"regular": Channel("regular", {"m": "2.0.0"})})
    assert RESOLUTIONS.known(bumped, runtime) is None  # replace gives a repo remembering nothing
    assert _one(resolve_runtime(bumped, runtime), "m").version == "2.0.0"
    assert _one(resolve_runtime(repo, runtime), "m").version == "1.0.0"


def test_a_repos_resolutions_are_forgotten_with_the_repo() -> None:
    repo = _repo([_module("m")], {"regular": {"m": "1.0.0"}})
    gc.collect()  # earlier tests' repos are forgotten now, not during the count below
    before = len(RESOLUTIONS)
    resolve_runtime(repo, _runtime(ModuleRef("m")))
    assert len(RESOLUTIONS) == before + 1

    del repo
    gc.collect()

    assert len(RESOLUTIONS) == before
