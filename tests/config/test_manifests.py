"""Module manifests are checked as Kubernetes would check them (nothing accepted that would then
fail for ever): `validate` refuses what the API server would refuse, or what made every reconcile
raise (`labels: [a]`, a CRD without `spec`, `replicas: one`), each at its place with a C1 diagnostic
that does not repeat the value; the operator's version label must be its folder's version (C4). Real
manifests keep validating: the sample repo (tests/project/test_sample_repo.py) and the
prometheus-operator corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.source.loader import ReadOptions, load_repo
from tests.support.repos import RepoFactory, channel_file, dump, module_files, runtime_file
from tests.support.tools import require_shared

MANIFEST = "modules/alpha/1.0.0/manifest.yaml"
OPERATOR = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: alpha-operator, labels: {app.kubernetes.io/version: "1.0.0"}}
"""


def _repo(make_repo: RepoFactory, extra: str, operator: str = OPERATOR) -> Path:
    """Module alpha 1.0.0 whose manifest is ``extra`` (first, so its lines count from 1), then
    the operator; a channel and a runtime using it."""
    files = {
        **module_files("alpha"),
        **channel_file("regular", {"alpha": "1.0.0"}),
        **runtime_file("one", "regular", [{"name": "alpha"}]),
        MANIFEST: f"{extra}---\n{operator}" if extra else operator,
    }
    return make_repo(files)


def _errors(root: Path, options: ReadOptions | None = None) -> list[str]:
    """``line:column: RULE message (pointer)`` of every diagnostic, paths checked."""
    validation = load_repo(root, options)
    found = []
    for diagnostic in validation.diagnostics:
        assert Path(diagnostic.path).relative_to(root).as_posix() == MANIFEST, diagnostic
        found.append(diagnostic.format().split(":", 1)[1])
    return found


# (a manifest document, the diagnostics it gives): one case per kind of mistake.
CASES: dict[str, tuple[str, list[str]]] = {
    "labels as a list": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: [a]\n",
        [
            "5:11: C1 metadata.labels must be a map of string keys to string values "
            "(/metadata/labels)"
        ],
    ),
    "CRD without spec": (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: widgets.example.io}\n",
        ["1:1: C1 a CustomResourceDefinition needs spec (a mapping) (/spec)"],
    ),
    "replicas as a word": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: helper}\nspec:\n  replicas: one\n",
        ["5:13: C1 spec.replicas must be an integer >= 0 (/spec/replicas)"],
    ),
    "negative replicas and a list as template": (
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n"
        "  replicas: -1\n  template: [a]\n",
        [
            "5:13: C1 spec.replicas must be an integer >= 0 (/spec/replicas)",
            "6:13: C1 spec.template must be a mapping (/spec/template)",
        ],
    ),
    "labels and annotations by Kubernetes' rules": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: Not_A_Label\n"
        "  labels:\n    -bad: x\n    ok: 'bad value!'\n    example.com/version: 1\n"
        "  annotations:\n    enabled: true\n",
        [
            "5:14: C1 metadata.namespace must be a DNS-1123 label: lower-case letters, digits "
            "and '-', starting and ending with a letter or digit, at most 63 characters "
            "(/metadata/namespace)",
            "7:5: C1 a label key is not valid: an optional DNS-1123 subdomain prefix and '/', "
            "then a name of at most 63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit (/metadata/labels)",
            "8:9: C1 label value is not valid: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (or empty) (/metadata/labels/ok)",
            "9:26: C1 label values must be strings (quote numbers and booleans) "
            "(/metadata/labels/example.com~1version)",
            "11:14: C1 annotation values must be strings (quote numbers and booleans) "
            "(/metadata/annotations/enabled)",
        ],
    ),
    "names by kind": (
        "apiVersion: v1\nkind: Service\nmetadata: {name: 9lives}\n---\n"
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n---\n"
        "apiVersion: v1\nkind: Secret\nmetadata: {name: My_Secret}\n---\n"
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        "metadata: {name: 'system:controller:alpha'}\n",
        [
            "3:18: C1 Kubernetes object needs metadata.name (a DNS-1035 label: lower-case "
            "letters, digits and '-', starting with a letter, ending with a letter or digit, "
            "at most 63 characters) (/metadata/name)",
            "7:18: C1 Kubernetes object needs metadata.name (a DNS-1123 label: lower-case "
            "letters, digits and '-', starting and ending with a letter or digit, at most 63 "
            "characters) (/metadata/name)",
            "11:18: C1 Kubernetes object needs metadata.name (a DNS-1123 subdomain: lower-case "
            "letters, digits, '-' and '.', starting and ending with a letter or digit, at most "
            "253 characters) (/metadata/name)",
        ],
    ),
    "CRD fields": (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: widgets.example.io}\nspec:\n  group: example.io\n"
        "  names: {kind: Widget}\n  scope: Global\n  versions:\n"
        "    - {name: v1, served: true, storage: true}\n"
        "    - {name: v2, served: yes please, storage: true}\n",
        [
            "6:10: C1 spec.names.plural must be a lower-case DNS-1035 label (e.g. widgets) "
            "(/spec/names/plural)",
            "7:10: C1 spec.scope must be Namespaced or Cluster (/spec/scope)",
            "9:5: C1 exactly one of spec.versions must have storage: true, found 2 "
            "(/spec/versions)",
            "10:26: C1 a version needs 'served' (true or false) (/spec/versions/1/served)",
        ],
    ),
    "CRD name and group": (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: gadgets.example.io}\nspec:\n  group: example.io\n"
        "  names: {kind: Widget, plural: widgets}\n  scope: Cluster\n  versions: []\n---\n"
        "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\n"
        "metadata: {name: olds.example.io}\n",
        [
            "3:18: C1 metadata.name of a CustomResourceDefinition must be "
            "<spec.names.plural>.<spec.group> (/metadata/name)",
            "8:13: C1 spec.versions must be a non-empty list (/spec/versions)",
            "10:13: C1 a CustomResourceDefinition must use apiVersion apiextensions.k8s.io/v1 "
            "(v1beta1 is not served since Kubernetes 1.22) (/apiVersion)",
        ],
    ),
    "containers": (
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: agent\n        - image: x\n"
        "        - just-a-string\n      initContainers: {name: init}\n",
        [
            "8:11: C1 a container needs an image (a string) "
            "(/spec/template/spec/containers/0/image)",
            "9:11: C1 a container needs a name (a DNS-1123 label: lower-case letters, digits "
            "and '-', starting and ending with a letter or digit, at most 63 characters) "
            "(/spec/template/spec/containers/1/name)",
            "10:11: C1 each of spec.template.spec.containers must be a mapping "
            "(/spec/template/spec/containers/2)",
            "11:23: C1 spec.template.spec.initContainers must be a list of containers "
            "(/spec/template/spec/initContainers)",
        ],
    ),
    "ConfigMap data that are not strings": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  a: {b: c}\n  l: [1]\n"
        "  num: 5\n  'x y': s\n  ok: text\nbinaryData: {bin: 'not base64!', good: aGk=}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata: [a]\n",
        [
            "5:6: C1 ConfigMap data values must be strings (quote numbers; a map or list as a "
            "text block) (/data/a)",
            "6:6: C1 ConfigMap data values must be strings (quote numbers; a map or list as a "
            "text block) (/data/l)",
            "7:8: C1 ConfigMap data values must be strings (quote numbers; a map or list as a "
            "text block) (/data/num)",
            "8:3: C1 a ConfigMap data key is not valid: letters, digits, '-', '_' or '.' (/data)",
            "10:19: C1 ConfigMap binaryData values must be base64 strings (/binaryData/bin)",
            "15:7: C1 ConfigMap data must be a map of keys to strings (/data)",
        ],
    ),
    "types of apiVersion, kind and metadata": (
        "apiVersion: 1\nkind: [ConfigMap]\nmetadata: c\n---\n"
        "apiVersion: apps/v1/extra\nkind: Config Map\nmetadata: {name: c}\n---\n- a list\n",
        [
            "1:1: C1 Kubernetes object has no 'apiVersion' (a string)",
            "1:1: C1 Kubernetes object has no 'kind' (a string)",
            "3:11: C1 Kubernetes object needs metadata (a mapping) with a name (/metadata)",
            "5:13: C1 apiVersion must be '<version>' or '<group>/<version>' (e.g. apps/v1) "
            "(/apiVersion)",
            "6:7: C1 kind must be a name of letters and digits (e.g. ConfigMap) (/kind)",
            "9:1: C1 a manifest document must be a Kubernetes object",
        ],
    ),
}


CASES["recreate where it is never done, or with another value"] = (
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: data\n"
    "  annotations: {reconciler.dev/recreate: on-immutable}\n"
    "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: d\n"
    "  annotations: {reconciler.dev/recreate: on-immutable}\n"
    "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n"
    "  annotations: {reconciler.dev/recreate: always}\n",
    [
        "5:42: C1 a Namespace is never recreated (deleting it takes what it holds along): drop "
        "reconciler.dev/recreate (/metadata/annotations/reconciler.dev~1recreate)",
        "11:42: C1 a PersistentVolumeClaim is never recreated (deleting it takes what it holds "
        "along): drop reconciler.dev/recreate (/metadata/annotations/reconciler.dev~1recreate)",
        "17:42: C1 reconciler.dev/recreate must be on-immutable "
        "(/metadata/annotations/reconciler.dev~1recreate)",
    ],
)


@pytest.mark.parametrize("case", list(CASES))
def test_each_mistake_is_refused_at_its_place(make_repo: RepoFactory, case: str) -> None:
    document, expected = CASES[case]

    assert _errors(_repo(make_repo, document)) == expected


def test_correct_objects_of_every_checked_kind_pass(make_repo: RepoFactory) -> None:
    document = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.io, labels: {example.com/part-of: alpha, empty: ''}}
spec:
  group: example.io
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - {name: v1alpha1, served: true, storage: false}
    - {name: v1, served: true, storage: true}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: tidy, namespace: alpha-jobs, annotations: {note: 'any text: 1, 2'}}
spec:
  jobTemplate:
    spec:
      backoffLimit: 0
      template:
        spec:
          containers: [{name: tidy, image: 'registry.example.io/tidy:1.0'}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: 'system:alpha:reader'}
"""
    assert _errors(_repo(make_repo, document)) == []


def test_a_refused_value_is_not_repeated(make_repo: RepoFactory) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    document = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        f"  name: {token}\n  labels:\n    {token}/x: v\n    k: {token}!\n"
    )
    root = _repo(make_repo, document)

    for output_format in ("text", "json"):
        result = CliRunner().invoke(cli, ["validate", str(root), "--format", output_format])
        assert result.exit_code == 1, result.output
        assert "metadata.name" in result.output or "/metadata/name" in result.output
        assert token not in result.output


def test_the_failures_that_made_every_reconcile_raise_are_refused_by_the_cli(
    make_repo: RepoFactory,
) -> None:
    """The three manifests of the issue: `validate` exits 1 naming each place, no traceback."""
    documents = [CASES[c][0] for c in ("labels as a list", "CRD without spec")]
    replicas = OPERATOR + "spec: {replicas: one}\n"
    root = _repo(make_repo, "---\n".join(documents), operator=replicas)

    result = CliRunner().invoke(cli, ["validate", str(root)])

    assert result.exit_code == 1
    assert "Traceback" not in result.output
    where = f"{root}/{MANIFEST}:"
    places = [line.split(" ", 2)[:2] for line in result.stdout.splitlines()]
    assert places == [
        [f"{where}5:11:", "C1"],
        [f"{where}7:1:", "C1"],
        [f"{where}14:18:", "C1"],
    ]


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ('"1.0.0"', []),
        ("v1.0.0", []),
        (
            "latest",
            [
                "3:70: C4 the operator's app.kubernetes.io/version label must be the version of "
                "its folder, 1.0.0 (the running version is read from it) "
                "(/metadata/labels/app.kubernetes.io~1version)"
            ],
        ),
        (
            "2.0.0",
            [
                "3:70: C4 the operator's app.kubernetes.io/version label must be the version of "
                "its folder, 1.0.0 (the running version is read from it) "
                "(/metadata/labels/app.kubernetes.io~1version)"
            ],
        ),
    ],
)
def test_the_operators_version_label_is_its_folders_version(
    make_repo: RepoFactory, label: str, expected: list[str]
) -> None:
    """Else every later sync would hold the module (a downgrade or an unknown version)."""
    operator = OPERATOR.replace('"1.0.0"', label)

    assert _errors(_repo(make_repo, "", operator=operator)) == expected


def test_the_prometheus_operator_corpus_validates_and_renders(
    make_repo: RepoFactory,
) -> None:
    """The upstream CRDs (an enum lists the plain scalar ``=``, read by kubectl as the string
    "=") are accepted as a module by the loader, ``validate`` and ``render``, within the time
    budgets (CPU time of the reading thread: about 1.2 s of the 10 s a file may take)."""
    corpus = require_shared("corpus", "prometheus-operator")  # real manifests, as CI has them
    texts = [p.read_text() for p in sorted(corpus.glob("*/*.yaml"))]
    assert len(texts) == 16
    module = {
        "apiVersion": "reconciler.dev/v1alpha1",
        "kind": "Module",
        "metadata": {"name": "prometheus"},
        "spec": {
            "namespace": "default",
            "operator": {"kind": "Deployment", "name": "prometheus-operator"},
        },
    }
    files = {
        "modules/prometheus/module.yaml": dump(module),
        "modules/prometheus/0.93.0/manifest.yaml": "---\n".join(texts),
        **channel_file("regular", {"prometheus": "0.93.0"}),
        **runtime_file("one", "regular", [{"name": "prometheus"}]),
    }
    root = make_repo(files)

    validation = load_repo(root)

    assert [d.format() for d in validation.diagnostics] == []
    assert validation.repo is not None
    objects = validation.repo.modules["prometheus"].versions["0.93.0"].objects
    kinds = [o["kind"] for o in objects]
    assert kinds.count("CustomResourceDefinition") == 10
    assert len(kinds) == 16
    enums = [
        item.get("enum")
        for o in objects
        for item in _walk(o)
        if isinstance(item, dict) and "=" in (item.get("enum") or [])
    ]
    assert enums, "the plain '=' of an enum is read as the string '='"
    validated = CliRunner().invoke(cli, ["validate", str(root)])
    rendered = CliRunner().invoke(cli, ["render", str(root), "--runtime", "one"])
    assert validated.exit_code == 0, validated.output
    assert rendered.exit_code == 0, rendered.output
    assert [d["kind"] for d in yaml.safe_load_all(rendered.output) if d].count(
        "CustomResourceDefinition"
    ) == 10


def _walk(value: Any) -> list[Any]:
    """Every mapping and list inside ``value``, itself included."""
    found = [value]
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    )
    for child in children:
        found.extend(_walk(child))
    return found


def test_the_default_configuration_is_never_recreated(make_repo: RepoFactory) -> None:
    root = _repo(make_repo, "")
    default = root / "modules/alpha/1.0.0/default.yaml"
    default.write_text(
        "apiVersion: example.io/v1\nkind: Alpha\nmetadata:\n  name: default\n"
        "  annotations: {reconciler.dev/recreate: on-immutable}\nspec: {}\n",
        encoding="utf-8",
    )

    found = [(Path(d.path).name, d.format().split(":", 1)[1]) for d in load_repo(root).diagnostics]

    assert found == [
        (
            "default.yaml",
            "5:42: C1 the default configuration is never recreated (created once, L3): drop "
            "reconciler.dev/recreate (/metadata/annotations/reconciler.dev~1recreate)",
        )
    ]


def test_a_module_opts_every_object_in_to_recreate_on_immutable(make_repo: RepoFactory) -> None:
    root = _repo(make_repo, "")
    module = root / "modules/alpha/module.yaml"
    module.write_text(
        module.read_text(encoding="utf-8").replace(
            "spec:\n", "spec:\n  recreateOnImmutable: true\n"
        ),
        encoding="utf-8",
    )

    validation = load_repo(root)

    assert validation.diagnostics == ()
    assert validation.repo is not None
    assert validation.repo.modules["alpha"].recreate_on_immutable
