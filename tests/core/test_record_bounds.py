"""What one request record may hold and believe: timestamps capped, implausible usage not believed."""

from __future__ import annotations

from tokenpace.core.metrics import summarize
from tokenpace.core.record import (
    MAX_OUTPUT_TOKENS,
    MAX_TOKENS_PER_CHUNK,
    TOKEN_TIMESTAMPS_KEPT,
    RequestRecord,
    TokenSource,
)


def streamed(chunks: int, usage: int | None) -> RequestRecord:
    rec = RequestRecord("r", sent_ns=1)
    for i in range(chunks):
        rec.note_token_chunk(1_000_000 * (i + 1), True)
    rec.output_tokens_server = usage
    rec.end_ns = 1_000_000 * (chunks + 1)
    return rec


def test_token_timestamps_are_capped_and_the_record_says_how_many_were_not_kept() -> None:
    rec = streamed(TOKEN_TIMESTAMPS_KEPT + 10, None)
    assert len(rec.token_ns) == TOKEN_TIMESTAMPS_KEPT and rec.token_ns_dropped == 10
    assert rec.output_tokens == TOKEN_TIMESTAMPS_KEPT + 10  # every chunk still counts
    assert rec.to_dict()["token_ns_dropped"] == 10
    assert RequestRecord.from_dict(rec.to_dict()).token_ns_dropped == 10


def test_usage_beyond_what_was_streamed_is_not_believed() -> None:
    assert streamed(10, 12).output_tokens == 12  # a few tokens per chunk: believed
    assert streamed(10, 10 * MAX_TOKENS_PER_CHUNK).output_tokens_source is TokenSource.SERVER
    for usage in (10 * MAX_TOKENS_PER_CHUNK + 1, 10**12, -5):
        rec = streamed(10, usage)
        assert rec.usage_implausible and rec.output_tokens == 10, usage
        assert rec.output_tokens_source is TokenSource.USAGE_IMPLAUSIBLE
    whole = RequestRecord("w", output_tokens_server=4000)  # not streamed: only the absolute cap
    assert not whole.usage_implausible and whole.output_tokens == 4000
    whole.output_tokens_server = MAX_OUTPUT_TOKENS + 1
    assert whole.usage_implausible and whole.output_tokens == 0


def test_a_lying_server_does_not_make_the_headline_throughput() -> None:
    records = [streamed(10, 10**12) for _ in range(4)]
    summary = summarize(records)
    assert summary.output_token_throughput < 1e6  # 40 tokens, not 4e12
    assert summary.tokens.output_sources == {"chunks_usage_implausible": 4}
    assert summary.tokens.compared == 0  # nothing believable to compare chunks with
