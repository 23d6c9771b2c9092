// Live updates for the Cacheon dashboard. The server sends an "overview"
// event on /api/stream whenever the validator's overview changes (its data
// is the overview's digest); the page then fetches itself again and swaps
// in the new #live region. Nothing is posted and nothing is reloaded.
"use strict";
(function () {
  const status = document.getElementById("live-status");
  const region = document.getElementById("live");
  const body = document.body;
  function show(state) {
    if (!status) return;
    status.textContent = state;
    status.dataset.state = state;
    body.dataset.live = state;
  }
  if (!region || !body.dataset.digest || !window.EventSource) return;
  let shown = body.dataset.digest; // the digest this page was rendered with
  let wanted = shown;
  let busy = false;
  body.dataset.refreshes = "0";

  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      // At most a few fetches per event: a source whose overview never
      // settles must not make the page fetch itself without end.
      for (let tries = 0; wanted !== shown && tries < 3; tries++) {
        const target = wanted;
        const res = await fetch(location.pathname + location.search, {
          cache: "no-store", credentials: "same-origin", headers: { "Accept": "text/html" },
        });
        if (!res.ok) {
          show("error " + res.status);
          return;
        }
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        const next = doc.getElementById("live");
        if (!next) {
          show("error");
          return;
        }
        region.replaceChildren(...Array.from(next.childNodes, (n) => document.importNode(n, true)));
        shown = doc.body.dataset.digest || target;
        body.dataset.digest = shown;
        body.dataset.refreshes = String(Number(body.dataset.refreshes) + 1);
        show("live");
      }
    } catch (e) {
      show("offline");
    } finally {
      busy = false;
    }
  }

  const events = new EventSource("/api/stream");
  events.addEventListener("open", () => show("live"));
  events.addEventListener("error", () => show("reconnecting"));
  events.addEventListener("overview", (ev) => {
    wanted = ev.data;
    refresh();
  });
})();
