#!/usr/bin/env python3
"""Check and benchmark the SGLang adapter: the same greedy prompts with no speculation, SGLang's own
NGRAM, and specplug's algorithms, in interleaved rounds of one run.

    python scripts/gpu_check_sglang.py --model Qwen/Qwen3-0.6B                    # a GPU machine
    nice .venv-sglang/bin/python scripts/gpu_check_sglang.py --device cpu \\
        --model .models/smollm2-135m-fp32 --prompts 2 --tokens 64 --rounds 3      # this CPU (test harness)
    python scripts/gpu_check_sglang.py --model meta-llama/Llama-3.1-8B-Instruct \\
        --eagle-head yuhuili/EAGLE-LLaMA3.1-Instruct-8B --only EAGLE SPECPLUG_HYBRID_EAGLE --width 4
    python scripts/gpu_check_sglang.py --model Qwen/Qwen3-8B --eagle-head AngelSlim/Qwen3-8B_eagle3 \\
        --eagle3 --only EAGLE SPECPLUG_HYBRID_EAGLE --width 4                      # an EAGLE-3 head
    python scripts/gpu_check_sglang.py --model XiaomiMiMo/MiMo-7B-RL --nextn \\
        --trust-remote-code --only EAGLE SPECPLUG_HYBRID_EAGLE --width 4           # the model's own MTP layers

The prompts are the first user turns of the shipped code-edit prompt set (specplug.lab). Each
configuration is one ``python -m sglang.launch_server`` started once (engine starts are slow) and
kept for every round; a round sends every configuration the same ``--prompts`` prompts, one
request at a time, in an order that rotates from round to round, and each round takes the next
prompts of the set (with the same prompts every round, methods that keep earlier requests' outputs,
SGLang's NGRAM corpus and suffix's cache, would draft round 2 from round 1's identical answers). Per configuration it prints the median over rounds of
tokens/s, of the speedup against plain in the same round (with the lowest and highest round: the
noise), SGLang's acceptance over all rounds (drafted tokens accepted per verify step, tokens per
verify step) and
whether every output equals the plain run token for token. ``--device cpu`` puts
tests/sglang/harness (test code: a stand-in sgl_kernel and the torch-native TARGET_VERIFY branch)
on the servers' path. Exit status 1 when an output differs; 2 when SGLang is missing.

With ``--eagle-head PATH`` (an EAGLE/EAGLE-3 head, or an MTP model's own path) two more
configurations run: SGLang's ``EAGLE`` (``EAGLE3`` with ``--eagle3``) and specplug's hybrid over
it, ``SPECPLUG_HYBRID_EAGLE`` (``_EAGLE3``), both as chains of ``--width - 1`` head steps. With
``--nextn`` those two run SGLang's ``NEXTN`` and ``SPECPLUG_HYBRID_NEXTN`` instead (under the same
two labels), the draft being the model's own MTP layers (``--eagle-head`` defaults to ``--model``). The
hybrid's own counters (drafts by source, ``overlaid_rows``: rows where the lookup's chain went to
verify in the head's place, faults) are printed from its stats file; exit status 1 also when the
overlay never ran, never overlaid a row, or faulted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from specplug.lab.local_server import free_port, wait_until_ready

ROOT = Path(__file__).resolve().parents[1]
#: label -> server flags beyond the model's; SPECPLUG_SUFFIX twice: chains only, and real trees
CONFIGS = {
    "plain": [],
    "NGRAM": ["--speculative-algorithm", "NGRAM"],
    "SPECPLUG_SUFFIX chain": ["--speculative-algorithm", "SPECPLUG_SUFFIX", "--speculative-ngram-max-bfs-breadth", "1"],
    "SPECPLUG_SUFFIX tree": ["--speculative-algorithm", "SPECPLUG_SUFFIX"],
    "SPECPLUG_ADAPTIVE": ["--speculative-algorithm", "SPECPLUG_ADAPTIVE"],
}
STARTUP_S = 600
#: the configurations on an EAGLE head (--eagle-head): SGLang's EAGLE, and the hybrid overlaid on it
EAGLE_LABELS = ("EAGLE", "SPECPLUG_HYBRID_EAGLE")


def _eagle_configs(head: str, drafter: str, width: int) -> dict[str, list[str]]:
    """SGLang's ``drafter`` (EAGLE, EAGLE3 or NEXTN) and the hybrid over it, as chains of ``width - 1`` steps."""
    chain = ["--speculative-draft-model-path", head, "--speculative-eagle-topk", "1",
             "--speculative-num-steps", str(width - 1)]
    return {"EAGLE": ["--speculative-algorithm", drafter, *chain],
            "SPECPLUG_HYBRID_EAGLE": ["--speculative-algorithm", "SPECPLUG_HYBRID_" + drafter, *chain]}


def _prompts(model: str, count: int) -> list[str]:
    from transformers import AutoTokenizer

    from specplug.lab.bench._tracegen import first_user_turns

    tokenizer = AutoTokenizer.from_pretrained(model)
    return [tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
            for chat in first_user_turns("code-edit", count)]


def _server_flags(device: str, trust_remote_code: bool = False) -> list[str]:
    flags = ["--log-level", "warning", "--sleep-on-idle"]  # an idle server must not take the CPU from a busy one
    if trust_remote_code:  # checkpoints whose config class ships with them (MiMo's)
        flags.append("--trust-remote-code")
    if device == "cpu":
        flags += ["--device", "cpu", "--attention-backend", "torch_native", "--dtype", "float32",
                  "--mem-fraction-static", "0.2", "--max-total-tokens", "8192", "--max-running-requests", "4",
                  "--disable-cuda-graph", "--grammar-backend", "none"]
    return flags


def _post(port: int, payload: dict) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/generate", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=1800) as response:
        return json.loads(response.read())


class Server:
    """One ``launch_server`` of one configuration, kept for every round."""

    def __init__(self, label: str, flags: list[str], model: str, device: str, width: int,
                 env: dict[str, str] | None = None, trust_remote_code: bool = False) -> None:
        self.label = label
        self.port = free_port()
        spec = ["--speculative-num-draft-tokens", str(width)] if flags else []
        command = [sys.executable, "-m", "sglang.launch_server", "--model-path", model, "--port", str(self.port),
                   *flags, *spec, *_server_flags(device, trust_remote_code)]
        self.log = tempfile.NamedTemporaryFile("w+", prefix="sglang-bench-", suffix=".log", delete=False)
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        env={**os.environ, **(env or {})})

    def wait(self) -> None:
        wait_until_ready(self.process, f"http://127.0.0.1:{self.port}/health", name=f"{self.label}: launch_server",
                         timeout_s=STARTUP_S, log=self.log.name)

    def run(self, prompts: list[str], tokens: int) -> dict:
        params = {"temperature": 0, "max_new_tokens": tokens}
        started = time.perf_counter()
        outputs = [_post(self.port, {"text": prompt, "sampling_params": params}) for prompt in prompts]
        elapsed = time.perf_counter() - started
        metas = [out["meta_info"] for out in outputs]
        generated = sum(meta["completion_tokens"] for meta in metas)
        verify = sum(meta.get("spec_verify_ct", 0) for meta in metas)
        return {
            "tokens_per_s": generated / elapsed,
            "generated": generated,
            "verify_steps": verify,
            "accepted": sum(meta.get("spec_num_correct_drafts", 0) for meta in metas),
            "texts": [out["text"] for out in outputs],
        }

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _load() -> str:
    try:
        return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load average unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--prompts", type=int, default=3, help="prompts per round (each round its own)")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--width", type=int, default=8, help="--speculative-num-draft-tokens")
    parser.add_argument("--only", nargs="*", choices=[*CONFIGS, *EAGLE_LABELS],
                        help="configurations to run (plain always runs)")
    parser.add_argument("--eagle-head", help="an EAGLE head (or an MTP model's own path): adds EAGLE and the hybrid over it")
    parser.add_argument("--eagle3", action="store_true", help="the head is an EAGLE-3 head")
    parser.add_argument("--nextn", action="store_true",
                        help="draft with the model's own MTP layers: SGLang's NEXTN and SPECPLUG_HYBRID_NEXTN")
    parser.add_argument("--trust-remote-code", action="store_true", help="passed to every server (MiMo needs it)")
    parser.add_argument("--json", type=Path, help="also write every round's figures here")
    args = parser.parse_args()
    if args.device == "cpu":
        harness = str(ROOT / "tests" / "sglang" / "harness")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [harness, os.environ.get("PYTHONPATH")]))
        os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    try:
        import sglang  # noqa: F401
    except ImportError as error:
        print(f"SGLang is not importable ({error}); run scripts/setup_sglang.sh", file=sys.stderr)
        return 2
    prompts = _prompts(args.model, args.prompts * args.rounds)
    if len(prompts) < args.prompts * args.rounds:
        print(f"--prompts {args.prompts} x --rounds {args.rounds} needs {args.prompts * args.rounds} prompts; "
              f"the code-edit set has {len(prompts)}", file=sys.stderr)
        return 2
    if args.nextn and args.eagle3:
        print("--nextn and --eagle3 exclude each other: give one drafter", file=sys.stderr)
        return 2
    configs = dict(CONFIGS)
    if args.nextn:
        configs.update(_eagle_configs(args.eagle_head or args.model, "NEXTN", args.width))
    elif args.eagle_head:
        configs.update(_eagle_configs(args.eagle_head, "EAGLE3" if args.eagle3 else "EAGLE", args.width))
    elif args.only and set(args.only) & set(EAGLE_LABELS):
        print(f"{' and '.join(EAGLE_LABELS)} need --eagle-head or --nextn", file=sys.stderr)
        return 2
    labels = ["plain", *[label for label in configs if label != "plain" and (not args.only or label in args.only)]]
    stats_dir = Path(tempfile.mkdtemp(prefix="specplug-sglang-stats-"))
    servers: list[Server] = []
    rounds: list[dict[str, dict]] = []
    try:
        for label in labels:  # one at a time: starts compete for the CPU
            env = {"SPECPLUG_SGLANG_STATS_FILE": str(stats_dir / f"{label}-{{pid}}.json"),
                   "SPECPLUG_SGLANG_STATS_INTERVAL": "0"}
            server = Server(label, configs[label], args.model, args.device, args.width, env, args.trust_remote_code)
            servers.append(server)
            server.wait()
            server.run(prompts[:1], 8)  # warm-up
            print(f"started {label} ({_load()})", flush=True)
        for number in range(args.rounds):
            order = servers[number % len(servers):] + servers[: number % len(servers)]
            chosen = prompts[number * args.prompts : (number + 1) * args.prompts]
            results = {server.label: server.run(chosen, args.tokens) for server in order}
            rounds.append(results)
            print(f"round {number + 1}: " + ", ".join(f"{label} {result['tokens_per_s']:.2f} tok/s"
                                                   for label, result in results.items()) + f" ({_load()})", flush=True)
    finally:
        for server in servers:
            server.stop()
    status = 0
    print(f"\n{'configuration':<24}{'tok/s':>8}{'speedup':>9}{'(min-max)':>14}{'accepted/step':>15}{'tok/step':>10}  output")
    for label in labels:
        tps = [result[label]["tokens_per_s"] for result in rounds]
        ratios = [result[label]["tokens_per_s"] / result["plain"]["tokens_per_s"] for result in rounds]
        same = all(result[label]["texts"] == result["plain"]["texts"] for result in rounds)
        status |= 0 if same else 1
        steps = sum(result[label]["verify_steps"] for result in rounds)
        accepted = f"{sum(result[label]['accepted'] for result in rounds) / steps:.2f}" if steps else "-"
        per_step = f"{sum(result[label]['generated'] for result in rounds) / steps:.2f}" if steps else "-"
        print(f"{label:<24}{statistics.median(tps):>8.2f}{statistics.median(ratios):>8.2f}x"
              f"{f'({min(ratios):.2f}-{max(ratios):.2f})':>14}{accepted:>15}{per_step:>10}  {'identical' if same else 'DIFFERS'}")
    if "SPECPLUG_HYBRID_EAGLE" in labels:
        status |= _report_overlay(stats_dir)
    if args.json:
        from specplug._outputs import write_text_atomic

        write_text_atomic(args.json, json.dumps([{label: {k: v for k, v in result.items() if k != "texts"}
                                                  for label, result in results.items()} for results in rounds], indent=1))
    return status


def _report_overlay(stats_dir: Path) -> int:
    """The hybrid overlay's counters from its scheduler's stats file; 1 when it never overlaid a row or faulted."""
    files = sorted(stats_dir.glob("SPECPLUG_HYBRID_EAGLE-*.json"))
    if not files:
        print("SPECPLUG_HYBRID_EAGLE wrote no stats: the overlay never ran", file=sys.stderr)
        return 1
    status = 0
    for path in files:
        counters = json.loads(path.read_text())["counters"]
        print(f"SPECPLUG_HYBRID_EAGLE counters ({path.name}): " + ", ".join(f"{k} {v}" for k, v in sorted(counters.items())))
        head_drafts = any(k.startswith("drafts.eagle") or k == "drafts.mtp" for k in counters)
        if not counters.get("overlaid_rows") or not head_drafts:
            print("the overlay never put a lookup chain in the head's place, or never saw the head's drafts", file=sys.stderr)
            status = 1
        if counters.get("faults"):
            print(f"the overlay faulted {counters['faults']} times", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
