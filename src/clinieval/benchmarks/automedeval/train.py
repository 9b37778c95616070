"""Training the judge: the curriculum's three stages in order, each continuing from the last.

The paper fine-tunes MedLLaMA-13B on its curriculum (#1 lower-quality evaluations to learn the
format, #2 the mixed remainder, #3 high-quality evaluations) at lr 2e-5, warmup ratio 0.03, 5
epochs, inputs up to 2,048 tokens, and (its public training script) 2 examples per device on 8
GPUs with 8 accumulation steps: an effective batch of 128. Those are the defaults here; the
effective batch is kept on any number of devices by deriving the accumulation steps from it
(one CPU: 2 per step x 64 steps), unless ``gradient_accumulation`` is given. The trainer is TRL's
``SFTTrainer`` (pinned, CPU wheels here) on each stage's Hugging Face ``messages`` file, given as
prompt and completion so that the loss is on the judge's evaluation only (the prompt's tokens are
masked), rendered with the model's own chat template.

Each stage is trained into a temporary folder and published as ``OUT/stageN`` only when done,
with a ``stage.json`` saying what it was trained from (a fingerprint of the stage's data, the
settings and the starting weights, and a SHA-256 of the weights before and after), so a rerun
reuses every finished stage whose inputs are unchanged and retrains from the first one that
changed; a killed run loses only the stage in progress. An empty or missing stage file is skipped
(and said); a skipped stage's earlier checkpoint is removed, so no stale stage remains. An example
whose prompt alone fills ``max_length`` is dropped by TRL (nothing of the evaluation is left to
learn) and counted.

It runs on CPU (slowly): real judge training needs a GPU and a 7-13B base model. The tests train
a tiny randomly initialised model for a few steps per stage: a wiring test, not a judge.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from clinieval.cli_commands import OptionGroup
from clinieval.cli_options import ShowProgress
from clinieval.datasets import json_objects
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, staged_dir

JSON = dict[str, Any]
Messages = list[dict[str, str]]

STAGES = ("stage1", "stage2", "stage3")
MARKER = "stage.json"
ROLES = ("system", "user", "assistant")


def stage_file(stages_dir: Path, stage: str) -> Path:
    """Where the curriculum writes a stage's examples (Hugging Face ``messages`` JSON Lines)."""
    return stages_dir / f"{stage}.hf.jsonl"


@dataclass(frozen=True, slots=True)
class TrainPlan(OptionGroup):
    """The trainer's settings, declared once: they are also ``automedeval train``'s options (an
    option group), so a default cannot differ between the command and the code. The defaults are
    the paper's (see the module)."""

    epochs: Annotated[float, typer.Option(min=0.01, help="epochs per stage (the paper: 5)")] = 5.0
    lr: Annotated[float, typer.Option(min=0.0, help="learning rate (the paper: 2e-5)")] = 2e-5
    warmup: Annotated[float, typer.Option(min=0.0, max=0.99, help="warmup ratio (the paper: 0.03)")] = 0.03
    """Warmup as a ratio of the stage's steps."""
    max_length: Annotated[int, typer.Option(min=16, help="tokens per example (the paper: 2,048)")] = 2048
    batch_size: Annotated[int, typer.Option(min=1, help="examples per device step (the paper: 2)")] = 2
    """Examples per device step (the paper's script: 2)."""
    effective_batch: Annotated[
        int, typer.Option(min=1, help="examples per optimizer update over all devices (the paper: 128)")
    ] = 128
    """Examples per optimizer update over all devices (the paper: 2 x 8 GPUs x 8 steps = 128)."""
    gradient_accumulation: Annotated[
        int | None,
        typer.Option(min=1, help="steps per optimizer update (default: derived from --effective-batch)"),
    ] = None
    """Steps per update; None derives it from ``effective_batch`` and the devices present."""
    max_steps: Annotated[
        int | None, typer.Option(min=1, help="cap each stage's optimizer steps (a smoke run)")
    ] = None
    """Cap on each stage's optimizer steps (a smoke run); None: the epochs decide."""
    seed: Annotated[int, typer.Option(help="training seed")] = 0
    progress: ShowProgress = True

    def accumulation(self, devices: int) -> int:
        """Accumulation steps on ``devices`` devices: the given number, or the fewest that reach the
        effective batch (an effective batch that does not divide evenly is rounded up, and said in
        :meth:`settings`)."""
        if self.gradient_accumulation is not None:
            return self.gradient_accumulation
        return max(1, -(-self.effective_batch // (self.batch_size * max(1, devices))))

    def settings(self, devices: int = 1) -> JSON:
        """What a checkpoint depends on (everything but the progress display), with the batch as
        trained: per device, devices, accumulation and the effective batch they make."""
        out = asdict(self)
        out.pop("progress")
        steps = self.accumulation(devices)
        out |= {
            "devices": devices,
            "gradient_accumulation": steps,
            "effective_batch": self.batch_size * devices * steps,
        }
        return out


# --- reading and checking -------------------------------------------------------------------


def read_stage(path: Path) -> list[Messages]:
    """A stage's conversations; each must end with the assistant's evaluation after a user turn."""
    out: list[Messages] = []
    for where, obj in json_objects(path):
        messages = obj.get("messages")
        if not isinstance(messages, list) or len(messages) < 2:
            raise UserError(f"{where}: field 'messages' should be a list of at least 2 messages")
        out.append([_message(m, f"{where}: field 'messages[{i}]'") for i, m in enumerate(messages)])
        roles = [m["role"] for m in out[-1]]
        if roles[-1] != "assistant" or "user" not in roles[:-1]:
            raise UserError(
                f"{where}: field 'messages' should end with an assistant message after a user message "
                f"(roles: {', '.join(roles)})"
            )
    return out


def _message(raw: object, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise UserError(f"{where} should be an object with role and content")
    role, content = raw.get("role"), raw.get("content")
    if role not in ROLES:
        raise UserError(f"{where}.role is {role!r}; expected {', '.join(ROLES)}")
    if not isinstance(content, str):
        raise UserError(f"{where}.content should be text")
    return {"role": str(role), "content": content}


def read_stages(stages_dir: Path) -> dict[str, list[Messages]]:
    """Every stage's examples, all checked before any training starts (a malformed stage 3 must
    not be found after hours spent on stage 1); a missing file is an empty stage."""
    if not stages_dir.is_dir():
        raise UserError(f"{stages_dir}: stages folder not found")
    stages = {s: read_stage(stage_file(stages_dir, s)) if stage_file(stages_dir, s).is_file() else []
              for s in STAGES}  # fmt: skip
    if not any(stages.values()):
        names = ", ".join(stage_file(stages_dir, s).name for s in STAGES)
        raise UserError(f"{stages_dir}: no training examples; expected {names} (the curriculum's output)")
    return stages


def load_tokenizer(folder: Path) -> Any:
    """The model folder's tokenizer, refusing one without a chat template: the judge must be
    trained on the same rendering it will be prompted with."""
    from transformers import AutoTokenizer

    if not (folder / "config.json").is_file():
        raise UserError(f"{folder}: not a model folder (no config.json); give a Hugging Face model folder")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, TypeError) as e:
        raise UserError(
            f"{folder}: no usable tokenizer ({type(e).__name__}); save the tokenizer with the model"
        ) from None
    if not getattr(tokenizer, "chat_template", None):
        raise UserError(
            f"{folder}: the tokenizer has no chat template; set tokenizer.chat_template (an instruct "
            "model's, or your own) and save it to the folder"
        )
    try:
        tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    except Exception as e:  # a template's own error (jinja2's) names what is wrong in it
        raise UserError(f"{folder}: the chat template does not render: {e}") from None
    return tokenizer


# --- fingerprints ---------------------------------------------------------------------------


def folder_identity(folder: Path) -> str:
    """A base model's identity: its files' names and sizes and its JSON files' contents (hashing
    the weights of a 13B model would take minutes on every rerun)."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        h.update(f"{f.relative_to(folder).as_posix()}:{f.stat().st_size}".encode())
        if f.suffix == ".json" and f.name != MARKER:
            h.update(f.read_bytes())
    return h.hexdigest()


def weights_digest(model: Any) -> str:
    """SHA-256 of every tensor of the model's state, by name: which weights a stage started from
    and ended with, comparable across stages and with any copy loaded from disk."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        h.update(flat.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _fingerprint(stage: str, examples: Sequence[Messages], plan: TrainPlan, start: str) -> str:
    blob = json.dumps([stage, examples, plan.settings(_devices()), start], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _finished(folder: Path, fingerprint: str) -> JSON | None:
    """The stage's record when ``folder`` holds it trained from exactly these inputs."""
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("fingerprint") == fingerprint else None


# --- training -------------------------------------------------------------------------------


def _datasets() -> Any:
    """The ``datasets`` module (TRL's input type), imported by name: it ships no type hints."""
    import importlib

    return importlib.import_module("datasets")


def _quiet(progress: bool) -> None:
    """Progress bars only when asked (they go to stderr and a log file would fill with them)."""
    from transformers.utils import logging as hf_logging

    if not progress:
        _datasets().disable_progress_bars()
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def _devices() -> int:
    """Devices the trainer spreads a batch over: the GPUs, or the one CPU."""
    import torch

    return max(1, torch.cuda.device_count())


def _config(plan: TrainPlan, output_dir: Path) -> Any:
    import torch
    from trl.trainer.sft_config import SFTConfig

    gpu = torch.cuda.is_available()
    with warnings.catch_warnings():  # TRL's own default, renamed by transformers 5
        warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
        return SFTConfig(
            output_dir=str(output_dir),
            num_train_epochs=plan.epochs,
            max_steps=plan.max_steps or -1,
            learning_rate=plan.lr,
            warmup_steps=plan.warmup,
            max_length=plan.max_length,
            per_device_train_batch_size=plan.batch_size,
            gradient_accumulation_steps=plan.accumulation(_devices()),
            gradient_checkpointing=gpu,
            bf16=gpu and torch.cuda.is_bf16_supported(),
            use_cpu=not gpu,
            seed=plan.seed,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=not plan.progress,
        )


def _token_counts(dataset: Any) -> tuple[int, int]:
    """(all tokens, tokens the loss is on) of a tokenized stage: the evaluation's tokens only,
    the prompt's being masked (label -100), which the record shows and the tests check."""
    ids = dataset["input_ids"]
    tokens = sum(len(x) for x in ids)
    if "labels" not in dataset.column_names:
        return tokens, tokens
    return tokens, sum(sum(t != -100 for t in x) for x in dataset["labels"])


def _train_stage(start: Path, examples: Sequence[Messages], folder: Path, plan: TrainPlan, fp: str) -> JSON:
    """Train one stage from the weights in ``start`` into ``folder`` (published when done)."""
    from transformers import AutoModelForCausalLM, PrinterCallback
    from trl.trainer.sft_trainer import SFTTrainer

    began = time.perf_counter()
    tokenizer = load_tokenizer(start)
    model = AutoModelForCausalLM.from_pretrained(start, local_files_only=True)
    before = weights_digest(model)
    rows = [{"prompt": m[:-1], "completion": m[-1:]} for m in examples]
    with staged_dir(folder, f"the checkpoint folder of {folder.name}") as tmp:
        trainer = SFTTrainer(
            model=model,
            args=_config(plan, tmp / "trainer"),
            train_dataset=_datasets().Dataset.from_list(rows),
            processing_class=tokenizer,
        )
        if not plan.progress:
            trainer.remove_callback(PrinterCallback)
        data: Any = trainer.train_dataset
        if len(data) == 0:
            raise UserError(
                f"{folder.name}: every example's prompt alone fills --max-length {plan.max_length} "
                "tokens, leaving no evaluation to learn; raise --max-length"
            )
        tokens, trained = _token_counts(data)
        result = trainer.train()
        losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
        shutil.rmtree(tmp / "trainer", ignore_errors=True)
        trainer.save_model(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        record: JSON = {
            "stage": folder.name,
            "fingerprint": fp,
            "started_from": str(start),
            "examples": len(examples),
            "dropped": len(examples) - len(data),
            "tokens": tokens,
            "trained_tokens": trained,
            "steps": int(trainer.state.global_step),
            "final_loss": losses[-1] if losses else None,
            "mean_loss": float(result.training_loss),
            "seconds": round(time.perf_counter() - began, 3),
            "device": str(trainer.args.device),
            "start_sha256": before,
            "end_sha256": weights_digest(trainer.model),
            "settings": plan.settings(_devices()),
        }
        atomic_write_json(tmp / MARKER, record)
    return record


def train_stages(stages_dir: Path, model: Path, out: Path, plan: TrainPlan = TrainPlan()) -> JSON:
    """Train ``model`` on the stages in order into ``out`` (``stageN/`` checkpoints and
    ``train.json``); finished stages with unchanged inputs are reused."""
    stages = read_stages(stages_dir)
    load_tokenizer(model)
    _quiet(plan.progress)
    out.mkdir(parents=True, exist_ok=True)
    start, start_id = model, folder_identity(model)
    report: list[JSON] = []
    for stage in STAGES:
        folder, examples = out / stage, stages[stage]
        if not examples:
            if (folder / MARKER).is_file():
                shutil.rmtree(folder)  # a checkpoint of data this stage no longer has
            report.append({"stage": stage, "skipped": "no examples", "examples": 0})
            continue
        fp = _fingerprint(stage, examples, plan, start_id)
        record = _finished(folder, fp)
        reused = record is not None
        if record is None:
            record = _train_stage(start, examples, folder, plan, fp)
        report.append({**record, "reused": reused, "checkpoint": str(folder)})
        start, start_id = folder, fp
    summary: JSON = {
        "base_model": str(model),
        "stages_dir": str(stages_dir),
        "settings": plan.settings(_devices()),
        "stages": report,
        "final": str(start) if start != model else None,
    }
    atomic_write_json(out / "train.json", summary)
    return summary
