// The explorer's views, one function each: (main, URL params, path tail) -> DOM. Text from the
// store is set with textContent only (el(..., {text}) or a text node).
import { api, el, navigate, namespace, showError, ui } from "./app.js";
import { graphView } from "./graph.js";

const MODES = ["hybrid", "bm25", "vector", "rerank"];
const SCOPES = ["user_id", "session_id", "as_of"];
// the time range a search is bounded to (URL ?from=&to=, the request's time_range)
const RANGE = ["from", "to"];

// ------------------------------------------------------------------------------------ helpers

function field(label, input) {
  return el("label", { class: "field" }, el("span", { text: label }), input);
}

function json(value) {
  return el("pre", { class: "json", text: JSON.stringify(value, null, 2) });
}

function memoryLink(id, text) {
  return el("a", { href: ui(`memories/${encodeURIComponent(id)}`), text: text || id });
}

// the query's terms (letters and digits, any script), lower case, longest first
function terms(q) {
  const words = (q.toLowerCase().match(/[\p{L}\p{N}][\p{L}\p{N}_-]*/gu) || []).filter((w) => w.length > 1);
  return [...new Set(words)].sort((a, b) => b.length - a.length);
}

// `text` with each of `words` in a <mark>: text nodes only
function highlighted(text, words) {
  const out = el("p", { class: "text" });
  if (!words.length) {
    out.textContent = text;
    return out;
  }
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const re = new RegExp(`(${escaped.join("|")})`, "giu");
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) out.append(document.createTextNode(text.slice(last, m.index)));
    out.append(el("mark", { text: m[0] }));
    last = m.index + m[0].length;
  }
  out.append(document.createTextNode(text.slice(last)));
  return out;
}

function bar(label, rank, score, max) {
  const width = max > 0 && score !== undefined ? Math.max(2, Math.round((100 * score) / max)) : 0;
  const fill = el("span", { class: "fill" });
  fill.style.width = `${width}%`;
  return el(
    "div",
    { class: "leg", "data-leg": label },
    el("span", { class: "leg-name", text: label }),
    el("span", { class: "leg-rank", text: rank === undefined ? "—" : `#${rank}` }),
    el("span", { class: "bar" }, fill),
    el("span", { class: "leg-score", text: score === undefined ? "" : score.toFixed(4) }),
  );
}

// ------------------------------------------------------------------------------------ search

function searchRequest(p) {
  const req = { search_text: p.get("q"), top_k: Number(p.get("top_k") || 10), mode: p.get("mode") || "hybrid" };
  req.metadata_filter = p.get("filter") ? JSON.parse(p.get("filter")) : {};
  for (const s of SCOPES) if (p.get(s)) req[s] = p.get(s);
  if (RANGE.some((r) => p.get(r))) req.time_range = Object.fromEntries(RANGE.filter((r) => p.get(r)).map((r) => [r, p.get(r)]));
  const ns = namespace();
  if (ns) req.namespace = ns;
  return req;
}

function filterRow(keys, key = "", value = "") {
  const k = el("select", { class: "filter-key", "aria-label": "filter key" }, el("option", { value: "", text: "(key)" }));
  for (const name of keys) k.append(el("option", { value: name, text: name, selected: name === key }));
  const v = el("input", { class: "filter-value", "aria-label": "filter value", value, size: 14 });
  const row = el("div", { class: "filter-row" }, k, el("span", { text: "=" }), v);
  row.append(el("button", { type: "button", text: "×", "aria-label": "remove filter", onclick: () => row.remove() }));
  return row;
}

function searchForm(p, keys) {
  const q = el("input", { id: "q", name: "q", type: "search", value: p.get("q") || "", size: 40, autofocus: true });
  const mode = el("select", { id: "mode", name: "mode" });
  for (const m of MODES) mode.append(el("option", { value: m, text: m, selected: m === (p.get("mode") || "hybrid") }));
  const topK = el("input", { id: "top_k", name: "top_k", type: "number", min: 1, max: 100, value: p.get("top_k") || 10 });
  const scopes = [...SCOPES, ...RANGE].map((s) => field(s === "from" || s === "to" ? `occurred ${s}` : s, el("input", { id: s, name: s, value: p.get(s) || "", size: 14, placeholder: SCOPES.includes(s) && s !== "as_of" ? "" : "2023-05-20 or ISO time" })));
  const filters = el("div", { id: "filters" });
  const current = p.get("filter") ? JSON.parse(p.get("filter")) : {};
  for (const [k, v] of Object.entries(current)) filters.append(filterRow(keys, k, typeof v === "string" ? v : JSON.stringify(v)));
  const add = el("button", { type: "button", id: "add-filter", text: "+ filter", onclick: () => filters.append(filterRow(keys)) });
  const form = el(
    "form",
    { id: "search-form", class: "search-form" },
    el("div", { class: "row" }, field("query", q), field("mode", mode), field("top_k", topK), el("button", { type: "submit", text: "Search" })),
    el("div", { class: "row" }, ...scopes),
    el("div", { class: "row" }, filters, add),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const filter = {};
    for (const row of filters.querySelectorAll(".filter-row")) {
      const key = row.querySelector(".filter-key").value;
      const raw = row.querySelector(".filter-value").value;
      if (!key) continue;
      let val = raw;
      try {
        val = JSON.parse(raw);
      } catch {
        val = raw;
      }
      filter[key] = val;
    }
    const query = { q: q.value, mode: mode.value, top_k: topK.value };
    if (Object.keys(filter).length) query.filter = JSON.stringify(filter);
    for (const s of [...SCOPES, ...RANGE]) query[s] = form.querySelector(`#${s}`).value.trim();
    navigate(ui("search", query));
  });
  return form;
}

function copyBlock(req) {
  const body = JSON.stringify(req);
  const shell = body.replace(/'/g, "'\\''");
  const curl = `curl -s ${location.origin}/v1/query -H 'Content-Type: application/json' -H "X-API-Key: $HYBRIDMEM_API_KEY" -d '${shell}'`;
  const cli = `echo '${shell}' | hybridmem search --request - --json`;
  const text = `${JSON.stringify(req, null, 2)}\n\n${curl}\n\n${cli}\n`;
  const pre = el("pre", { id: "request-text", class: "json", text });
  const copy = el("button", {
    type: "button",
    id: "copy-request",
    text: "Copy request",
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(text);
        copy.textContent = "Copied";
      } catch {
        copy.textContent = "Select the text to copy";
      }
    },
  });
  return el("details", { class: "request" }, el("summary", { text: "Request (contract JSON, curl, CLI)" }), copy, pre);
}

function legReport(resp) {
  const items = Object.entries(resp.legs || {}).map(([name, leg]) =>
    el(
      "li",
      { class: `leg-report ${leg.status}`, "data-leg": name },
      `${name}: ${leg.status}, ${leg.took_ms.toFixed(1)} ms, ${leg.returned} returned`,
      leg.error ? el("span", { class: "leg-error", text: ` (${leg.error})` }) : null,
    ),
  );
  const warn = (resp.warnings || []).map((w) => el("li", { class: "warning", text: w }));
  return el(
    "div",
    { class: "summary" },
    el("p", { text: `${resp.results.length} results, mode ${resp.mode}, ${resp.took_ms.toFixed(1)} ms, namespace ${resp.namespace}` }),
    el("ul", { class: "legs" }, items, warn),
  );
}

function resultCard(r, i, words, max) {
  const legs = [...new Set([...Object.keys(r.ranks || {}), ...Object.keys(r.scores || {}), ...Object.keys(max)])];
  const meta = Object.keys(r.metadata || {}).length ? el("code", { class: "meta", text: JSON.stringify(r.metadata) }) : null;
  return el(
    "li",
    { class: "result", "data-doc": r.doc_id },
    el(
      "div",
      { class: "result-head" },
      el("span", { class: "rank", text: `${i + 1}` }),
      el("span", { class: "fused", text: `fused ${r.rrf_score.toFixed(4)}` }),
      memoryLink(r.doc_id),
      r.source ? el("span", { class: "source", text: r.source }) : null,
      r.session_id ? el("a", { href: ui(`conversations/${encodeURIComponent(r.session_id)}`, { turn: r.turn }), text: `session ${r.session_id} turn ${r.turn}` }) : null,
    ),
    el("div", { class: "legs-bars" }, legs.map((leg) => bar(leg, r.ranks?.[leg], r.scores?.[leg], max[leg] || 0))),
    highlighted(r.text, words),
    meta,
  );
}

// the store's metadata keys (the filter builder's choices), per namespace, read at most once a minute:
// /v1/stats counts the whole store, and a search must not wait for it
const keyCache = new Map();
async function metadataKeys() {
  const ns = namespace() || "";
  const hit = keyCache.get(ns);
  if (hit && Date.now() - hit.at < 60000) return hit.keys;
  const stats = await api("GET", "/v1/stats").catch(() => ({ metadata_keys: [] }));
  keyCache.set(ns, { at: Date.now(), keys: stats.metadata_keys || [] });
  return stats.metadata_keys || [];
}

async function searchView(main, p) {
  const req = p.get("q") ? searchRequest(p) : null;
  // the keys and the search at once; a failed search is shown under the form
  const [keys, resp] = await Promise.all([metadataKeys(), req ? api("POST", "/v1/query", { body: req }).catch((e) => e) : null]);
  main.append(el("h1", { text: "Search" }), searchForm(p, keys));
  if (!req) return;
  main.append(copyBlock(req));
  if (resp instanceof Error) throw resp;
  const max = {};
  for (const r of resp.results) for (const [leg, s] of Object.entries(r.scores || {})) max[leg] = Math.max(max[leg] || 0, s);
  const words = terms(req.search_text);
  main.append(legReport(resp), el("ol", { id: "results", class: "results" }, resp.results.map((r, i) => resultCard(r, i, words, max))));
}

// ------------------------------------------------------------------------------------ memory

// a line diff (longest common subsequence) of two texts: [op, line] with op " ", "-" or "+"
function diffLines(a, b) {
  const x = a.split("\n");
  const y = b.split("\n");
  const n = x.length;
  const m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push([" ", x[i++]]);
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", x[i++]]);
    else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  return out;
}

function diffView(older, newer) {
  const lines = diffLines(older.text || "", newer.text || "");
  const cls = { " ": "same", "-": "del", "+": "add" };
  return el(
    "div",
    { class: "diff" },
    el("h3", { text: `diff v${older.version} → v${newer.version}` }),
    el("pre", {}, lines.map(([op, line]) => el("span", { class: cls[op], text: `${op} ${line}\n` }))),
  );
}

function versionsTable(versions) {
  const rows = versions.map((v) =>
    el(
      "tr",
      { class: v.current ? "current" : "old" },
      el("td", { text: `v${v.version}` }),
      el("td", { text: v.recorded_at || "" }),
      el("td", { text: v.valid_to || (v.current ? "current" : "") }),
      el("td", { text: v.reason || "" }),
    ),
  );
  const head = el("tr", {}, ["version", "recorded", "valid to", "reason"].map((h) => el("th", { text: h })));
  const diffs = [];
  for (let i = versions.length - 1; i > 0; i--) diffs.push(diffView(versions[i - 1], versions[i]));
  return el("section", { id: "versions" }, el("h2", { text: `Versions (${versions.length})` }), el("table", {}, head, rows), diffs);
}

function dangerButton(label, question, action) {
  return el("button", {
    type: "button",
    class: "danger",
    id: label.toLowerCase(),
    text: label,
    onclick: async () => {
      if (!window.confirm(question)) return;
      try {
        await action();
      } catch (err) {
        showError(err);
      }
    },
  });
}

async function memoryView(main, p, id) {
  const path = `/v1/memories/${encodeURIComponent(id)}`;
  const [doc, hist] = await Promise.all([api("GET", path).catch((e) => e), api("GET", `${path}/history`).catch(() => null)]);
  main.append(el("h1", {}, "Memory ", el("code", { text: id })));
  const versions = hist ? hist.versions : [];
  if (doc instanceof Error) {
    if (!versions.length) throw doc;
    main.append(el("p", { id: "not-current", class: "warning", text: "This memory is not current (forgotten or deleted); its versions follow." }));
  } else {
    const actions = el(
      "div",
      { class: "actions" },
      dangerButton("Forget", `Forget ${id}? It stops being current and stays in its history.`, async () => {
        await api("POST", `${path}/forget`, { body: { reason: "forgotten in the explorer" } });
        navigate(location.pathname + location.search, true);
      }),
      dangerButton("Delete", `Delete ${id} and every version of it? This cannot be undone.`, async () => {
        await api("DELETE", path);
        navigate(ui("browse"));
      }),
    );
    const chunks = doc.chunks.map((c) => el("li", { class: "chunk" }, el("code", { text: c.chunk_id }), el("p", { class: "text", text: c.text })));
    main.append(
      actions,
      el("dl", { class: "facts" }, ["source", "version", "occurred_at", "recorded_at", "updated_at", "n_chunks", "namespace"].flatMap((k) => [el("dt", { text: k }), el("dd", { text: doc[k] ?? "" })])),
      el("h2", { text: "Metadata" }),
      json(doc.metadata),
      el("h2", { text: `Chunks (${doc.chunks.length})` }),
      el("ol", { id: "chunks" }, chunks),
    );
  }
  if (versions.length) main.append(versionsTable(versions));
}

// ------------------------------------------------------------------------------------ browse

async function browseView(main, p) {
  const order = p.get("order") || "recorded_at";
  const query = { order, descending: p.get("descending") || "false", cursor: p.get("cursor"), limit: p.get("limit") || 25, filter: p.get("filter") };
  for (const s of ["user_id", "session_id", "as_of"]) query[s] = p.get(s);
  const page = await api("GET", "/v1/memories", { query });
  const sel = el("select", { id: "order", onchange: () => navigate(ui("browse", { order: sel.value })) });
  for (const o of ["recorded_at", "occurred_at", "id"]) sel.append(el("option", { value: o, text: o, selected: o === order }));
  const rows = page.memories.map((m) =>
    el(
      "tr",
      {},
      el("td", {}, memoryLink(m.doc_id)),
      el("td", { text: m[order] ?? m.recorded_at ?? "" }),
      el("td", { class: "snippet", text: (m.chunks?.[0]?.text || "").slice(0, 160) }),
    ),
  );
  const next = page.next_cursor ? el("a", { id: "next-page", href: ui("browse", { ...query, cursor: page.next_cursor, namespace: null }), text: "next page →" }) : el("span", { text: "last page" });
  main.append(
    el("h1", { text: "Browse" }),
    field("order", sel),
    el("table", { id: "memories" }, el("tr", {}, el("th", { text: "id" }), el("th", { text: order }), el("th", { text: "text" })), rows),
    el("p", { class: "pager" }, `${page.count} on this page · `, next),
  );
}

// ------------------------------------------------------------------------------------ conversations

async function conversationsView(main, p, session) {
  main.append(el("h1", { text: session ? `Session ${session}` : "Conversations" }));
  if (!session) {
    const page = await api("GET", "/v1/memories", { query: { order: "occurred_at", limit: 500, descending: "true" } });
    const sessions = new Map();
    for (const m of page.memories) {
      const s = m.session_id || m.metadata?.session_id;
      const u = m.user_id || m.metadata?.user_id || "(no user)";
      if (!s) continue;
      if (!sessions.has(u)) sessions.set(u, new Set());
      sessions.get(u).add(s);
    }
    if (!sessions.size) main.append(el("p", { text: "No conversations in this namespace (among its latest 500 memories)." }));
    for (const [u, ss] of sessions) main.append(el("h2", { text: `user ${u}` }), el("ul", {}, [...ss].map((s) => el("li", {}, el("a", { href: ui(`conversations/${encodeURIComponent(s)}`), text: s })))));
    return;
  }
  const page = await api("GET", "/v1/memories", { query: { session_id: session, order: "occurred_at", limit: 500 } });
  const turns = page.memories;
  const at = Math.max(0, turns.findIndex((m) => String(m.turn ?? m.metadata?.turn) === p.get("turn")));
  const list = el("ol", { id: "timeline", class: "timeline" });
  turns.forEach((m, i) => {
    const speaker = m.speaker || m.metadata?.speaker || m.role || m.metadata?.role || "";
    list.append(
      el(
        "li",
        { class: i === at ? "turn here" : "turn", "data-turn": m.turn ?? m.metadata?.turn ?? i },
        el("span", { class: "when", text: m.occurred_at || "" }),
        el("strong", { class: "speaker", text: speaker }),
        el("span", { class: "text", text: m.chunks?.map((c) => c.text).join(" ") || "" }),
        " ",
        memoryLink(m.doc_id, "open"),
      ),
    );
  });
  const step = (d) => {
    const t = turns[at + d];
    if (t) navigate(ui(`conversations/${encodeURIComponent(session)}`, { turn: t.turn ?? t.metadata?.turn }), true);
  };
  main.append(
    el("div", { class: "actions" }, el("button", { type: "button", id: "prev-turn", text: "← previous turn", onclick: () => step(-1) }), el("button", { type: "button", id: "next-turn", text: "next turn →", onclick: () => step(1) })),
    list,
  );
  list.children[at]?.scrollIntoView({ block: "center" });
}

// ------------------------------------------------------------------------------------ status

async function statusView(main) {
  const box = el("div", { id: "status" });
  main.append(el("h1", { text: "Status" }), box, el("p", { class: "hint", text: "Refreshed every 2 s." }));
  const load = async () => {
    const s = await api("GET", "/v1/stats");
    const keys = ["documents", "chunks", "vectors", "pending_vectors", "embedder", "dim", "dense_index", "schema_version", "size_bytes"];
    const worker = s.worker ? [["worker", JSON.stringify(s.worker)]] : [];
    box.replaceChildren(
      el("dl", { class: "facts" }, [...keys.map((k) => [k, s[k]]), ["namespaces", (s.namespaces || []).join(", ")], ...worker].flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v ?? "", "data-stat": k })])),
    );
  };
  await load();
  const timer = setInterval(() => {
    if (!box.isConnected) clearInterval(timer);
    else load().catch(showError);
  }, 2000);
}

export const VIEWS = {
  search: searchView,
  memories: memoryView,
  browse: browseView,
  conversations: conversationsView,
  graph: graphView,
  status: statusView,
};
