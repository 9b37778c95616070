"""A suite file with a mistake is refused with one line naming the table and key, exit 2, before
anything is written or asked (issue 29, item 1); the published JSON Schema is the generated one.

Each class of fault (unknown key, wrong type, a choice not among the choices, missing models or
benchmarks, an unknown benchmark, a TOML syntax error, a bad model spec, a bad data folder) is
tried at least three times through ``clinieval.cli.main``, the entry point the installed command
runs, in this process over the suite group (a subprocess per case would cost ~1.5 s each); one
case also runs through the installed command. About 6 s on 2 cores.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal

import pytest

from clinieval.suite.schema import SchemaError, field_schema, options_schema
from tests.conftest import REPO, run_cli
from tests.suite_helpers import GOOD, pubmedqa_folder

SCHEMA_FILE = REPO / "docs" / "suite.schema.json"


def _main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """``clinieval suite ARGS`` in this process: the exit status, stdout and stderr. ``main`` (the installed
    command's entry point, which turns a UserError into one line and exit 2) runs over the suite
    group alone: building the whole command tree costs ~0.4 s a call, the group ~0.04 s."""
    import clinieval.cli
    from clinieval.cli import main
    from clinieval.cli.suite import app

    monkeypatch.setattr(clinieval.cli, "app", app)
    monkeypatch.setattr(sys, "argv", ["clinieval", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    code, captured = exit_.value.code, capsys.readouterr()
    return int(code) if isinstance(code, int) else 1, captured.out, captured.err


def _suite(tmp_path: Path, text: str) -> Path:
    pubmedqa_folder(tmp_path / "pqa")
    path = tmp_path / "suite.toml"
    path.write_text(text, encoding="utf-8")
    return path


BAD: dict[str, list[tuple[str, str]]] = {
    "unknown key": [
        (GOOD + 'splt = "all"\n', '[benchmarks.pubmedqa] unknown key "splt"; did you mean "split"?'),
        ("sed = 3\n" + GOOD, 'unknown key "sed"; did you mean "seed"?'),
        (GOOD + "[endpoints]\ntimout = 3\n", '[endpoints] unknown key "timout"; did you mean "timeout"?'),
        (
            GOOD + "[judge]\nmodel = 'llamacpp:smollm2-135m-instruct'\nrepeat = 2\n",
            '[judge] unknown key "repeat"',
        ),
    ],
    "wrong type": [
        ('limit = "5"\n' + GOOD, 'limit: expected an integer, got "5"'),
        (GOOD + "max_tokens = 1.5\n", "[benchmarks.pubmedqa] max_tokens: expected an integer, got 1.5"),
        (GOOD + "shuffle = 'yes'\n", '[benchmarks.pubmedqa] shuffle: expected true or false, got "yes"'),
        (
            GOOD + "[endpoints]\nallow_host = 'h'\n",
            '[endpoints] allow_host: expected a list of strings, got "h"',
        ),
        (GOOD.replace('"openai:', "3 #"), "[models] a: expected a model spec string"),
        (GOOD + "judge = 3\n", "[benchmarks.pubmedqa] judge: expected a judge model spec, or false"),
    ],
    "not a choice": [
        (GOOD + 'split = "TEST"\n', '[benchmarks.pubmedqa] split: expected one of "test", "all", got "TEST"'),
        (
            GOOD + "[endpoints]\nexecutor = 'rai'\n",
            '[endpoints] executor: expected one of "local", "ray", got "rai"',
        ),
        (GOOD + 'split = "train"\n', 'split: expected one of "test", "all", got "train"'),
    ],
    "out of range": [
        ("limit = 0\n" + GOOD, "limit: expected a number of at least 1, got 0"),
        (GOOD + "[endpoints]\ntimeout = 0\n", "[endpoints] timeout: expected a number above 0, got 0"),
        (
            GOOD + "judge_repeats = 0\n",
            "[benchmarks.pubmedqa] judge_repeats: expected a number of at least 1",
        ),
    ],
    "missing": [
        ('[benchmarks.pubmedqa]\ndata = "pqa"\n', "no [models] table: name each model under test"),
        ('[models]\na = "llamacpp:smollm2-135m-instruct"\n', "no [benchmarks.NAME] table"),
        ('[models]\n[benchmarks.pubmedqa]\ndata = "pqa"\n', "[models] no model: name each model under test"),
        (GOOD + "[judge]\nrepeats = 2\n", "[judge] missing key model"),
        ('[models]\na = "llamacpp:smollm2-135m-instruct"\n[benchmarks]\n', "[benchmarks] no benchmark"),
    ],
    "unknown benchmark": [
        (
            GOOD.replace("pubmedqa]", "pubmedq]"),
            '[benchmarks] unknown benchmark "pubmedq"; did you mean "pubmedqa"?',
        ),
        (GOOD.replace("pubmedqa]", "PubMedQA]"), 'unknown benchmark "PubMedQA"; did you mean "pubmedqa"?'),
        (GOOD.replace("pubmedqa]", "mmlu]"), 'unknown benchmark "mmlu" (known: '),
    ],
    "toml syntax": [
        (GOOD.replace("[benchmarks.pubmedqa]", "[benchmarks.pubmedqa"), "not valid TOML: Expected ']'"),
        ("limit = \n" + GOOD, "not valid TOML: Invalid value (at line 1, column 9)"),
        (GOOD + "split = test\n", "not valid TOML: Invalid value (at line 6, column 9)"),
    ],
    "bad model": [
        (GOOD.replace('"openai:', '"foo:'), "[models] a: model spec 'foo:"),
        (
            GOOD.replace("127.0.0.1", "10.9.9.9"),
            "[models] a: endpoint 'http://10.9.9.9:9/v1': host '10.9.9.9' is not loopback",
        ),
        (
            GOOD.replace("@fault", ""),
            "[models] a: model spec 'openai:http://127.0.0.1:9/v1': expected URL@model-name",
        ),
        (
            '[models]\n"a b" = "llamacpp:smollm2-135m-instruct"\n[benchmarks.pubmedqa]\n',
            '[models] "a b": not a usable model name',
        ),
        (GOOD + "judge = 'llamacpp:no-such-model'\n", "[benchmarks.pubmedqa] judge: "),
        (GOOD + "[judge]\nmodel = 'openai:nowhere'\n", "[judge] model: model spec 'openai:nowhere'"),
    ],
    "worded for a suite file": [
        # the fix is a key of the suite file, not a command-line option a suite user cannot pass
        (
            GOOD.replace("127.0.0.1", "10.9.9.9"),
            'allowlist it with [endpoints] allow_host = ["10.9.9.9"] (or',
        ),
        (
            GOOD + "[judge]\nmodel = 'openai:http://10.1.2.3:8000/v1@j'\n",
            "[judge] model: endpoint 'http://10.1.2.3:8000/v1': host '10.1.2.3' is not loopback; patient "
            'data stays local unless you allowlist it with [endpoints] allow_host = ["10.1.2.3"]',
        ),
        (
            GOOD + "judge = 'openai:http://192.168.1.20:8000/v1@j'\n",
            "[benchmarks.pubmedqa] judge: endpoint 'http://192.168.1.20:8000/v1': host '192.168.1.20' is "
            "not loopback; patient data stays local unless you allowlist it with [endpoints] allow_host = "
            '["192.168.1.20"]',
        ),
    ],
    "bad margin": [
        (GOOD + "margin = 0\n", "[benchmarks.pubmedqa] margin: expected a number above 0, got 0"),
    ],
    "judge where none is": [
        (GOOD + "judge = true\n", "[benchmarks.pubmedqa] judge: pubmedqa is scored without a judge"),
        (GOOD + "judge_repeats = 3\n", "[benchmarks.pubmedqa] judge_repeats: pubmedqa is scored without"),
    ],
    "name clash": [
        (
            GOOD.replace("[models]\n", '[models]\nA = "openai:http://127.0.0.1:9/v1@fault"\n'),
            "[models] 'A' and 'a' differ only in case",
        ),
    ],
    "bad data": [
        (GOOD.replace('data = "pqa"', 'data = "nowhere"'), "[benchmarks.pubmedqa] data: "),
        (GOOD.replace('data = "pqa"', 'data = "pqa/ori_pqal.json"'), "not a folder"),
        (GOOD.replace('data = "pqa"', 'data = "empty"'), "ori_pqal.json"),
    ],
}
CASES = [(kind, text, message) for kind, cases in BAD.items() for text, message in cases]
"""Every case goes through ``suite run``; the first of each class through ``suite plan`` too."""
FIRSTS = {kind: cases[0] for kind, cases in BAD.items()}


@pytest.mark.parametrize(("kind", "text", "message"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_bad_suite_file_is_one_line_exit_2_and_nothing_written(
    kind: str,
    text: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "empty").mkdir()
    path = _suite(tmp_path, text)
    before = sorted(tmp_path.rglob("*"))
    commands = [["run", str(path), "--out", str(tmp_path / "out")]]
    if FIRSTS[kind] == (text, message):
        commands.append(["plan", str(path)])
    for command in commands:
        code, _, err = _main(monkeypatch, capsys, *command)
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(f"error: {path}: "), lines[0]
        assert message in lines[0], (kind, lines[0])
        assert "Traceback" not in err
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, no --out folder


def test_the_installed_command_refuses_a_bad_field_with_one_line(tmp_path: Path) -> None:
    path = _suite(tmp_path, GOOD + 'split = "TEST"\n')
    done = run_cli("suite", "run", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr == (
        f'error: {path}: [benchmarks.pubmedqa] split: expected one of "test", "all", got "TEST"; '
        'did you mean "test"?\n'
    )
    assert not (tmp_path / "out").exists()


def test_the_published_schema_is_the_generated_one() -> None:
    """docs/suite.schema.json is `clinieval suite schema`'s output; regenerate it with
    `clinieval suite schema > docs/suite.schema.json` when a benchmark's options change."""
    from clinieval.cli.suite import schema_text, suite_parts
    from clinieval.suite.layout import published_schema

    generated = schema_text(published_schema(suite_parts()))
    assert SCHEMA_FILE.read_text(encoding="utf-8") == generated
    schema = json.loads(generated)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "pubmedqa" in schema["properties"]["benchmarks"]["properties"]
    assert "typeText" not in generated and "requiredText" not in generated  # the checker's own keys


def test_the_schema_prints_through_the_command() -> None:
    done = run_cli("suite", "schema")
    assert done.returncode == 0, done.stderr
    assert done.stdout == SCHEMA_FILE.read_text(encoding="utf-8")


def test_an_options_dataclass_becomes_its_table_schema() -> None:
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Options:
        data: Path | None = field(default=None, metadata={"help": "where"})
        format: Literal["mc", "free"] = "mc"
        names: tuple[str, ...] = ("a",)
        rate: float = 0.5
        on: bool = True

    schema = options_schema(Options)
    assert schema["additionalProperties"] is False
    assert schema["properties"] == {
        "data": {"type": "string", "format": "path", "description": "where"},
        "format": {"type": "string", "enum": ["mc", "free"], "default": "mc"},
        "names": {"type": "array", "items": {"type": "string"}, "default": ["a"]},
        "rate": {"type": "number", "default": 0.5},
        "on": {"type": "boolean", "default": True},
    }
    with pytest.raises(SchemaError):
        field_schema(dict[str, int])
    with pytest.raises(SchemaError):
        options_schema(Options, extra={"format": {"type": "string"}})


def test_endpoint_keys_are_the_command_lines_endpoint_options() -> None:
    """[endpoints] mirrors the Endpoints option group key for key (the CLI turns one into the other)."""
    import dataclasses

    from clinieval.cli_commands import Endpoints
    from clinieval.suite.layout import EndpointSettings

    ours = [f.name for f in dataclasses.fields(EndpointSettings)]
    # server_kind is the one key more: the commands take it as --server-kind beside the group
    # (Endpoints.backend(server_kind)), and a pre-flight refusal names it, so a suite needs it too
    assert [n for n in ours if n != "server_kind"] == [f.name for f in dataclasses.fields(Endpoints)]
    assert EndpointSettings().server_kind is None
    ours.remove("server_kind")
    for name in ours:  # the same defaults (a list option's None is an empty tuple here)
        assert getattr(EndpointSettings(), name) in (getattr(Endpoints(), name), ())


def test_the_example_in_docs_plans_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/suite.md's suite file, copied as a user copies it, beside the demo's EHRNoteQA set."""
    from clinieval.cli.suite import suite_parts
    from tests.conftest import need_shared

    need_shared("pubmedqa")
    text = (REPO / "docs" / "suite.md").read_text(encoding="utf-8")
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "suite.toml"
    path.write_text("\n".join(line.removeprefix("   ") for line in block.splitlines()), encoding="utf-8")
    [ehrnoteqa] = [p for p in suite_parts() if p.name == "ehrnoteqa"]
    ehrnoteqa.synthetic(tmp_path / "runs" / "suite-demo" / "data" / "ehrnoteqa", 0)
    monkeypatch.chdir(tmp_path / "runs")  # relative paths are the suite file's, not the shell's
    # the example's servers are not running here: the plan's pre-flight names each model once,
    # with the cells it would refuse, and --no-check plans from the file and the data alone
    code, _, err = _main(monkeypatch, capsys, "plan", str(path))
    assert code == 2 and "4 cells would be refused before the first model call: (1) " in err
    assert "pubmedqa × llama8b, ehrnoteqa × llama8b: cannot reach http://127.0.0.1:8000/v1" in err
    code, table, err = _main(monkeypatch, capsys, "plan", str(path), "--no-check")
    assert code == 0, err
    assert "not checked" in table
    assert "4 cells (2 models x 2 benchmarks)" in table
    assert "pubmedqa   llama8b" in table and "ehrnoteqa  qwen7b" in table
    assert "answer 100 questions (100)" in table  # the benchmark's own limit won over the suite's


def test_endpoint_options_in_an_error_become_the_suite_files_keys() -> None:
    from clinieval.suite.layout import in_suite_terms

    assert (
        in_suite_terms("try --n-ctx 8192 or a shorter record")
        == "try [endpoints] n_ctx = 8192 or a shorter record"
    )
    assert in_suite_terms("raise --timeout (now 120 s)") == "raise [endpoints] timeout (now 120 s)"
    assert in_suite_terms("pass --no-proxy, or --ca-bundle FILE") == (
        "pass [endpoints] no_proxy, or [endpoints] ca_bundle FILE"
    )
    # options that are not endpoint keys stay as they are
    assert in_suite_terms("use --scorer choice or --limit 5") == "use --scorer choice or --limit 5"


def test_every_fault_of_a_suite_file_is_named_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: a file with three faults named only the first, so fixing it took three runs."""
    text = 'sed = 3\nlimit = "5"\n' + GOOD + "splt = 'all'\n"
    path = _suite(tmp_path, text)
    code, _, err = _main(monkeypatch, capsys, "plan", str(path))
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {path}: 3 problems: (1) ")
    assert 'unknown key "sed"' in line and 'limit: expected an integer, got "5"' in line
    assert '[benchmarks.pubmedqa] unknown key "splt"; did you mean "split"?' in line


def test_every_endpoints_key_reaches_the_models_options() -> None:
    """Each ``[endpoints]`` key, set away from its default, changes what models are opened with
    exactly as the same command-line option does (backend_for copies the table by field name)."""
    import dataclasses

    from clinieval.cli.suite import backend_for
    from clinieval.cli_commands import Endpoints
    from clinieval.suite.layout import EndpointSettings

    bundle = Path("/etc/ssl/certs/ca-certificates.crt")  # any readable PEM bundle (Debian's)
    table = EndpointSettings(
        n_ctx=1234,
        timeout=7.5,
        retries=1,
        concurrency=3,
        allow_host=("models.example.org",),
        ca_bundle=bundle,
        no_proxy=True,
        fingerprint="warn",
        server_kind="vllm",
        executor="ray",
        ray_address="head:6379",
        ray_workers=2,
    )
    options, in_flight = backend_for(table)
    same = Endpoints(
        n_ctx=1234,
        timeout=7.5,
        retries=1,
        concurrency=3,
        allow_host=["models.example.org"],
        ca_bundle=bundle,
        no_proxy=True,
        fingerprint="warn",
        executor="ray",
        ray_address="head:6379",
        ray_workers=2,
    )
    assert options == same.backend("vllm")
    assert in_flight == same.in_flight()
    defaults = backend_for(EndpointSettings())[0]
    changed = [
        f.name for f in dataclasses.fields(options) if getattr(options, f.name) != getattr(defaults, f.name)
    ]
    # chat is the one option a suite's [endpoints] never sets (it follows each model's spec)
    assert sorted(changed) == sorted(f.name for f in dataclasses.fields(options) if f.name != "chat")
