"""A token counter from a local Hugging Face ``tokenizer.json`` (or a model folder holding one).
Nothing is downloaded; the server's own ``/tokenize`` is asked by ``tokenpace.client.tokenize``."""

from __future__ import annotations

from pathlib import Path

from tokenpace.core.workload.prompts import EncodeCounter, TokenizerError


def load_tokenizer(path: str | Path) -> EncodeCounter:
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.exists():
        raise TokenizerError(f"{path}: no tokenizer.json there (give the file or a model folder holding one)")
    try:
        from tokenizers import Tokenizer
    except ImportError:  # an optional extra: counts come from the server without it
        raise TokenizerError(
            "--tokenizer needs the 'tokenizers' package: pip install 'tokenpace[tokenizers]'"
        ) from None
    try:
        tok = Tokenizer.from_file(str(p))
    except Exception as exc:  # the library raises plain Exception for a bad file
        raise TokenizerError(f"{p}: not a Hugging Face tokenizer.json ({str(exc)[:120]})") from None

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    return EncodeCounter(encode, str(p))
