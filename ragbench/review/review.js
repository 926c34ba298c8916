// The review page: every text from the server is put in with textContent or text nodes, never as HTML.
"use strict";
let state = null;
let position = 0;
let shownKey = null; // the item whose passages and buttons are on the page
let markAt = 0; // the marked span `m` goes to next
const SHARED_WORDS = 4; // a run of this many words found in the answer and in a passage is marked

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

async function load(order) {
  const response = await fetch("/api/state?order=" + encodeURIComponent(order));
  state = await response.json();
  const select = $("order");
  select.replaceChildren(...state.orders.map((name) => {
    const option = el("option", name);
    option.value = name;
    option.selected = name === state.order;
    return option;
  }));
  $("title").textContent = state.title;
  const first = state.items.findIndex((item) => item.label === null);
  position = first === -1 ? 0 : first;
  show();
  showAgreement(state.agreement);
  showProgress(state.progress);
}

function show() {
  const item = state.items[position];
  const done = state.items.filter((i) => i.label !== null).length;
  $("progress").textContent = `item ${position + 1} of ${state.items.length} (${done} labelled)`;
  if (item.key !== shownKey) showItem(item);
  $("note").value = item.label ? item.label.note : "";
  $("status").textContent = item.label ? `your label: ${shown(item, item.label.value)}` : "not labelled";
  for (const button of $("scale").querySelectorAll("button")) {
    button.setAttribute("aria-pressed", String(item.label !== null && item.label.value === Number(button.value)));
  }
  reveal(item);
}

// What stays as it is while the person is on one item (a label does not fold the passages they opened).
function showItem(item) {
  shownKey = item.key;
  markAt = 0;
  $("criterion").textContent = item.criterion + (item.scale === "1-5" ? " (1-5)" : " (pass/fail)");
  const turns = item.history || [];
  $("history-block").hidden = turns.length === 0;
  $("history").replaceChildren(...turns.map((turn) => el("div", `${turn.role}: ${turn.content}`, "text turn")));
  $("question").textContent = item.question;
  const searched = item.searched || [];
  $("searched").hidden = searched.length === 0;
  $("searched").textContent = searched.length ? `Searched for (query rewrite): ${searched.join(" | ")}` : "";
  $("answer-heading").textContent = item.kind === "candidate" ? "Reference answer it comes with" : "Answer";
  $("answer").textContent = item.answer;
  $("reference").textContent = item.reference === null ? "(none)" : item.reference;
  const values = item.scale === "1-5" ? [1, 2, 3, 4, 5] : [1, 0];
  $("scale").replaceChildren(el("span", "your verdict:", "source"), ...values.map((value) => {
    const button = el("button", item.scale === "1-5" ? value : `${shown(item, value)} (${value ? "p" : "f"})`);
    button.type = "button";
    button.value = String(value);
    button.addEventListener("mousedown", (event) => event.preventDefault()); // a click leaves the focus where it was
    button.addEventListener("click", () => save(value));
    return button;
  }));
  const found = [];
  $("passages").replaceChildren(...item.passages.map((p, i) => {
    const spans = sharedSpans(item.answer, p.text);
    if (spans.length) found.push([i + 1, spans.length]);
    return passage(p, i + 1, spans);
  }));
  const spans = found.reduce((sum, [, n]) => sum + n, 0);
  const where = found.map(([n]) => `[${n}]`).join(", ");
  $("cites").textContent = found.length
    ? `Shares ${plural(spans, "span")} with passage${found.length === 1 ? "" : "s"} ${where}, marked below (m goes to them).`
    : `Shares no run of ${SHARED_WORDS} words with a passage.`;
  window.scrollTo(0, 0);
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

// One passage, folded: its number and source (and how many spans of the answer it holds) on the summary line.
function passage(p, number, spans) {
  const box = el("details", null, "passage");
  const summary = el("summary", `[${number}] ${p.source}`, "source");
  if (spans.length) summary.append(el("span", `${plural(spans.length, "marked span")} of the answer`, "hits"));
  summary.addEventListener("mousedown", (event) => event.preventDefault()); // Enter still means "next"
  summary.addEventListener("click", (event) => { // a click, or Enter / Space on a focused summary
    event.preventDefault();
    box.open = !box.open;
    const first = box.querySelector("mark");
    if (box.open && first) first.scrollIntoView({ block: "nearest" });
  });
  box.append(summary, marked(p.text, spans));
  return box;
}

// The words of a text, compared without case or punctuation, with where each stands in the text.
function words(text) {
  return Array.from(text.matchAll(/[\p{L}\p{M}\p{N}]+/gu), (m) => ({
    key: m[0].normalize("NFKC").toLowerCase(), start: m.index, end: m.index + m[0].length,
  }));
}

// [start, end) of the runs of `passage` made of SHARED_WORDS or more consecutive words that also stand
// consecutively in `answer`.
function sharedSpans(answer, passage) {
  const gram = (list, i) => list.slice(i, i + SHARED_WORDS).map((w) => w.key).join(" ");
  const said = words(answer);
  const grams = new Set();
  for (let i = 0; i + SHARED_WORDS <= said.length; i++) grams.add(gram(said, i));
  const read = words(passage);
  const covered = new Array(read.length).fill(false);
  for (let i = 0; i + SHARED_WORDS <= read.length; i++) {
    if (grams.has(gram(read, i))) covered.fill(true, i, i + SHARED_WORDS);
  }
  const spans = [];
  read.forEach((w, i) => {
    if (!covered[i]) return;
    if (i > 0 && covered[i - 1]) spans[spans.length - 1][1] = w.end;
    else spans.push([w.start, w.end]);
  });
  return spans;
}

// The passage's text as text nodes, the shared spans in <mark> elements: DOM nodes, never an HTML string.
function marked(text, spans) {
  const box = el("div", null, "text");
  let at = 0;
  for (const [start, end] of spans) {
    box.append(document.createTextNode(text.slice(at, start)), el("mark", text.slice(start, end)));
    at = end;
  }
  box.append(document.createTextNode(text.slice(at)));
  return box;
}

function toggleFolds() {
  const folds = Array.from($("passages").querySelectorAll("details"));
  const open = folds.some((box) => !box.open);
  for (const box of folds) box.open = open;
  if (open && folds.length) $("passages-heading").scrollIntoView({ block: "start" });
}

function nextMark() {
  const marks = Array.from($("passages").querySelectorAll("mark"));
  if (!marks.length) return;
  const mark = marks[markAt % marks.length];
  markAt += 1;
  for (const other of marks) other.classList.toggle("current", other === mark);
  mark.closest("details").open = true;
  mark.scrollIntoView({ block: "center" });
}

function shown(item, value) {
  if (item.scale === "1-5") return `${value} / 5`;
  if (item.kind === "candidate") return value ? "keep" : "reject";
  return value ? "pass" : "fail";
}

function reveal(item) {
  const box = $("revealed");
  if (!item.label) { box.hidden = true; box.replaceChildren(); return; }
  const rows = Object.entries(item.verdicts || {}).map(([judge, score]) => {
    const line = el("div", `${judge}: ${shown(item, score)}`);
    const why = (item.reasoning || {})[judge];
    if (why) line.append(el("div", why, "source"));
    return line;
  });
  if ((item.keyword_failures || []).length) rows.push(el("div", "keyword tests failed: " + item.keyword_failures.join("; ")));
  if (!rows.length) rows.push(el("div", "no judge verdict on this item"));
  box.replaceChildren(el("b", "Judges"), ...rows);
  box.hidden = false;
}

function showAgreement(rows) {
  const box = $("agreement");
  if (!rows.length) { box.replaceChildren(el("p", "No labels yet.")); return; }
  const table = el("table");
  const head = el("tr");
  for (const name of ["criterion", "judge", "labels", "exact", "kappa", "interval", "more labels for +/-0.1"]) head.append(el("th", name));
  table.append(head);
  for (const a of rows) {
    const tr = el("tr");
    const interval = a.kappa_low === null ? "n/a" : `[${a.kappa_low.toFixed(2)}, ${a.kappa_high.toFixed(2)}]`;
    for (const cell of [a.criterion, a.judge, a.labels, a.exact === null ? "n/a" : `${Math.round(a.exact * 100)}%`,
      a.kappa === null ? "n/a" : a.kappa.toFixed(2), interval, a.labels_needed === null ? "n/a" : a.labels_needed]) {
      tr.append(el("td", cell));
    }
    table.append(tr);
  }
  box.replaceChildren(table);
}

// On a sample order: how far the random sample has got, its corrected mean, and the labels a narrow
// interval needs at the agreement seen so far (the run's report computes the same per cell).
function showProgress(rows) {
  const box = $("sample-progress");
  box.hidden = !state.sample;
  if (!state.sample) return;
  const lead = el("p", "Labels given in this order are a random sample: a run with evaluation.label_correction " +
    "corrects the judge's numbers with them. Label in the queue's order: a case skipped ends the sample there.");
  const lines = rows.map((p) => el("div", `${p.judge} on ${p.criterion}: ${p.sampled_cases} of ${p.cases} cases ` +
    `labelled; corrected mean ${p.estimate}` +
    (p.labels_for_width === null ? "" : `; about ${p.labels_for_width} labelled cases in all for an interval ` +
      `narrower than ${p.width}`) +
    (p.ceiling === null ? "" : `; a label is worth at most ${p.ceiling.toFixed(2)} with this judge`)));
  box.replaceChildren(lead, ...lines);
}

async function save(value) {
  const at = position;
  const item = state.items[at];
  $("status").textContent = "saving...";
  const response = await fetch("/api/label", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ key: item.key, value: value, note: $("note").value, order: state.order }),
  });
  const body = await response.json();
  if (!response.ok) {
    if (position === at) $("status").textContent = "not saved: " + body.error;
    return;
  }
  Object.assign(item, body);
  showAgreement(body.agreement);
  showProgress(body.progress || []);
  if (position !== at) return; // the person moved on meanwhile: leave the item they are on alone
  show();
  $("status").textContent = `saved: ${shown(item, value)}`;
}

function move(step) {
  position = Math.min(state.items.length - 1, Math.max(0, position + step));
  show();
}

document.addEventListener("keydown", (event) => {
  if (!state || event.ctrlKey || event.metaKey || event.altKey) return;
  const note = $("note");
  if (document.activeElement === note) {
    if (event.key === "Escape") note.blur();
    return;
  }
  const item = state.items[position];
  const key = event.key.toLowerCase();
  if (key === "enter" && document.activeElement.matches("button, summary")) return; // a focused control's own
  if (item.scale === "1-5" && "12345".includes(key) && key.length === 1) save(Number(key));
  else if (item.scale === "pass_fail" && (key === "p" || key === "1")) save(1);
  else if (item.scale === "pass_fail" && (key === "f" || key === "0")) save(0);
  else if (key === "n") { event.preventDefault(); note.focus(); }
  else if (key === "enter" || key === "arrowright" || key === "s") move(1);
  else if (key === "b" || key === "arrowleft") move(-1);
  else if (key === "o") toggleFolds();
  else if (key === "m") nextMark();
  else return;
  event.preventDefault();
});

$("order").addEventListener("change", (event) => load(event.target.value));
load(new URLSearchParams(location.search).get("order") || "disagreement");
