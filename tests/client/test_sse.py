from tokenpace.client.sse import SseParser


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
