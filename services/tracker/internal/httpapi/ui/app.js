// The tracker's page: the stuck and recent sagas, and one saga's timeline
// drawn as a lane per service with its events in time order, left to
// right. It only reads the tracker's JSON API (GET /sagas, GET
// /sagas/{order_id}); ?order=<id> in the address shows that saga.
"use strict";

// The services, one lane each, in the saga's forward order. An event from
// any other source gets a lane of its own after them.
const LANES = ["order", "payment", "inventory", "shipping"];

async function getJSON(path) {
  const res = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await res.json().catch(() => null);
  if (!res.ok) {
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

function renderList(id, sagas, current) {
  const ul = document.getElementById(id);
  ul.replaceChildren();
  ul.removeAttribute("data-loading");
  if (sagas.length === 0) {
    ul.append(el("li", { class: "empty" }, "none"));
    return;
  }
  for (const s of sagas) {
    const a = el("a", { href: `?order=${encodeURIComponent(s.order_id)}`, "data-order-id": s.order_id,
      "aria-current": s.order_id === current ? "true" : "false" }, el("span", {}, s.order_id), stateBadge(s.state));
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      history.pushState(null, "", a.getAttribute("href"));
      show(s.order_id).catch(showError);
    });
    ul.append(el("li", {}, a));
  }
}

async function loadLists(current) {
  const [stuck, recent] = await Promise.all([getJSON("sagas?state=stuck&limit=20"), getJSON("sagas?limit=20")]);
  renderList("stuck-list", stuck.sagas, current);
  renderList("recent-list", recent.sagas, current);
}

// offset formats an event's time relative to the saga's start.
function offset(at, start) {
  const ms = new Date(at) - new Date(start);
  return ms < 1000 ? `+${ms} ms` : `+${(ms / 1000).toFixed(2)} s`;
}

function facts(saga) {
  const dl = el("dl", { class: "facts" });
  const add = (k, v) => dl.append(el("div", {}, el("dt", {}, k), el("dd", {}, v)));
  add("order", saga.order_id);
  add("state", stateBadge(saga.state));
  if (saga.waiting_for) add("waiting for", el("span", { id: "waiting-for" }, saga.waiting_for));
  add("started", saga.started_at);
  add("ended", saga.ended_at || "—");
  add("events", String(saga.events.length));
  return dl;
}

// lanes draws the timeline: a grid whose rows are the services and whose
// columns are the events in time order, each event in its service's row.
function lanes(saga) {
  const names = [...LANES];
  for (const e of saga.events) {
    if (!names.includes(e.service)) names.push(e.service);
  }
  const grid = el("div", { class: "lanes", role: "table", "aria-label": "timeline" });
  grid.style.gridTemplateColumns = `8em repeat(${Math.max(saga.events.length, 1)}, minmax(9em, 1fr))`;
  names.forEach((name, i) => {
    const known = LANES.includes(name) ? name : "other";
    const label = el("div", { class: `lane-name lane-${known}`, "data-lane": name, role: "rowheader" }, name);
    label.style.gridRow = String(i + 1);
    label.style.gridColumn = "1";
    const bg = el("div", { class: "lane-bg" });
    bg.style.gridRow = String(i + 1);
    bg.style.gridColumn = `2 / span ${Math.max(saga.events.length, 1)}`;
    grid.append(label, bg);
  });
  saga.events.forEach((e, i) => {
    const known = LANES.includes(e.service) ? e.service : "other";
    const box = el("div", {
      class: `event lane-${known}`, "data-event-id": e.event_id, "data-type": e.type, "data-service": e.service,
      title: `${e.type} ${e.event_id}\n${e.topic}/${e.partition}@${e.offset}\n${e.at}`,
    }, el("span", { class: "type" }, e.type), el("span", { class: "at" }, offset(e.at, saga.started_at)));
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
  for (const a of document.querySelectorAll("ul.sagas a")) {
    a.setAttribute("aria-current", a.dataset.orderId === orderID ? "true" : "false");
  }
}

async function main() {
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
