"""Module kinds and values at validate (reconciler.config.templates): one kind per version,
valuesFrom inside the repo, credentials never in values."""

from __future__ import annotations

from reconciler.source.loader import load_repo
from tests.support.charts import chart_module_files
from tests.support.repos import RepoFactory, channel_file, dump, runtime_file


def _errors(make_repo: RepoFactory, files: dict[str, str]) -> list[str]:
    validation = load_repo(make_repo(files))
    return [
        f"{d.path.split('/repo/')[-1]}:{d.line} {d.rule} {d.message}"
        for d in validation.diagnostics
    ]


def _repo(entry: dict[str, object], **extra: str) -> dict[str, str]:
    return {
        **chart_module_files("web"),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("rt", "regular", [{"name": "web", **entry}]),
        **extra,
    }


def test_a_version_folder_holds_one_kind(make_repo: RepoFactory) -> None:
    files = _repo({}, **{"modules/web/1.0.0/manifest.yaml": "kind: ConfigMap\n"})
    (error,) = _errors(make_repo, files)
    assert error.endswith(
        "modules/web/1.0.0/chart/Chart.yaml:1 C4 version folder holds manifest.yaml and "
        "chart/Chart.yaml: one kind per version (keep one of them)"
    )


def test_a_declared_kind_must_agree_with_the_folder(make_repo: RepoFactory) -> None:
    files = _repo({})
    module = files["modules/web/module.yaml"].replace(
        "spec:\n", "spec:\n  versions:\n    1.0.0:\n      kind: manifest\n"
    )
    files["modules/web/module.yaml"] = module
    (error,) = _errors(make_repo, files)
    assert "C4 version 1.0.0 is declared kind 'manifest' but its folder holds a chart" in error


def test_values_from_names_a_file_inside_the_repo(make_repo: RepoFactory) -> None:
    missing = _errors(make_repo, _repo({"valuesFrom": "values/nope.yaml"}))
    climbing = _errors(make_repo, _repo({"valuesFrom": "../outside.yaml"}))
    assert [e.split(" ", 1)[1] for e in missing] == [
        "C2 valuesFrom file 'values/nope.yaml' does not exist in the repo"
    ]
    assert "C6 valuesFrom must name a file inside the repo" in climbing[0]


def test_credentials_in_values_are_refused_wherever_they_are(make_repo: RepoFactory) -> None:
    files = _repo(
        {"valuesFrom": "values/rt.yaml", "values": {"db": {"password": "hunter22"}}},
        **{
            "values/rt.yaml": dump({"apiKey": "abcdef123456"}),
            "modules/web/1.0.0/values.yaml": dump({"auth": {"token": "s3cr3t-t0ken"}}),
        },
    )
    errors = _errors(make_repo, files)
    assert [e.split(" ")[1] for e in errors] == ["C6", "C6", "C6"]
    assert {e.split(":")[0].rsplit("/", 1)[-1] for e in errors} == {"values.yaml", "rt.yaml"}
