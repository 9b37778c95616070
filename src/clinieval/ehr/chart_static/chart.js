/* The patient chart (clinieval.ehr.chart_html): find in the whole record, jump to a date, expand
 * and collapse encounters. Shared by the review app and the static results browser, so it reads
 * nothing but the chart's own markup, writes only text nodes and <mark> elements (never HTML
 * from the record), and needs no server. Every .chart on the page is wired on its own. */
(function () {
  "use strict";
  var MAX_HITS = 5000; // beyond this the count says "5000+": marking more only slows the page

  function escapeRegExp(text) { return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function openAncestors(node, chart) {
    for (var el = node.parentElement; el && el !== chart; el = el.parentElement) {
      if (el.tagName === "DETAILS" && !el.open) el.open = true;
    }
  }

  function clearMarks(body) {
    var marks = body.querySelectorAll("mark.chart-hit");
    var parents = [];
    for (var i = 0; i < marks.length; i++) {
      var m = marks[i];
      parents.push(m.parentNode);
      m.parentNode.replaceChild(document.createTextNode(m.textContent), m);
    }
    for (var j = 0; j < parents.length; j++) parents[j].normalize();
  }

  function markAll(body, query) {
    var pattern = new RegExp(escapeRegExp(query), "gi");
    var walker = document.createTreeWalker(body, NodeFilter.SHOW_TEXT);
    var nodes = [];
    for (var n = walker.nextNode(); n; n = walker.nextNode()) {
      pattern.lastIndex = 0;
      if (pattern.test(n.nodeValue)) nodes.push(n);
    }
    var hits = [];
    var more = false;
    for (var k = 0; k < nodes.length && !more; k++) {
      var node = nodes[k];
      var text = node.nodeValue;
      var frag = document.createDocumentFragment();
      var last = 0;
      pattern.lastIndex = 0;
      var m;
      while ((m = pattern.exec(text)) !== null) {
        if (hits.length >= MAX_HITS) { more = true; break; }
        frag.appendChild(document.createTextNode(text.slice(last, m.index)));
        var mark = document.createElement("mark");
        mark.className = "chart-hit";
        mark.textContent = m[0];
        frag.appendChild(mark);
        hits.push(mark);
        last = m.index + m[0].length;
      }
      frag.appendChild(document.createTextNode(text.slice(last)));
      node.parentNode.replaceChild(frag, node);
    }
    return { hits: hits, more: more };
  }

  function wire(chart) {
    var id = chart.id;
    var body = chart.querySelector(".chart-body");
    var input = document.getElementById(id + "-search");
    var count = document.getElementById(id + "-search-count");
    var state = { query: "", hits: [], current: -1, more: false };

    function show(index) {
      if (!state.hits.length) return;
      if (state.current >= 0) state.hits[state.current].classList.remove("current");
      state.current = (index + state.hits.length) % state.hits.length;
      var hit = state.hits[state.current];
      hit.classList.add("current");
      openAncestors(hit, chart);
      hit.scrollIntoView({ block: "center" });
      count.textContent = (state.current + 1) + " of " + state.hits.length + (state.more ? "+" : "") + " matches";
    }

    function search(step) {
      var query = input.value.trim();
      if (query === state.query && state.hits.length) { show(state.current + step); return; }
      clearMarks(body);
      state = { query: query, hits: [], current: -1, more: false };
      if (!query) { count.textContent = ""; return; }
      var found = markAll(body, query);
      state.hits = found.hits;
      state.more = found.more;
      if (!state.hits.length) { count.textContent = "No match in the record"; return; }
      show(0);
    }

    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter") { event.preventDefault(); search(event.shiftKey ? -1 : 1); }
    });
    input.addEventListener("search", function () { if (!input.value) search(1); });
    document.getElementById(id + "-search-next").addEventListener("click", function () { search(1); });
    document.getElementById(id + "-search-prev").addEventListener("click", function () { search(-1); });

    var date = document.getElementById(id + "-date");
    if (date) {
      date.addEventListener("change", function () {
        var wanted = date.value; // YYYY-MM-DD; encounters are newest first
        if (!wanted) return;
        var encounters = chart.querySelectorAll("details.encounter[data-day]");
        var target = null;
        for (var i = 0; i < encounters.length; i++) {
          var day = encounters[i].getAttribute("data-day");
          if (day && day <= wanted) { target = encounters[i]; break; }
          if (day) target = encounters[i]; // the oldest dated one, when the date is before them all
        }
        if (!target) return;
        var previous = chart.querySelector("details.encounter.jumped");
        if (previous) previous.classList.remove("jumped");
        target.open = true;
        target.classList.add("jumped");
        target.scrollIntoView({ block: "start" });
      });
    }
    var expand = document.getElementById(id + "-expand");
    var collapse = document.getElementById(id + "-collapse");
    function setAll(open) {
      var all = chart.querySelectorAll("details.encounter");
      for (var i = 0; i < all.length; i++) all[i].open = open;
    }
    if (expand) expand.addEventListener("click", function () { setAll(true); });
    if (collapse) collapse.addEventListener("click", function () { setAll(false); });
  }

  // Wires every chart not wired yet; a page that inserts a chart later (the review app loads it as
  // a fragment) calls window.clinievalChart.start() again.
  function start() {
    var charts = document.querySelectorAll(".chart[id]");
    for (var i = 0; i < charts.length; i++) {
      if (charts[i].dataset.wired) continue;
      charts[i].dataset.wired = "1";
      wire(charts[i]);
    }
  }
  window.clinievalChart = { start: start };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
