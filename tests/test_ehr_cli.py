"""`clinieval ehr …` end to end on real and synthetic data, and the OMOP → XML round trip."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from clinieval.ehr.medalign_xml import read_xml, timeline_to_xml
from clinieval.ehr.omop.source import open_omop
from tests.conftest import need_shared, run_cli


@pytest.fixture(scope="module")
def synthea() -> Path:
    return need_shared("omop-synthea27nj")


def person_rows(folder: Path, table: str) -> Counter[str]:
    with (folder / f"{table.upper()}.csv").open(newline="") as f:
        return Counter(row["person_id"] for row in csv.DictReader(f))


def test_omop2xml_on_synthea_writes_28_documents_with_matching_counts(synthea: Path, tmp_path: Path) -> None:
    out = tmp_path / "xml"
    done = run_cli("ehr", "omop2xml", str(synthea), str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "28 patients written" in done.stdout
    files = sorted(out.glob("*.xml"))
    assert len(files) == 28
    visits = person_rows(synthea, "visit_occurrence")
    conditions = person_rows(synthea, "condition_occurrence")
    drugs = person_rows(synthea, "drug_exposure")
    measurements = person_rows(synthea, "measurement")
    for path in files:
        tl = read_xml(path)
        pid = path.stem
        by_domain = Counter(e.domain for e in tl.events)
        assert by_domain["condition_occurrence"] == conditions[pid]
        assert by_domain["drug_exposure"] == drugs[pid]
        assert by_domain["measurement"] == measurements[pid]
        real_visits = [v for v in tl.visits if v.type != "No visit"]
        assert len(real_visits) <= visits[pid]  # visits with no events have no day to show


def test_omop_xml_timeline_xml_is_stable(synthea: Path) -> None:
    with open_omop(synthea) as source:
        for tl in list(source.iter_timelines())[:5]:
            first = timeline_to_xml(tl)
            again = timeline_to_xml(read_xml(first))
            assert again == first


def test_synth_then_stats(tmp_path: Path) -> None:
    omop = tmp_path / "omop"
    made = run_cli("ehr", "synth", "--patients", "6", "--seed", "3", str(omop))
    assert made.returncode == 0, made.stderr
    stats_csv = tmp_path / "stats.csv"
    done = run_cli("ehr", "stats", str(omop), "--csv", str(stats_csv))
    assert done.returncode == 0, done.stderr
    assert "tokens" in done.stdout and "6 patients" in done.stdout
    rows = list(csv.DictReader(stats_csv.open()))
    assert len(rows) == 6 and all(int(r["tokens"]) > 100 for r in rows)
    with open_omop(omop) as source:
        tl = next(iter(source.iter_timelines()))
    from clinieval.context.tokenizers import tokenizer_from_spec

    tok = tokenizer_from_spec("tiktoken:cl100k_base")
    assert int(rows[0]["tokens"]) == tok.count(timeline_to_xml(tl))


def test_bad_inputs_leave_no_output_folder(tmp_path: Path) -> None:
    empty = tmp_path / "not-omop"
    empty.mkdir()
    out = tmp_path / "out"
    done = run_cli("ehr", "omop2xml", str(empty), str(out))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "person" in done.stderr.lower()
    assert not out.exists()
    bad_xml = tmp_path / "bad.xml"
    bad_xml.write_text("<record><visit type='x' start='01/01/2020 10:00'>\n<day>\n</record>")
    done = run_cli("ehr", "stats", str(bad_xml))
    assert done.returncode == 2 and "line" in done.stderr and "column" in done.stderr
    weird = tmp_path / "weird.xml"
    weird.write_text("<patient/>")
    done = run_cli("ehr", "stats", str(weird))
    assert done.returncode == 2 and "patient" in done.stderr


def test_memory_limit_is_passed_to_duckdb(synthea: Path, tmp_path: Path) -> None:
    out = tmp_path / "xml"
    bad = run_cli("ehr", "omop2xml", str(synthea), str(out), "--memory-limit", "lots")
    assert bad.returncode == 2 and "bad memory_limit 'lots'" in bad.stderr
    assert not out.exists()
