"""tokenpace gateway: a measuring pass-through proxy in front of OpenAI-compatible upstreams."""
