from tokenpace.wire.sse import SseParser


def feed_all(parts):
    p = SseParser()
    out = []
    for part in parts:
        out.extend(p.feed(part))
    return out, p


def test_one_event_per_read():
    out, _ = feed_all([b'data: {"a":1}\n\n', b"data: [DONE]\n\n"])
    assert out == [b'{"a":1}', b"[DONE]"]


def test_event_split_across_reads_and_several_in_one():
    stream = b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n'
    for cut in range(1, len(stream)):
        out, p = feed_all([stream[:cut], stream[cut:]])
        assert out == [b'{"a":1}', b'{"b":2}', b"[DONE]"], cut
        assert p.pending == b""


def test_crlf_and_cr_line_ends_even_split_between_reads():
    stream = b'data: {"a":1}\r\n\r\ndata: x\r\r'
    for cut in range(1, len(stream)):
        out, _ = feed_all([stream[:cut], stream[cut:]])
        assert out == [b'{"a":1}', b"x"], cut


def test_comments_other_fields_and_empty_events_carry_nothing():
    out, _ = feed_all([b": keep-alive\n\nevent: message\nid: 7\ndata: hi\n\nretry: 10\n\n"])
    assert out == [b"hi"]


def test_multi_line_data_and_no_space_after_colon():
    out, _ = feed_all([b"data:line1\ndata: line2\n\n"])
    assert out == [b"line1\nline2"]


def test_unterminated_event_stays_pending():
    out, p = feed_all([b'data: {"a":1}\n'])
    assert out == [] and p.pending == b'data: {"a":1}\n'


def test_every_line_end_style_split_at_every_point_into_three_reads():
    for sep in (b"\n", b"\r\n", b"\r"):
        stream = b"data: a" + sep + sep + b": c" + sep + sep + b"data: b" + sep + b"data: c" + sep + sep
        for i in range(1, len(stream)):
            for j in range(i, len(stream)):
                out, p = feed_all([stream[:i], stream[i:j], stream[j:]])
                assert out == [b"a", b"b\nc"], (sep, i, j)
                assert p.pending == b"" and p.error is None


def test_byte_at_a_time():
    stream = b'data: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n'
    out, _ = feed_all([bytes([b]) for b in stream])
    assert out == [b'{"a":1}', b"[DONE]"]


def test_unfinished_event_is_kept_as_it_came_never_joined_or_rescanned():
    p = SseParser()
    assert p.feed(b"data: ") == []
    for _ in range(100):
        assert p.feed(b"x" * 1000) == []
    assert len(p._parts) == 101 and p.pending_len == 100_006  # pieces kept, not copied together
    assert p.feed(b"\n") == []
    assert p.feed(b"\ndata: y\n\n") == [b"x" * 100_000, b"y"]  # the blank line straddled two reads
    assert p.pending == b""


def test_an_event_over_the_bound_stops_the_parser_with_a_reason():
    p = SseParser(max_event=1024)
    assert p.feed(b"data: ok\n\n") == [b"ok"]
    out = []
    for _ in range(3):
        out += p.feed(b"data: " + b"x" * 500)
    assert out == [] and p.error == "event over 1 KiB without a blank line"
    assert p.feed(b"\n\ndata: later\n\n") == []  # stopped: the stream is broken
    assert p.pending == b""  # nothing held


def test_default_bound_is_one_mib_also_for_a_complete_event_in_one_read():
    p = SseParser()
    assert p.feed(b"data: " + b"x" * (1024 * 1024) + b"\n\n") == []
    assert p.error == "event over 1 MiB without a blank line"
    q = SseParser()
    assert q.feed(b"data: a\n\ndata: " + b"x" * (1024 * 1024 + 1)) == [b"a"]  # events before it count
    assert q.error is not None


def test_a_stream_opening_with_a_bom_keeps_its_first_event() -> None:
    """Issue 38, edge: an SSE stream starting with a UTF-8 BOM lost its first event."""
    from tokenpace.wire.sse import SseParser

    whole = b"\xef\xbb\xbfdata: one\n\ndata: two\n\n"
    assert SseParser().feed(whole) == [b"one", b"two"]
    for cut in range(1, len(whole)):  # the BOM split anywhere across reads
        p = SseParser()
        assert p.feed(whole[:cut]) + p.feed(whole[cut:]) == [b"one", b"two"], cut
    assert SseParser().feed(b"data: x\n\n\xef\xbb\xbfdata: y\n\n")[0] == b"x"  # only at the start


def test_a_flood_of_comment_lines_is_not_an_event_past_the_bound() -> None:
    """Issue 38, edge: a stream of comment lines was cut as 'event over 1 MiB'."""
    from tokenpace.wire.sse import SseParser

    p = SseParser(max_event=4096)
    got = []
    for _ in range(2000):  # 2000 x 20 bytes: ten times the bound, never a blank line
        got += p.feed(b": keep-alive ping\r\n")
    got += p.feed(b"data: tok\n\n")
    assert p.error is None and got == [b"tok"]
    assert p.pending_len == 0
    q = SseParser(max_event=4096)  # comments inside an event, split anywhere: the event is whole
    for part in (b"data: a\n: c1\n", b": c2\n", b"data: b\n", b"\n"):
        got = q.feed(part)
    assert got == [b"a\nb"]
    r = SseParser(max_event=4096)
    r.feed(b": " + b"x" * 5000)  # an endless comment line is still bounded
    assert r.error is not None
