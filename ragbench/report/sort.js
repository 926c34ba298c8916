// Sorts every table inside a ".sortable" container by the clicked column: numbers numerically, text
// naturally, blanks last in both directions.
(() => {
  "use strict";
  const key = (cell, numeric) => {
    const text = cell ? cell.textContent.trim() : "";
    if (!numeric) return text;
    const value = parseFloat(text);
    return Number.isNaN(value) ? "" : value;
  };
  for (const table of document.querySelectorAll(".sortable table")) {
    const headers = Array.from(table.tHead.rows[0].cells);
    headers.forEach((header, index) => {
      const sort = () => {
        const ascending = header.getAttribute("aria-sort") !== "ascending";
        headers.forEach((other) => other.removeAttribute("aria-sort"));
        header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        const numeric = rows.some((row) => row.cells[index] && row.cells[index].classList.contains("number"));
        const keyed = rows.map((row) => [key(row.cells[index], numeric), row]);
        keyed.sort(([a], [b]) => {
          if (a === "" || b === "") return (a === "") - (b === "");
          const order = numeric ? a - b : a.localeCompare(b, undefined, { numeric: true });
          return ascending ? order : -order;
        });
        body.append(...keyed.map(([, row]) => row));
      };
      header.tabIndex = 0;
      header.addEventListener("click", sort);
      header.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          sort();
        }
      });
    });
  }
})();
