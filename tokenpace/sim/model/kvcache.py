"""Paged KV cache with prefix caching, after vLLM's block pool.

Blocks hold `block_size` tokens. A full prompt block is registered under a hash of its tokens and of
every block before it, so equal hashes mean equal prefixes. Blocks nobody references stay in an LRU
free queue with their contents: a later request with the same prefix takes them back (a hit, no
prefill); a new allocation evicts from the head of the queue (least recently freed first).

The free queue is a list of block numbers read from a head index, with lazy removal: a hit that
takes a block back leaves its entry in place, and a block freed again is appended again; an entry is
live only if it is its block's last one and the block is unreferenced, and stale ones are skipped
when they reach the head (the same order an ordered dict's delete and re-insert would give, with
only list operations, which compiled code runs as C: sim/native.py). Bound: when the list holds more
than twice the blocks (read or stale entries), it is rebuilt from its live entries.
"""

from __future__ import annotations

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
        # Unreferenced blocks, least recently freed first (the next to be evicted), with stale
        # entries (see the module's doc); _entries[b]: b's entries in the queue.
        self._queue = list(range(num_blocks))
        self._head = 0  # entries before it are read
        self._entries = [1] * num_blocks
        self._num_free = num_blocks
        self.queries = 0  # prompt tokens looked up (vLLM's prefix_cache_queries)
        self.hits = 0  # of which found cached

    @property
    def num_free(self) -> int:
        return self._num_free

    @property
    def usage(self) -> float:
        return 1.0 - self._num_free / self.num_blocks

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def lookup(self, hashes: list[int]) -> list[int]:
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

    def count_free_among(self, blocks: list[int]) -> int:
        return sum(1 for b in blocks if self._ref[b] == 0)

    def touch(self, blocks: list[int]) -> None:
        """Take a reference on cached blocks (removing them from the free queue)."""
        ref = self._ref
        for b in blocks:
            if ref[b] == 0:
                self._num_free -= 1  # its queue entry goes stale
            ref[b] += 1

    def allocate(self, n: int) -> list[int]:
        if n > self._num_free:
            raise MemoryError("KV cache exhausted")  # callers check num_free first
        queue, entries, ref, hashes, cached = self._queue, self._entries, self._ref, self._hash, self._cached
        head = self._head
        out: list[int] = []
        while len(out) < n:  # `allocate_one` n times, inline (one call per prompt, not per block)
            b = queue[head]
            head += 1
            entries[b] -= 1
            if entries[b] or ref[b]:
                continue  # stale: taken back by a hit, or freed again later in the queue
            h = hashes[b]
            if h is not None:
                del cached[h]
                hashes[b] = None
            ref[b] = 1
            out.append(b)
        self._head = head
        self._num_free -= n
        return out

    def allocate_one(self) -> int:
        """The least recently freed block, its cached contents evicted, referenced once."""
        if not self._num_free:
            raise MemoryError("KV cache exhausted")  # callers check num_free first
        queue, entries, ref = self._queue, self._entries, self._ref
        head = self._head
        while True:
            b = queue[head]
            head += 1
            entries[b] -= 1
            if entries[b] == 0 and ref[b] == 0:
                break  # else stale: taken back by a hit, or freed again later in the queue
        self._head = head
        h = self._hash[b]
        if h is not None:  # evict its cached contents (a block's hash is cached under it: register)
            del self._cached[h]
            self._hash[b] = None
        ref[b] = 1
        self._num_free -= 1
        return b

    def free(self, blocks: list[int]) -> None:
        # Reverse order: a sequence's tail blocks are the least likely to be shared, so evict them first.
        ref, queue, entries = self._ref, self._queue, self._entries
        freed = 0
        for b in reversed(blocks):
            ref[b] -= 1
            if ref[b] == 0:
                queue.append(b)
                entries[b] += 1
                freed += 1
        self._num_free += freed
        if len(queue) > 2 * self.num_blocks:
            self._compact()

    def _compact(self) -> None:
        """Keep only live entries (each unreferenced block's last), in order."""
        ref, entries, queue = self._ref, self._entries, self._queue
        live: list[int] = []
        for b in reversed(queue[self._head :]):  # entries before the head are read (uncounted)
            if entries[b] > 0 and ref[b] == 0:
                live.append(b)
            entries[b] = 0  # later (earlier-queued) entries of b are stale
        live.reverse()
        for b in live:
            entries[b] = 1
        self._queue = live
        self._head = 0

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
