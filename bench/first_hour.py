"""A newcomer's first hour, timed: the six jobs of docs/first-hour.md against a real local server.

One command starts ``python -m llama_cpp.server`` with the embedded SmolLM2-135M (n_ctx 2048, as a
newcomer's server would have), then runs each job through the real CLI with ``--limit 10``, one
after another, and records its wall time, exit status and what it printed:

  1 pubmedqa     clinieval run pubmedqa -m openai:URL@smol     (the defaults: what the server can serve)
  1b baseline    the same with --scorer choice_extract         (the issue's 17 s reference)
  2 mcq          clinieval run questions.jsonl (five lettered questions of one's own)
  3 medalign     clinieval ehr omop2xml (Synthea OMOP) + clinieval run medalign over three patients
  4 judge        clinieval judge RUN --rubric reference_correct       (the server as the judge)
  5 compare      clinieval run pubmedqa with the embedded Gemma-3, then clinieval analyze A B
  6 view         clinieval view A B
  7 echo         clinieval run pubmedqa against a base model behind a chat template (a stand-in server
                 that answers with its prompt: bench/_echo_server.py): the score must not be 1.000
  8 swap         clinieval run pubmedqa against llama_cpp.server serving SmolLM2 as "clinic", then Gemma
                 on the same port under the same name (the rerun must refuse), then SmolLM2 again on
                 another port (the rerun must resume)

Goals (issue 23): each job under 2 minutes on 2 cores, and the PubMedQA default run no slower than
2x the choice_extract run. Issue 34: job 7 prints no score for the echoes and warns once; job 8's
swapped rerun exits 2 naming what changed, and the same model at a new address resumes.

Prints a table and writes bench/out/first-hour-<timestamp>.json, with
each job's output under --keep (default: a temporary folder) for the docs.

    .venv/bin/python bench/first_hour.py [--keep runs/first-hour]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _echo_server import echo_server
from _server import ROOT, free_port, smol_server, warm_up

CLI = ROOT / ".venv" / "bin" / "clinieval"
OMOP = ROOT.parent / "shared" / "data" / "omop-synthea27nj"
GOAL_S = 120.0

QUESTIONS = [
    ("q1", "Which laboratory test is used to monitor unfractionated heparin therapy?",
     ["Prothrombin time", "aPTT", "Platelet count", "Anti-Xa level"], "aPTT"),
    ("q2", "Which drug reverses the effect of unfractionated heparin?",
     ["Vitamin K", "Protamine sulfate", "Idarucizumab", "Andexanet alfa"], "Protamine sulfate"),
    ("q3", "Which electrolyte disturbance is most typical of tumour lysis syndrome?",
     ["Hypokalaemia", "Hyperphosphataemia", "Hypercalcaemia", "Hyponatraemia"], "Hyperphosphataemia"),
    ("q4", "Which antibiotic class can prolong the QT interval?",
     ["Penicillins", "Fluoroquinolones", "Cephalosporins", "Carbapenems"], "Fluoroquinolones"),
    ("q5", "What is the first-line drug for anaphylaxis?",
     ["Intramuscular adrenaline", "Oral cetirizine", "IV hydrocortisone", "Nebulised salbutamol"],
     "Intramuscular adrenaline"),
]  # fmt: skip


@dataclass(slots=True)
class Job:
    name: str
    command: str
    wall_s: float
    exit: int
    stdout: str
    stderr: str


def cli(name: str, *args: str, timeout: float = 600) -> Job:
    start = time.perf_counter()
    shown = " ".join(["clinieval", *args])
    try:
        p = subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:  # recorded, not raised: a job that never ends is a result
        print(f"  {name:<12} killed after {timeout:.0f}s", flush=True)
        out, err = (x.decode() if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr))
        return Job(name, shown, time.perf_counter() - start, -9, out, err)
    wall = time.perf_counter() - start
    print(f"  {name:<12} {wall:7.1f}s  exit {p.returncode}", flush=True)
    return Job(name, shown, wall, p.returncode, p.stdout, p.stderr)


def write_questions(path: Path) -> Path:
    lines = [json.dumps({"id": i, "input": q, "choices": c, "target": t}) for i, q, c, t in QUESTIONS]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_instructions(folder: Path, xml: Path) -> Path:
    """Three instructions over the first three patients omop2xml wrote (person_id = file stem)."""
    people = sorted(p.stem for p in xml.glob("*.xml"))[:3]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ehrs").symlink_to(xml.resolve(), target_is_directory=True)
    with (folder / "instructions.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["instruction_id", "person_id", "question", "gold_response"])
        for n, person in enumerate(people):
            w.writerow([f"i{n}", person, "List the patient's active medications.", ""])
    return folder


def pubmedqa_jobs(out: Path, spec: str) -> list[Job]:
    """Job 1 and its baseline: the defaults, then generation alone (``--scorer choice_extract``)."""
    return [
        cli("pubmedqa", "run", "pubmedqa", "-m", spec, "--limit", "10", "--shuffle", "0",
            "--out", str(out / "pubmedqa-smol"), "--no-progress"),
        cli("baseline", "run", "pubmedqa", "-m", spec, "--limit", "10", "--shuffle", "0",
            "--scorer", "choice_extract", "--out", str(out / "pubmedqa-smol-extract"), "--no-progress"),
    ]  # fmt: skip


def run_jobs(out: Path, url: str) -> list[Job]:
    spec = f"openai:{url}@smol"
    quiet = ["--no-progress"]
    jobs = pubmedqa_jobs(out, spec)
    jobs += [
        cli("mcq", "run", str(write_questions(out / "questions.jsonl")), "-m", spec,
            "--out", str(out / "mcq-smol"), *quiet),
    ]  # fmt: skip
    start = time.perf_counter()
    xml = cli("omop2xml", "ehr", "omop2xml", str(OMOP), str(out / "xml"))
    data = write_instructions(out / "medalign", out / "xml")
    medalign = cli(
        "medalign", "run", "medalign", "--data", str(data), "-m", spec, "--tokenizer",
        "llamacpp:smollm2-135m-instruct", "--max-context", "2048", "--limit", "10",
        "--out", str(out / "medalign-smol"), *quiet,
    )  # fmt: skip
    jobs.append(
        Job("medalign", f"{xml.command} && {medalign.command}", time.perf_counter() - start,
            xml.exit or medalign.exit, xml.stdout + medalign.stdout, xml.stderr + medalign.stderr)
    )  # fmt: skip
    jobs.append(
        cli("judge", "judge", str(out / "mcq-smol"), "--judge", spec, "--rubric", "reference_correct",
            "--repeats", "1", "--allow-failures", *quiet)
    )  # fmt: skip
    start = time.perf_counter()
    gemma = cli("gemma", "run", "pubmedqa", "-m", "llamacpp:gemma3-270m", "--limit", "10", "--shuffle", "0",
                "--scorer", "choice_extract", "--out", str(out / "pubmedqa-gemma"), *quiet)  # fmt: skip
    analyze = cli("analyze", "analyze", str(out / "pubmedqa-smol"), str(out / "pubmedqa-gemma"),
                  "--out", str(out / "compare"))  # fmt: skip
    jobs.append(
        Job("compare", f"{gemma.command} && {analyze.command}", time.perf_counter() - start,
            gemma.exit or analyze.exit, gemma.stdout + analyze.stdout, gemma.stderr + analyze.stderr)
    )  # fmt: skip
    jobs.append(
        cli(
            "view",
            "view",
            str(out / "pubmedqa-smol"),
            str(out / "pubmedqa-gemma"),
            "--out",
            str(out / "view"),
        )
    )
    return jobs


def echo_job(out: Path) -> Job:
    """Job 7: PubMedQA against a base model behind a chat template (every answer is its prompt)."""
    with echo_server() as url:
        spec = f"openai:{url}@base"
        folder = str(out / "pubmedqa-base")
        return cli("echo", "run", "pubmedqa", "-m", spec, "--limit", "10", "--shuffle", "0",
                   "--scorer", "choice_extract", "--out", folder, "--no-progress")  # fmt: skip


def swap_jobs(out: Path) -> list[Job]:
    """Job 8: the same URL and name, another model behind it; then the first model at a new URL."""
    from clinieval.models.catalog import find_embedded

    gemma = find_embedded("gemma3-270m").locate()
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    args = ["run", "pubmedqa", "-m", f"openai:{url}@clinic", "--limit", "10", "--shuffle", "0",
            "--scorer", "choice_extract", "--out", str(out / "pubmedqa-clinic"), "--no-progress"]  # fmt: skip
    jobs = []
    with smol_server(alias="clinic", port=port) as server:
        warm_up(server)
        jobs.append(cli("swap-first", *args))
    with smol_server(alias="clinic", port=port, model=gemma) as server:
        warm_up(server)
        jobs.append(cli("swap-gemma", *args))
    with smol_server(alias="clinic") as server:  # SmolLM2 again, at another port
        warm_up(server)
        moved = [a.replace(url, server.base_url) for a in args]
        jobs.append(cli("swap-moved", *moved))
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--keep", type=Path, help="folder for the jobs' runs and outputs (default: temporary)"
    )
    parser.add_argument(
        "--issue34-only", action="store_true", help="jobs 7 and 8 alone (the base model and the swap)"
    )
    parser.add_argument(
        "--pubmedqa-only",
        action="store_true",
        help="job 1 and its baseline alone (e.g. to time an older checkout through PYTHONPATH=OLD/src)",
    )
    args = parser.parse_args()
    out = args.keep or Path(tempfile.mkdtemp(prefix="clinieval-first-hour-"))
    if args.keep is not None and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    jobs: list[Job] = []
    if not args.issue34_only:
        with smol_server(n_ctx=2048) as server:
            warm_up(server)
            spec = f"openai:{server.base_url}@smol"
            jobs = pubmedqa_jobs(out, spec) if args.pubmedqa_only else run_jobs(out, server.base_url)
    if not args.pubmedqa_only:
        jobs += [echo_job(out), *swap_jobs(out)]
    by_name = {j.name: j for j in jobs}
    ratio = by_name["pubmedqa"].wall_s / by_name["baseline"].wall_s if "pubmedqa" in by_name else float("nan")
    print(f"\n{'job':<10} {'wall':>8} {'exit':>5}  goal < {GOAL_S:.0f}s")
    for j in jobs:
        print(f"{j.name:<10} {j.wall_s:7.1f}s {j.exit:>5}  {'met' if j.wall_s < GOAL_S else 'NOT met'}")
    print(f"pubmedqa default / choice_extract: {ratio:.2f}x (goal <= 2x)")
    for j in jobs:
        if j.name == "echo" or j.name.startswith("swap"):
            shown = [ln for ln in (j.stdout + j.stderr).splitlines() if ln.strip()]
            print(f"\n$ {j.command}  (exit {j.exit})\n" + "\n".join(shown[:14]))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    result = {
        "benchmark": "first_hour",
        "command": " ".join([".venv/bin/python", "bench/first_hour.py", *sys.argv[1:]]),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load": os.getloadavg(),
        },
        "jobs": [asdict(j) for j in jobs],
        "default_over_extract": ratio,
        "out": str(out),
    }
    path = ROOT / "bench" / "out" / f"first-hour-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
