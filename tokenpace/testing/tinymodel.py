"""A tiny llama-architecture model made from nothing, for testing tokenpace against real engines.

No hub, no torch: a byte-level BPE tokenizer trained (with ``tokenizers``) on generated text whose
words are tokenpace's synthetic prompt words, seeded random weights (numpy), saved both as a Hugging
Face folder (``safetensors``; for vLLM) and as a GGUF file (``gguf``; for llama.cpp), with q/k rows
permuted to llama.cpp's rope layout so that both files hold the same model.

Two properties make it a good yardstick:

- Every synthetic prompt word is one token with and without its leading space, so a prompt of N
  words is N tokens (plus the chat template's fixed overhead, ``TEMPLATE_OVERHEAD``).
- Only whole lowercase words with a leading space can be sampled: EOS, special tokens, lone bytes
  and punctuation get a logit of about -1000 (residual dimension 0 is a constant that no layer
  writes to, and the output head's column 0 is that bias). So every request yields exactly
  ``max_tokens`` tokens, one streamed chunk per token.

    python -m tokenpace.testing.tinymodel [DIR]   # prints DIR (default: the cache folder)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tokenpace.core.workload import WORDS

GENERATOR_VERSION = 1  # bump when the model changes: the cache folder is keyed by it
MODEL_NAME = "tokenpace-tiny-llama"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# Tokens the template adds around one user message:
# <|im_start|> user \n ... <|im_end|> \n <|im_start|> assistant \n
TEMPLATE_OVERHEAD = 8
_ROLES = ("system", "user", "assistant")
_SAMPLEABLE = re.compile(r"^ [a-z]+$")
_BIAS = 1000.0  # banned tokens' logit is about -_BIAS * (normalised dimension 0)


@dataclass(frozen=True, slots=True)
class TinyConfig:
    vocab_size: int = 4096  # upper bound; the trained vocabulary is smaller
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 512
    context: int = 8192
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    seed: int = 0


def default_dir() -> Path:
    cache = os.environ.get("TOKENPACE_CACHE") or os.path.join(Path.home(), ".cache", "tokenpace")
    return Path(cache) / f"tiny-llama-v{GENERATOR_VERSION}"


def _corpus(rng: np.random.Generator, lines: int = 4000) -> list[str]:
    """Text made of the prompt words, with some punctuation and numbers for a realistic vocabulary."""
    words = np.asarray(WORDS)
    out = []
    for _ in range(lines):
        n = int(rng.integers(4, 24))
        picked = list(words[rng.integers(0, len(words), size=n)])
        if rng.random() < 0.3:
            picked.insert(int(rng.integers(0, n)), str(int(rng.integers(0, 2000))))
        text = " ".join(picked)
        out.append(text[0].upper() + text[1:] + rng.choice([".", ",", "?", "!", ":"]))
    return out


def train_tokenizer(seed: int = 0, vocab_size: int = 4096) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    rng = np.random.default_rng(seed)
    # Every word alone (bare and after a space) at the start, so each becomes one token.
    words = [w for w in (*WORDS, *_ROLES) for _ in range(8)]
    tok.train_from_iterator([*words, *(" " + w for w in words), *_corpus(rng)], trainer=trainer)
    for word in (*WORDS, *_ROLES):
        for text in (word, " " + word):
            ids = tok.encode(text).ids
            if len(ids) != 1:
                raise RuntimeError(f"tiny tokenizer splits {text!r} into {len(ids)} tokens")
    return tok


def _vocab(tok: Any) -> list[str]:
    by_id = {i: t for t, i in tok.get_vocab(with_added_tokens=True).items()}
    return [by_id[i] for i in range(len(by_id))]


def banned_ids(tok: Any) -> np.ndarray:
    """Ids that must never be sampled: everything but whole lowercase words with a leading space."""
    ids = [i for i in range(tok.get_vocab_size()) if not _SAMPLEABLE.match(tok.decode([i]))]
    return np.asarray(ids, dtype=np.int64)


def make_weights(cfg: TinyConfig, vocab: int, banned: np.ndarray) -> dict[str, np.ndarray]:
    """Hugging Face LlamaForCausalLM tensors (float32), seeded."""
    rng = np.random.default_rng(cfg.seed + 1)
    head_dim = cfg.hidden // cfg.heads

    def rand(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    emb = rand(vocab, cfg.hidden)
    emb[:, 0] = 1.0  # the constant "bias" dimension
    w: dict[str, np.ndarray] = {"model.embed_tokens.weight": emb}
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        o_proj = rand(cfg.hidden, cfg.heads * head_dim)
        down = rand(cfg.hidden, cfg.ffn)
        o_proj[0, :] = 0.0  # no layer writes to dimension 0
        down[0, :] = 0.0
        w |= {
            p + "input_layernorm.weight": np.ones(cfg.hidden, np.float32),
            p + "self_attn.q_proj.weight": rand(cfg.heads * head_dim, cfg.hidden),
            p + "self_attn.k_proj.weight": rand(cfg.kv_heads * head_dim, cfg.hidden),
            p + "self_attn.v_proj.weight": rand(cfg.kv_heads * head_dim, cfg.hidden),
            p + "self_attn.o_proj.weight": o_proj,
            p + "post_attention_layernorm.weight": np.ones(cfg.hidden, np.float32),
            p + "mlp.gate_proj.weight": rand(cfg.ffn, cfg.hidden),
            p + "mlp.up_proj.weight": rand(cfg.ffn, cfg.hidden),
            p + "mlp.down_proj.weight": down,
        }
    head = rand(vocab, cfg.hidden, std=0.5)  # large enough that greedy decoding varies its words
    head[:, 0] = 0.0
    head[banned, 0] = -_BIAS
    w["model.norm.weight"] = np.ones(cfg.hidden, np.float32)
    w["lm_head.weight"] = head
    return w


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Hugging Face q/k rows to llama.cpp's rope layout (as convert_hf_to_gguf.py does)."""
    permuted: np.ndarray = w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2)
    return permuted.reshape(w.shape)


def write_hf(out: Path, cfg: TinyConfig, tok: Any, weights: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    tok.save(str(out / "tokenizer.json"))
    vocab = len(weights["lm_head.weight"])
    bos, eos = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": cfg.hidden,
        "intermediate_size": cfg.ffn,
        "num_hidden_layers": cfg.layers,
        "num_attention_heads": cfg.heads,
        "num_key_value_heads": cfg.kv_heads,
        "max_position_embeddings": cfg.context,
        "rms_norm_eps": cfg.rms_eps,
        "rope_theta": cfg.rope_theta,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "float32",
    }
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "model_max_length": cfg.context,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": bos, "eos_token_id": eos}))
    (out / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2))
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
    )


def write_gguf(path: Path, cfg: TinyConfig, tok: Any, weights: dict[str, np.ndarray]) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(MODEL_NAME)
    writer.add_context_length(cfg.context)
    writer.add_embedding_length(cfg.hidden)
    writer.add_block_count(cfg.layers)
    writer.add_feed_forward_length(cfg.ffn)
    writer.add_head_count(cfg.heads)
    writer.add_head_count_kv(cfg.kv_heads)
    writer.add_rope_dimension_count(cfg.hidden // cfg.heads)
    writer.add_rope_freq_base(cfg.rope_theta)
    writer.add_layer_norm_rms_eps(cfg.rms_eps)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    tokens = _vocab(tok)
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    specials = {tok.token_to_id(s) for s in SPECIAL_TOKENS}
    types = [gguf.TokenType.CONTROL if i in specials else gguf.TokenType.NORMAL for i in range(len(tokens))]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tok.token_to_id("<|endoftext|>"))
    writer.add_eos_token_id(tok.token_to_id("<|im_end|>"))
    writer.add_pad_token_id(tok.token_to_id("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    names = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    writer.add_tensor("token_embd.weight", weights["model.embed_tokens.weight"])
    for i in range(cfg.layers):
        for hf, gg in names.items():
            data = weights[f"model.layers.{i}.{hf}.weight"]
            if hf == "self_attn.q_proj":
                data = _permute(data, cfg.heads)
            elif hf == "self_attn.k_proj":
                data = _permute(data, cfg.kv_heads)
            writer.add_tensor(f"blk.{i}.{gg}.weight", np.ascontiguousarray(data))
    writer.add_tensor("output_norm.weight", weights["model.norm.weight"])
    writer.add_tensor("output.weight", weights["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def make_tiny_model(out: Path | None = None, cfg: TinyConfig | None = None) -> Path:
    """Write DIR/model.gguf and DIR/hf/ (idempotent: an existing complete folder is kept)."""
    cfg = cfg or TinyConfig()
    out = Path(out) if out else default_dir()
    if (out / "model.gguf").is_file() and (out / "hf" / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    tmp.chmod(0o755)
    try:
        tok = train_tokenizer(cfg.seed, cfg.vocab_size)
        weights = make_weights(cfg, tok.get_vocab_size(), banned_ids(tok))
        write_hf(tmp / "hf", cfg, tok, weights)
        write_gguf(tmp / "model.gguf", cfg, tok, weights)
        (tmp / "tinymodel.json").write_text(
            json.dumps({"generator_version": GENERATOR_VERSION, "config": asdict(cfg)}, indent=2)
        )
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        print(make_tiny_model(Path(args[0]) if args else None))
    except ImportError as exc:
        print(f"tinymodel: {exc} (pip install -e '.[dev]')", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
