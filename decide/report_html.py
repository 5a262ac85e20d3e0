"""`report.html`: one self-contained page (inline CSS, JS and SVG; no network) for reviewers.

Sections, in order: a summary, the review queue and calibration (when the job has them; see
`report_review_html`), the failures (first, since they need action), per-question answer
distributions as SVG bar charts, the confidence histogram, the least confident answers, and a
searchable, sortable table of the sampled documents; clicking a row shows the document text next
to its answers, low-confidence answers highlighted and string and number answers marked where
they occur in the text. Charts are drawn here in Python; the script
only filters, sorts and shows rows, reading the sample from an embedded JSON block.
"""

from __future__ import annotations

import html
import json
from typing import Any

from .report_review_html import review_section

LOW_CONFIDENCE = 0.5
WIDTH = 520

CSS = """
:root { --ink:#1d2430; --muted:#5b6472; --line:#dde1e7; --bg:#f6f7f9; --accent:#2f6fdb;
        --bad:#c0392b; --warn:#fff1c2; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color:var(--ink); background:var(--bg); }
header { background:#fff; border-bottom:1px solid var(--line); padding:16px 24px; }
h1 { margin:0 0 4px; font-size:20px; } h2 { font-size:16px; margin:0 0 12px; }
main { padding:16px 24px; max-width:1400px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px;
          margin-bottom:16px; }
.cards { display:flex; flex-wrap:wrap; gap:12px; }
.card { border:1px solid var(--line); border-radius:6px; padding:8px 12px; min-width:130px; }
.card b { display:block; font-size:18px; }
.muted { color:var(--muted); } .bad { color:var(--bad); }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line);
         vertical-align:top; }
th { background:var(--bg); cursor:pointer; user-select:none; position:sticky; top:0; }
th.sorted-asc::after { content:" ▲"; } th.sorted-desc::after { content:" ▼"; }
tr.doc:hover { background:#eef4ff; cursor:pointer; } tr.selected { background:#dce8ff; }
td.low, span.low { background:var(--warn); }
.charts { display:grid; grid-template-columns:repeat(auto-fill, minmax(540px, 1fr)); gap:16px; }
.chart h3 { margin:0 0 6px; font-size:14px; } svg text { font-size:11px; fill:var(--ink); }
#search { width:100%; max-width:420px; padding:6px 8px; border:1px solid var(--line);
          border-radius:6px; margin-bottom:8px; }
.scroll { max-height:520px; overflow:auto; border:1px solid var(--line); }
#detail { display:grid; grid-template-columns:3fr 2fr; gap:16px; margin-top:12px; }
#detail pre { white-space:pre-wrap; margin:0; font:13px/1.5 ui-monospace, monospace;
              background:var(--bg); padding:12px; border-radius:6px; max-height:480px;
              overflow:auto; }
#detail mark { background:#d8e6ff; border-radius:2px; }
#detail dl { margin:0; } #detail dt { font-weight:600; margin-top:6px; }
#detail dd { margin:0 0 0 8px; }
"""

SCRIPT = """
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

  function text(v) {
    if (v === null || v === undefined) { return ""; }
    return typeof v === "string" ? v : JSON.stringify(v);
  }
  function minConf(r) {
    if (!r.confidence) { return -1; }
    var m = 2;
    for (var k in r.confidence) { if (r.confidence[k] < m) { m = r.confidence[k]; } }
    return m;
  }
  function cell(tr, value, cls) {
    var td = document.createElement("td");
    td.textContent = value;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
  }
  function render() {
    var q = search.value.toLowerCase();
    var list = rows.filter(function (r) {
      if (!q) { return true; }
      var hay = [text(r.doc_id), r.status, r.error || "", JSON.stringify(r.answers || {}),
                 r.text || ""].join(" ").toLowerCase();
      return hay.indexOf(q) !== -1;
    });
    if (sortKey !== null) {
      list.sort(function (a, b) {
        var x = sortKey(a), y = sortKey(b);
        return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
      });
    }
    body.textContent = "";
    list.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.className = "doc";
      cell(tr, text(r.doc_id));
      cell(tr, r.status, r.status === "error" ? "bad" : "");
      questions.forEach(function (qid) {
        var c = r.confidence ? r.confidence[qid] : null;
        var v = r.answers ? text(r.answers[qid]) : (r.error || "");
        cell(tr, v, c !== null && c !== undefined && c < low ? "low" : "");
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
  var NUMBER = new RegExp("(?:(?<![\\\\p{L}\\\\p{N}_.])[-\\u2212])?(?<![\\\\p{L}\\\\p{N}_.])" +
    "(?:\\\\d{1,3}(?:,\\\\d{3})+|\\\\d+)(?:\\\\.\\\\d+)?(?!\\\\d)(?!\\\\.\\\\d)", "gu");
  // The text with accents and other combining marks removed, and for each of its UTF-16 units
  // the offset in the original it came from (one more entry: the original's length), so that
  // "jose muller" (an uncased vocabulary strips accents) is found in "José Müller".
  function fold(text) {
    var out = "", from = [], at = 0;
    for (var c of text) {
      var f = c.normalize("NFD").replace(/\\p{M}/gu, "");
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
      var a = answers[qid];
      if (typeof a === "number") {
        var n;
        NUMBER.lastIndex = 0;
        while ((n = NUMBER.exec(value)) !== null) {
          if (parseFloat(n[0].replace("\\u2212", "-").replace(/,/g, "")) === a) {
            found.push([n.index, n.index + n[0].length, qid]);
          }
        }
        return;
      }
      if (typeof a !== "string") { return; }
      var chars = Array.from(fold(a).text.replace(/\\s+/g, ""));
      if (chars.length < 2) { return; }
      var body = chars.map(function (c) {
        return c.replace(/[.*+?^${}()|[\\]\\\\/]/g, "\\\\$&");
      }).join("\\\\s*");
      var re = new RegExp("(?<![\\\\p{L}\\\\p{N}])" + body + "(?![\\\\p{L}\\\\p{N}])", "giu");
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
    if (r.text === null) {
      pre.textContent = "(document text not available: the input files were not readable " +
        "when this report was built)";
    } else {
      mark(pre, r.text, r.status === "ok" ? r.answers : {});
      if (r.text_cut) { pre.appendChild(document.createTextNode("\\n[…]")); }
    }
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
        if (!(qid in r.answers)) { return; }
        var dt = document.createElement("dt");
        dt.textContent = qid;
        var dd = document.createElement("dd");
        var span = document.createElement("span");
        var c = r.confidence[qid];
        span.textContent = text(r.answers[qid]) + "  (confidence " + c.toFixed(3) + ")";
        if (c < low) { span.className = "low"; }
        dd.appendChild(span);
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
      var keys = [function (r) { return text(r.doc_id); }, function (r) { return r.status; }];
      questions.forEach(function (qid) {
        keys.push(function (r) { return r.answers ? text(r.answers[qid]) : ""; });
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
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def bar_chart(labels: list[str], counts: list[int], title: str) -> str:
    """Horizontal bars, one per label, with the count at the end."""
    height = 22 * len(labels) + 8
    top = max(counts) if counts and max(counts) > 0 else 1
    label_w = 170
    bars = []
    for i, (label, count) in enumerate(zip(labels, counts, strict=True)):
        y = 4 + 22 * i
        w = (WIDTH - label_w - 60) * count / top
        short = label if len(label) <= 26 else label[:25] + "…"
        bars.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{_e(short)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="15" fill="#2f6fdb">'
            f"<title>{_e(label)}: {count}</title></rect>"
            f'<text x="{label_w + w + 4:.1f}" y="{y + 14}">{count:,}</text>'
        )
    return (
        f'<svg class="chart-svg" role="img" aria-label="{_e(title)}" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}">{"".join(bars)}</svg>'
    )


def column_chart(labels: list[str], counts: list[int], title: str) -> str:
    """Vertical columns (histograms), labels under every other column."""
    height, base = 170, 140
    top = max(counts) if counts and max(counts) > 0 else 1
    n = max(len(counts), 1)
    step = (WIDTH - 20) / n
    parts = []
    for i, (label, count) in enumerate(zip(labels, counts, strict=True)):
        h = (base - 20) * count / top
        x = 10 + i * step
        parts.append(
            f'<rect x="{x + 2:.1f}" y="{base - h:.1f}" width="{step - 4:.1f}" height="{h:.1f}" '
            f'fill="#2f6fdb"><title>{_e(label)}: {count}</title></rect>'
        )
        if count:
            parts.append(f'<text x="{x + step / 2:.1f}" y="{base - h - 3:.1f}" '
                         f'text-anchor="middle">{count:,}</text>')  # fmt: skip
        if i % 2 == 0 or n <= 10:
            parts.append(f'<text x="{x + step / 2:.1f}" y="{base + 14}" '
                         f'text-anchor="middle">{_e(label)}</text>')  # fmt: skip
    return (
        f'<svg class="chart-svg" role="img" aria-label="{_e(title)}" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}">{"".join(parts)}</svg>'
    )


def _distribution_chart(question: dict[str, Any]) -> str:
    dist = question["distribution"]
    title = f"answers to {question['id']}"
    if dist["type"] == "histogram":
        if not dist["bins"]:
            return '<p class="muted">no answers</p>'
        labels = [f"{b['low']:.4g}" for b in dist["bins"]]
        return column_chart(labels, [b["count"] for b in dist["bins"]], title)
    labels = [json.dumps(v["value"]) if not isinstance(v["value"], str) else v["value"]
              for v in dist["values"]]  # fmt: skip
    counts = [v["count"] for v in dist["values"]]
    if dist["other"]:
        labels.append(f"({dist['distinct'] - len(dist['values'])} other values)")
        counts.append(dist["other"])
    if not labels:
        return '<p class="muted">no answers</p>'
    return bar_chart(labels, counts, title)


def confidence_chart(hist: dict[str, Any], title: str) -> str:
    labels = [f"{i / 10:.1f}" for i in range(10)]
    return column_chart(labels, hist["counts"], title)


def _confidence_meaning(report: dict[str, Any]) -> str:
    if (report.get("calibration") or {}).get("calibrated"):
        return "Calibrated probability that each answer is right (see Calibration above)."
    return (
        "Product of the probabilities each answer was committed with: model-derived, not "
        "calibrated."
    )


def render_html(report: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    c, t, job = report["counts"], report["throughput"], report["job"]
    cards = [
        ("documents", _fmt(c["total"])),
        ("ok", _fmt(c["ok"])),
        ("failed", _fmt(c["failed"])),
        ("documents/s", _fmt(t["documents_per_second"])),
        ("forward passes/doc", _fmt(t["forward_passes_per_document"])),
        ("answer tokens/forward pass", _fmt(t["answer_tokens_per_forward_pass"])),
        ("mean confidence", _fmt(report["confidence"]["mean"], 3)),
    ]
    summary = "".join(f'<div class="card"><span class="muted">{_e(k)}</span><b>{v}</b></div>'
                      for k, v in cards)  # fmt: skip
    reasons = "".join(
        f"<tr><td>{_e(reason)}</td><td>{n:,}</td></tr>"
        for reason, n in sorted(c["failed_by_reason"].items(), key=lambda kv: -kv[1])
    )
    failures = "".join(
        f'<tr><td>{_e(f["doc_id"])}</td><td class="bad">{_e(f["error"])}</td></tr>'
        for f in report["failures"]
    )
    if c["failed"]:
        failure_html = (
            f"<table><tr><th>reason</th><th>rows</th></tr>{reasons}</table><br>"
            f'<div class="scroll"><table><tr><th>doc_id</th><th>error</th></tr>{failures}'
            "</table></div>"
        )
    else:
        failure_html = '<p class="muted">No failed rows.</p>'
    charts = "".join(
        f'<div class="chart"><h3>{_e(q["id"])} <span class="muted">{_e(q["text"])}</span></h3>'
        f"{_distribution_chart(q)}"
        f'<p class="muted">{q["answered"]:,} answered; mean confidence '
        f"{_fmt(q['confidence']['mean'], 3)}</p></div>"
        for q in report["questions"]
    )
    lowest = "".join(
        f"<tr><td>{_e(r['doc_id'])}</td><td>{_e(r['question'])}</td>"
        f'<td class="low">{_e(json.dumps(r["answer"], ensure_ascii=False))}</td>'
        f"<td>{r['confidence']:.3f}</td></tr>"
        for r in report["lowest_confidence"]
    )
    question_ids = [q["id"] for q in report["questions"]]
    heads = "".join(f"<th>{_e(q)}</th>" for q in ["doc_id", "status", *question_ids, "min conf."])
    sample = {"rows": rows, "questions": question_ids, "low": LOW_CONFIDENCE}
    payload = json.dumps(sample, ensure_ascii=False, default=str).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>decide report</title><style>{CSS}</style></head>
<body>
<header><h1>Decision report</h1>
<div class="muted">model {_e(job["model"])} ({_e(job["model_type"])}) · job {_e(job["status"])}
· generated {_e(report["generated"])} · {job["seconds"]:.1f}s</div></header>
<main>
<section id="summary"><h2>Summary</h2><div class="cards">{summary}</div></section>
{review_section(report)}
<section id="failures"><h2>Failures</h2>{failure_html}</section>
<section id="questions"><h2>Answers by question</h2><div class="charts">{charts}</div></section>
<section id="confidence"><h2>Confidence</h2>
<p class="muted">{_confidence_meaning(report)} Answers below {LOW_CONFIDENCE} are highlighted.</p>
{confidence_chart(report["confidence"], "confidence of all answers")}
<h3>Least confident answers</h3>
<table><tr><th>doc_id</th><th>question</th><th>answer</th><th>confidence</th></tr>{lowest}</table>
</section>
<section id="documents"><h2>Documents</h2>
<input id="search" type="search" placeholder="Search doc id, answers, text…" aria-label="search">
<div id="shown" class="muted"></div>
<div class="scroll"><table id="doc-table"><thead><tr>{heads}</tr></thead>
<tbody id="doc-body"></tbody></table></div>
<div id="detail"></div>
</section>
</main>
<script id="sample" type="application/json">{payload}</script>
<script>{SCRIPT}</script>
</body></html>
"""
