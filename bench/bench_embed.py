"""Throughput of the packaged embedding model on short task-like instructions (prints numbers; not a test).

Run: python bench/bench_embed.py [--texts 1000] [--batch-size 64]
It measures load time once, then encodes the same texts with torch's default thread count and with 1 thread.
"""

import argparse
import os
import platform
import random
import time

import numpy as np
import torch

from axisrl.embedding import PACKAGED_MODEL, embed_texts

_TEMPLATES = (
    "Set the quantity of order {order} for customer {customer} to {number}.",
    "Cancel order {order} placed by {customer} and refund the payment.",
    "Change the shipping address of order {order} to {number} {street} Street.",
    "Add {number} units of {product} to the cart of customer {customer}.",
    "Find all open tickets assigned to {customer} and close the oldest one.",
    "Move the meeting with {customer} on {day} to {number} pm.",
    "Update the price of {product} to {number} dollars in the {store} catalogue.",
    "Create a new account for {customer} with the email {customer_lower}@example.com.",
)
_CUSTOMERS = ("Zarvel", "Imrana", "Oskett", "Bellamy", "Quorra", "Tessin", "Vadim", "Yulenne")
_PRODUCTS = ("blue kettle", "desk lamp", "usb cable", "hiking boots", "green tea", "notebook")
_STREETS = ("Elm", "Harbor", "Mill", "Station", "Cedar")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_STORES = ("north", "south", "online")


def task_instructions(count: int, seed: int = 0) -> list[str]:
    """Template renderings with random entity IDs, like the study's generated task instructions."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        customer = rng.choice(_CUSTOMERS)
        texts.append(
            rng.choice(_TEMPLATES).format(
                order=f"{''.join(rng.choices('ABCDEFGHJKLMNPQRSTUVWXYZ', k=3))}-{rng.randrange(10_000):04d}",
                customer=customer,
                customer_lower=customer.lower(),
                number=rng.randrange(1, 100),
                product=rng.choice(_PRODUCTS),
                street=rng.choice(_STREETS),
                day=rng.choice(_DAYS),
                store=rng.choice(_STORES),
            )
        )
    return texts


def timed_throughput(texts: list[str], batch_size: int) -> tuple[float, np.ndarray]:
    """Texts per second of one full encode, and the embeddings."""
    start = time.perf_counter()
    embeddings = embed_texts(texts, PACKAGED_MODEL, batch_size)
    return len(texts) / (time.perf_counter() - start), embeddings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    texts = task_instructions(args.texts)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, {args.texts} texts")
    start = time.perf_counter()
    embed_texts(texts[:1], PACKAGED_MODEL)
    print(f"load (import + weights + first text): {time.perf_counter() - start:.1f} s")

    default_threads = torch.get_num_threads()
    for threads in (default_threads, 1):
        torch.set_num_threads(threads)
        rate, embeddings = timed_throughput(texts, args.batch_size)
        print(f"threads={threads}: {rate:.0f} texts/s")
    torch.set_num_threads(default_threads)

    print(
        f"shape {embeddings.shape}, dtype {embeddings.dtype}, deterministic rerun: "
        f"{np.array_equal(embeddings, embed_texts(texts, PACKAGED_MODEL, args.batch_size))}"
    )
    energy = np.linalg.eigvalsh(embeddings.T.astype(np.float64) @ embeddings)[::-1]
    cumulative = np.cumsum(energy) / energy.sum()
    print(
        "energy in the first k principal axes (uncentred): "
        + ", ".join(f"k={k}: {cumulative[k - 1]:.2f}" for k in (8, 32, 64, 128, 256))
    )
    same_template = [
        _TEMPLATES[0].format(order="ABX-0042", customer="Zarvel", number=7),
        _TEMPLATES[0].format(order="QRT-9917", customer="Imrana", number=31),
    ]
    first, second = embed_texts(same_template, PACKAGED_MODEL)
    print(
        f"cosine distance of two renderings of one template (other order ID, customer, number): "
        f"{1 - float(first @ second):.3f}"
    )


if __name__ == "__main__":
    main()
