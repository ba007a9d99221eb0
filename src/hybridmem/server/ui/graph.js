// The graph view: communities with their summaries and staleness, and one entity's neighbourhood
// drawn as an SVG (the entity in the middle, its relations around it; a click re-centres on a
// neighbour). Names and summaries are set with textContent only.
import { ApiError, api, el, navigate, ui } from "./app.js";

const SVG = "http://www.w3.org/2000/svg";
const MAX_NODES = 200;
const SHOWN_DOCS = 8;
const LABEL_CHARS = 22;

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

function entityLink(name) {
  return el("a", { href: ui("graph", { entity: name }), text: name });
}

function neighbours(info) {
  const seen = new Map();
  for (const r of info.relations_out) if (!seen.has(r.target)) seen.set(r.target, { name: r.target, type: r.type, dir: "out" });
  for (const r of info.relations_in) if (!seen.has(r.source)) seen.set(r.source, { name: r.source, type: r.type, dir: "in" });
  return [...seen.values()].slice(0, MAX_NODES - 1);
}

// rings around the entity: the strongest relations nearest and labelled, the rest further out,
// named on hover (a single circle of 199 labels was unreadable on the podcast graph)
const RINGS = [
  { size: 16, radius: 0.36, label: true },
  { size: 48, radius: 0.62, label: false },
  { size: 135, radius: 0.88, label: false },
];

function placed(nodes, c) {
  let start = 0;
  for (const ring of RINGS) {
    const part = nodes.slice(start, start + ring.size);
    part.forEach((n, i) => {
      const a = (2 * Math.PI * i) / Math.max(part.length, 1) + (ring.label ? 0 : Math.PI / part.length);
      n.x = c + ring.radius * c * Math.cos(a);
      n.y = c + ring.radius * c * Math.sin(a);
      n.label = ring.label || nodes.length <= RINGS[0].size;
    });
    start += ring.size;
  }
  return nodes;
}

function drawing(info) {
  const size = 720;
  const c = size / 2;
  const nodes = placed(neighbours(info), c);
  const root = svg("svg", { id: "neighbourhood", viewBox: `0 0 ${size} ${size}`, role: "img", "aria-label": `relations of ${info.name}` });
  for (const n of nodes) root.append(svg("line", { x1: c, y1: c, x2: n.x, y2: n.y, class: `edge ${n.type === "co_occurs" ? "weak" : ""}` }));
  for (const n of nodes) {
    const g = svg("g", { class: n.label ? "node" : "node small", tabindex: 0, "data-entity": n.name });
    g.append(svg("circle", { cx: n.x, cy: n.y, r: n.label ? 6 : 4 }), svg("title", {}, `${n.name} (${n.dir === "out" ? "→" : "←"} ${n.type})`));
    if (n.label) {
      const left = n.x < c - 1; // labels point away from the centre
      const text = n.name.length > LABEL_CHARS ? `${n.name.slice(0, LABEL_CHARS - 1)}…` : n.name;
      g.append(svg("text", { x: left ? n.x - 9 : n.x + 9, y: n.y + 4, "text-anchor": left ? "end" : "start" }, text));
    }
    const go = () => navigate(ui("graph", { entity: n.name }));
    g.addEventListener("click", go);
    g.addEventListener("keydown", (ev) => ev.key === "Enter" && go());
    root.append(g);
  }
  root.append(svg("circle", { cx: c, cy: c, r: 10, class: "centre" }), svg("text", { x: c + 14, y: c + 5, class: "centre-label" }, info.name));
  return root;
}

function matchList(found) {
  return el(
    "ul",
    { id: "entity-matches" },
    found.entities.map((m) => el("li", {}, entityLink(m.name), el("span", { class: "hint", text: ` ${m.type} · ${m.mentions} mentions` }))),
  );
}

// the documents that mention it: the first few as links, then how many in all
function documentsLine(info) {
  const docs = (info.documents || []).slice(0, SHOWN_DOCS);
  const total = info.documents_total ?? (info.documents || []).length;
  const links = docs.flatMap((d, i) => [i ? ", " : "", el("a", { href: ui(`memories/${encodeURIComponent(d)}`), text: d })]);
  return el("p", { id: "entity-documents" }, `in ${total} document${total === 1 ? "" : "s"}: `, links, total > docs.length ? ` … and ${total - docs.length} more` : "");
}

async function entityView(main, name) {
  let info;
  try {
    info = await api("GET", `/v1/graph/entities/${encodeURIComponent(name)}`, { query: { limit: 100 } });
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 404) throw err;
    const found = await api("GET", "/v1/graph/entities", { query: { q: name, limit: 20 } });
    main.append(el("h2", { text: `No entity “${name}”` }), el("p", { text: found.entities.length ? `Closest of ${found.total_entities} entities:` : `None of the ${found.total_entities} entities is close.` }), matchList(found));
    return;
  }
  const rel = (r, dir) => el("tr", {}, el("td", { text: dir }), el("td", { text: r.type }), el("td", {}, entityLink(dir === "→" ? r.target : r.source)), el("td", { text: String(r.weight) }));
  main.append(
    el("h2", {}, el("span", { text: info.name }), " ", el("small", { text: `(${info.type})` })),
    el("p", { text: `communities: ${(info.communities || []).join(", ") || "–"}` }),
    documentsLine(info),
    drawing(info),
    el("table", { id: "relations" }, el("tr", {}, ["", "relation", "entity", "weight"].map((h) => el("th", { text: h }))), info.relations_out.map((r) => rel(r, "→")), info.relations_in.map((r) => rel(r, "←"))),
  );
}

async function communitiesView(main) {
  const page = await api("GET", "/v1/graph/communities", { query: { limit: 50 } });
  if (!page.total) {
    main.append(el("p", { text: "No graph in this namespace: run `hybridmem graph build` (or POST /v1/graph/build)." }));
    return;
  }
  main.append(el("h2", { text: `Communities (${page.communities.length} of ${page.total})` }));
  const list = el("ol", { id: "communities" });
  for (const c of page.communities) {
    list.append(
      el(
        "li",
        { class: c.stale ? "community stale" : "community", "data-community": c.community_id },
        el("strong", { text: c.title || c.community_id }),
        el("span", { class: "hint", text: ` level ${c.level} · ${c.size} entities · ${c.stale ? "stale" : "fresh"}` }),
        el("p", { class: "text", text: c.summary }),
        el("p", { class: "members" }, c.members.slice(0, 12).flatMap((m, i) => [i ? ", " : "", entityLink(m)])),
      ),
    );
  }
  main.append(list);
}

// suggestions while typing: the server's ranked matches, at most one request in flight per pause
function suggest(input, list) {
  let timer = null;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    const text = input.value.trim();
    if (text.length < 2) return;
    timer = setTimeout(async () => {
      const found = await api("GET", "/v1/graph/entities", { query: { q: text, limit: 15 } }).catch(() => null);
      if (!found || input.value.trim() !== text) return;
      list.replaceChildren(...found.entities.map((m) => el("option", { value: m.name, label: `${m.type} · ${m.mentions}` })));
    }, 150);
  });
}

export async function graphView(main, p) {
  const list = el("datalist", { id: "entity-suggestions" });
  const input = el("input", { id: "entity", name: "entity", type: "search", value: p.get("entity") || "", size: 30, placeholder: "an entity's name", list: "entity-suggestions", autocomplete: "off" });
  suggest(input, list);
  const form = el("form", { class: "panel", onsubmit: (ev) => { ev.preventDefault(); navigate(ui("graph", { entity: input.value.trim() })); } }, el("label", { class: "field" }, el("span", { text: "entity" }), input), el("button", { type: "submit", text: "Show" }), list);
  main.append(el("h1", { text: "Graph" }), form);
  if (p.get("entity")) await entityView(main, p.get("entity"));
  else await communitiesView(main);
}
