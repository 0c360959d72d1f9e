"""Paged KV cache with prefix caching, after vLLM's block pool.

Blocks hold `block_size` tokens. A full prompt block is registered under a hash of its tokens and of
every block before it, so equal hashes mean equal prefixes. Blocks nobody references stay in an LRU
free queue with their contents: a later request with the same prefix takes them back (a hit, no
prefill); a new allocation evicts from the head of the queue (least recently freed first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence


def block_hashes(tokens: Sequence[str], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of a token sequence."""
    out: list[int] = []
    parent = 0
    for i in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[i : i + block_size])))
        out.append(parent)
    return out


class KVCache:
    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        if num_blocks <= 0:
            raise ValueError("the KV cache needs at least one block")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self._ref = [0] * num_blocks
        self._hash: list[Hashable | None] = [None] * num_blocks
        self._cached: dict[Hashable, int] = {}
        # Unreferenced blocks, least recently freed first (the next to be evicted).
        self._free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self.queries = 0  # prompt tokens looked up (vLLM's prefix_cache_queries)
        self.hits = 0  # of which found cached

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def usage(self) -> float:
        return 1.0 - len(self._free) / self.num_blocks

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def lookup(self, hashes: Sequence[int]) -> list[int]:
        """Blocks of the longest cached prefix (references unchanged)."""
        found: list[int] = []
        if not self.prefix_caching:
            return found
        for h in hashes:
            b = self._cached.get(h)
            if b is None:
                break
            found.append(b)
        return found

    def count_free_among(self, blocks: Sequence[int]) -> int:
        return sum(1 for b in blocks if self._ref[b] == 0)

    def touch(self, blocks: Sequence[int]) -> None:
        """Take a reference on cached blocks (removing them from the free queue)."""
        for b in blocks:
            if self._ref[b] == 0:
                del self._free[b]
            self._ref[b] += 1

    def allocate(self, n: int) -> list[int]:
        if n > len(self._free):
            raise MemoryError("KV cache exhausted")  # callers check num_free first
        popitem, hashes, cached, ref = self._free.popitem, self._hash, self._cached, self._ref
        out = [popitem(False)[0] for _ in range(n)]
        for b in out:
            h = hashes[b]
            if h is not None:  # evict its cached contents (a block's hash is cached under it: register)
                del cached[h]
                hashes[b] = None
            ref[b] = 1
        return out

    def allocate_one(self) -> int:
        """`allocate(1)[0]` without the list: a decoding request crossing into a new block."""
        if not self._free:
            raise MemoryError("KV cache exhausted")  # callers check num_free first
        b = self._free.popitem(False)[0]
        h = self._hash[b]
        if h is not None:  # evict its cached contents
            del self._cached[h]
            self._hash[b] = None
        self._ref[b] = 1
        return b

    def free(self, blocks: Sequence[int]) -> None:
        # Reverse order: a sequence's tail blocks are the least likely to be shared, so evict them first.
        ref, free = self._ref, self._free
        for b in reversed(blocks):
            ref[b] -= 1
            if ref[b] == 0:
                free[b] = None

    # Invariant: _hash[b] is h only while _cached[h] is b (both set in register, both cleared when b is
    # evicted), so an eviction deletes without checking.
    def register(self, block: int, h: int) -> None:
        if self.prefix_caching and self._hash[block] is None and h not in self._cached:
            self._hash[block] = h
            self._cached[h] = block

    def register_many(self, blocks: Sequence[int], hashes: Sequence[int], start: int, stop: int) -> None:
        """`register(blocks[i], hashes[i])` for i in start..stop-1, in that order (one call per step)."""
        if not self.prefix_caching:
            return
        block_hash, cached = self._hash, self._cached
        for i in range(start, stop):
            block, h = blocks[i], hashes[i]
            if block_hash[block] is None and h not in cached:
                block_hash[block] = h
                cached[h] = block
