"""``clinieval correlate``: benchmark-vs-clinician Spearman and Kendall tables (EHRNoteQA's analysis).

Every table is a real file written into tmp_path, read by the same reader the command uses.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from clinieval.analysis.correlate import CLINICIAN_MEAN, correlate_scores
from clinieval.analysis.correlate_markdown import render_markdown, write_outputs
from clinieval.analysis.model_scores import read_scores, split_columns
from clinieval.errors import UserError
from tests.conftest import run_cli

# Five models; A orders them as c1 does except one adjacent swap, c2 is the exact reverse of A.
BENCH = "model,A,B\nm1,1,10\nm2,2,30\nm3,3,20\nm4,4,50\nm5,5,40\n"
CLIN = "model,c1,c2\nm1,1,5\nm2,2,4\nm3,3,3\nm4,5,2\nm5,4,1\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def run(tmp_path: Path, bench: str = BENCH, clin: str = CLIN, **kw: Any) -> dict[str, Any]:
    b = read_scores(write(tmp_path / "bench.csv", bench), role="benchmark")
    c = read_scores(write(tmp_path / "clin.csv", clin), role="clinician")
    return correlate_scores(b, c, **kw)


def stat(result: dict[str, Any], bench: str, clin: str, kind: str) -> float:
    value = result["cells"][bench][clin][kind]["statistic"]
    assert value is not None, result["cells"][bench][clin][kind]
    return float(value)


def cell_values(result: dict[str, Any]) -> dict[tuple[str, str, str], tuple[Any, Any, int]]:
    return {
        (b, c, k): (cell[k]["statistic"], cell[k]["pvalue"], cell["n"])
        for b, row in result["cells"].items()
        for c, cell in row.items()
        for k in ("spearman", "kendall")
    }


# --- the numbers ---------------------------------------------------------------------------------


def test_hand_computed_values(tmp_path: Path) -> None:
    r = run(tmp_path)
    # A vs c1: one adjacent swap in 5 -> sum d^2 = 2, rho = 1 - 6*2/(5*24) = 0.9;
    # 9 concordant, 1 discordant of 10 pairs -> tau = 0.8; exact p = 2 * (1 + 4) / 5! = 1/12.
    assert stat(r, "A", "c1", "spearman") == pytest.approx(0.9)
    assert stat(r, "A", "c1", "kendall") == pytest.approx(0.8)
    assert r["cells"]["A"]["c1"]["kendall"]["pvalue"] == pytest.approx(1 / 12)
    # Spearman's p is the t approximation: t = rho * sqrt((n-2)/(1-rho^2)) on n-2 df.
    t = 0.9 * math.sqrt(3 / (1 - 0.81))
    assert r["cells"]["A"]["c1"]["spearman"]["pvalue"] == pytest.approx(2 * stats.t.sf(t, 3))
    assert stat(r, "A", "c2", "spearman") == pytest.approx(-1.0)
    assert stat(r, "A", "c2", "kendall") == pytest.approx(-1.0)
    # B = ranks 1,3,2,5,4 vs c1 = 1,2,3,5,4: d = 0,1,-1,0,0 -> rho 0.9; pairs: 1 discordant -> tau 0.8
    assert stat(r, "B", "c1", "spearman") == pytest.approx(0.9)
    # mean over the two clinicians
    mean = r["mean_over_clinicians"]["A"]
    assert mean["spearman"]["mean"] == pytest.approx((0.9 - 1.0) / 2)
    assert mean["kendall"]["mean"] == pytest.approx((0.8 - 1.0) / 2)
    assert mean["spearman"]["clinicians"] == ["c1", "c2"]
    assert r["cells"]["A"]["c1"]["n"] == 5
    assert r["cells"]["A"]["c1"]["models"] == ["m1", "m2", "m3", "m4", "m5"]


def test_matches_scipy_on_random_tables_with_missing_cells(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    models = [f"model-{i}" for i in range(9)]
    benches, clins = ["b1", "b2", "b3"], ["c1", "c2", "c3"]
    bench = rng.normal(size=(9, 3)).round(3)
    clin = (bench[:, [0]] * 0.5 + rng.normal(size=(9, 3))).round(1)  # round -> some ties
    bench_missing = rng.random((9, 3)) < 0.15
    clin_missing = rng.random((9, 3)) < 0.15

    def csv_text(names: list[str], values: np.ndarray, missing: np.ndarray) -> str:
        lines = ["model," + ",".join(names)]
        for i, m in enumerate(models):
            lines.append(
                m + "," + ",".join("" if missing[i, j] else repr(float(values[i, j])) for j in range(3))
            )
        return "\n".join(lines) + "\n"

    r = run(tmp_path, csv_text(benches, bench, bench_missing), csv_text(clins, clin, clin_missing))
    checked = 0
    for j, b in enumerate(benches):
        for k, c in enumerate(clins):
            keep = ~bench_missing[:, j] & ~clin_missing[:, k]
            x, y = bench[keep, j], clin[keep, k]
            cell = r["cells"][b][c]
            assert cell["n"] == int(keep.sum())
            assert cell["models"] == [m for m, kept in zip(models, keep, strict=True) if kept]
            rho, tau = stats.spearmanr(x, y), stats.kendalltau(x, y)
            assert cell["spearman"]["statistic"] == pytest.approx(rho.statistic, abs=1e-12)
            assert cell["spearman"]["pvalue"] == pytest.approx(rho.pvalue, rel=1e-9)
            assert cell["kendall"]["statistic"] == pytest.approx(tau.statistic, abs=1e-12)
            assert cell["kendall"]["pvalue"] == pytest.approx(tau.pvalue, rel=1e-9)
            checked += 1
        # the clinician-mean pseudo column: the mean over models every clinician scored
        full = ~clin_missing.any(axis=1) & ~bench_missing[:, j]
        tau = stats.kendalltau(bench[full, j], clin[full].mean(axis=1))
        assert r["cells"][b][CLINICIAN_MEAN]["kendall"]["statistic"] == pytest.approx(tau.statistic)
        assert r["cells"][b][CLINICIAN_MEAN]["n"] == int(full.sum())
    assert checked == 9
    assert bench_missing.any() and clin_missing.any()  # the seed really exercises missing cells


def test_missing_cells_use_only_shared_models(tmp_path: Path) -> None:
    bench = "model,A\nm1,1\nm2,2\nm3,\nm4,4\nm5,5\nm6,6\nextra,7\n"
    clin = "model,c1\nm1,1\nm2,2\nm3,3\nm4,NA\nm5,6\nm6,5\nonly-here,9\n"
    r = run(tmp_path, bench, clin)
    cell = r["cells"]["A"]["c1"]
    assert cell["models"] == ["m1", "m2", "m5", "m6"]
    assert cell["n"] == 4
    assert cell["spearman"]["statistic"] == pytest.approx(stats.spearmanr([1, 2, 5, 6], [1, 2, 6, 5])[0])
    assert r["models"]["only_in_benchmarks"] == ["extra"]
    assert r["models"]["only_in_clinicians"] == ["only-here"]
    notes = " ".join(r["notes"])
    assert "extra" in notes and "only-here" in notes
    assert "every correlation here is over fewer than 5 models (n = 4)" in notes
    # a single clinician: no clinician-mean column (it would repeat c1)
    assert r["clinician_mean"] is None and CLINICIAN_MEAN not in r["cells"]["A"]
    assert "n = 4" in render_markdown(r)


def test_constant_clinician_is_an_undefined_cell_not_a_crash(tmp_path: Path) -> None:
    clin = "model,c1,flat\nm1,1,3\nm2,2,3\nm3,3,3\nm4,5,3\nm5,4,3\n"
    r = run(tmp_path, clin=clin)
    flat = r["cells"]["A"]["flat"]
    for kind in ("spearman", "kendall"):
        assert flat[kind]["statistic"] is None and flat[kind]["pvalue"] is None
        assert "the clinician gives all 5 models the same score" in flat[kind]["undefined"]
    assert stat(r, "A", "c1", "spearman") == pytest.approx(0.9)
    # the mean is over the clinicians with a value, and says which
    assert r["mean_over_clinicians"]["A"]["spearman"] == {"mean": pytest.approx(0.9), "clinicians": ["c1"]}
    md = render_markdown(r)
    assert "## Undefined" in md and "A vs flat, spearman (n = 5)" in md
    assert "(1 of 2)" in md


def test_too_few_models_for_spearman_still_gives_kendall(tmp_path: Path) -> None:
    r = run(tmp_path, "model,A\nm1,1\nm2,2\n", "model,c1\nm1,2\nm2,1\n")
    cell = r["cells"]["A"]["c1"]
    assert (
        cell["spearman"]["undefined"] == "only 2 model(s) have both scores; Spearman's rho needs at least 3"
    )
    assert cell["kendall"]["statistic"] == pytest.approx(-1.0)
    assert r["best"]["spearman"]["mean_over_clinicians"] == []
    assert "— (undefined)" in render_markdown(r)


def test_means_over_different_clinicians_are_flagged_and_n_shown_per_cell(tmp_path: Path) -> None:
    bench = "model,A,B\nm1,1,1\nm2,2,\nm3,3,\nm4,4,4\nm5,5,5\n"
    clin = "model,c1,c2\nm1,1,\nm2,2,2\nm3,3,3\nm4,5,4\nm5,4,5\n"
    r = run(tmp_path, bench, clin)
    assert r["cells"]["B"]["c2"]["n"] == 2 and r["cells"]["B"]["c2"]["spearman"]["statistic"] is None
    assert r["mean_over_clinicians"]["B"]["spearman"]["clinicians"] == ["c1"]
    assert r["mean_over_clinicians"]["A"]["spearman"]["clinicians"] == ["c1", "c2"]
    assert any("means are over fewer clinicians" in n for n in r["notes"])
    # only some pairs are small: they are listed, the n = 5 pair is not
    small = next(n for n in r["notes"] if n.startswith("fewer than 5 models for "))
    assert "A vs c2 (n = 4)" in small and "B vs c2 (n = 2)" in small and "A vs c1" not in small
    md = render_markdown(r)
    assert "Every correlation is over" not in md
    assert "(p = 0.037, n = 5)" in md  # A vs c1: rho 0.9 on all five models


def test_no_shared_model_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no model appears in both .*bench.csv.*clin.csv"):
        run(tmp_path, "model,A\nx,1\ny,2\n", "model,c1\nGPT,1\nclaude,2\n")


def test_lower_is_better_flips_the_sign(tmp_path: Path) -> None:
    plain = run(tmp_path)
    flipped = run(tmp_path, lower_is_better={"A"})
    assert stat(flipped, "A", "c1", "spearman") == pytest.approx(-stat(plain, "A", "c1", "spearman"))
    assert stat(flipped, "A", "c1", "kendall") == pytest.approx(-0.8)
    assert stat(flipped, "B", "c1", "kendall") == pytest.approx(stat(plain, "B", "c1", "kendall"))
    assert flipped["lower_is_better"] == ["A"]
    assert any("A: lower is better" in n for n in flipped["notes"])
    assert "A (lower is better, negated)" in render_markdown(flipped)
    with pytest.raises(
        UserError, match=r"lower-is-better names 'Z', which is not a benchmark in .*bench.csv"
    ):
        run(tmp_path, lower_is_better={"Z"})


def test_best_per_clinician_and_overall_with_ties(tmp_path: Path) -> None:
    bench = "model,A,copy of A,bad\nm1,1,1,5\nm2,2,2,4\nm3,3,3,3\nm4,4,4,1\nm5,5,5,2\n"
    r = run(tmp_path, bench, "model,c1,c2\nm1,1,1\nm2,2,3\nm3,3,2\nm4,5,4\nm5,4,5\n")
    best = r["best"]
    assert best["spearman"]["per_clinician"]["c1"] == ["A", "copy of A"]
    assert best["kendall"]["mean_over_clinicians"] == ["A", "copy of A"]
    assert best["spearman"]["per_clinician"][CLINICIAN_MEAN] == ["A", "copy of A"]
    md = render_markdown(r)
    assert "A, copy of A (tie)" in md
    a_row = next(line for line in md.splitlines() if line.startswith("| A |"))
    bad_row = next(line for line in md.splitlines() if line.startswith("| bad |"))
    assert a_row.count("**") > 0 and "**" not in bad_row


def test_a_clear_winner_is_named_alone(tmp_path: Path) -> None:
    r = run(tmp_path)
    # A: 0.9 and -1 (mean -0.05); B vs c2: ranks 1,3,2,5,4 vs 5,4,3,2,1 -> rho -0.8 -> mean 0.05
    assert r["best"]["spearman"]["mean_over_clinicians"] == ["B"]
    assert r["best"]["spearman"]["per_clinician"]["c2"] == ["B"]


def test_markdown_escapes_text_from_the_data(tmp_path: Path) -> None:
    bench = "model,a|b <i>*x*</i>\nm1,1\nm2,2\nm3,3\nm4,4\nm5,5\n"
    md = render_markdown(run(tmp_path, bench, "model,_c1_\nm1,1\nm2,2\nm3,3\nm4,5\nm5,4\n"))
    assert "a\\|b \\<i\\>\\*x\\*\\</i\\>" in md
    assert "\\_c1\\_ ρ" in md
    header = next(line for line in md.splitlines() if line.startswith("| benchmark |"))
    # the escaped pipe adds no column: benchmark, c1 rho, c1 tau, mean rho, mean tau
    assert header.count(" | ") == len(["benchmark", "c1 ρ", "c1 τ", "mean ρ", "mean τ"]) - 1


# --- formats -------------------------------------------------------------------------------------


LONG_BENCH = "model\tbenchmark\tscore\n" + "".join(
    f"{m}\t{b}\t{v}\n"
    for m, a, bb in [("m1", 1, 10), ("m2", 2, 30), ("m3", 3, 20), ("m4", 4, 50), ("m5", 5, 40)]
    for b, v in (("A", a), ("B", bb))
)


def test_wide_and_long_layouts_in_every_format_agree(tmp_path: Path) -> None:
    reference = cell_values(run(tmp_path))
    rows = [line.split(",") for line in CLIN.strip().splitlines()]
    clin_objects = [{"model": r[0], "c1": float(r[1]), "c2": float(r[2])} for r in rows[1:]]
    clin_files = {
        "clin.tsv": CLIN.replace(",", "\t"),
        "clin.txt": CLIN.replace(",", "\t"),  # .txt: tab sniffed from the header
        "clin.json": json.dumps(clin_objects, indent=2),
        "clin_keyed.json": json.dumps({o["model"]: {"c1": o["c1"], "c2": o["c2"]} for o in clin_objects}),
        "clin.jsonl": "".join(json.dumps(o) + "\n" for o in clin_objects),
        "clin_lines.json": "".join(json.dumps(o) + "\n" for o in clin_objects),  # JSON Lines named .json
        "clin_long.csv": "model,clinician,score\n"
        + "".join(f"{o['model']},{c},{o[c]}\n" for o in clin_objects for c in ("c1", "c2")),
    }
    bench = read_scores(write(tmp_path / "bench_long.tsv", LONG_BENCH))
    assert bench.layout == "long" and bench.columns == ("A", "B")
    for name, text in clin_files.items():
        clin = read_scores(write(tmp_path / name, text))
        assert clin.columns == ("c1", "c2"), name
        assert cell_values(correlate_scores(bench, clin)) == reference, name
    assert read_scores(tmp_path / "clin_long.csv").layout == "long"
    assert read_scores(tmp_path / "clin.txt").layout == "wide"


def test_model_column_is_configurable_and_hash_is_recorded(tmp_path: Path) -> None:
    path = write(tmp_path / "b.csv", BENCH.replace("model", "LLM", 1))
    table = read_scores(path, model_column="LLM")
    assert table.models == ("m1", "m2", "m3", "m4", "m5")
    assert table.source() == {
        "file": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "layout": "wide",
    }
    with pytest.raises(
        UserError, match=r"b.csv:1: no column 'model' naming the models; the columns are 'LLM'"
    ):
        read_scores(path)


def test_one_file_split_into_benchmarks_and_clinicians(tmp_path: Path) -> None:
    both = "model,A,c1,B,c2\n" + "".join(
        f"{b.split(',')[0]},{b.split(',')[1]},{c.split(',')[1]},{b.split(',')[2]},{c.split(',')[2]}\n"
        for b, c in zip(BENCH.splitlines()[1:], CLIN.splitlines()[1:], strict=True)
    )
    table = read_scores(write(tmp_path / "both.csv", both))
    bench, clin = split_columns(table, ["c1", "c2"])
    assert bench.columns == ("A", "B") and clin.columns == ("c1", "c2")
    assert cell_values(correlate_scores(bench, clin)) == cell_values(run(tmp_path))
    # a long file holding both is split by the names in its label column
    long_both = "model,benchmark,score\n" + "".join(
        f"{m},{name},{v}\n"
        for m in bench.models
        for name, v in (("A", bench.scores["A"][m]), ("c1", clin.scores["c1"][m]))
    )
    lb, lc = split_columns(read_scores(write(tmp_path / "long_both.csv", long_both)), ["c1"])
    assert lb.columns == ("A",) and lc.columns == ("c1",) and lb.layout == "long"
    long_cells = cell_values(correlate_scores(lb, lc))
    assert long_cells[("A", "c1", "kendall")] == cell_values(run(tmp_path))[("A", "c1", "kendall")]
    with pytest.raises(UserError, match=r"both.csv: no column 'c9' among the clinician columns"):
        split_columns(table, ["c1", "c9"])
    with pytest.raises(UserError, match=r"both.csv: every score column is a clinician"):
        split_columns(table, ["A", "B", "c1", "c2"])
    with pytest.raises(UserError, match=r"clinician column list is empty"):
        split_columns(table, [])


def test_a_clinician_named_like_the_mean_column_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"clin.csv: a clinician is named 'clinician mean'"):
        run(tmp_path, clin="model,c1,clinician mean\nm1,1,1\nm2,2,2\nm3,3,3\n")
    # without the mean column the name is free
    r = run(tmp_path, clin="model,c1,clinician mean\nm1,1,1\nm2,2,2\nm3,3,3\n", clinician_mean=False)
    assert r["clinicians"] == ["c1", "clinician mean"] and r["clinician_mean"] is None


# --- bad input: one UserError naming file, line/row and column -----------------------------------


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.csv", "", r"bad.csv: the file is empty"),
        ("bad.csv", "\n  \n", r"bad.csv: the file is empty"),
        ("bad.csv", "model,A\n", r"bad.csv:1: a header but no rows"),
        (
            "bad.csv",
            "name,A\nm1,1\n",
            r"bad.csv:1: no column 'model' naming the models; the columns are 'name'",
        ),
        (
            "bad.csv",
            "model,A\nm1,1\nm2,2\nm1,3\n",
            r"bad.csv:4: model 'm1' appears again \(first at .*bad.csv:2\)",
        ),
        ("bad.csv", "model,A\nm1,1\nm2,abc\n", r"bad.csv:3: column 'A' is 'abc'; expected a number"),
        ("bad.csv", "model,A\nm1,inf\n", r"bad.csv:2: column 'A' is 'inf'; expected a finite number"),
        ("bad.csv", "model,A,B\nm1,1,2\nm2,1\n", r"bad.csv:3: 2 cells but the header has 3 columns"),
        ("bad.csv", "model,A,A\nm1,1,2\n", r"bad.csv:1: column\(s\) 'A' appear more than once"),
        ("bad.csv", "model,,B\nm1,1,2\n", r"bad.csv:1: column 2 of the header has no name"),
        ("bad.csv", "model,A\nm1,1\n ,2\n", r"bad.csv:3: column 'model' is empty; expected a model name"),
        ("bad.csv", "model\nm1\n", r"bad.csv:1: only the model column 'model'; expected one numeric column"),
        (
            "bad.csv",
            "model,benchmark,score\nm1,A,1\nm2,A,2\nm1,A,3\n",
            r"bad.csv:4: model 'm1' and benchmark 'A' appear again \(first at .*bad.csv:2\)",
        ),
        (
            "bad.csv",
            "model,benchmark,score\nm1,,1\n",
            r"bad.csv:2: column 'benchmark' is ''; expected a benchmark",
        ),
        (
            "bad.csv",
            "model,benchmark,score\nm1,A,x\n",
            r"bad.csv:2: column 'score' is 'x'; expected a number",
        ),
        (
            "bad.csv",
            "model,benchmark,score,notes\nm1,A,1,ok\n",
            r"bad.csv:1: looks like the long layout .* also has column\(s\) 'notes'",
        ),
        ("bad.json", '[{"model": "m1", "A": 1},\n oops]', r"bad.json:2: not valid JSON"),
        ("bad.json", '[{"model": "m1", "A": 1}, 3]', r"bad.json: row 2 is int; expected an array of row"),
        (
            "bad.json",
            '[{"model": "m1", "A": true}]',
            r"bad.json: row 1: column 'A' is True; expected a number",
        ),
        ("bad.json", '"just a string"', r"bad.json: expected an array of row objects"),
        (
            "bad.json",
            '{"m1": {"A": "high"}}',
            r"bad.json: model 'm1': column 'A' is 'high'; expected a number",
        ),
        ("bad.json", '{"m1": {"model": "m1", "A": 1}}', r"bad.json: model 'm1': has a 'model' field"),
        ("bad.jsonl", '{"model": "m1", "A": 1}\n[1, 2]\n', r"bad.jsonl:2: expected a JSON object per line"),
        ("bad.jsonl", '{"model": "m1", "A": 1}\n{oops\n', r"bad.jsonl:2: not valid JSON"),
        ("bad.xlsx", "model,A\nm1,1\n", r"bad.xlsx: expected a .csv, .tsv, .txt, .json or .jsonl file"),
    ],
)
def test_bad_tables_give_one_user_error(tmp_path: Path, name: str, content: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        read_scores(write(tmp_path / name, content))


def test_unreadable_files_give_one_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"nope.csv: file not found"):
        read_scores(tmp_path / "nope.csv")
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("model,A\nm\xe9,1\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"latin1.csv: byte 9 is not UTF-8"):
        read_scores(bad)
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(UserError, match=r"dir.csv: is a folder"):
        read_scores(tmp_path / "dir.csv")


def test_blank_and_na_cells_are_missing_and_a_bom_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_bytes(b"\xef\xbb\xbfmodel,A\nm1,1\nm2,\nm3,NA\nm4, 4.5 \n")
    table = read_scores(path)
    assert table.models == ("m1", "m2", "m3", "m4")
    assert dict(table.scores["A"]) == {"m1": 1.0, "m4": 4.5}


# --- output files ----------------------------------------------------------------------------------


def test_write_outputs_replaces_files_atomically(tmp_path: Path) -> None:
    r = run(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "correlation.json").write_text("old")
    json_path, md_path = write_outputs(r, out)
    assert json.loads(json_path.read_text()) == json.loads(json.dumps(r))
    assert md_path.read_text() == render_markdown(r)
    assert sorted(p.name for p in out.iterdir()) == ["correlation.json", "correlation.md"]  # no temp files
    blocker = write(tmp_path / "a-file", "")
    with pytest.raises(UserError, match=r"cannot create the output folder .*a-file"):
        write_outputs(r, blocker / "sub")


# --- the command -----------------------------------------------------------------------------------


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_cli_writes_json_and_markdown(tmp_path: Path) -> None:
    bench, clin = write(tmp_path / "bench.csv", BENCH), write(tmp_path / "clin.csv", CLIN)
    out = tmp_path / "report"
    proc = run_cli(
        "correlate", "--benchmarks", str(bench), "--clinicians", str(clin), "--out", str(out), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "correlation.json").read_text())
    assert data["cells"]["A"]["c1"]["spearman"]["statistic"] == pytest.approx(0.9)
    assert data["inputs"]["benchmarks"]["sha256"] == hashlib.sha256(bench.read_bytes()).hexdigest()
    md = (out / "correlation.md").read_text()
    assert md.startswith("# Benchmark–clinician correlation")
    assert "| benchmark | c1 ρ | c1 τ | c2 ρ | c2 τ | mean ρ | mean τ |" in proc.stdout
    assert "| A (lower" not in proc.stdout
    assert "**0.900** (p = 0.037)" in proc.stdout  # A and B tie at 0.9 with c1: both bold


def test_cli_one_file_with_clinician_columns_and_lower_is_better(tmp_path: Path) -> None:
    both = write(
        tmp_path / "both.csv", "model,rank,c1,c2\nm1,5,1,1\nm2,4,2,3\nm3,3,3,2\nm4,2,5,4\nm5,1,4,5\n"
    )
    out = tmp_path / "o"
    args = ["correlate", "--benchmarks", str(both), "--clinician-columns", "c1, c2", "--out", str(out)]
    proc = run_cli(*args, "--lower-is-better", "rank", "--no-clinician-mean", timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "correlation.json").read_text())
    assert data["benchmarks"] == ["rank"] and data["clinicians"] == ["c1", "c2"]
    assert data["lower_is_better"] == ["rank"] and data["clinician_mean"] is None
    # rank 5..1 negated is m1 < ... < m5, which orders the models as c1 does but for one swap
    assert data["cells"]["rank"]["c1"]["spearman"]["statistic"] == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("bench", "extra", "needles"),
    [
        ("model,A\nm1,1\nm1,2\n", [], ["bench.csv:3", "model 'm1' appears again"]),
        ("model,A\nm1,1\nm2,high\n", [], ["bench.csv:3", "column 'A' is 'high'"]),
        ("llm,A\nm1,1\n", [], ["bench.csv:1", "no column 'model'", "--model-column"]),
        (BENCH, ["--lower-is-better", "Z"], ["lower-is-better names 'Z'"]),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, bench: str, extra: list[str], needles: list[str]
) -> None:
    b, c = write(tmp_path / "bench.csv", bench), write(tmp_path / "clin.csv", CLIN)
    out = tmp_path / "out"
    proc = run_cli("correlate", "--benchmarks", str(b), "--clinicians", str(c), "--out", str(out), *extra)
    assert_one_line_error(proc, *needles)
    assert not out.exists()  # nothing is written when the input is bad
    assert proc.stdout == ""


def test_cli_needs_exactly_one_source_of_clinicians(tmp_path: Path) -> None:
    b, c = write(tmp_path / "bench.csv", BENCH), write(tmp_path / "clin.csv", CLIN)
    proc = run_cli("correlate", "--benchmarks", str(b))
    assert_one_line_error(proc, "give either --clinicians FILE, or --clinician-columns")
    proc = run_cli("correlate", "--benchmarks", str(b), "--clinicians", str(c), "--clinician-columns", "A")
    assert_one_line_error(proc, "give either --clinicians FILE")
    proc = run_cli("correlate", "--benchmarks", str(b), "--clinician-columns", "A,,B")
    assert_one_line_error(proc, "--clinician-columns 'A,,B'")
