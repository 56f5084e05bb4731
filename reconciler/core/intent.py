"""The inventories a lifecycle pass writes (pure): intended before, final after, rebuilt.

An install writes its module's inventory twice (L4, S1): the *intent* before any object, so a
crash never loses track of one (the new objects, every old one still to prune, the default
configuration about to be created), then the *final* inventory once the objects are applied.
A module whose inventory was deleted gets one *rebuilt* from our labels on its objects.

- :func:`inventory_intent` and :func:`default_configuration_intent` (L3 bookkeeping), with
  :func:`ready_before` (L15: the version last Ready, kept while an upgrade is under way);
- :func:`final_inventory`; :func:`rebuilt_inventory`; :func:`recorded_refs`.

Callers: the lifecycle's reads and its install stage (``reconciler.lifecycle``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from reconciler.core.hooks import delete_hooks_text
from reconciler.core.inventory import NEVER_READY, Inventory
from reconciler.core.live import labelled_ours
from reconciler.core.model import ANNOTATION_MODULE_VERSION, Strategy
from reconciler.core.objects import Body, ObjectRef
from reconciler.core.plan_values import DesiredModule


def recorded_refs(inventory: Inventory) -> list[ObjectRef]:
    """The objects an inventory lists, then its default configuration if it is not among them."""
    refs = list(inventory.objects)
    default = inventory.default_configuration
    if default is not None and default not in refs:
        refs.append(default)
    return refs


def rebuilt_inventory(
    runtime: str, module: DesiredModule, objects: Mapping[ObjectRef, Body], running: str | None
) -> Inventory | None:
    """An inventory that was deleted, rebuilt from our labels on the objects the module's
    manifest names (a copied label on another object does not count); ``None`` when none
    carries them."""
    ours = [
        ObjectRef.of(o.body)
        for o in module.objects
        if labelled_ours(objects.get(ObjectRef.of(o.body)), runtime, module.name)
    ]
    if not ours:
        return None
    annotations = (objects[ours[0]].get("metadata") or {}).get("annotations") or {}
    version = annotations.get(ANNOTATION_MODULE_VERSION) or running
    default = module.default_configuration
    default_ref = ObjectRef.of(default.body) if default else None
    default_ours = default_ref is not None and labelled_ours(
        objects.get(default_ref), runtime, module.name
    )
    return Inventory(
        runtime,
        module.name,
        str(version),
        module.strategy,
        tuple(ours),
        module.managed_kinds(),
        default_ref if default_ours else None,
        default_configuration_done=default_ours,
    )


def inventory_intent(
    runtime: str,
    module: DesiredModule,
    current: Inventory | None,
    commit: str,
    objects: Mapping[ObjectRef, Body],
    running: str | None = None,
) -> Inventory:
    """The inventory written before applying: the new objects plus every old one still to prune,
    the default configuration about to be created (recorded before it exists), and the version
    the module last became Ready at, kept (:func:`ready_before`). The commit moves on only when
    something else did."""
    wanted = [ObjectRef.of(o.body) for o in module.objects]
    old = [r for r in (current.objects if current else ()) if r not in wanted]
    default, done = default_configuration_intent(runtime, module, current, objects)
    fresh = Inventory(
        runtime,
        module.name,
        module.resolved.version,
        module.strategy,
        tuple(wanted + old),
        module.managed_kinds(),
        default,
        done,
        current.commit if current else commit,
        current.enforced if current else (),
        ready_before(module.resolved.version, current, running),
        delete_hooks_text(module.hooks),
    )
    if current is not None and fresh != current:
        fresh = replace(fresh, commit=commit or current.commit)
    return fresh


def ready_before(version: str, current: Inventory | None, running: str | None) -> str | None:
    """L15: the version a module applied at ``version`` last became Ready at, as its inventory
    keeps it until it is Ready again: the recorded one; for an inventory written before L15
    that moves to another version, its version (what it was taken to run, as before); for a
    module found installed by hand (L6), the version its operator says runs; else none
    (:data:`NEVER_READY`: a first install)."""
    if current is None:
        return running if running is not None else NEVER_READY
    if current.ready_version is None and current.version != version:
        return current.version
    return current.ready_version


def default_configuration_intent(
    runtime: str,
    module: DesiredModule,
    current: Inventory | None,
    objects: Mapping[ObjectRef, Body],
) -> tuple[ObjectRef | None, bool]:
    """L3 bookkeeping: (the default configuration that is ours, whether it was created).

    The reference is recorded *before* the object is created, "intended" (not done), so that
    a lost response or a kill right after the create can never make our object look like a
    user's. Then: intended and absent -> create it (once); intended and present with our labels
    -> it was created (the answer was lost): done; done -> never created again, even when a
    user deleted it; present before we intended anything -> a user's, never ours."""
    ref, done = (
        (current.default_configuration, current.default_configuration_done)
        if current
        else (None, False)
    )
    rendered = module.default_configuration
    if rendered is None or module.strategy is not Strategy.CREATE_AND_DELETE:
        return ref, done
    wanted = ObjectRef.of(rendered.body)
    body = objects.get(wanted)
    ours = body is not None and labelled_ours(body, runtime, module.name)
    if ref is None and ours:  # created by us, recorded by an older reconciler: ours again
        return wanted, True
    if ref is not None and not done and body is not None and not ours:
        return None, True  # a user made it between our intent and our create: keep theirs
    if done or ref is not None:  # L12: the same object at the apiVersion shipped now
        return (wanted if ref == wanted else ref), done
    if body is not None:  # someone made it already: keep theirs
        return None, True
    return wanted, False  # intended: created right after this inventory is written


def final_inventory(
    intent: Inventory, module: DesiredModule, kept: Sequence[ObjectRef] = ()
) -> Inventory:
    """The inventory once the module is applied: the new objects (and ``kept``, old ones that
    stay for now: a CRD with custom resources left), and an intended default configuration now
    created."""
    wanted = tuple(ObjectRef.of(o.body) for o in module.objects) + tuple(kept)
    done = intent.default_configuration_done or intent.default_configuration is not None
    return replace(intent, objects=wanted, default_configuration_done=done)
