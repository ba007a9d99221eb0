// The explorer's core: the API client (key in sessionStorage only), the router (history API:
// every view has its URL), small DOM helpers. Memory text is data: it is only ever set with
// textContent, never parsed as HTML.
import { VIEWS } from "./views.js";

const KEY = "hybridmem.apiKey";
const NS = "hybridmem.namespace";

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function namespace() {
  return document.getElementById("namespace").value.trim() || null;
}

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(`${status} ${e.type || "error"}: ${e.message || "request failed"}`);
    this.status = status;
    this.field = e.field || null;
  }
}

// one call of the JSON API; `query` gets the namespace added; a 401 asks for a key
export async function api(method, path, { query = {}, body = undefined } = {}) {
  const params = new URLSearchParams();
  const ns = namespace();
  if (ns) params.set("namespace", ns);
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== "") params.set(k, v);
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem(KEY);
  if (key) headers["X-API-Key"] = key;
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const qs = params.toString();
  const resp = await fetch(path + (qs ? `?${qs}` : ""), { method, headers, body: payload, credentials: "omit" });
  const data = await resp.json().catch(() => null);
  if (!resp.ok) {
    if (resp.status === 401) askKey(Boolean(key));
    throw new ApiError(resp.status, data);
  }
  return data;
}

export function showError(err) {
  const box = document.getElementById("error");
  if (!err) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.hidden = false;
  box.textContent = err instanceof Error ? err.message : String(err);
}

function askKey(wrong) {
  const form = document.getElementById("key-form");
  form.hidden = false;
  if (wrong) sessionStorage.removeItem(KEY);
  document.getElementById("api-key").focus();
}

// ------------------------------------------------------------------------------------ routing

export function navigate(url, replace = false) {
  const u = new URL(url, location.origin);
  if (u.pathname + u.search !== location.pathname + location.search) {
    if (replace) history.replaceState(null, "", u);
    else history.pushState(null, "", u);
  }
  render();
}

export function ui(path, query = {}) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== "") p.set(k, v);
  const qs = p.toString();
  return `/ui/${path}${qs ? `?${qs}` : ""}`;
}

async function render() {
  const main = document.getElementById("main");
  const rest = location.pathname.replace(/^\/ui\/?/, "");
  const [name, ...tail] = rest.split("/");
  const view = VIEWS[name || "search"];
  const params = new URLSearchParams(location.search);
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.view === (name || "search"));
  }
  showError(null);
  main.replaceChildren();
  if (!view) {
    main.append(el("p", { text: `no such view: ${rest}` }));
    return;
  }
  try {
    await view(main, params, tail.map(decodeURIComponent).join("/"));
  } catch (err) {
    showError(err);
  }
}

function start() {
  const ns = document.getElementById("namespace");
  ns.value = sessionStorage.getItem(NS) || "";
  ns.addEventListener("change", () => {
    sessionStorage.setItem(NS, ns.value.trim());
    render();
  });
  const forget = document.getElementById("forget-key");
  forget.hidden = !sessionStorage.getItem(KEY);
  forget.addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    forget.hidden = true;
    askKey(false);
  });
  document.getElementById("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, document.getElementById("api-key").value);
    document.getElementById("api-key").value = "";
    document.getElementById("key-form").hidden = true;
    forget.hidden = false;
    render();
  });
  // links inside the app route without a page load; modified clicks keep the browser's behaviour
  document.addEventListener("click", (ev) => {
    const a = ev.target.closest && ev.target.closest("a[href^='/ui']");
    if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
    ev.preventDefault();
    navigate(a.getAttribute("href"));
  });
  window.addEventListener("popstate", render);
  render();
}

start();
