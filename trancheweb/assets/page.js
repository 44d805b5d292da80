// The backfill and DAG pages: a click on a cell, or on a partition of an
// aggregated cell, shows its history beside the grid; while the backfill
// is not done (for a DAG, while one of its backfills is neither done nor
// canceled, or a partition runs), its status is polled and the counts,
// grid and list are redrawn when they change. Everything inserted is
// HTML the server escaped.
"use strict";
(function () {
  const root = document.getElementById("backfill") || document.getElementById("dag");
  const detail = document.getElementById("detail");

  async function show(href) {
    const res = await fetch(href, { headers: { "X-Tranche-Fragment": "1" } });
    const html = await res.text();
    detail.innerHTML = '<button type="button" class="close" id="close">Close</button>' + html;
    detail.hidden = false;
    detail.scrollTop = 0;
  }

  document.addEventListener("click", function (ev) {
    if (ev.target.id === "close") {
      detail.hidden = true;
      detail.innerHTML = "";
      return;
    }
    const a = ev.target.closest("a.js-detail");
    if (!a || !detail || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) {
      return;
    }
    ev.preventDefault();
    document.querySelectorAll(".cell.selected").forEach((c) => c.classList.remove("selected"));
    if (a.classList.contains("cell")) {
      a.classList.add("selected");
    }
    show(a.href).catch(() => { window.location.href = a.href; });
  });

  if (!root || root.dataset.done === "true") {
    return;
  }
  const every = Math.max(1000, Number(root.dataset.refresh) || 5000);
  let signature = root.dataset.signature;
  async function poll() {
    if (document.hidden) {
      return true;
    }
    const res = await fetch(root.dataset.status, { cache: "no-store" });
    if (!res.ok) {
      return true;
    }
    const st = await res.json();
    if (st.signature !== signature) {
      const live = await fetch(root.dataset.live, { cache: "no-store" });
      if (live.ok) {
        document.getElementById("live").innerHTML = await live.text();
        signature = st.signature;
        root.dataset.signature = signature;
      }
    }
    return root.id === "dag" ? st.running : !st.done;
  }
  function loop() {
    poll().then((more) => { if (more) setTimeout(loop, every); }, () => setTimeout(loop, every));
  }
  setTimeout(loop, every);
})();
