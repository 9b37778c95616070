/* clinieval review: the little script the pages use. No framework, no build step, no network
 * beyond this server. Everything works without it (plain forms and links); it adds:
 *  - a warning before leaving a page with unsaved changes;
 *  - a keep-alive ping (POST /keepalive, at most every 2 minutes) while the reviewer types;
 *  - ranking by drag or by Up/Down buttons (renumbering the rank boxes), beside typed numbers;
 *  - the record pane: paging and search without reloading the page (the server sends escaped
 *    HTML fragments; this script only swaps them in and highlights the search term with DOM nodes).
 */
(function () {
  "use strict";

  // --- unsaved changes ------------------------------------------------------------------------
  var form = document.getElementById("review-form");
  var dirty = false;

  function markDirty() { dirty = true; }

  if (form) {
    // a refused save (422) or a stale one (409) comes back with the reviewer's values unsaved
    if (document.getElementById("form-error") || document.getElementById("stale-notice")) dirty = true;
    form.addEventListener("input", markDirty);
    form.addEventListener("change", markDirty);
    form.addEventListener("submit", function () { dirty = false; });
    // typing makes no request: ping the server (at most every 2 minutes) so the 30-minute idle
    // limit does not end the session mid-rationale; the 12-hour limit still holds
    var lastPing = Date.now();
    var csrf = form.querySelector('input[name="csrf_token"]');
    form.addEventListener("input", function () {
      if (!csrf || Date.now() - lastPing < 120000) return;
      lastPing = Date.now();
      fetch("/keepalive", { method: "POST", credentials: "same-origin",
                            headers: { "X-CSRF-Token": csrf.value } }).catch(function () {});
    });
    window.addEventListener("beforeunload", function (event) {
      if (!dirty) return undefined;
      event.preventDefault();
      event.returnValue = "You have unsaved changes on this item.";
      return event.returnValue;
    });
  }

  // --- the Save/Submit bar stays at the window's bottom: never over the field being worked on -----
  // (the stylesheet's scroll-padding covers what the browser scrolls into view itself; focus from
  // Tab or a click does not honour it, so a field that is on screen but under the bar is lifted)
  var bar = form ? form.querySelector(".actions") : null;
  if (bar) {
    form.addEventListener("focusin", function (event) {
      var field = event.target;
      if (!field || !field.getBoundingClientRect || bar.contains(field)) return;
      var box = field.getBoundingClientRect();
      var over = box.bottom - bar.getBoundingClientRect().top;
      if (over > 0) window.scrollBy(0, Math.min(over + 12, Math.max(box.top - 12, 0)));
    });
  }

  // --- ranking ----------------------------------------------------------------------------------
  var list = document.querySelector("ol.rank-list");

  function renumber() {
    var inputs = list.querySelectorAll(".rank-input");
    for (var i = 0; i < inputs.length; i++) inputs[i].value = String(i + 1);
    markDirty();
  }

  function move(card, offset) {
    if (offset < 0 && card.previousElementSibling) list.insertBefore(card, card.previousElementSibling);
    if (offset > 0 && card.nextElementSibling) list.insertBefore(card.nextElementSibling, card);
    renumber();
  }

  if (list) {
    list.addEventListener("click", function (event) {
      var button = event.target.closest("button.move-up, button.move-down");
      if (!button) return;
      move(button.closest("li.answer"), button.classList.contains("move-up") ? -1 : 1);
      button.focus();
    });

    var dragged = null;
    list.addEventListener("dragstart", function (event) {
      var handle = event.target.closest ? event.target.closest(".drag-handle") : null;
      if (!handle) return;
      dragged = handle.closest("li.answer");
      dragged.classList.add("dragging");
      event.dataTransfer.effectAllowed = "move";
      event.dataTransfer.setData("text/plain", dragged.dataset.letter);
    });
    list.addEventListener("dragover", function (event) {
      var target = event.target.closest ? event.target.closest("li.answer") : null;
      if (!dragged || !target || target === dragged) return;
      event.preventDefault();
      target.classList.add("drop-target");
    });
    list.addEventListener("dragleave", function (event) {
      var target = event.target.closest ? event.target.closest("li.answer") : null;
      if (target) target.classList.remove("drop-target");
    });
    list.addEventListener("drop", function (event) {
      var target = event.target.closest ? event.target.closest("li.answer") : null;
      if (!dragged || !target || target === dragged) return;
      event.preventDefault();
      target.classList.remove("drop-target");
      var cards = Array.prototype.slice.call(list.children);
      var after = cards.indexOf(dragged) < cards.indexOf(target);
      list.insertBefore(dragged, after ? target.nextElementSibling : target);
      renumber();
    });
    list.addEventListener("dragend", function () {
      if (dragged) dragged.classList.remove("dragging");
      dragged = null;
    });
  }

  // --- the record pane --------------------------------------------------------------------------
  var pane = document.getElementById("record-pane");
  var query = "";

  function escapeRegExp(text) { return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function highlight() {
    var pre = document.getElementById("record-text");
    if (!pre || !query) return;
    var text = pre.textContent;
    var pattern = new RegExp(escapeRegExp(query), "gi");
    var fragment = document.createDocumentFragment();
    var last = 0;
    var match;
    while ((match = pattern.exec(text)) !== null) {
      if (match[0].length === 0) break;
      fragment.appendChild(document.createTextNode(text.slice(last, match.index)));
      var mark = document.createElement("mark");
      mark.textContent = match[0];
      fragment.appendChild(mark);
      last = match.index + match[0].length;
    }
    if (last === 0) return;
    fragment.appendChild(document.createTextNode(text.slice(last)));
    pre.textContent = "";
    pre.appendChild(fragment);
    var first = pre.querySelector("mark");
    if (first) {
      first.classList.add("current");
      first.scrollIntoView({ block: "center" });
    }
  }

  function showError(where, message) {
    var p = document.createElement("p");
    p.className = "error";
    p.textContent = message;
    where.textContent = "";
    where.appendChild(p);
  }

  function fetchFragment(url, into, then) {
    var container = document.getElementById(into);
    var current = document.getElementById("record-page");
    if (into === "record-page-container" && current) current.classList.add("loading");
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (response.redirected || response.status === 401) {
          throw new Error("Your session has ended. Log in again in another tab; this page keeps what you typed.");
        }
        if (!response.ok) throw new Error("The record could not be loaded (" + response.status + ").");
        return response.text();
      })
      .then(function (html) {
        container.innerHTML = html;  // server-rendered, every value escaped by the template
        if (then) then();
      })
      .catch(function (error) { showError(container, error.message); });
  }

  function showPage(page) {
    var id = pane.dataset.assignment;
    fetchFragment("/a/" + encodeURIComponent(id) + "/context?page=" + encodeURIComponent(page),
      "record-page-container", function () {
        highlight();
        var hits = document.querySelectorAll("#record-search-results li.search-hit");
        for (var i = 0; i < hits.length; i++) {
          hits[i].classList.toggle("current", hits[i].dataset.page === String(page));
        }
      });
  }

  // Chart / Raw tabs: switched in place (the links reload the page with ?view= only without script),
  // so neither the form nor the place in the other tab is lost.
  function showTab(name) {
    pane.dataset.tab = name;
    var tabs = pane.querySelectorAll(".record-tabs [data-tab]");
    for (var i = 0; i < tabs.length; i++) {
      tabs[i].setAttribute("aria-selected", tabs[i].dataset.tab === name ? "true" : "false");
    }
    document.getElementById("record-chart-panel").hidden = name !== "chart";
    document.getElementById("record-raw-panel").hidden = name !== "raw";
  }

  // The chart comes as a fragment once the page (and the form) is up, so the page stays small.
  var chartBox = document.getElementById("record-chart-container");
  if (chartBox) {
    fetchFragment(chartBox.dataset.src, "record-chart-container", function () {
      if (window.clinievalChart) window.clinievalChart.start();
    });
  }

  if (pane) {
    pane.addEventListener("click", function (event) {
      var tab = event.target.closest(".record-tabs [data-tab]");
      if (tab) { event.preventDefault(); showTab(tab.dataset.tab); return; }
      if (event.target.id === "record-toggle") {
        var hide = !pane.classList.contains("collapsed");
        pane.classList.toggle("collapsed", hide);
        event.target.setAttribute("aria-expanded", hide ? "false" : "true");
        event.target.textContent = hide ? "Show record" : "Hide record";
        return;
      }
      var link = event.target.closest("#record-prev, #record-next, a.search-link");
      if (!link) return;
      event.preventDefault();
      if (link.getAttribute("aria-disabled") === "true") return;
      showPage(link.dataset.page);
    });
    pane.addEventListener("submit", function (event) {
      if (event.target.id === "record-goto-form") {
        event.preventDefault();
        showPage(event.target.querySelector("input[name=page]").value || "1");
      } else if (event.target.id === "record-search-form") {
        event.preventDefault();
        query = event.target.querySelector("input[name=q]").value.trim();
        var id = pane.dataset.assignment;
        fetchFragment("/a/" + encodeURIComponent(id) + "/search?q=" + encodeURIComponent(query),
          "record-search-results", function () {
            var first = document.querySelector("#record-search-results a.search-link");
            if (first) showPage(first.dataset.page);
          });
      }
    });
  }

  // --- sentence: start the rewrite from the sentence ----------------------------------------------
  var copy = document.getElementById("copy-sentence");
  if (copy) {
    copy.addEventListener("click", function () {
      var sentence = document.querySelector("#prompt .text");
      var rewrite = document.getElementById("rewrite");
      if (sentence && rewrite) {
        rewrite.value = sentence.textContent;
        rewrite.focus();
        markDirty();
      }
    });
  }
})();
