//! The status page at `GET /` (issue 10, item 5): one self-contained HTML document — inline CSS
//! and script, nothing fetched from elsewhere, since hosts often have no internet — that asks this
//! host's `/topology?scope=cluster`, `/status`, `/snapshots` and `/metrics` every 2 s and shows:
//! - `#tree`: the tree of vnodes from the static topology, each with its live state (the parent it
//!   follows, its terms, keys and prepared transactions, a running cut), and the secondary
//!   parents running in place of dead ones;
//! - `#snapshots`: each chain as a timeline of its full snapshot and increments (cut, time, size);
//! - `#throughput`: commits per second and commit latency (mean, p99) over the last five minutes,
//!   computed by the page from successive samples of the commit counter and latency histogram;
//! - `#cuts`: the age of the last successful cut and the mean time of each cut phase.
//!
//! The counters are this host's: the page shows the transactions of the clients connected here.
//! Values from the server are put into the page as text (`textContent`), never as markup.

pub const STATUS_PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Waymark status</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f4f5f7; color: #1d2430; }
  header { background: #1d2430; color: #fff; padding: 10px 20px; display: flex; gap: 24px; align-items: baseline; }
  header h1 { font-size: 18px; margin: 0; }
  header .meta { color: #b8c0cc; }
  #error { color: #ffb4a8; }
  main { display: grid; grid-template-columns: minmax(380px, 1fr) minmax(420px, 1.3fr); gap: 16px; padding: 16px 20px; }
  section { background: #fff; border-radius: 6px; padding: 12px 16px; box-shadow: 0 1px 2px #0002; }
  section h2 { font-size: 15px; margin: 0 0 8px; }
  .wide { grid-column: 1 / -1; }
  ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 18px; border-left: 1px dashed #c6ccd6; }
  ul.tree { border-left: none; padding-left: 0; }
  ul.tree li { margin: 4px 0; }
  .vnode { font-family: ui-monospace, monospace; font-weight: 600; }
  .badge { display: inline-block; border-radius: 3px; padding: 0 5px; margin-left: 6px; font-size: 12px; }
  .ok { background: #dff3e4; color: #17603a; }
  .warn { background: #fff1cc; color: #7a5300; }
  .down { background: #fde0dc; color: #8a1c0f; }
  .info { background: #e3ecfb; color: #1f4f99; }
  .detail { color: #5b6575; font-size: 12px; margin-left: 6px; }
  .chain { margin-bottom: 10px; }
  .chain h3 { font-size: 14px; margin: 0 0 4px; font-family: ui-monospace, monospace; }
  .timeline { display: flex; gap: 6px; flex-wrap: wrap; align-items: stretch; }
  .member { border: 1px solid #c6ccd6; border-radius: 4px; padding: 3px 7px; font-size: 12px; background: #fafbfc; }
  .member.full { border-color: #1f4f99; background: #e3ecfb; }
  .member.incomplete { border-style: dashed; color: #8a1c0f; }
  .member b { font-family: ui-monospace, monospace; }
  canvas { width: 100%; height: 240px; display: block; }
  .legend span { margin-right: 14px; font-size: 12px; }
  .swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: middle; }
  table { border-collapse: collapse; font-size: 13px; }
  td, th { padding: 2px 10px 2px 0; text-align: left; }
  th { color: #5b6575; font-weight: 500; }
  .empty { color: #8a93a3; font-style: italic; }
</style>
</head>
<body>
<header>
  <h1>Waymark</h1>
  <span class="meta" id="where">connecting…</span>
  <span class="meta" id="updated"></span>
  <span id="error"></span>
</header>
<main>
  <section>
    <h2>Tree of vnodes</h2>
    <div id="tree"><p class="empty">waiting for /topology…</p></div>
  </section>
  <section>
    <h2>Snapshots</h2>
    <div id="snapshots"><p class="empty">waiting for /snapshots…</p></div>
    <h2 style="margin-top:14px">Cuts through this host</h2>
    <div id="cuts"><p class="empty">no cut yet</p></div>
  </section>
  <section class="wide">
    <h2>Throughput and commit latency (transactions of this host's clients, last 5 minutes)</h2>
    <div class="legend">
      <span><i class="swatch" style="background:#1f6fd1"></i>commits/s (left axis)</span>
      <span><i class="swatch" style="background:#e08a00"></i>mean latency, ms (right axis)</span>
      <span><i class="swatch" style="background:#c62828"></i>p99 latency, ms (right axis)</span>
      <span id="now"></span>
    </div>
    <canvas id="throughput" width="1100" height="240"></canvas>
  </section>
</main>
<script>
"use strict";
const REFRESH_MS = 2000;
const WINDOW_MS = 5 * 60 * 1000;
const PHASES = ["start", "started", "finish", "end"];
const samples = [];

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function badge(text, cls) { return el("span", { class: "badge " + cls }, text); }

async function get(path, json) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": " + r.status);
  return json ? r.json() : r.text();
}

// ---- the tree ----
function vnodeLine(cfg, live, secondaries) {
  const li = el("li", {}, el("span", { class: "vnode" }, cfg.id), badge(cfg.kind, "info"));
  if (!live) {
    li.append(badge("no answer", "down"));
    return li;
  }
  if (live.leading_term !== null && live.leading_term !== undefined) li.append(badge("root, term " + live.leading_term, "ok"));
  if (cfg.parents.length > 0) {
    li.append(live.follows_primary_parent ? badge("follows primary parent", "ok") : badge("follows secondary " + live.parent, "warn"));
  }
  if (live.running_cut !== null && live.running_cut !== undefined) li.append(badge("cut " + live.running_cut + " running", "info"));
  if ((live.learning || []).length > 0) li.append(badge("catching up on " + live.learning.length + " partitions", "warn"));
  const d = ["term " + live.promised_term, "metadata #" + live.metadata_seq];
  if (cfg.kind === "store") d.push(live.keys + " keys", live.prepared + " prepared", live.checkpoints + " checkpoints");
  else d.push((live.children || []).length + "/" + cfg.children.length + " children heard");
  li.append(el("span", { class: "detail" }, d.join(" · ")));
  for (const s of secondaries.filter(s => s.of === cfg.id)) {
    li.append(el("div", { class: "detail" }, "⇢ secondary parent ", el("span", { class: "vnode" }, s.id), " on " + s.host + " stands in for it"));
  }
  return li;
}

function drawTree(topo) {
  const byId = new Map(topo.tree.map(v => [v.id, v]));
  const live = new Map(topo.vnodes.map(v => [v.id, v]));
  const seen = new Set();
  const build = (id) => {
    const cfg = byId.get(id);
    if (!cfg || seen.has(id)) return null;
    seen.add(id);
    const li = vnodeLine(cfg, live.get(id), topo.secondary_parents);
    if (cfg.children.length > 0) {
      const ul = el("ul");
      for (const c of cfg.children) { const sub = build(c); if (sub) ul.append(sub); }
      li.append(ul);
    }
    return li;
  };
  const root = el("ul", { class: "tree" });
  for (const v of topo.tree.filter(v => v.parents.length === 0)) { const li = build(v.id); if (li) root.append(li); }
  for (const v of topo.tree) { const li = build(v.id); if (li) root.append(li); } // anything not reached from a root
  const box = document.getElementById("tree");
  box.replaceChildren(root);
  const rt = topo.root_term === null ? "unknown (the root's host did not answer)" : topo.root_term;
  box.append(el("p", { class: "detail" }, "root term: " + rt));
  for (const u of topo.unreachable) box.append(el("p", {}, badge("host " + u.host + " did not answer", "down"), el("span", { class: "detail" }, u.error)));
}

// ---- snapshots ----
function size(bytes) {
  if (bytes >= 1 << 20) return (bytes / (1 << 20)).toFixed(1) + " MiB";
  if (bytes >= 1 << 10) return (bytes / (1 << 10)).toFixed(1) + " KiB";
  return bytes + " B";
}
function drawSnapshots(snaps) {
  const box = document.getElementById("snapshots");
  if (snaps.snapshots.length === 0) {
    box.replaceChildren(el("p", { class: "empty" }, "no snapshot in " + snaps.root));
    return;
  }
  const chains = snaps.snapshots.map(chain => {
    const line = el("div", { class: "timeline" });
    for (const m of chain.members) {
      const kind = m.increment === 0 ? "full" : "+" + m.increment;
      if (!m.complete) { line.append(el("div", { class: "member incomplete" }, el("b", {}, kind), " incomplete")); continue; }
      const when = new Date(m.created_unix_ms).toLocaleTimeString();
      line.append(el("div", { class: "member" + (m.increment === 0 ? " full" : ""), title: new Date(m.created_unix_ms).toISOString() },
        el("b", {}, kind), " cut " + m.cut + " · " + when + " · " + size(m.bytes)));
    }
    return el("div", { class: "chain" }, el("h3", {}, chain.name), line);
  });
  box.replaceChildren(...chains);
}

// ---- metrics ----
function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || line.trim() === "") continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || "").matchAll(/(\w+)="([^"]*)"/g)) labels[l[1]] = l[2];
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value: parseFloat(m[3]) });
  }
  return out;
}
const total = (ms, name) => (ms.get(name) || []).reduce((a, s) => a + s.value, 0);

function sample(ms) {
  const buckets = (ms.get("waymark_commit_latency_seconds_bucket") || []).map(s => [parseFloat(s.labels.le), s.value]);
  buckets.sort((a, b) => a[0] - b[0]);
  return {
    t: Date.now(),
    committed: total(ms, "waymark_transactions_committed_total"),
    sum: total(ms, "waymark_commit_latency_seconds_sum"),
    count: total(ms, "waymark_commit_latency_seconds_count"),
    buckets,
  };
}

// One point per pair of successive samples: rates over the interval between them.
function points() {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const dt = (b.t - a.t) / 1000, n = b.count - a.count;
    if (dt <= 0 || b.committed < a.committed) continue; // the host restarted: counters went back
    let p99 = null;
    if (n > 0 && a.buckets.length === b.buckets.length) {
      for (let k = 0; k < b.buckets.length; k++) {
        if (b.buckets[k][1] - a.buckets[k][1] >= 0.99 * n) { p99 = b.buckets[k][0] * 1000; break; }
      }
    }
    out.push({ t: b.t, tps: (b.committed - a.committed) / dt, mean: n > 0 ? (b.sum - a.sum) / n * 1000 : null, p99 });
  }
  return out;
}

function drawChart() {
  const c = document.getElementById("throughput"), g = c.getContext("2d");
  const W = c.width, H = c.height, L = 56, R = 56, T = 10, B = 24;
  g.clearRect(0, 0, W, H);
  const pts = points(), now = Date.now(), t0 = now - WINDOW_MS;
  const finite = v => v !== null && isFinite(v);
  const tpsMax = Math.max(1, ...pts.map(p => p.tps)) * 1.1;
  const latMax = Math.max(1, ...pts.filter(p => finite(p.p99)).map(p => Math.min(p.p99, 60000)), ...pts.filter(p => finite(p.mean)).map(p => p.mean)) * 1.1;
  const x = t => L + (t - t0) / WINDOW_MS * (W - L - R);
  const yl = v => H - B - v / tpsMax * (H - T - B), yr = v => H - B - Math.min(v, latMax) / latMax * (H - T - B);
  g.strokeStyle = "#e3e6eb"; g.fillStyle = "#5b6575"; g.font = "11px sans-serif"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = T + i * (H - T - B) / 4;
    g.beginPath(); g.moveTo(L, y); g.lineTo(W - R, y); g.stroke();
    g.textAlign = "right"; g.fillText((tpsMax * (4 - i) / 4).toFixed(0), L - 4, y + 4);
    g.textAlign = "left"; g.fillText((latMax * (4 - i) / 4).toFixed(1), W - R + 4, y + 4);
  }
  g.textAlign = "center";
  for (let m = 0; m <= 5; m++) g.fillText(m === 5 ? "now" : "-" + (5 - m) + " min", x(t0 + m * 60000), H - 6);
  const line = (key, y, color, dash) => {
    g.strokeStyle = color; g.lineWidth = 2; g.setLineDash(dash); g.beginPath();
    let on = false;
    for (const p of pts) {
      if (p.t < t0 || !finite(p[key])) { on = false; continue; }
      if (on) g.lineTo(x(p.t), y(p[key])); else g.moveTo(x(p.t), y(p[key]));
      on = true;
    }
    g.stroke(); g.setLineDash([]);
  };
  line("tps", yl, "#1f6fd1", []);
  line("mean", yr, "#e08a00", []);
  line("p99", yr, "#c62828", [5, 3]);
  const last = pts[pts.length - 1];
  const fmt = v => finite(v) ? v.toFixed(1) : "–";
  document.getElementById("now").textContent = last
    ? "now: " + last.tps.toFixed(0) + " commits/s, mean " + fmt(last.mean) + " ms, p99 ≤ " + fmt(last.p99) + " ms"
    : "collecting samples…";
}

function drawCuts(ms) {
  const box = document.getElementById("cuts");
  const age = total(ms, "waymark_last_cut_age_seconds");
  const ok = (ms.get("waymark_cuts_total") || []).filter(s => s.labels.outcome === "ok").reduce((a, s) => a + s.value, 0);
  const failed = (ms.get("waymark_cuts_total") || []).filter(s => s.labels.outcome === "failed").reduce((a, s) => a + s.value, 0);
  if (ok + failed === 0) return;
  const rows = [el("tr", {}, el("th", {}, "cuts"), el("td", {}, ok + " ok, " + failed + " failed")),
                el("tr", {}, el("th", {}, "last success"), el("td", {}, ms.has("waymark_last_cut_age_seconds") ? age.toFixed(1) + " s ago" : "never"))];
  for (const phase of PHASES) {
    const pick = name => (ms.get(name) || []).filter(s => s.labels.phase === phase).reduce((a, s) => a + s.value, 0);
    const n = pick("waymark_cut_phase_duration_seconds_count");
    if (n > 0) rows.push(el("tr", {}, el("th", {}, "phase " + phase), el("td", {}, (pick("waymark_cut_phase_duration_seconds_sum") / n * 1000).toFixed(1) + " ms mean of " + n)));
  }
  box.replaceChildren(el("table", {}, ...rows));
}

async function refresh() {
  const problems = [];
  const run = async (what, f) => { try { await f(); } catch (e) { problems.push(what + ": " + e.message); } };
  await Promise.all([
    run("topology", async () => drawTree(await get("/topology?scope=cluster", true))),
    run("snapshots", async () => drawSnapshots(await get("/snapshots", true))),
    run("status", async () => {
      const s = await get("/status", true);
      document.getElementById("where").textContent = "cluster " + s.cluster + " · host " + s.host + " · up " + s.uptime_seconds + " s";
    }),
    run("metrics", async () => {
      const ms = parseMetrics(await get("/metrics", false));
      samples.push(sample(ms));
      while (samples.length > 2 && samples[0].t < Date.now() - WINDOW_MS - REFRESH_MS) samples.shift();
      drawCuts(ms);
    }),
  ]);
  drawChart();
  document.getElementById("error").textContent = problems.join("; ");
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

refresh();
setInterval(refresh, REFRESH_MS);
</script>
</body>
</html>
"##;
