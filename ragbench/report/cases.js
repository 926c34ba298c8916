// Renders the side-by-side answers from the JSON data block. Every piece of data goes in through
// textContent (or new Option), never innerHTML, so no answer, passage or label can become markup.
(() => {
  "use strict";
  const cases = JSON.parse(document.getElementById("case-data").textContent);
  const pickA = document.getElementById("cell-a");
  const pickB = document.getElementById("cell-b");
  const onlyDiffer = document.getElementById("only-differ");
  const list = document.getElementById("case-list");
  const count = document.getElementById("case-count");
  const element = (tag, className, text) => {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  };
  const answersOf = new Map(cases.map((item) => [item, new Map(item.answers.map((a) => [a.cell, a]))]));
  const differ = (a, b) =>
    !a || !b || a.answer !== b.answer || JSON.stringify(a.scores) !== JSON.stringify(b.scores) ||
    a.keyword_failures.join("\n") !== b.keyword_failures.join("\n");
  const answerBlock = (pick, entry) => {
    const box = element("div", "answer");
    box.append(element("h4", null, pick.selectedOptions[0].textContent));
    if (!entry) {
      box.append(element("p", "note", "This configuration did not answer this question."));
      return box;
    }
    if (entry.answer === null) {
      box.append(element("p", "error", "No answer: " + (entry.error || "reader failed")));
    } else {
      box.append(element("p", "answer-text", entry.answer));
    }
    const scores = Object.entries(entry.scores).map(([name, verdict]) => name + " " + verdict);
    box.append(element("p", "meta", "Judge: " + (scores.length ? scores.join("; ") : "not judged")));
    const failures = entry.keyword_failures.length ? entry.keyword_failures.join("; ") : "none";
    box.append(element("p", "meta", "Keyword failures: " + failures));
    if (entry.judge_reasoning) box.append(element("p", "meta", "Reasoning: " + entry.judge_reasoning));
    if ((entry.searched || []).length) {
      box.append(element("p", "meta", "Searched (query rewrite): " + entry.searched.join(" | ")));
    }
    for (const [scorer, lines] of Object.entries(entry.scorer_details || {})) {
      const details = element("details", "meta");
      details.append(element("summary", null, scorer + ": what it judged"));
      const items = element("ul");
      for (const line of lines) items.append(element("li", null, line));
      details.append(items);
      box.append(details);
    }
    if (entry.passages.length) {
      const passages = element("ol", "meta");
      for (const passage of entry.passages) {
        const details = element("details");
        const rank = passage.rank === null ? "" : " (retrieval rank " + passage.rank + ")";
        details.append(element("summary", null, passage.source + rank));
        details.append(element("div", "passage-text", passage.text));
        const item = element("li");
        item.append(details);
        passages.append(item);
      }
      box.append(passages);
    }
    return box;
  };
  const render = () => {
    list.replaceChildren();
    let shown = 0;
    for (const item of cases) {
      const a = answersOf.get(item).get(pickA.value);
      const b = answersOf.get(item).get(pickB.value);
      if ((!a && !b) || (onlyDiffer.checked && !differ(a, b))) continue;
      const card = element("section", "case");
      card.append(element("h3", null, item.id + ": " + item.question));
      if ((item.history || []).length) {
        const turns = element("div", "turns");
        turns.append(element("p", "note", "Asked after this conversation:"));
        for (const turn of item.history) turns.append(element("p", "turn", turn.role + ": " + turn.content));
        card.append(turns);
      }
      const pair = element("div", "pair");
      pair.append(answerBlock(pickA, a), answerBlock(pickB, b));
      card.append(pair);
      list.append(card);
      shown += 1;
    }
    count.textContent = shown + " of " + cases.length + " questions shown";
  };
  for (const control of [pickA, pickB, onlyDiffer]) control.addEventListener("change", render);
  render();
})();
