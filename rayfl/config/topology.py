"""The ``topology`` section of a run config: one union member per registered topology.

The section is a pydantic union discriminated on ``kind`` whose members are the
``config`` models of the topology plug-ins in :data:`rayfl.registry.TOPOLOGIES`
(:class:`rayfl.topology.TopologyPlugin`). A topology registered at run time
(:func:`rayfl.registry.register_topology`) joins the union the next time a
config is validated: :func:`refresh` rebuilds the field of
:class:`rayfl.config.RunConfig` when the registry has changed since it was
built, so no project file names the topologies.

Example:
    >>> from typing import get_args
    >>> [union_kind(m) for m in get_args(get_args(topology_union())[0])]
    ['star', 'hierarchical', 'd2d']
"""

from __future__ import annotations

from typing import Annotated, Any, Union, get_args

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

from rayfl import registry
from rayfl.config.numbers import union_kind
from rayfl.registry import topology_names, topology_of

__all__ = [
    "TOPOLOGY_DESCRIPTION",
    "default_topology",
    "mark_built",
    "refresh",
    "topology_sections",
    "topology_tags",
    "topology_union",
]

TOPOLOGY_DESCRIPTION = (
    "The network: `kind` names a registered topology (rayfl.registry.TOPOLOGIES): "
    "star (clients + cloud, the default; `flat`, its older name, is read as "
    "star), hierarchical (devices → edge "
    "actors → cloud, H2FDP, rayfl.hierarchy) or d2d (server-free, pFedWN, "
    "rayfl.d2d); the other fields are that topology's own."
)
"""The ``topology`` field's description (the docs' configuration page)."""

_BUILT: dict[type, tuple[tuple[str, str], ...]] = {}
"""Model → the registry's entries when its topology field was last built."""


def topology_sections() -> list[type[BaseModel]]:
    """Return the registered topologies' section models, in registration order.

    Raises:
        ValueError: If two topologies declare the same ``kind`` tag.
    """
    sections: list[type[BaseModel]] = []
    for name in topology_names():
        section = topology_of(name).config
        clash = [s for s in sections if union_kind(s) == union_kind(section)]
        if clash and clash[0] is not section:
            raise ValueError(
                f"topology {name!r}: its section's kind {union_kind(section)!r} "
                "is already another topology's"
            )
        if not clash:
            sections.append(section)
    return sections


def topology_tags() -> set[str]:
    """Return the ``kind`` tags of the union (pydantic puts them in error locations)."""
    tags: set[str] = set()
    for section in topology_sections():
        field = section.model_fields["kind"]
        tags.update(get_args(field.annotation) or (union_kind(section),))
    return tags


def topology_union() -> Any:
    """Return the ``topology`` field's type: the sections, discriminated on ``kind``."""
    sections = tuple(topology_sections())
    if len(sections) == 1:
        return sections[0]
    return Annotated[Union[sections], Field(discriminator="kind")]  # noqa: UP007


def default_topology() -> Any:
    """Return the default ``topology`` section: the first registered (the star's)."""
    return topology_of(topology_names()[0]).config()


def mark_built(model: type[BaseModel]) -> None:
    """Record that ``model``'s topology field is built from today's registry."""
    _BUILT[model] = tuple(registry.TOPOLOGIES.items())


def refresh(model: type[BaseModel], field: str = "topology") -> None:
    """Rebuild ``model``'s topology field if the registry changed since it was built.

    Args:
        model: A pydantic model with a topology field (:class:`RunConfig`).
        field: The field's name.
    """
    if _BUILT.get(model) == tuple(registry.TOPOLOGIES.items()):
        return
    old = model.model_fields[field]
    new = FieldInfo.from_annotated_attribute(
        topology_union(),
        Field(default_factory=default_topology, description=old.description),
    )
    model.model_fields[field] = new
    model.model_rebuild(force=True)
    mark_built(model)
