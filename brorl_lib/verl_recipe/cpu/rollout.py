"""The ``hf`` rollout: verl's token-in, token-out server contract answered by a transformers model on CPU.

verl 0.9.1 registers only vllm, sglang and trtllm rollouts (``workers/rollout/base.py`` and
``workers/rollout/replica.py``); ``HFRollout`` still ships, but nothing reaches it. Three pieces, registered
by ``plugin`` under the name ``hf`` (``actor_rollout_ref.rollout.name=hf``):

* ``HFServer``: a Ray actor holding a transformers copy of the policy. ``generate`` takes one request
  (prompt ids and verl's sampling params: temperature, top-p, top-k, log-probs) and returns a
  ``TokenOutput``; concurrent requests are batched. Log-probs are of the sampled tokens under the
  temperature-scaled distribution before top-p, as vLLM's ``processed_logprobs`` (verl's default).
* ``HFReplica``: the ``RolloutReplica`` that starts one server per replica (hybrid mode: the replica's
  trainer worker holds the weights).
* ``HFServerAdapter``: the ``BaseRollout`` in the trainer worker; ``update_weights`` sends the trainer's
  state dict to the server each step (verl calls it before every generation round).
"""

from __future__ import annotations

import asyncio
import os

import ray
import torch
from verl.utils import hf_tokenizer
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

SERVER_NAME = "hf_server_{replica}"
MAX_BATCH = 256  # our choice: requests generated together; bounds memory of the KV cache on a laptop


def _sample(logits: torch.Tensor, temperature: float, top_p: float, top_k: int, gen: torch.Generator):
    """Next tokens and their log-probs (temperature-scaled, before top-k/top-p) for a batch of logits."""
    if temperature <= 0:  # greedy, as vLLM treats temperature 0
        logp = torch.log_softmax(logits.float(), -1)
        tok = logits.argmax(-1)
        return tok, logp.gather(-1, tok[:, None])[:, 0]
    logp = torch.log_softmax(logits.float() / temperature, -1)
    probs = logp.exp()
    if top_k is not None and 0 < top_k < probs.shape[-1]:
        kth = probs.topk(top_k, -1).values[:, -1:]
        probs = torch.where(probs < kth, 0.0, probs)
    if top_p is not None and top_p < 1.0:
        sorted_p, order = probs.sort(-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p  # the smallest prefix whose mass reaches top_p
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p * keep)
    tok = torch.multinomial(probs, 1, generator=gen)[:, 0]
    return tok, logp.gather(-1, tok[:, None])[:, 0]


@torch.no_grad()
def generate_batch(
    model,
    prompts: list[list[int]],
    max_tokens: int,
    eos_ids: set[int],
    pad_id: int,
    temperature: float,
    top_p: float,
    top_k: int,
    gen: torch.Generator,
) -> list[tuple[list[int], list[float], str]]:
    """Sample a response per prompt with a KV cache: (token ids, log-probs, stop reason) each."""
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    tokens, logps = [], []
    done = torch.zeros(len(prompts), dtype=torch.bool)
    for _ in range(max_tokens):
        tok, lp = _sample(out.logits[:, -1], temperature, top_p, top_k, gen)
        tok = torch.where(done, pad_id, tok)
        tokens.append(tok)
        logps.append(lp)
        done |= torch.isin(tok, torch.tensor(sorted(eos_ids)))
        if bool(done.all()):
            break
        mask = torch.cat([mask, torch.ones_like(tok)[:, None]], 1)
        pos = pos[:, -1:] + 1
        out = model(input_ids=tok[:, None], attention_mask=mask, position_ids=pos, past_key_values=out.past_key_values)
    results = []
    toks, lps = torch.stack(tokens, 1).tolist(), torch.stack(logps, 1).tolist()
    for row, lp in zip(toks, lps):
        end = next((i + 1 for i, t in enumerate(row) if t in eos_ids), None)
        results.append((row[:end], lp[:end], "completed" if end is not None else "length"))
    return results


def _field(config, name: str):
    """``config.name`` for a dataclass or a DictConfig in struct mode; None when absent."""
    return config.get(name, None) if hasattr(config, "get") else getattr(config, name, None)


class HFServer:
    """A Ray actor: the policy as a transformers model, generating verl's requests in batches."""

    def __init__(self, config, model_config, replica_rank: int = 0, seed: int = 0):
        from transformers import AutoModelForCausalLM

        self.config = config
        path = _field(model_config, "local_path") or _field(model_config, "path")
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        tokenizer = hf_tokenizer(path)
        extra = getattr(self.model.generation_config, "eos_token_id", None)
        self.eos_ids = {tokenizer.eos_token_id, *(extra if isinstance(extra, list) else [extra])} - {None}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.gen = torch.Generator().manual_seed(seed + replica_rank)
        self.global_steps = None
        self.queue: asyncio.Queue | None = None
        self.worker: asyncio.Task | None = None
        torch.set_num_threads(max(1, int(os.environ.get("BRORL_HF_THREADS", "1"))))

    def _max_tokens(self, prompt_len: int, sampling_params: dict) -> int:
        """As verl's vLLM server: the request's max_tokens, else the response length within the context."""
        limit = self.config.prompt_length + self.config.response_length - prompt_len
        wanted = sampling_params.get("max_tokens", sampling_params.get("max_new_tokens"))
        return max(1, min(limit, wanted if wanted is not None else self.config.response_length))

    async def generate(self, prompt_ids, sampling_params: dict, request_id: str = "", **kwargs):
        if self.queue is None:
            self.queue = asyncio.Queue()
            self.worker = asyncio.get_running_loop().create_task(self._serve())
        done = asyncio.get_running_loop().create_future()
        await self.queue.put((list(prompt_ids), dict(sampling_params), done))
        token_ids, log_probs, stop = await done
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs if sampling_params.get("logprobs") else None,
            stop_reason=stop,
            extra_fields={"global_steps": self.global_steps},
        )

    async def _serve(self) -> None:
        """Take every waiting request (up to MAX_BATCH), generate those that share sampling settings together."""
        while True:
            batch = [await self.queue.get()]
            await asyncio.sleep(0.05)  # let the rest of verl's concurrent requests arrive
            while not self.queue.empty() and len(batch) < MAX_BATCH:
                batch.append(self.queue.get_nowait())
            groups: dict[tuple, list] = {}
            for prompt, sp, done in batch:
                key = (
                    float(sp.get("temperature", 1.0)),
                    float(sp.get("top_p", 1.0)),
                    int(sp.get("top_k", -1)),
                    self._max_tokens(len(prompt), sp),
                )
                groups.setdefault(key, []).append((prompt, done))
            for (temperature, top_p, top_k, max_tokens), items in groups.items():
                try:
                    outs = await asyncio.to_thread(
                        generate_batch,
                        self.model,
                        [p for p, _ in items],
                        max_tokens,
                        self.eos_ids,
                        self.pad_id,
                        temperature,
                        top_p,
                        top_k,
                        self.gen,
                    )
                    for (_, done), out in zip(items, outs):
                        done.set_result(out)
                except Exception as exc:  # noqa: BLE001 -- any error fails its requests instead of hanging them
                    for _, done in items:
                        if not done.done():
                            done.set_exception(exc)

    def load_weights(self, state_dict: dict[str, torch.Tensor], global_steps: int | None = None) -> int:
        """The trainer's weights (HF names); returns how many tensors were loaded."""
        own = self.model.state_dict()
        unknown = sorted(set(state_dict) - set(own))
        if unknown:
            raise KeyError(f"the trainer sent weights this model does not have: {unknown[:5]}")
        with torch.no_grad():
            for name, tensor in state_dict.items():
                own[name].copy_(tensor.to(own[name].dtype))
        self.global_steps = global_steps
        return len(state_dict)

    # verl's server control calls: nothing to free or pause on a CPU
    async def wake_up(self):
        return None

    async def sleep(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def abort_all_requests(self, reject_request: bool = False):
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None


class HFReplica(RolloutReplica):
    """One ``HFServer`` per replica, named so that the trainer worker's adapter can find it."""

    async def launch_servers(self):
        name = SERVER_NAME.format(replica=self.replica_rank)
        server = (
            ray.remote(HFServer)
            .options(name=name, max_concurrency=self.max_concurrency, num_cpus=0)
            .remote(self.config, self.model_config, self.replica_rank, int(_field(self.config, "seed") or 0))
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"ray://{name}"


class HFServerAdapter(BaseRollout):
    """In the trainer worker: sends the trainer's weights to this replica's ``HFServer``."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1, **kwargs):
        super().__init__(config, model_config, device_mesh)
        world = self.config.tensor_model_parallel_size * self.config.data_parallel_size
        rank = int(os.environ.get("RANK", 0))
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.is_leader = rank % world == 0

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    async def update_weights(self, weights, wire_format: str = "named_tensors", **kwargs):
        if wire_format != "named_tensors":
            raise ValueError(f"wire_format={wire_format!r} is not supported by the hf rollout")
        state = {name: t.detach().to("cpu", torch.float32).clone() for name, t in weights}
        if self.is_leader:
            server = ray.get_actor(SERVER_NAME.format(replica=self.replica_rank))
            await server.load_weights.remote(state, kwargs.get("global_steps"))
