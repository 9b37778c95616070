// clinieval view: the index's filters and the item pages' pagers. No dependencies, no network:
// the data comes from <script type="application/json"> elements the pages carry, and run text is
// only ever put into the page as text (textContent), never as markup.
"use strict";

(function () {
  function readJson(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  // ---- pagers: long text shown one page at a time ----------------------------------------------

  function fmt(n) {
    return n.toLocaleString("en-US");
  }

  function renderPage(pre, text, start, cut) {
    pre.textContent = "";
    var pos = 0;
    cut.forEach(function (range) {
      var lo = Math.max(range[0] - start, pos), hi = Math.min(range[1] - start, text.length);
      if (lo >= hi) return;
      pre.appendChild(document.createTextNode(text.slice(pos, lo)));
      var span = document.createElement("span");
      span.className = "cut";
      span.textContent = text.slice(lo, hi);
      pre.appendChild(span);
      pos = hi;
    });
    pre.appendChild(document.createTextNode(text.slice(pos)));
  }

  function setupPager(box) {
    var data = readJson(box.getAttribute("data-pager") + "-data");
    var pre = box.querySelector("pre.text");
    var where = box.querySelector(".pager-where");
    var prev = box.querySelector('[data-step="-1"]'), next = box.querySelector('[data-step="1"]');
    var cut = data.cut.slice().sort(function (a, b) { return a[0] - b[0]; });
    var index = 0;
    function show(i) {
      index = i;
      var text = data.pages[i], start = data.starts[i];
      renderPage(pre, text, start, cut);
      where.textContent = "page " + (i + 1) + " of " + data.pages.length + " · characters " +
        fmt(start + 1) + "–" + fmt(start + text.length) + " of " + fmt(data.total);
      prev.disabled = i === 0;
      next.disabled = i === data.pages.length - 1;
    }
    prev.addEventListener("click", function () { if (index > 0) show(index - 1); });
    next.addEventListener("click", function () { if (index < data.pages.length - 1) show(index + 1); });
  }

  document.querySelectorAll("[data-pager]").forEach(setupPager);

  // ---- index filters ---------------------------------------------------------------------------

  var data = readJson("view-data");
  var form = document.getElementById("filters");
  if (!data || !form) return;

  var rows = document.querySelectorAll("#samples tbody tr[data-row]");
  var armSel = document.getElementById("f-arm"), errSel = document.getElementById("f-error");
  var scoreSel = document.getElementById("f-score");
  var minIn = document.getElementById("f-min"), maxIn = document.getElementById("f-max");
  var cats = Array.prototype.slice.call(document.querySelectorAll("select.f-cat"));
  var shown = document.getElementById("shown");

  function bound(input) {
    if (!input || input.value.trim() === "") return null;
    var v = Number(input.value);
    return isNaN(v) ? null : v;
  }

  // An arm's answer passes when it has a record, its score lies in the range and it has the error
  // asked for; a sample passes when one of the arms looked at passes and its categories match.
  function armPasses(arm, score, lo, hi, error) {
    if (!arm) return false;
    if (score && (lo !== null || hi !== null)) {
      var v = arm.s[score];
      if (v === undefined || v === null) return false;
      if (lo !== null && v < lo) return false;
      if (hi !== null && v > hi) return false;
    }
    if (error === "*") return arm.e.length > 0;
    if (error === "-") return arm.e.length === 0;
    if (error) return arm.e.indexOf(error) >= 0;
    return true;
  }

  function apply() {
    var armIndex = armSel.value === "" ? -1 : data.arms.indexOf(armSel.value);
    var score = scoreSel ? scoreSel.value : "", lo = bound(minIn), hi = bound(maxIn), error = errSel.value;
    var wanted = cats.filter(function (s) { return s.value !== ""; });
    var count = 0;
    rows.forEach(function (tr) {
      var row = data.rows[Number(tr.getAttribute("data-row"))];
      var arms = armIndex >= 0 ? [row.arms[armIndex]] : row.arms;
      var ok = arms.some(function (a) { return armPasses(a, score, lo, hi, error); }) &&
        wanted.every(function (s) { return row.cat[s.getAttribute("data-field")] === s.value; });
      tr.hidden = !ok;
      if (ok) count += 1;
    });
    document.querySelectorAll("#samples .arm-col").forEach(function (cell) {
      cell.hidden = armIndex >= 0 && Number(cell.getAttribute("data-arm")) !== armIndex;
    });
    shown.textContent = count + " of " + rows.length + " samples";
    writeHash();
  }

  // The filters live in the address's fragment (#arm=...&error=...), so a filtered view can be
  // bookmarked or linked from a report.
  function writeHash() {
    var p = new URLSearchParams();
    if (armSel.value) p.set("arm", armSel.value);
    if (scoreSel && (minIn.value || maxIn.value)) p.set("score", scoreSel.value);
    if (minIn && minIn.value) p.set("min", minIn.value);
    if (maxIn && maxIn.value) p.set("max", maxIn.value);
    if (errSel.value) p.set("error", errSel.value);
    cats.forEach(function (s) { if (s.value) p.append("cat", s.getAttribute("data-field") + "=" + s.value); });
    var hash = p.toString();
    if (hash || location.hash.indexOf("=") >= 0) history.replaceState(null, "", hash ? "#" + hash : location.pathname);
  }

  function choose(select, value) {
    if (!select || value === null) return;
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === value) { select.value = value; return; }
    }
  }

  function readHash() {
    if (location.hash.indexOf("=") < 0) return;  // a plain #s-<id> anchor is a row, not filters
    var p = new URLSearchParams(location.hash.slice(1));
    choose(armSel, p.get("arm"));
    choose(scoreSel, p.get("score"));
    if (minIn && p.get("min") !== null) minIn.value = p.get("min");
    if (maxIn && p.get("max") !== null) maxIn.value = p.get("max");
    choose(errSel, p.get("error"));
    p.getAll("cat").forEach(function (pair) {
      var at = pair.indexOf("=");
      var field = pair.slice(0, at), value = pair.slice(at + 1);
      cats.forEach(function (s) { if (s.getAttribute("data-field") === field) choose(s, value); });
    });
  }

  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("reset", function () { setTimeout(apply, 0); });
  readHash();
  apply();
})();
