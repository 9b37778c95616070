"""The results browser (`clinieval view`): two arms run for real by the CLI against a local server,
judged by `clinieval medalign judge` against the same server, written as a site; its pages hold
what they should (question, both answers, scores, rationales), escape what runs hold, page long
text; a real Chromium filters the index from file:// and follows a link to an item page."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from clinieval.context.fit import drop_if_over, keep_oldest, keep_recent
from clinieval.context.tokenizers import tokenizer_from_spec
from clinieval.errors import UserError
from clinieval.records.runs import RunDir, append_record, build_manifest
from clinieval.records.sample_record import SampleRecord
from clinieval.types import Message, ModelOutput, Sample, Score
from clinieval.view.cut import cut_ranges, describe_cut
from clinieval.view.paging import split_pages
from clinieval.view.site import build_site
from clinieval.view.urls import item_href, item_stem

pytest_plugins = ["tests.browser"]

RECORD = "0123456789" * 4_500  # 45,000 characters without a line break: pages of exactly 20,000
ODD_ID = 'b/<x> "1"'
SCRIPT_Q = 'Is <script>alert("x")</script> safe?'
IMG_ANSWER = "First arm: <img src=x onerror=alert(1)>"
ROWS = [
    {"id": "a", "input": "Summarise the record.", "context": RECORD, "target": "Normal.",
     "metadata": {"level": "easy"}},
    {"id": ODD_ID, "input": SCRIPT_Q, "target": "No.", "metadata": {"level": "hard"}},
    {"id": "c", "input": "Q c? FAULT:FILTER", "target": "ref c", "metadata": {"level": "hard"}},
    {"id": "d", "input": "Is the BP of 150/95 high?", "target": "Yes.", "metadata": {"level": "easy"}},
]  # fmt: skip
RIGHT = (
    '{"rationale": "Correct: a BP of <b>150/95</b> is high.", '
    '"C1": false, "C2": false, "C3": false, "score": 5}'
)
WRONG = '{"rationale": "Wrong: 150/95 is high.", "C1": false, "C2": true, "C3": false, "score": 1}'
FAIR = '{"rationale": "Plausible answer.", "C1": false, "C2": false, "C3": false, "score": 3}'


def view_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`clinieval view ARGS` through the installed command (its one-line errors)."""
    from tests.conftest import run_cli

    return run_cli("view", *args, timeout=120)


class Responder:
    """The local server's answers: each arm its own, and the judge a verdict read off the answer."""

    def __init__(self) -> None:
        self.arm = "one"

    def __call__(self, prompt: str) -> str:
        if "## Answer to review" in prompt:
            return self.verdict(prompt.split("## Answer to review", 1)[1])
        if "BP of 150/95" in prompt:
            return "No." if self.arm == "one" else "Yes."
        if "<script>" in prompt:
            return IMG_ANSWER if self.arm == "one" else "Second arm: no."
        return "Normal-ish." if self.arm == "one" else "Second arm: normal."

    @staticmethod
    def verdict(answer: str) -> str:
        if "Normal-ish" in answer:
            return "I cannot judge this."
        if "Yes." in answer:
            return RIGHT
        return WRONG if "No." in answer else FAIR


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two arms run and judged for real, then `clinieval view` over both."""
    from tests.conftest import run_cli
    from tests.fault_server import FaultServer

    root = tmp_path_factory.mktemp("view")
    data = root / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    responder = Responder()
    with FaultServer(responder=responder) as server:
        model = f"openai:{server.url}@fault"
        for arm in ("one", "two"):
            responder.arm = arm
            done = run_cli("run", str(data), "-m", model, "--out", str(root / f"arm-{arm}"), "--no-progress",
                           "--scorer", "exact_match", "--concurrency", "1")  # fmt: skip
            assert done.returncode == 0, done.stderr
        judged = run_cli("medalign", "judge", str(root / "arm-one"), str(root / "arm-two"), "--judge", model,
                         "--repeats", "2", "--no-progress", "--concurrency", "1")  # fmt: skip
        assert judged.returncode == 0, judged.stderr
    out = root / "site"
    made = view_cli(str(root / "arm-one"), str(root / "arm-two"), "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"{out / 'index.html'}: 4 samples x 2 arms"
    yield out


def read(site: Path, sample_id: str) -> str:
    return (site / item_href(sample_id)).read_text(encoding="utf-8")


def section(page: str, element_id: str) -> str:
    """The HTML of ``<section id=...>`` (sections do not nest on these pages)."""
    found = re.search(rf'<section id="{element_id}">(.*?)</section>', page, re.S)
    assert found, element_id
    return found.group(1)


def pager_data(page: str) -> list[dict[str, Any]]:
    return [
        json.loads(m)
        for m in re.findall(r'<script type="application/json" id="p\d+-data">(.*?)</script>', page)
    ]


# --- addresses, pages, cuts ---------------------------------------------------------------------


def test_item_addresses_follow_the_documented_scheme() -> None:
    assert item_href("q-12.v2") == "items/q-12.v2.html"
    digest = hashlib.sha256(b"b/2").hexdigest()[:12]
    assert item_stem("b/2") == f"b-2~{digest}"
    assert item_stem(".hidden").startswith("hidden~") and item_stem("x" * 101).startswith("x" * 60 + "~")
    assert item_stem("a b") != item_stem("a-b") == "a-b"  # a slug never collides with a plain id


def test_scores_read_as_a_person_writes_them() -> None:
    from clinieval.view.html import number

    cases = [1.0, 0.5, 2 / 3, 1e-5, -0.25, None, float("nan")]
    assert [number(v) for v in cases] == ["1", "0.5", "0.6667", "1e-05", "-0.25", "—", "—"]


def test_long_text_is_split_into_pages_that_join_back() -> None:
    pages = split_pages("a" * 45_000)
    assert [(s, len(t)) for s, t in pages] == [(0, 20_000), (20_000, 20_000), (40_000, 5_000)]
    late_break = "x" * 17_000 + "\n" + "y" * 10_000  # a line break in the page's last fifth ends it
    assert [(s, len(t)) for s, t in split_pages(late_break)] == [(0, 17_001), (17_001, 10_000)]
    early_break = "x" * 15_000 + "\n" + "y" * 10_000  # too early: cut at exactly 20,000
    assert [(s, len(t)) for s, t in split_pages(early_break)] == [(0, 20_000), (20_000, 5_001)]
    assert split_pages("") == [(0, "")] and "".join(t for _, t in split_pages(late_break, 7)) == late_break


def test_cuts_are_described_from_what_the_policies_record() -> None:
    tok = tokenizer_from_spec("tiktoken:cl100k_base")
    text = "".join(f"Visit {i}: BP {120 + i}/80, note number {i}.\n" for i in range(200))
    _, recent = keep_recent(text, tok, 100)
    assert (
        describe_cut(recent)
        == "Cut (keep_recent): kept 100 of 3,000 tokens; 2,900 tokens removed from the start."
    )
    assert (
        cut_ranges(recent, len(text)) == [(0, recent["first_kept_char"])] and recent["first_kept_char"] > 7000
    )
    _, oldest = keep_oldest(text, tok, 100)
    assert "removed from the end" in describe_cut(oldest)
    assert cut_ranges(oldest, len(text)) == [(oldest["kept_chars"], len(text))]
    assert (
        cut_ranges(recent, len(text) + 1) == []
    )  # the record changed since: no marks rather than wrong ones
    _, dropped = drop_if_over(text, tok, 100)
    assert describe_cut(dropped).startswith("Dropped (drop): record has 3000 tokens")
    assert cut_ranges(dropped, len(text)) == [(0, len(text))]


# --- the site of two real runs ------------------------------------------------------------------


def test_index_lists_every_sample_with_both_arms_and_the_filter_choices(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    for row in ROWS:
        assert f'href="{item_href(row["id"]).replace(chr(34), "&quot;")}"' in index
        assert (site / item_href(row["id"])).is_file()
    assert index.count('<th class="arm-col"') == 2 and ">arm-one</th>" in index and ">arm-two</th>" in index
    assert '<select class="f-cat" data-field="level"><option value="">all</option>' in index
    errors = re.search(r'<select id="f-error">(.*?)</select>', index, re.S)
    assert errors and re.findall(r'value="([^"]*)"', errors.group(1)) == [
        "",
        "*",
        "-",
        "content_filter",
        "judge_unparsed",
    ]
    scores = re.search(r'<select id="f-score">(.*?)</select>', index, re.S)
    assert scores and re.findall(r'value="([^"]*)"', scores.group(1)) == ["exact_match", "medalign_judge"]
    assert "http://" not in index.replace(str(site), "").split("<table", 1)[0].split("</ul>", 1)[1]
    assert json.loads((site / "view.json").read_text())["kind"] == "clinieval-view"


def test_an_item_page_shows_question_answers_scores_and_rationales_side_by_side(site: Path) -> None:
    page = read(site, "d")
    assert "Is the BP of 150/95 high?" in section(page, "question")
    assert "Yes." in section(page, "reference")
    answers = section(page, "answers")
    one, two = answers.split('id="arm-1"')
    assert (
        'id="arm-0"' in one and '<pre class="text">No.</pre>' in one and '<pre class="text">Yes.</pre>' in two
    )
    table = section(page, "scores-section")
    rows = dict(re.findall(r"<tr><td>([a-z_]+)</td>(.*?)</tr>", table))
    assert re.findall(r"<td>([^<]*)</td>", rows["exact_match"]) == ["0", "1"]
    # the judge: arm one wrong (correct 0), arm two right (correct 1), each the mean of two repeats
    assert re.findall(r"<td>([^<]*)</td>", rows["medalign_judge"]) == ["0", "1"]
    # one rationale cell per judge repeat (the raw replies, which hold them too, sit in <details>)
    assert one.count('<td><pre class="text">Wrong: 150/95 is high.</pre></td>') == 2
    assert (
        two.count('<td><pre class="text">Correct: a BP of &lt;b&gt;150/95&lt;/b&gt; is high.</pre></td>') == 2
    )
    assert "correct 1, score 5, c1 0, c2 0, c3 0" in two


def test_failures_and_unparsed_verdicts_are_shown_as_such(site: Path) -> None:
    failed = read(site, "c")
    assert failed.count("The call failed: <b>content_filter</b>") == 2
    unparsed = read(site, "a")
    one = section(unparsed, "answers").split('id="arm-1"')[0]
    # a refusal is unparsed with its own reason (issue 34's reading policy), shown as such
    refused = "unparsed: the judge refused or offered help instead of a verdict"
    assert one.count(refused) == 2 and "I cannot judge this." in one
    assert "— judge_unparsed" in section(unparsed, "scores-section")


def test_run_text_is_escaped_everywhere(site: Path) -> None:
    page = read(site, ODD_ID)
    index = (site / "index.html").read_text(encoding="utf-8")
    for html in (page, index):
        assert "<script>alert" not in html and "<img src=x" not in html
        assert len(re.findall(r"<script\b", html)) == html.count("</script>")
    assert "Is &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; safe?" in section(page, "question")
    assert "First arm: &lt;img src=x onerror=alert(1)&gt;" in section(page, "answers")
    assert "<h1>Sample b/&lt;x&gt; &quot;1&quot;</h1>" in page
    data = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', index, re.S)
    assert data and "<" not in data.group(1) and len(json.loads(data.group(1))["rows"]) == 4


def test_long_prompts_and_records_are_paged(site: Path) -> None:
    page = read(site, "a")
    prompt = section(page, "prompt")
    assert prompt.count("<h3>") == 1 and "Sent by arm-one, arm-two" in prompt  # the same prompt, shown once
    assert "The whole record was sent (full)." in prompt
    (message,) = pager_data(prompt)
    sent = RECORD + "\n\nSummarise the record."
    assert [len(p) for p in message["pages"]] == [20_000, 20_000, 5_023] and "".join(message["pages"]) == sent
    assert message["starts"] == [0, 20_000, 40_000] and message["total"] == 45_023 and message["cut"] == []
    shown = re.findall(r'<div class="message">.*?<pre class="text">([^<]*)</pre>', prompt, re.S)
    assert [len(unescape(s)) for s in shown] == [20_000]  # only the first page is laid out
    assert "page 1 of 3 · characters 1–20,000 of 45,023" in prompt
    # both arms sent the record whole: it is not written out a second time
    record = section(page, "record")
    assert "arm-one, arm-two sent the whole record" in record and "<pre" not in record


def test_a_cut_record_is_marked_where_it_was_cut(tmp_path: Path) -> None:
    """A run whose record was fitted by the real keep_recent: the cut part is marked and counted."""
    tok = tokenizer_from_spec("tiktoken:cl100k_base")
    record = "".join(f"Visit {i}: BP {120 + i}/80.\n" for i in range(300))
    sample = Sample(id="long", input="Latest BP?", context=record, target="BP 419/80")
    kept, info = keep_recent(record, tok, 60)
    run = RunDir.create_or_resume(
        tmp_path / "trimmed", build_manifest({"task": "t", "model": {"spec": "m"}}, [])
    )
    rec = SampleRecord(sample, 0, [Message("user", f"{kept}\n\n{sample.input}")], info,
                       ModelOutput(text="BP 419/80."), scores={"exact_match": Score(1.0)})  # fmt: skip
    with run.open_appender() as f:
        append_record(f, rec)
    made = build_site([run.path], tmp_path / "site", page_chars=2_000)
    assert made.items == 1 and made.arms == 1
    page = (tmp_path / "site" / "items" / "long.html").read_text(encoding="utf-8")
    first = info["first_kept_char"]
    assert f"kept {info['kept_tokens']} of {info['original_tokens']:,} tokens" in page
    assert f"Marked: the {first:,} characters trimmed did not send." in page
    record_data = pager_data(section(page, "record"))[0]
    assert record_data["cut"] == [[0, first]] and "".join(record_data["pages"]) == record
    first_page = re.search(r'<pre class="text"><span class="cut">([^<]*)</span>', section(page, "record"))
    assert first_page and len(unescape(first_page.group(1))) == min(first, len(record_data["pages"][0]))


def test_bad_input_is_one_line_and_nothing_is_replaced(site: Path, tmp_path: Path) -> None:
    bad = view_cli(str(tmp_path), "--out", str(tmp_path / "out"))
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "not a run directory, nor a folder of run directories" in bad.stderr
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    refused = view_cli(str(site.parent / "arm-one"), "--out", str(mine))
    assert refused.returncode == 2 and "is not a site written by clinieval view" in refused.stderr
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"
    with pytest.raises(UserError, match="would replace the run"):
        build_site([site.parent / "arm-one"], site.parent)
    again = tmp_path / "again"
    assert view_cli(str(site.parent / "arm-two"), "--out", str(again)).returncode == 0
    assert view_cli(str(site.parent / "arm-one"), "--out", str(again)).returncode == 0  # a site: replaced
    assert (
        ">arm-one</th>" in (again / "index.html").read_text()
        and ">arm-two</th>" not in (again / "index.html").read_text()
    )


# --- in a real browser --------------------------------------------------------------------------


def visible_ids(page: Any) -> list[str]:
    return page.locator("#samples tbody tr:not([hidden]) a.item-link").all_text_contents()


def test_the_index_filters_and_links_in_a_real_browser(site: Path, page: Any) -> None:
    page.goto((site / "index.html").as_uri())
    assert visible_ids(page) == ["a", ODD_ID, "c", "d"]
    page.select_option("#f-error", "content_filter")
    assert visible_ids(page) == ["c"] and page.text_content("#shown") == "1 of 4 samples"
    assert "error=content_filter" in page.evaluate("location.hash")
    page.click("#f-reset")
    page.wait_for_function("document.querySelectorAll('#samples tbody tr[hidden]').length === 0")
    page.select_option("#f-arm", "arm-two")
    page.select_option("#f-score", "exact_match")
    page.fill("#f-min", "1")
    assert visible_ids(page) == ["d"]
    assert page.locator("#samples th.arm-col:not([hidden])").all_text_contents() == ["arm-two"]
    page.select_option("#f-arm", "arm-one")
    assert visible_ids(page) == []  # arm one got d wrong
    page.click("#f-reset")
    page.select_option("select.f-cat[data-field=level]", "hard")
    page.select_option("#f-error", "judge_unparsed")
    assert visible_ids(page) == []  # the unparsed verdicts were on "a", which is easy
    page.select_option("select.f-cat[data-field=level]", "easy")
    assert visible_ids(page) == ["a"]
    page.click("#samples a.item-link >> text=a")
    page.wait_for_url("**/items/a.html")
    assert page.text_content("h1") == "Sample a"
    pager = page.locator("#prompt .pager")
    assert pager.locator(".pager-where").text_content() == "page 1 of 3 · characters 1–20,000 of 45,023"
    pager.locator('button[data-step="1"]').click()
    assert pager.locator(".pager-where").text_content() == "page 2 of 3 · characters 20,001–40,000 of 45,023"
    assert pager.locator("pre.text").text_content() == RECORD[20_000:40_000]
    pager.locator('button[data-step="1"]').click()
    assert pager.locator("pre.text").text_content() == RECORD[40_000:] + "\n\nSummarise the record."
    assert pager.locator('button[data-step="1"]').is_disabled()


def test_a_filtered_view_can_be_linked(site: Path, page: Any) -> None:
    page.goto((site / "index.html").as_uri() + "#error=content_filter")
    assert visible_ids(page) == ["c"] and page.input_value("#f-error") == "content_filter"
    page.goto((site / item_href(ODD_ID)).as_uri())
    assert page.text_content("#question pre") == SCRIPT_Q  # shown as text, never run
    assert page.evaluate("document.querySelectorAll('#question script, #answers img').length") == 0
