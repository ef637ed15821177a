"""toolworld's canonical JSON, short hashes and seed derivation: ``axisrl.domains.canon``'s, which every
domain shares (re-exported here, where the domains first found them)."""

from axisrl.domains.canon import SEED_BITS, canonical_json, derive_seed, short_hash

__all__ = ["SEED_BITS", "canonical_json", "derive_seed", "short_hash"]
