"""Shared by the gray-release tests: users through a gateway, each reporting business outcomes at a
rate that depends on the arm that served them (as a worse model would earn more complaints)."""

from __future__ import annotations

import asyncio
import random

import aiohttp
import orjson

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}


async def users_with_outcomes(
    url: str,
    admin_url: str,
    users: list[str],
    complaint_rate: dict[str, float],
    arm_of: dict[str, str],
    per_user: int = 2,
    seed: int = 1,
) -> dict[str, int]:
    """Each user sends ``per_user`` requests; every answer is ``accepted`` (by request id), and a
    share ``complaint_rate[arm]`` of each arm's users complain (by user id). Returns events sent."""
    rng = random.Random(seed)
    limit = asyncio.Semaphore(16)
    events: list[dict] = []
    async with aiohttp.ClientSession() as s:

        async def one(user: str) -> None:
            async with limit:
                for _ in range(per_user):
                    async with s.post(
                        url + "/v1/chat/completions", json=CHAT, headers={"x-user-id": user}
                    ) as r:
                        assert r.status == 200
                        await r.read()
                        events.append({"request_id": r.headers["x-request-id"], "event": "accepted"})

        await asyncio.gather(*(one(u) for u in users))
        complained = 0
        for user in users:
            if rng.random() < complaint_rate[arm_of[user]]:
                events.append({"user_id": user, "event": "complaint"})
                complained += 1
        async with s.post(admin_url + "/tokenpace/events", data=orjson.dumps(events)) as r:
            assert r.status == 200, await r.text()
            answer = await r.json()
        assert answer["unknown_request_ids"] == 0
    return {"events": len(events), "complaints": complained}
