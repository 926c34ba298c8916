// The review page: every text from the server is put in with textContent, never as HTML.
"use strict";
let state = null;
let position = 0;

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
}

function show() {
  const item = state.items[position];
  const done = state.items.filter((i) => i.label !== null).length;
  $("progress").textContent = `item ${position + 1} of ${state.items.length} (${done} labelled)`;
  $("criterion").textContent = item.criterion + (item.scale === "1-5" ? " (1-5)" : " (pass/fail)");
  $("question").textContent = item.question;
  $("answer-heading").textContent = item.kind === "candidate" ? "Reference answer it comes with" : "Answer";
  $("answer").textContent = item.answer;
  $("reference").textContent = item.reference === null ? "(none)" : item.reference;
  $("passages").replaceChildren(...item.passages.map((p, i) => {
    const box = el("div", null, "passage");
    box.append(el("div", `[${i + 1}] ${p.source}`, "source"), el("div", p.text, "text"));
    return box;
  }));
  $("note").value = item.label ? item.label.note : "";
  $("status").textContent = item.label ? `your label: ${shown(item, item.label.value)}` : "not labelled";
  reveal(item);
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

async function save(value) {
  const at = position;
  const item = state.items[at];
  $("status").textContent = "saving...";
  const response = await fetch("/api/label", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ key: item.key, value: value, note: $("note").value }),
  });
  const body = await response.json();
  if (!response.ok) {
    if (position === at) $("status").textContent = "not saved: " + body.error;
    return;
  }
  Object.assign(item, body);
  showAgreement(body.agreement);
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
  if (item.scale === "1-5" && "12345".includes(key) && key.length === 1) save(Number(key));
  else if (item.scale === "pass_fail" && (key === "p" || key === "1")) save(1);
  else if (item.scale === "pass_fail" && (key === "f" || key === "0")) save(0);
  else if (key === "n") { event.preventDefault(); note.focus(); }
  else if (key === "enter" || key === "arrowright" || key === "s") move(1);
  else if (key === "b" || key === "arrowleft") move(-1);
  else return;
  event.preventDefault();
});

$("order").addEventListener("change", (event) => load(event.target.value));
load(new URLSearchParams(location.search).get("order") || "disagreement");
