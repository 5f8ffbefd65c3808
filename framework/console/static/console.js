// The Outrigger console: plain ES module, no build step. Pages are drawn from the JSON under /ui/api/
// (docs/console.md); live counters come from the server-sent events of /ui/api/stream.

const view = document.getElementById("view");
const live = document.getElementById("live");
const REFRESH_TICKS = 5; // the overview's tables are fetched again every 5 samples

// ---- DOM helpers (text is always set as text, never parsed as HTML) --------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function table(headers, rows, attrs) {
  return h("table", attrs || {},
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows));
}

const fmt = (v, unit) => (v === null || v === undefined ? "–" : `${v}${unit || ""}`);
const podLink = (key) => h("a", { href: `#/pod/${key}`, "data-pod": key }, key);

async function api(path) {
  const r = await fetch(`/ui/api/${path}`, { headers: { Accept: "application/json" } });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || `${r.status}`);
  return body;
}

function show(...nodes) {
  view.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}

function failed(err) {
  show(h("p", { class: "error", "data-error": "" }, String(err.message || err)));
}

// ---- the live stream -------------------------------------------------------------------------------

const listeners = new Set();
let source = null;

function connect() {
  source = new EventSource("/ui/api/stream");
  source.addEventListener("open", () => { live.textContent = "live"; live.className = "live on"; });
  source.addEventListener("error", () => { live.textContent = "reconnecting"; live.className = "live"; });
  source.addEventListener("sample", (e) => {
    const point = JSON.parse(e.data);
    for (const fn of listeners) fn(point);
  });
}

// ---- Overview --------------------------------------------------------------------------------------

const COUNTERS = [
  ["podsPerSec", "pods/s", ""], ["attemptsPerSec", "attempts/s", ""], ["scheduled", "scheduled", ""],
  ["unschedulable", "unschedulable attempts", ""], ["errors", "errors", ""],
  ["p50Ms", "attempt p50 (1 min)", " ms"], ["p99Ms", "attempt p99 (1 min)", " ms"],
];

function counters(now) {
  return h("section", { class: "counters" }, COUNTERS.map(([key, label, unit]) =>
    h("div", { class: "counter" }, h("span", { class: "value", "data-counter": key }, fmt(now[key], unit)),
      h("span", { class: "label" }, label))));
}

function chart(el, title, series, history) {
  if (!window.uPlot) return null;
  const data = [history.map((p) => p.t), ...series.map(([, get]) => history.map(get))];
  const colors = ["#2563eb", "#d97706", "#dc2626", "#059669"];
  return new window.uPlot({
    title, width: Math.max(320, el.clientWidth - 8), height: 180,
    series: [{}, ...series.map(([label], i) => ({ label, stroke: colors[i % colors.length], width: 1.5 }))],
    axes: [{}, { size: 50 }],
  }, data, el);
}

function unschedulableTable(groups) {
  if (!groups.length) return h("p", { class: "muted", "data-unschedulable-empty": "" }, "No unschedulable pods.");
  return table(["Reason", "Pods", "Some of them"], groups.map((g) =>
    h("tr", { "data-group": "" }, h("td", { "data-reason": "" }, g.reason || "(no message)"),
      h("td", { "data-count": "" }, g.count),
      h("td", {}, g.pods.map((p) => [podLink(p), " "])))), { id: "unschedulable" });
}

function pluginsTable(rows) {
  return table(["Profile", "Plugin", "Point", "Calls", "Errors", "Mean latency"], rows.map((r) =>
    h("tr", {}, h("td", {}, r.profile), h("td", {}, r.plugin, r.remote ? h("span", { class: "tag" }, "remote") : ""),
      h("td", {}, r.point), h("td", {}, r.calls, r.sampled ? h("span", { class: "muted", title: "sampled" }, " (s)") : ""),
      h("td", { class: r.errors ? "error" : "" }, r.errors), h("td", {}, fmt(r.meanMs, " ms")))), { id: "plugins" });
}

function endpointsTable(eps) {
  if (!eps.length) return h("p", { class: "muted" }, "No remote plugin endpoints.");
  const rows = [];
  for (const ep of eps) {
    for (const r of ep.replicas) {
      rows.push(h("tr", { "data-replica": r.address },
        h("td", {}, ep.endpoint), h("td", {}, r.address),
        h("td", { class: r.healthy ? "ok" : "error" }, r.healthy ? "healthy" : "down"),
        h("td", {}, r.picked), h("td", {}, fmt(r.inFlight)), h("td", {}, fmt(r.latencyMs, " ms")),
        h("td", {}, ep.plugins.join(", "))));
    }
  }
  return table(["Endpoint", "Replica", "Health", "Calls", "In flight", "Latency", "Plugins"], rows, { id: "endpoints" });
}

async function overviewPage() {
  const data = await api("overview");
  const queues = h("div", { class: "chart", id: "queues-chart" });
  const rate = h("div", { class: "chart", id: "rate-chart" });
  const counterBox = h("div", {}, counters(data.now));
  const tables = h("div", {});
  const drawTables = (d) => tables.replaceChildren(
    h("h2", {}, "Unschedulable pods by reason"), unschedulableTable(d.unschedulable),
    h("h2", {}, "Plugins"), pluginsTable(d.plugins),
    h("h2", {}, "Remote endpoints"), endpointsTable(d.endpoints));
  drawTables(data);
  show(h("h1", {}, "Overview"), counterBox, h("div", { class: "charts" }, queues, rate), tables);
  const history = data.history.slice();
  const queueSeries = [["active", (p) => p.queues.active], ["backoff", (p) => p.queues.backoff],
    ["unschedulable", (p) => p.queues.unschedulable]];
  const rateSeries = [["pods/s", (p) => p.podsPerSec], ["attempts/s", (p) => p.attemptsPerSec]];
  let q = chart(queues, "Queues", queueSeries, history);
  let r = chart(rate, "Throughput", rateSeries, history);
  let ticks = 0;
  const onSample = async (point) => {
    history.push(point);
    if (history.length > 600) history.shift();
    counterBox.replaceChildren(counters(point));
    if (q) q.setData([history.map((p) => p.t), ...queueSeries.map(([, g]) => history.map(g))]);
    if (r) r.setData([history.map((p) => p.t), ...rateSeries.map(([, g]) => history.map(g))]);
    if (++ticks % REFRESH_TICKS === 0) drawTables(await api("overview"));
  };
  listeners.add(onSample);
  return () => { listeners.delete(onSample); q?.destroy(); r?.destroy(); q = r = null; };
}

// ---- A pod -----------------------------------------------------------------------------------------

function statusText(st) {
  if (!st) return "";
  return `${st.code}${st.plugin ? ` (${st.plugin})` : ""}${st.reasons.length ? `: ${st.reasons.join(", ")}` : ""}`;
}

function filterTable(groups, attrs) {
  if (!groups.length) return h("p", { class: "muted" }, "No node was rejected.");
  return table(["Plugin", "Code", "Reason", "Nodes", "Some of them"], groups.map((g) =>
    h("tr", { "data-filter-group": "" }, h("td", {}, g.plugin || "–"), h("td", {}, g.code),
      h("td", {}, g.reasons.join(", ")), h("td", { "data-count": "" }, g.count),
      h("td", { class: "nodes" }, g.nodes.join(" ")))), attrs);
}

// rows: [{node, total, scores: {plugin: {raw, normalized, weighted}}}]; selected: the chosen node.
function scoreTable(rows, selected, attrs) {
  if (!rows.length) return h("p", { class: "muted" }, "No node was scored.");
  const plugins = [...new Set(rows.flatMap((r) => Object.keys(r.scores)))].sort();
  const head = ["Node", ...plugins.map((p) => `${p} raw / norm / weighted`), "Total"];
  return table(head, rows.map((r) => h("tr", { "data-node": r.node, class: r.node === selected ? "chosen" : "" },
    h("td", {}, r.node, r.node === selected ? h("span", { class: "tag" }, "chosen") : ""),
    plugins.map((p) => {
      const s = r.scores[p];
      if (!s) return h("td", {}, "–");
      return h("td", { class: "score" }, ["raw", "normalized", "weighted"].map((k, i) => [i ? " / " : "",
        h("span", { "data-node": r.node, "data-plugin": p, "data-kind": k }, s[k])]));
    }),
    h("td", { "data-node": r.node, "data-kind": "total" }, r.total))), attrs);
}

function waterfall(spans) {
  if (!spans.length) return h("p", { class: "muted" }, "No spans kept for this attempt.");
  const start = Math.min(...spans.map((s) => s.start));
  const end = Math.max(...spans.map((s) => s.end || s.start));
  const total = Math.max(1, end - start);
  // Tree order: each span followed by its children (by start time); a span whose parent is not kept
  // (a host's span that arrived without its caller) is a root.
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const children = new Map();
  const roots = [];
  for (const s of spans) {
    if (s.parentSpanId && byId.has(s.parentSpanId)) {
      if (!children.has(s.parentSpanId)) children.set(s.parentSpanId, []);
      children.get(s.parentSpanId).push(s);
    } else roots.push(s);
  }
  const ordered = [];
  const depthOf = new Map();
  const visit = (s, d) => {
    if (depthOf.has(s.spanId)) return;
    depthOf.set(s.spanId, d);
    ordered.push(s);
    for (const c of children.get(s.spanId) || []) visit(c, d + 1);
  };
  roots.forEach((r) => visit(r, 0));
  const depth = (s) => depthOf.get(s.spanId) || 0;
  return h("div", { class: "waterfall", "data-waterfall": "" }, ordered.map((s) => {
    const left = ((s.start - start) / total) * 100;
    const width = Math.max(0.3, (((s.end || s.start) - s.start) / total) * 100);
    const ms = ((s.end - s.start) / 1e6).toFixed(3);
    const remote = s.service !== "outrigger-framework";
    return h("div", { class: `span-row${remote ? " remote" : ""}${s.status === "ERROR" ? " failed" : ""}`,
      "data-span-name": s.name, "data-service": s.service, title: JSON.stringify(s.attributes, null, 1) },
      h("span", { class: "span-name", style: `padding-left:${depth(s) * 12}px` },
        remote ? h("span", { class: "tag" }, s.service) : "", s.name),
      h("span", { class: "span-track" }, h("span", { class: "span-bar", style: `left:${left}%;width:${width}%` })),
      h("span", { class: "span-ms" }, `${ms} ms`));
  }));
}

function attemptSection(a) {
  const trace = h("div", {});
  const loadTrace = async () => {
    try { trace.replaceChildren(waterfall((await api(`traces/${a.traceId}`)).spans)); } catch (e) { trace.replaceChildren(h("p", { class: "muted" }, e.message)); }
  };
  return h("section", { class: "attempt", "data-attempt": a.attempt },
    h("h3", {}, `Attempt ${a.attempt}: ${a.result}`, a.selected ? [" → ", h("span", { "data-selected": "" }, a.selected)] : "",
      h("span", { class: "muted" }, ` ${new Date(a.started * 1000).toLocaleTimeString()}, ${a.durationMs} ms, ${a.nodesExamined} nodes examined, ${a.feasible} feasible`)),
    a.status ? h("p", { class: "error" }, statusText(a.status)) : "",
    h("h4", {}, "Filter: rejected nodes by reason"), filterTable(a.filter, { class: "filter" }),
    h("h4", {}, `Score: the best ${a.scores.length} of ${a.scoredNodes} scored nodes`),
    scoreTable(a.scores, a.selected, { class: "scores" }),
    a.traceId ? [h("button", { type: "button", onclick: loadTrace, "data-load-trace": "" }, "Show trace"), trace] : "");
}

function explainSection(pod) {
  const out = h("div", { id: "explain" });
  const run = async () => {
    out.replaceChildren(h("p", { class: "muted" }, "Explaining…"));
    try {
      const e = await api(`explain/${pod.namespace}/${pod.name}`);
      const nodes = Object.entries(e.nodes);
      const scored = nodes.filter(([, n]) => n.total !== null).map(([node, n]) => ({ node, total: n.total, scores: n.scores }))
        .sort((x, y) => y.total - x.total || (x.node < y.node ? -1 : 1));
      const rejected = new Map();
      for (const [node, n] of nodes) {
        if (!n.filter || n.filter.code === "Success") continue;
        const key = JSON.stringify([n.filter.plugin, n.filter.code, n.filter.reasons]);
        const g = rejected.get(key) || { plugin: n.filter.plugin, code: n.filter.code, reasons: n.filter.reasons, count: 0, nodes: [] };
        g.count++; if (g.nodes.length < 20) g.nodes.push(node);
        rejected.set(key, g);
      }
      out.replaceChildren(
        h("p", { "data-explain-status": e.status.code }, `Now: ${e.status.code}`,
          e.selected ? [" → ", h("span", { "data-explain-selected": "" }, e.selected)] : "",
          e.status.reasons.length ? `: ${e.status.reasons.join(", ")}` : ""),
        filterTable([...rejected.values()].sort((x, y) => y.count - x.count), { class: "filter explain" }),
        scoreTable(scored, e.selected, { class: "scores explain" }));
    } catch (err) { out.replaceChildren(h("p", { class: "error" }, err.message)); }
  };
  return h("section", {}, h("h2", {}, "Explain now"),
    h("p", { class: "muted" }, "One cycle on the current state with every node evaluated; nothing is reserved or bound (a placed pod is taken off its node first)."),
    h("button", { type: "button", onclick: run, "data-explain": "" }, "Explain now"), out,
    pod.phase === "Bound" ? "" : whatIfForm(pod));
}

// "What if N nodes like X were added": explain --what-if-nodes for this pod, on the current state.
function whatIfForm(pod) {
  const node = h("input", { type: "text", placeholder: "a node of the cluster", "data-what-if-node": "", size: 18 });
  const count = h("input", { type: "number", min: 1, max: 100, value: 1, "data-what-if-count": "", style: "width:5em" });
  const out = h("div", { id: "what-if" });
  const run = async (e) => {
    e.preventDefault();
    out.replaceChildren(h("p", { class: "muted" }, "Working…"));
    try {
      const r = await api(`whatif/${pod.namespace}/${pod.name}?node=${encodeURIComponent(node.value.trim())}&count=${encodeURIComponent(count.value)}`);
      out.replaceChildren(h("p", {}, `New nodes: ${r.whatIf.nodes.join(", ")}`),
        table(["Pod", "Fits", "Node", "On a new node", "Reasons"], r.pods.map((p) => h("tr", { "data-what-if-pod": p.pod },
          h("td", {}, p.pod), h("td", { "data-fits": p.fits }, p.fits ? "yes" : "no"), h("td", { "data-what-if-node-chosen": "" }, p.node || "–"),
          h("td", {}, p.newNode ? "yes" : "no"), h("td", {}, p.reasons.join(", "))))));
    } catch (err) { out.replaceChildren(h("p", { class: "error" }, err.message)); }
  };
  return h("form", { class: "what-if", onsubmit: run }, h("h3", {}, "What if nodes were added?"),
    h("label", {}, count, " node(s) like ", node), " ", h("button", { type: "submit", "data-what-if": "" }, "What if"), out);
}

async function podPage(ns, name) {
  const p = await api(`pods/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`);
  show(h("h1", {}, `Pod ${p.namespace}/${p.name}`),
    h("dl", { class: "facts" },
      h("dt", {}, "Phase"), h("dd", { "data-phase": "" }, p.phase),
      h("dt", {}, "Node"), h("dd", { "data-node-name": "" }, p.node || "–"),
      h("dt", {}, "Nominated"), h("dd", {}, p.nominatedNode || "–"),
      h("dt", {}, "Profile"), h("dd", {}, p.profile),
      h("dt", {}, "Attempts"), h("dd", {}, p.attemptCount),
      h("dt", {}, "Queue"), h("dd", {}, p.queue || "–"),
      h("dt", {}, "Last status"), h("dd", {}, statusText(p.status) || "–")),
    explainSection(p),
    h("h2", {}, "Attempts"),
    p.attempts.length ? p.attempts.slice().reverse().map(attemptSection)
      : h("p", { class: "muted" }, "No attempt recorded: attempts are kept while the console is open."),
    h("h2", {}, "Events"),
    table(["#", "Type", "Node", "Status", "Time"], p.events.map((e) => h("tr", { "data-event": e.type },
      h("td", {}, e.sequence), h("td", {}, e.type), h("td", {}, e.node || ""), h("td", {}, statusText(e.status)),
      h("td", {}, new Date(e.timestamp * 1000).toLocaleTimeString())))));
}

// ---- Configuration and search ----------------------------------------------------------------------

async function configPage() {
  const c = await api("config");
  const profiles = c.componentconfig.profiles || [];
  const args = (p) => Object.fromEntries((p.pluginConfig || []).map((x) => [x.name, x.args]));
  show(h("h1", {}, "Configuration"),
    profiles.map((p) => h("section", { class: "profile", "data-profile": p.schedulerName },
      h("h2", {}, `Profile ${p.schedulerName}`),
      table(["Extension point", "Plugins (weight)"], Object.entries(p.plugins || {}).map(([point, set]) =>
        h("tr", {}, h("td", {}, point), h("td", {}, (set.enabled || []).map((e) =>
          h("span", { class: "plugin", "data-plugin": e.name }, e.name, e.weight ? ` (${e.weight})` : "")))))),
      h("details", {}, h("summary", {}, "Plugin args"), h("pre", {}, JSON.stringify(args(p), null, 2))))),
    h("h2", {}, "Remote endpoints"),
    c.endpoints.length ? c.endpoints.map((ep) => h("section", { "data-endpoint": ep.endpoint },
      h("h3", {}, `${ep.endpoint}: ${ep.addresses.join(", ")}`),
      h("pre", {}, JSON.stringify(ep.manifests, null, 2)))) : h("p", { class: "muted" }, "None."),
    h("h2", {}, "Feature gates"), h("pre", {}, JSON.stringify(c.featureGates, null, 2)));
}

async function searchPage(q) {
  const r = await api(`pods?q=${encodeURIComponent(q)}`);
  show(h("h1", {}, `Search: ${q}`), h("p", { class: "muted" }, `${r.count} pod(s)${r.count > r.pods.length ? `, the first ${r.pods.length} shown` : ""}`),
    table(["Pod", "Phase", "Node", "Attempts", "Reason"], r.pods.map((p) => h("tr", { "data-result": "" },
      h("td", {}, podLink(`${p.namespace}/${p.name}`)), h("td", {}, p.phase), h("td", {}, p.node || "–"),
      h("td", {}, p.attempts), h("td", {}, p.phase === "Bound" ? "" : statusText(p.status))))));
}

// ---- routing ---------------------------------------------------------------------------------------

let leave = null;

async function route() {
  if (leave) { leave(); leave = null; }
  const hash = decodeURIComponent(location.hash.slice(1) || "/");
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("here", a.getAttribute("href") === `#${hash}`));
  try {
    let m;
    if ((m = hash.match(/^\/pod\/([^/]+)\/(.+)$/))) await podPage(m[1], m[2]);
    else if (hash === "/config") await configPage();
    else if ((m = hash.match(/^\/search\/(.*)$/))) await searchPage(m[1]);
    else leave = await overviewPage();
  } catch (err) { failed(err); }
}

document.getElementById("search-form").addEventListener("submit", (e) => {
  e.preventDefault();
  location.hash = `#/search/${encodeURIComponent(document.getElementById("search").value.trim())}`;
});
window.addEventListener("hashchange", route);
connect();
route();
