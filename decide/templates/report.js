(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("sample").textContent);
  var rows = data.rows, questions = data.questions, low = data.low;
  var body = document.getElementById("doc-body");
  var search = document.getElementById("search");
  window.decideMarks = function (value, answers) {  // for tests: the marks `show` would draw
    var pre = document.createElement("pre");
    mark(pre, value, answers);
    return Array.from(pre.querySelectorAll("mark")).map(function (m) {
      return [m.getAttribute("data-question"), m.textContent];
    });
  };
  var shown = document.getElementById("shown");
  var sortKey = null, sortDir = 1;

  // A question's entry in a row's answers, confidences, ... : own keys only, so that a question
  // id that names a property every object has ("constructor", "toString") is not found in a
  // row that was not asked it.
  function has(o, k) { return !!o && Object.prototype.hasOwnProperty.call(o, k); }
  function own(o, k) { return has(o, k) ? o[k] : undefined; }
  function text(v) {  // a null answer reads "null": not the empty string, not "not asked"
    if (v === undefined) { return ""; }
    return typeof v === "string" ? v : JSON.stringify(v);
  }
  // An answer as report.json writes it: `exact` holds the text of one the script cannot hold
  // as it is (an integer beyond 2^53, which JSON.parse rounds).
  function answerText(r, qid) {
    if (has(r.exact, qid)) { return r.exact[qid]; }
    return text(own(r.answers, qid));
  }
  function failure(r, qid) {  // why a partial row has no answer to `qid`, or null
    return own(r.errors, qid) || null;
  }
  // A confidence is a number, or "NaN" / "Infinity" for one that is not a probability: shown
  // as such and highlighted, as the review queue takes it whatever the threshold.
  function confText(c) {
    if (c === null || c === undefined) { return "–"; }
    return typeof c === "number" ? c.toFixed(3) : String(c);
  }
  function isLow(c) {
    return typeof c === "string" || (typeof c === "number" && c < low);
  }
  function minConf(r) {
    if (!r.confidence) { return -1; }
    var m = 2;
    for (var k in r.confidence) {  // null: a question a partial row has no answer to
      var c = own(r.confidence, k);
      if (typeof c === "number" && c < m) { m = c; }
    }
    return m === 2 ? -1 : m;
  }
  // Sort order: numbers by value (9 before 10), before any text; text as strings.
  function compare(x, y) {
    var nx = typeof x === "number", ny = typeof y === "number";
    if (nx && ny) { return x < y ? -1 : x > y ? 1 : 0; }
    if (nx !== ny) { return nx ? -1 : 1; }
    return x < y ? -1 : x > y ? 1 : 0;
  }
  function cell(tr, value, cls, title) {
    var td = document.createElement("td");
    td.textContent = value;
    if (cls) { td.className = cls; }
    if (title) { td.title = title; }
    tr.appendChild(td);
  }
  function render() {
    var q = search.value.toLowerCase();
    var list = rows.filter(function (r) {
      if (!q) { return true; }
      var hay = [text(r.doc_id), r.status, r.error || "", JSON.stringify(r.answers || {}),
                 JSON.stringify(r.exact || {}), r.text || ""].join(" ").toLowerCase();
      return hay.indexOf(q) !== -1;
    });
    if (sortKey !== null) {
      list.sort(function (a, b) {
        return compare(sortKey(a), sortKey(b)) * sortDir;
      });
    }
    body.textContent = "";
    list.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.className = "doc";
      cell(tr, text(r.doc_id));
      cell(tr, r.status, r.status === "error" ? "bad" : "");
      questions.forEach(function (qid) {
        var c = own(r.confidence, qid);
        var why = failure(r, qid);
        if (!r.answers) { cell(tr, r.error || "", "text"); return; }
        if (why) { cell(tr, "failed", "bad", why); return; }
        var cls = "text" + (isLow(c) ? " low" : "");
        if (has(r.answers, qid) && r.answers[qid] === null) { cls += " null"; }
        cell(tr, answerText(r, qid), cls);
      });
      var m = minConf(r);
      cell(tr, m < 0 ? "" : m.toFixed(3), m >= 0 && m < low ? "low" : "");
      tr.addEventListener("click", function () { show(r, tr); });
      body.appendChild(tr);
    });
    shown.textContent = list.length + " of " + rows.length + " sampled documents";
  }
  // Every string answer found in the document text (as whole words, ignoring case, accents and
  // whitespace: an uncased model answers "tulsa,ok" for "Tulsa, OK") is marked where it occurs,
  // and every number answer where the text states that number ("$12,500.00" for 12500, read as
  // decide's extract reads numbers), so a reviewer sees where it came from; overlapping matches
  // keep the earlier, longer one.
  var NUMBER = new RegExp("(?:(?<![\\p{L}\\p{N}_.])[-\u2212])?(?<![\\p{L}\\p{N}_.])" +
    "(?:\\d{1,3}(?:,\\d{3})+|\\d+)(?:\\.\\d+)?(?!\\d)(?!\\.\\d)", "gu");
  // The text with accents and other combining marks removed, and for each of its UTF-16 units
  // the offset in the original it came from (one more entry: the original's length), so that
  // "jose muller" (an uncased vocabulary strips accents) is found in "José Müller".
  function fold(text) {
    var out = "", from = [], at = 0;
    for (var c of text) {
      var f = c.normalize("NFD").replace(/\p{M}/gu, "");
      for (var k = 0; k < f.length; k++) { from.push(at); }
      out += f;
      at += c.length;
    }
    from.push(text.length);
    return { text: out, from: from };
  }
  function mark(pre, value, answers) {
    var found = [];
    var folded = fold(value);
    questions.forEach(function (qid) {
      var a = own(answers, qid);
      if (typeof a === "number") {
        var n;
        NUMBER.lastIndex = 0;
        while ((n = NUMBER.exec(value)) !== null) {
          if (parseFloat(n[0].replace("\u2212", "-").replace(/,/g, "")) === a) {
            found.push([n.index, n.index + n[0].length, qid]);
          }
        }
        return;
      }
      if (typeof a !== "string") { return; }
      var chars = Array.from(fold(a).text.replace(/\s+/g, ""));
      if (chars.length < 2) { return; }
      var body = chars.map(function (c) {
        return c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
      }).join("\\s*");
      var re = new RegExp("(?<![\\p{L}\\p{N}])" + body + "(?![\\p{L}\\p{N}])", "giu");
      var m;
      while ((m = re.exec(folded.text)) !== null) {
        found.push([folded.from[m.index], folded.from[m.index + m[0].length], qid]);
      }
    });
    found.sort(function (x, y) { return x[0] - y[0] || y[1] - x[1]; });
    var at = 0;
    found.forEach(function (f) {
      if (f[0] < at) { return; }
      pre.appendChild(document.createTextNode(value.slice(at, f[0])));
      var m = document.createElement("mark");
      m.title = f[2];
      m.setAttribute("data-question", f[2]);
      m.textContent = value.slice(f[0], f[1]);
      pre.appendChild(m);
      at = f[1];
    });
    pre.appendChild(document.createTextNode(value.slice(at)));
  }
  // The document as the page holds it: its text (cut at the embed limit), or for a document
  // read in windows its `pieces` (the head and every evidence window, `[start, text]`) with
  // "[…]" where text is left out. With `focus` (a question id) that answer's evidence window is
  // highlighted (`.evidence`), its extract span marked (`mark.evidence-span`) and scrolled to;
  // without, answers are marked where they occur.
  function renderText(pre, r, focus) {
    pre.textContent = "";
    if (r.text === null) {
      pre.textContent = "(document text not available: the input files were not readable " +
        "when this report was built)";
      return;
    }
    var answers = r.status === "ok" ? r.answers : {};
    if (!r.pieces) {
      mark(pre, r.text, answers);
      if (r.text_cut) { pre.appendChild(document.createTextNode("\n[…]")); }
      return;
    }
    var ev = focus === null ? null : own(r.evidence, focus);
    var target = null, end = 0;
    r.pieces.forEach(function (piece) {
      var start = piece[0], t = piece[1];
      if (start > end) { pre.appendChild(document.createTextNode("\n[…]\n")); }
      end = start + t.length;
      if (!ev) { mark(pre, t, answers); return; }
      var edges = ev.window.concat(ev.span || []);
      var cuts = [0, t.length];
      edges.forEach(function (e) {
        if (e - start > 0 && e - start < t.length) { cuts.push(e - start); }
      });
      cuts.sort(function (x, y) { return x - y; });
      for (var k = 0; k + 1 < cuts.length; k++) {
        if (cuts[k] === cuts[k + 1]) { continue; }
        var at = start + cuts[k], part = t.slice(cuts[k], cuts[k + 1]);
        var inWindow = at >= ev.window[0] && at < ev.window[1];
        var inSpan = ev.span !== null && at >= ev.span[0] && at < ev.span[1];
        if (!inWindow && !inSpan) { pre.appendChild(document.createTextNode(part)); continue; }
        var node = document.createElement(inSpan ? "mark" : "span");
        node.className = inSpan ? "evidence-span" : "evidence";
        node.setAttribute("data-question", focus);
        node.textContent = part;
        pre.appendChild(node);
        if (target === null) { target = node; }
      }
    });
    if (end < r.length) { pre.appendChild(document.createTextNode("\n[…]")); }
    if (target !== null) { target.scrollIntoView({ block: "center" }); }
  }
  function show(r, tr) {
    var prev = body.querySelector("tr.selected");
    if (prev) { prev.className = "doc"; }
    tr.className = "doc selected";
    var panel = document.getElementById("detail");
    panel.textContent = "";
    var left = document.createElement("div");
    var h = document.createElement("h3");
    h.textContent = "Document " + text(r.doc_id);
    left.appendChild(h);
    var pre = document.createElement("pre");
    renderText(pre, r, null);
    left.appendChild(pre);
    var right = document.createElement("div");
    var h2 = document.createElement("h3");
    h2.textContent = r.status === "ok" ? "Answers" : "Error";
    right.appendChild(h2);
    if (r.status !== "ok") {
      var p = document.createElement("p");
      p.className = "bad";
      p.textContent = r.error;
      right.appendChild(p);
    } else {
      var dl = document.createElement("dl");
      questions.forEach(function (qid) {
        var failed = failure(r, qid);
        if (!has(r.answers, qid) && !failed) { return; }  // a question this row was not asked
        var dt = document.createElement("dt");
        dt.textContent = qid;
        var dd = document.createElement("dd");
        var span = document.createElement("span");
        if (failed) {  // a partial row: this answer failed on its own, the others are kept
          span.className = "bad";
          span.textContent = "failed: " + failed;
          dd.appendChild(span);
          dl.appendChild(dt);
          dl.appendChild(dd);
          return;
        }
        var c = own(r.confidence, qid);
        span.textContent = answerText(r, qid) + "  (confidence " + confText(c) + ")";
        if (isLow(c)) { span.className = "low"; }
        dd.appendChild(span);
        var held = own(r.withheld, qid);
        if (held) {  // absent_below gave the absent value instead of this one
          var why = document.createElement("small");
          why.className = "muted";
          why.textContent = "  withheld: " + (has(held, "exact") ? held.exact : text(held.value)) +
            " (confidence " + confText(held.confidence) + ")";
          dd.appendChild(why);
        }
        var ev = own(r.evidence, qid);
        if (ev) {  // a click shows where this answer was read
          var where = document.createElement("small");
          where.className = "muted";
          where.textContent = (ev.index === null ? "  " : "  window " + ev.index + ", ") +
            "characters " + ev.characters[0] + "–" + ev.characters[1];
          dd.appendChild(where);
          dd.className = "evidence-link";
          dd.setAttribute("data-question", qid);
          dd.title = "show where this answer was read";
          dd.addEventListener("click", function () { renderText(pre, r, qid); });
        }
        dl.appendChild(dt);
        dl.appendChild(dd);
      });
      right.appendChild(dl);
    }
    panel.appendChild(left);
    panel.appendChild(right);
  }
  document.querySelectorAll("#doc-table th").forEach(function (th, i) {
    th.addEventListener("click", function () {
      var keys = [function (r) {
        return typeof r.doc_id === "number" ? r.doc_id : text(r.doc_id);
      }, function (r) { return r.status; }];
      questions.forEach(function (qid) {
        keys.push(function (r) {
          var a = own(r.answers, qid);
          return typeof a === "number" ? a : answerText(r, qid);
        });
      });
      keys.push(minConf);
      sortDir = (th.className === "sorted-asc") ? -1 : 1;
      document.querySelectorAll("#doc-table th").forEach(function (o) { o.className = ""; });
      th.className = sortDir === 1 ? "sorted-asc" : "sorted-desc";
      sortKey = keys[i];
      render();
    });
  });
  search.addEventListener("input", render);
  render();
})();
