"""The math+code training, held-out and placebo pools, with toolworld's row shape.

A structure is a (generator, tools, python semantics) triple, one S1 environment identity; an
environment is a structure under one answer grammar and one content seed (which problems its
tasks are). There is no separable world axis (the seed paper's dagger): every environment is in
the one world ``mathcode``, and ``d_env`` counts structures.

Training: every configured generator under every configured harness structure, except
``heldout.t1_envs`` structures withheld for T1, in one seeded order (so the first ``d_env``
identities mix generators and harnesses), each under every grammar and
``contents_per_variant`` contents. Held-out, contents from the ``heldout.seed`` stream:
T0 = a training (structure, grammar) with new content; T1 = a withheld structure (its generator
is trained under other harnesses); T2 = an unseen generator (the first ``heldout.t2_worlds`` of
``mathcode.heldout_generators``, each under ``heldout.t2_variants_per_world`` structures).
Placebo: the first training structure under ``placebo_contents`` contents.

Tasks are reasoning-gym problems drawn in index order from a dataset seeded by the content, kept
only if the reference (``finish`` with the oracle answer) verifies while a no-op finish and
another problem's answer do not; so ``tasks_per_env = n`` gives a prefix of ``2n``'s tasks.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import reasoning_gym
from reasoning_gym.dataset import ProceduralDataset
from reasoning_gym.factory import DATASETS

from axisrl.domains.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.mathcode.env import Harness, MathcodeEnv
from axisrl.domains.pool import Pool
from axisrl.domains.toolworld.model import FINISH

WORLD_ID = "mathcode"
GENERATORS = (
    "ab",
    "advanced_geometry",
    "base_conversion",
    "basic_arithmetic",
    "bf",
    "binary_alternation",
    "binary_matrix",
    "bitwise_arithmetic",
    "caesar_cipher",
    "calendar_arithmetic",
    "chain_sum",
    "codeio",
    "coin_flip",
    "complex_arithmetic",
    "count_primes",
    "course_schedule",
    "decimal_arithmetic",
    "decimal_chain_sum",
    "dice",
    "family_relationships",
    "fraction_simplification",
    "game_of_life",
    "gcd",
    "group_anagrams",
    "intermediate_integration",
    "isomorphic_strings",
    "jugs",
    "lcm",
    "leg_counting",
    "letter_counting",
    "letter_jumble",
    "manipulate_matrix",
    "number_filtering",
    "number_format",
    "number_sorting",
    "palindrome_generation",
    "palindrome_partitioning",
    "path_star",
    "polynomial_equations",
    "pool_matrix",
    "power_function",
    "products",
    "quantum_lock",
    "ransom_note",
    "rotate_matrix",
    "sentence_reordering",
    "shortest_path",
    "simple_equations",
    "simple_geometry",
    "simple_integration",
    "spell_backward",
    "spiral_matrix",
    "string_insertion",
    "string_manipulation",
    "string_synthesis",
    "word_ladder",
    "word_sequence_reversal",
    "word_sorting",
)
"""Training generators when ``mathcode.generators`` is null: reasoning-gym 0.1.25's arithmetic,
algebra, algorithmic, code, geometry, graphs and probability generators whose problems are
deterministic, JSON-serialisable and carry an oracle answer that their own scorer accepts while
other problems' answers fail (graph_color, gsm_symbolic and game_of_life_halting do not), less
``HELDOUT_GENERATORS``."""
HELDOUT_GENERATORS = (
    "time_intervals",
    "prime_factorization",
    "polynomial_multiplication",
    "rotten_oranges",
    "cryptarithm",
    "string_splitting",
    "largest_island",
    "count_bits",
)
"""Held-out (T2) generators when ``mathcode.heldout_generators`` is null: one or two per category
that has several, none with a yes/no answer."""
DATASET_SEED_MODULUS = 2**31
"""Reasoning-gym seeds item ``i`` with ``seed + i`` (numpy's global seed for some generators, which
must stay below 2**32)."""


def harness_structures(mc: Mapping[str, Any]) -> list[Harness]:
    """Every configured (tools, python semantics), in config order, with the first grammar."""
    structures = []
    for tools in mc["tools"]:
        if tools == "python":
            structures += [
                Harness(tools, state, output, mc["grammars"][0])
                for state, output in itertools.product(mc["python_states"], mc["python_outputs"])
            ]
        else:
            structures.append(Harness(tools, grammar=mc["grammars"][0]))
    return structures


def _with_grammar(harness: Harness, grammar: str) -> Harness:
    return Harness(harness.tools, harness.python_state, harness.python_output, grammar)


def generate_tasks(spec: Mapping[str, Any], env_id: str, n_tasks: int) -> list[dict[str, Any]]:
    """Up to ``n_tasks`` verified problems of the environment's generator and content (fewer only
    if ``4 n + 8`` draws are not enough)."""
    attempts = 4 * n_tasks + 8
    dataset = reasoning_gym.create_dataset(
        spec["generator"], seed=spec["content_seed"] % DATASET_SEED_MODULUS, size=attempts + 1
    )
    entries = _entries(dataset)
    harness = Harness.from_spec(spec)
    tasks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index in range(attempts):
        if len(tasks) == n_tasks:
            break
        entry, other = entries(index), entries(index + 1)
        if entry["answer"] is None:
            continue
        reference = [{"name": FINISH, "arguments": {"answer": harness.wrap(entry["answer"])}}]
        wrong = (
            [{"name": FINISH, "arguments": {"answer": harness.wrap(other["answer"])}}]
            if other["answer"] not in (None, entry["answer"])
            else None
        )
        goal = canonical_json(entry)
        task = {
            "task_id": short_hash([env_id, goal]),
            "env_id": env_id,
            "instruction": entry["question"],
            "goal": goal,
            "answer": entry["answer"],
        }
        if task["task_id"] in seen or not _passes_filter(spec, task, reference, wrong):
            continue
        seen.add(task["task_id"])
        tasks.append(
            {
                **task,
                "skeleton": spec["generator"],
                "skill_sig": short_hash([spec["generator"], entry["metadata"].get("difficulty")]),
                "verifier_sig": short_hash([spec["generator"], harness.grammar]),
                "reference": canonical_json(reference),
                "n_steps": 0,
                "n_distractors": None,
                "id_depth": None,
            }
        )
    return tasks


def _entries(dataset: ProceduralDataset) -> Callable[[int], dict[str, Any]]:
    """Item ``i`` after a JSON round trip (what the verifier will read back), each made once."""
    cache: dict[int, dict[str, Any]] = {}

    def entry(index: int) -> dict[str, Any]:
        if index not in cache:
            cache[index] = json.loads(canonical_json(dataset[index]))
        return cache[index]

    return entry


def _passes_filter(
    spec: Mapping[str, Any],
    task: Mapping[str, Any],
    reference: list[dict[str, Any]],
    wrong: list[dict[str, Any]] | None,
) -> bool:
    """The reference verifies; finishing without an answer and with another problem's answer fail."""

    def succeeds(calls: list[dict[str, Any]]) -> bool:
        env = MathcodeEnv(spec, task)
        env.reset()
        for call in calls:
            env.step(call)
        return env.verify().success

    return (
        succeeds(reference)
        and not succeeds([{"name": FINISH, "arguments": {}}])
        and (wrong is None or not succeeds(wrong))
    )


def _emit(
    cfg: Mapping[str, Any],
    generator: str,
    harness: Harness,
    variant_index: int,
    content_seed: int,
    split: str,
    tier: str | None,
    n_tasks: int,
    envs: list[dict[str, Any]],
    tasks: list[dict[str, Any]],
) -> None:
    """Append one environment row and its tasks."""
    spec = {
        "domain": "mathcode",
        "generator": generator,
        "harness": harness.as_dict(),
        "content_seed": content_seed,
        "max_steps": cfg["max_steps"],
        "python_timeout_s": cfg["mathcode"]["python_timeout_s"],
    }
    spec_json = canonical_json(spec)
    env_id = short_hash(spec_json)
    envs.append(
        {
            "env_id": env_id,
            "world_id": WORLD_ID,
            "world_seed": None,
            "variant_index": variant_index,
            "variant_seed": None,
            "content_seed": content_seed,
            "skin_index": 0,
            "split": split,
            "tier": tier,
            "n_tables": None,
            "n_tools": {"answer": 1}.get(harness.tools, 2),
            "n_rows": None,
            "edits": harness.edits(),
            "vocabulary": [],
            "spec": spec_json,
            "generator": generator,
        }
    )
    tasks += [{**task, "split": split, "tier": tier} for task in generate_tasks(spec, env_id, n_tasks)]


def _check_generators(train: Sequence[str], heldout: Sequence[str]) -> None:
    unknown = sorted((set(train) | set(heldout)) - set(DATASETS))
    if unknown:
        raise ValueError(f"not reasoning-gym generators: {unknown}")
    shared = sorted(set(train) & set(heldout))
    if shared:
        raise ValueError(f"held-out generators are also trained on: {shared}; T2 would leak")


def _withheld(order: list[tuple[str, Harness]], count: int, seed: int) -> set[int]:
    """Positions of ``count`` structures held out for T1, each leaving its generator trained under
    another harness (a seen generator with an unseen harness)."""
    remaining: dict[str, int] = {}
    for generator, _ in order:
        remaining[generator] = remaining.get(generator, 0) + 1
    chosen: set[int] = set()
    for position in random.Random(seed).sample(range(len(order)), len(order)):
        if len(chosen) == count:
            break
        generator = order[position][0]
        if remaining[generator] > 1:
            remaining[generator] -= 1
            chosen.add(position)
    if len(chosen) < count:
        raise ValueError(
            f"T1: only {len(chosen)} structures can be withheld with their generator still trained; "
            f"heldout.t1_envs asks for {count} (add harness options or generators)"
        )
    return chosen


def _contents(root: int, *parts: object) -> Iterator[int]:
    for c in itertools.count():
        yield derive_seed(root, *parts, c)


def generate_pool(cfg: Mapping[str, Any]) -> Pool:
    """The pools for a validated ``synthesize`` section (its ``mathcode`` subsection, ``seed``,
    ``tasks_per_env``, ``contents_per_variant``, ``max_steps``, ``placebo_*`` and ``heldout``)."""
    mc, held = cfg["mathcode"], cfg["heldout"]
    train_generators = list(mc["generators"] or GENERATORS)
    heldout_generators = list(mc["heldout_generators"] or HELDOUT_GENERATORS)
    _check_generators(train_generators, heldout_generators)
    root, hs = cfg["seed"], held["seed"]
    structures = harness_structures(mc)
    order = [(generator, harness) for generator in train_generators for harness in structures]
    random.Random(derive_seed(root, "order")).shuffle(order)
    withheld = _withheld(order, held["t1_envs"], derive_seed(root, "t1-withheld"))
    variant = {harness: k for k, harness in enumerate(structures)}
    pool = Pool()

    training = [pair for position, pair in enumerate(order) if position not in withheld]
    for generator, harness in training:
        for grammar in mc["grammars"]:
            contents = _contents(root, "content", generator, canonical_json(harness.as_dict()), grammar)
            for content_seed in itertools.islice(contents, cfg["contents_per_variant"]):
                _emit(
                    cfg,
                    generator,
                    _with_grammar(harness, grammar),
                    variant[harness],
                    content_seed,
                    "train",
                    None,
                    cfg["tasks_per_env"],
                    pool.envs,
                    pool.tasks,
                )

    generator, harness = training[0]
    for content_seed in itertools.islice(_contents(root, "placebo-content"), cfg["placebo_contents"]):
        _emit(
            cfg,
            generator,
            harness,
            variant[harness],
            content_seed,
            "placebo",
            None,
            cfg["placebo_tasks_per_env"],
            pool.placebo_envs,
            pool.placebo_tasks,
        )

    rng = random.Random(derive_seed(hs, "tiers"))
    n_tasks, out = held["tasks_per_env"], (pool.heldout_envs, pool.heldout_tasks)
    for i, (generator, harness) in enumerate(rng.choices(training, k=held["t0_envs"])):
        grammar = rng.choice(mc["grammars"])
        _emit(
            cfg,
            generator,
            _with_grammar(harness, grammar),
            variant[harness],
            derive_seed(hs, "t0-content", i),
            "heldout",
            "T0",
            n_tasks,
            *out,
        )
    for i, position in enumerate(sorted(withheld)):
        generator, harness = order[position]
        _emit(
            cfg,
            generator,
            _with_grammar(harness, rng.choice(mc["grammars"])),
            variant[harness],
            derive_seed(hs, "t1-content", i),
            "heldout",
            "T1",
            n_tasks,
            *out,
        )
    if held["t2_worlds"] > len(heldout_generators):
        raise ValueError(
            f"T2: heldout.t2_worlds={held['t2_worlds']} but only {len(heldout_generators)} "
            "held-out generators are configured"
        )
    per_generator = min(held["t2_variants_per_world"], len(structures))
    for i, generator in enumerate(heldout_generators[: held["t2_worlds"]]):
        for v, harness in enumerate(rng.sample(structures, per_generator)):
            _emit(
                cfg,
                generator,
                _with_grammar(harness, rng.choice(mc["grammars"])),
                variant[harness],
                derive_seed(hs, "t2-content", i, v),
                "heldout",
                "T2",
                n_tasks,
                *out,
            )
    return pool
