"""`tokenpace bench` in place of `vllm bench serve`: the command lines of docs/vllm.md (vLLM's own
documentation's, program name changed) run against the simulator on datasets made here in vLLM's
formats; every flag of vLLM's list is in docs/vllm-reference.md's table and accepted or refused by name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from docs.doc_commands import doc_commands

from tokenpace.app.serving.simproc import SimProcess
from tokenpace.cli.bench.bench_cmd import bench
from tokenpace.testing.procs import run_cli

DOC = Path(__file__).resolve().parents[3] / "docs" / "vllm-reference.md"  # its table of every flag
MAX_PROMPTS = "6"  # the documented counts, shrunk for a laptop-sized test

# Every flag of `vllm bench serve` 0.11 (serve.py and datasets.py), by name only.
VLLM_FLAGS = """
--append-result --backend --base-url --blazedit-max-distance --blazedit-min-distance --burstiness
--custom-output-len --custom-skip-chat-template --dataset-name --dataset-path --disable-tqdm
--endpoint --endpoint-type --goodput --header --hf-name --hf-output-len --hf-split --hf-subset
--host --ignore-eos --label --logprobs --lora-modules --max-concurrency --metadata
--metric-percentiles --min-p --model --no-oversample --no-stream --num-prompts --num-warmups
--percentile-metrics --port --prefix-repetition-num-prefixes --prefix-repetition-output-len
--prefix-repetition-prefix-len --prefix-repetition-suffix-len --profile --ramp-up-end-rps
--ramp-up-start-rps --ramp-up-strategy --random-batch-size --random-input-len
--random-mm-base-items-per-request --random-mm-bucket-config --random-mm-limit-mm-per-prompt
--random-mm-num-mm-items-range-ratio --random-output-len --random-prefix-len --random-range-ratio
--ready-check-timeout-sec --request-id-prefix --request-rate --result-dir --result-filename
--save-detailed --save-result --seed --served-model-name --sharegpt-output-len --sonnet-input-len
--sonnet-output-len --sonnet-prefix-len --spec-bench-category --spec-bench-output-len
--temperature --tokenizer --tokenizer-mode --top-k --top-p --trust-remote-code --use-beam-search
--extra-body
""".split()


def _vllm_commands() -> list[list[str]]:
    return [list(c.argv[1:]) for c in doc_commands() if c.where.startswith("docs/vllm.md")]


def _datasets(folder: Path) -> None:
    """ShareGPT JSON, a custom JSONL and a poem, in the formats vLLM reads."""
    conversations = [
        {
            "id": str(i),
            "conversations": [
                {"from": "human", "value": f"Tell me about the river number {i} and its towns."},
                {"from": "gpt", "value": " ".join(["water"] * (8 + i))},
            ],
        }
        for i in range(12)
    ]
    (folder / "ShareGPT_V3_unfiltered_cleaned_split.json").write_text(json.dumps(conversations))
    prompts = "".join(json.dumps({"prompt": f"What is the capital of country {i}?"}) + "\n" for i in range(8))
    (folder / "data.jsonl").write_text(prompts)
    poem = "".join(f"From fairest creatures we desire increase, line {i}\n" for i in range(60))
    (folder / "sonnet.txt").write_text(poem)


def _shrunk(args: list[str], port: int) -> list[str]:
    out = list(args)
    for flag, value in (("--num-prompts", MAX_PROMPTS), ("--port", str(port))):
        if flag in out:
            out[out.index(flag) + 1] = value
    return out


def test_the_docs_table_lists_every_vllm_flag_and_bench_accepts_each():
    table = {m for line in DOC.read_text().splitlines() if line.startswith("| `--")
             for m in re.findall(r"(--[a-z0-9-]+)", line.split("|")[1])}  # fmt: skip
    listed = table | {"--random-mm-base-items-per-request", "--random-mm-bucket-config",
                      "--random-mm-limit-mm-per-prompt", "--random-mm-num-mm-items-range-ratio"}  # fmt: skip
    assert sorted(set(VLLM_FLAGS) - listed) == []
    ours = {o for p in bench.params for o in p.opts}
    assert sorted(set(VLLM_FLAGS) - ours) == []


@pytest.fixture(scope="module")
def sim_port():
    with SimProcess(None) as url:
        yield int(url.rsplit(":", 1)[1].split("/")[0])


@pytest.mark.parametrize("args", _vllm_commands()[:7], ids=lambda a: a[a.index("--dataset-name") + 1])
def test_a_vllm_docs_command_line_runs_unchanged(args, sim_port, tmp_path):
    _datasets(tmp_path)
    argv = _shrunk(args, sim_port)
    r = run_cli("bench", *argv, "--out", "run.json", "--no-store", "-q", cwd=str(tmp_path), timeout=240)
    assert r.returncode in (0, 3), r.stderr  # 3: this shared machine could not keep up (timing only)
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["summary"]["counts"]["ok"] == int(MAX_PROMPTS if "--num-prompts" in args else 200)
    conditions = run["conditions"]
    backend = args[args.index("--backend") + 1] if "--backend" in args else "openai"
    assert conditions["api"] == {"openai-chat": "openai-chat"}.get(backend, "openai-completions")
    if "--port" in args:
        assert conditions["endpoint"] == f"http://127.0.0.1:{sim_port}/v1"
    if "--save-result" in args:
        folder = tmp_path / args[args.index("--result-dir") + 1] if "--result-dir" in args else tmp_path
        name = args[args.index("--result-filename") + 1] if "--result-filename" in args else None
        files = [folder / name] if name else sorted(folder.glob("vllm-*qps*.json"))
        (saved,) = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        model = args[args.index("--model") + 1]
        assert saved["model_id"] == saved["tokenizer_id"] == model and saved["completed"] == 6
        detailed = "--save-detailed" in args
        assert ("generated_texts" in saved) is detailed and ("ttfts" in saved) is detailed
        if detailed:
            assert len(saved["generated_texts"]) == 6 and all(t.strip() for t in saved["generated_texts"])
        if "--metadata" in args:
            assert (saved["gpu"], saved["tp"]) == ("h100", "1")
            assert run["summary"]["slo"] == {"ttft_ms": 500.0, "tpot_ms": 50.0}
            assert {"p50_e2el_ms", "p90_itl_ms", "p99_ttft_ms"} <= set(saved)


def test_random_dataset_lengths_ratio_and_prefix_follow_vllm(tmp_path):
    r = run_cli("bench", "--dataset-name", "random", "--random-input-len", "40", "--random-output-len", "8",
                "--random-range-ratio", "0.5", "--random-prefix-len", "10", "--num-prompts", "12",
                "--out", "r.json", "--no-store", "-q", cwd=str(tmp_path))  # fmt: skip
    assert r.returncode in (0, 3), r.stderr
    w = json.loads((tmp_path / "r.json").read_text())["conditions"]["workload"]
    # uniform in [n(1-r), n(1+r)] after one shared prefix of 10 tokens
    assert w["input_len"]["spec"] == "10 shared + 20:60" and w["output_len"]["spec"] == "4:12"


def test_append_result_appends_a_line(tmp_path):
    for _ in range(2):
        r = run_cli("bench", "--dataset-name", "random", "--random-input-len", "16", "--random-output-len",
                    "4", "--num-prompts", "3", "--append-result", "--result-filename", "all.json",
                    "--no-store", "-q", "--out", "r.json", cwd=str(tmp_path))  # fmt: skip
        assert r.returncode in (0, 3), r.stderr
    lines = (tmp_path / "all.json").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["completed"] == 3 for x in lines)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--profile"], "--profile"),
        (["--use-beam-search"], "--use-beam-search"),
        (["--lora-modules", "a", "b"], "--lora-modules"),
        (["--dataset-name", "hf", "--dataset-path", "x/y"], "--dataset-name hf"),
        (["--hf-split", "train"], "--hf-split"),
        (["--random-batch-size", "4"], "--random-batch-size"),
        (["--backend", "openai-audio"], "--backend openai-audio"),
        (["--dataset-name", "sharegpt"], "--dataset-path"),
        (["--backend", "openai-chat", "--endpoint", "/v1/completions"], "--endpoint"),
        (
            [
                "--ramp-up-strategy",
                "linear",
                "--ramp-up-start-rps",
                "1",
                "--ramp-up-end-rps",
                "5",
                "--request-rate",
                "3",
            ],
            "--request-rate",
        ),
        (
            [
                "--ramp-up-strategy",
                "exponential",
                "--ramp-up-start-rps",
                "0",
                "--ramp-up-end-rps",
                "5",
                "--num-prompts",
                "3",
            ],
            "--ramp-up-start-rps",
        ),
    ],
)
def test_a_flag_tokenpace_cannot_honour_is_refused_by_name(args, says):
    r = run_cli("bench", *args)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr


def test_a_sweep_takes_vllms_dataset_and_slo_flags_and_refuses_its_load_flags(tmp_path):
    r = run_cli("sweep", "--concurrency", "1,2", "--dataset-name", "random", "--random-input-len", "40",
                "--random-output-len", "4", "--num-prompts", "4", "--goodput", "ttft:500", "tpot:50",
                "--no-store", "-q", "--out", "s.json", cwd=str(tmp_path), timeout=240)  # fmt: skip
    assert r.returncode in (0, 3), r.stderr
    step = json.loads((tmp_path / "s.json").read_text())["steps"][0]
    assert step["conditions"]["api"] == "openai-completions"  # vLLM's default backend
    assert step["conditions"]["workload"]["input_len"]["spec"] == "40"
    assert step["summary"]["slo"] == {"ttft_ms": 500.0, "tpot_ms": 50.0}
    refused = run_cli("sweep", "--concurrency", "1,2", "--request-rate", "5")
    assert refused.returncode == 2 and "--request-rate: a sweep sets the load" in refused.stderr


def test_burstgpt_lengths_served_name_host_and_a_hub_tokenizer(sim_port, tmp_path):
    csv = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    csv += "".join(f"{i},ChatGPT,{20 + i},{0 if i == 2 else 4 + i},0,Conversation log\n" for i in range(6))
    (tmp_path / "burst.csv").write_text(csv)
    r = run_cli("bench", "--host", "127.0.0.1", "--port", str(sim_port), "--model", "org/Some-Model-7B",
                "--served-model-name", "m", "--tokenizer", "org/Some-Model-7B", "--dataset-name", "burstgpt",
                "--dataset-path", "burst.csv", "--num-prompts", "5", "--save-result", "--result-filename",
                "v.json", "--no-store", "-q", "--out", "run.json", cwd=str(tmp_path))  # fmt: skip
    assert r.returncode in (0, 3), r.stderr
    assert "--tokenizer org/Some-Model-7B: not a local file or folder" in r.stdout
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["conditions"]["model"] == "m" and run["conditions"]["workload"]["kind"] == "lengths_from_log"
    saved = json.loads((tmp_path / "v.json").read_text())
    assert (saved["model_id"], saved["tokenizer_id"], saved["backend"]) == ("org/Some-Model-7B",) * 2 + (
        "openai",
    )
