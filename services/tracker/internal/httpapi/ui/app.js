// The tracker's page: the stuck and recent sagas — their age, outcome and
// why they ended, with a filter — and one saga's timeline drawn as a lane
// per service with its events in time order, left to right, a failed step
// or a compensation drawn unlike a forward step. It only reads the
// tracker's JSON API (GET /sagas, GET /sagas/{order_id}) with an
// operator's token; ?order=<id> in the address shows that saga.
"use strict";

// The services, one lane each, in the saga's forward order. An event from
// any other source gets a lane of its own after them.
const LANES = ["order", "payment", "inventory", "shipping"];

// The API needs an operator's token. It is given once, in the address's
// fragment (#token=…, which the browser never sends to a server) or in the
// token field, and kept in sessionStorage, for this tab only; the fragment
// is taken out of the address, so the token is neither bookmarked nor
// passed on with a link.
const TOKEN_KEY = "choreo-tracker-token";

function takeToken() {
  const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
}

async function getJSON(path) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(path, { headers });
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    if (res.status === 401 || res.status === 403) document.getElementById("token-form").hidden = false;
    throw new Error((body && body.detail) || `${path} answered ${res.status}`);
  }
  return body;
}

// el builds an element: el("a", {href: "x", class: "y"}, "text", child…).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function showError(err) {
  const p = document.getElementById("error");
  p.textContent = String(err.message || err);
  p.hidden = false;
}

function stateBadge(state) {
  return el("span", { class: `state state-${state}`, "data-state": state }, state);
}

// duration formats a span of milliseconds for people: 72 ms, 1.25 s, 3 min.
function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms < 3600000) return `${Math.round(ms / 60000)} min`;
  if (ms < 86400000) return `${(ms / 3600000).toFixed(1)} h`;
  return `${(ms / 86400000).toFixed(1)} d`;
}

function renderList(id, sagas, current) {
  const table = document.getElementById(id);
  const body = table.tBodies[0];
  body.replaceChildren();
  table.removeAttribute("data-loading");
  if (sagas.length === 0) {
    body.append(el("tr", { class: "empty" }, el("td", { colspan: "4" }, "none")));
    return;
  }
  const now = Date.now();
  for (const s of sagas) {
    const a = el("a", { href: `?order=${encodeURIComponent(s.order_id)}`, "data-order-id": s.order_id,
      "aria-current": s.order_id === current ? "true" : "false" }, s.order_id);
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      history.pushState(null, "", a.getAttribute("href"));
      show(s.order_id).catch(showError);
    });
    const age = now - new Date(s.started_at);
    body.append(el("tr", { "data-order-id": s.order_id, "data-state": s.state, "data-reason": s.reason || "" },
      el("td", { class: "order" }, a),
      el("td", { class: "age", title: s.started_at }, duration(Math.max(age, 0))),
      el("td", { class: "outcome" }, stateBadge(s.state)),
      el("td", { class: "reason" }, s.reason || "")));
  }
  body.append(el("tr", { class: "empty no-match", hidden: "" }, el("td", { colspan: "4" }, "no saga matches the filter")));
  applyFilter();
}

// applyFilter hides the listed sagas whose id, outcome and reason do not
// all together contain the filter's text, ignoring case.
function applyFilter() {
  const q = document.getElementById("filter").value.trim().toLowerCase();
  for (const body of document.querySelectorAll("table.sagas tbody")) {
    let shown = 0;
    for (const tr of body.querySelectorAll("tr[data-order-id]")) {
      const text = `${tr.dataset.orderId} ${tr.dataset.state} ${tr.dataset.reason}`.toLowerCase();
      tr.hidden = q !== "" && !text.includes(q);
      if (!tr.hidden) shown++;
    }
    const none = body.querySelector("tr.no-match");
    if (none) none.hidden = shown > 0;
  }
}

async function loadLists(current) {
  const [stuck, recent] = await Promise.all([getJSON("sagas?state=stuck&limit=20"), getJSON("sagas?limit=20")]);
  renderList("stuck-list", stuck.sagas, current);
  renderList("recent-list", recent.sagas, current);
}

// offset formats an event's time relative to the saga's start.
function offset(at, start) {
  return `+${duration(new Date(at) - new Date(start))}`;
}

function facts(saga) {
  const dl = el("dl", { class: "facts" });
  const add = (k, v) => dl.append(el("div", {}, el("dt", {}, k), el("dd", {}, v)));
  add("order", saga.order_id);
  add("state", stateBadge(saga.state));
  if (saga.reason) add("reason", el("span", { id: "reason" }, saga.reason));
  // The whole saga, first event to last: how long it took, or has run.
  const ms = (saga.ended_at ? new Date(saga.ended_at) : new Date()) - new Date(saga.started_at);
  add(saga.ended_at ? "took" : "running for", el("span", { id: "duration", "data-ms": String(ms) }, duration(ms)));
  if (saga.waiting_for) add("waiting for", el("span", { id: "waiting-for" }, saga.waiting_for));
  add("started", saga.started_at);
  add("ended", saga.ended_at || "—");
  add("events", String(saga.events.length));
  return dl;
}

// lanes draws the timeline: a grid whose rows are the services and whose
// columns are the events in time order, each event in its service's row.
// Columns are as wide as their label at least, so none is cut off; the
// grid scrolls sideways instead.
function lanes(saga) {
  const names = [...LANES];
  for (const e of saga.events) {
    if (!names.includes(e.service)) names.push(e.service);
  }
  const n = Math.max(saga.events.length, 1);
  const grid = el("div", { class: "lanes", role: "table", "aria-label": "timeline" });
  grid.style.gridTemplateColumns = `max-content repeat(${n}, minmax(max-content, 1fr))`;
  names.forEach((name, i) => {
    const known = LANES.includes(name) ? name : "other";
    const label = el("div", { class: `lane-name lane-${known}`, "data-lane": name, role: "rowheader" }, name);
    label.style.gridRow = String(i + 1);
    label.style.gridColumn = "1";
    const bg = el("div", { class: "lane-bg" });
    bg.style.gridRow = String(i + 1);
    bg.style.gridColumn = `2 / span ${n}`;
    grid.append(label, bg);
  });
  saga.events.forEach((e, i) => {
    const known = LANES.includes(e.service) ? e.service : "other";
    const kind = e.kind || "other";
    const box = el("div", {
      class: `event lane-${known} kind-${kind}`, "data-event-id": e.event_id, "data-type": e.type, "data-service": e.service,
      "data-kind": kind, title: `${e.type} (${kind}) ${e.event_id}\n${e.topic}/${e.partition}@${e.offset}\n${e.at}`,
    }, el("span", { class: "type" }, e.type));
    if (e.reason) box.append(el("span", { class: "reason" }, e.reason));
    box.append(el("span", { class: "at" }, offset(e.at, saga.started_at)));
    box.style.gridRow = String(names.indexOf(e.service) + 1);
    box.style.gridColumn = String(i + 2);
    grid.append(box);
  });
  return grid;
}

async function show(orderID) {
  const saga = await getJSON(`sagas/${encodeURIComponent(orderID)}`);
  const t = document.getElementById("timeline");
  t.replaceChildren(el("h2", {}, "Saga ", el("code", {}, saga.order_id)), facts(saga), lanes(saga));
  t.setAttribute("data-order-id", saga.order_id);
  t.setAttribute("data-state", saga.state);
  document.getElementById("error").hidden = true;
  for (const a of document.querySelectorAll("table.sagas a")) {
    a.setAttribute("aria-current", a.dataset.orderId === orderID ? "true" : "false");
  }
}

async function main() {
  takeToken();
  document.getElementById("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    location.reload();
  });
  document.getElementById("filter").addEventListener("input", applyFilter);
  const current = new URLSearchParams(location.search).get("order");
  const work = [loadLists(current)];
  if (current) work.push(show(current));
  const results = await Promise.allSettled(work);
  for (const r of results) {
    if (r.status === "rejected") showError(r.reason);
  }
  // Drawn, or the error shown: what a test of the page waits for.
  document.body.setAttribute("data-loaded", "true");
}

window.addEventListener("popstate", () => {
  const id = new URLSearchParams(location.search).get("order");
  if (id) show(id).catch(showError);
});
main();
