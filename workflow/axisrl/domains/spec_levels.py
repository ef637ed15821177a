"""A ``LevelSynthesizer`` (``axisrl.domains.levels``) made of the functions that draw a domain's levels:
what webworld's and repoworld's pool modules share. Each of them still binds its own functions and sizes
and defines its two entry points (``generate_pool``, ``generate_pretrain_pool``, which ``domains.load``
reads), so those few lines are alike in the two by design."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from axisrl.domains.canon import derive_seed, short_hash
from axisrl.domains.levels import EnvShape, Origin, Streams

Spec = dict[str, Any]


@dataclass
class SpecLevels:
    """A world is drawn once per seed (``sample_world(world_seed, world_size)``); an environment's spec
    is a structure with a content (``sample_content(structure, content_seed, pool, rows)``) under the
    skin of its world's seed, with the step limit ``max_steps`` (``build_spec``); a world's id hashes
    ``<domain>-world`` and its seed. The other members are ``LevelSynthesizer``'s, as given."""

    domain: str
    world_word: str
    world_size: tuple[int, int]
    rows: tuple[int, int]
    max_steps: int
    sample_world: Callable[[int, tuple[int, int]], Any]
    variant: Callable[[Any, int | None], tuple[Any, list[str]]]
    sample_content: Callable[[Any, int, str, tuple[int, int]], Any]
    build_spec: Callable[[Any, Any, str, int, int], Spec]
    reskin: Callable[[Spec, int], Spec]
    signatures: Callable[[Spec], dict[str, str]]
    env_id: Callable[[Spec], str]
    tasks: Callable[[Spec, str, int, int], Iterable[dict[str, Any]]]
    shape: Callable[[Spec], EnvShape]
    worlds: dict[int, Any] = field(default_factory=dict, repr=False)

    @property
    def streams(self) -> Streams:
        """Seed streams named ``<domain>-...``, tier P from the held-out lexicon with split ``train``."""
        return Streams(f"{self.domain}-")

    def world(self, world_seed: int) -> Any:
        if world_seed not in self.worlds:
            self.worlds[world_seed] = self.sample_world(world_seed, self.world_size)
        return self.worlds[world_seed]

    def world_id(self, world_seed: int) -> str:
        return short_hash([f"{self.domain}-world", world_seed])

    def spec(self, structure: Any, origin: Origin, pool: str) -> Spec:
        content = self.sample_content(structure, origin.content_seed, pool, self.rows)
        return self.build_spec(structure, content, pool, derive_seed(origin.world_seed, "skin"), self.max_steps)
