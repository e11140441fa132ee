// The Tessera explorer: plain JavaScript over the service's own routes.
// POST /v1/layout-assignment runs the pipeline; POST /v1/graph draws a
// computation; GET /v1/layout/draw and /v1/layout/explain picture a layout.
"use strict";

const $ = (id) => document.getElementById(id);

// An instruction line of HLO text: indent, ROOT, name, shape, opcode.
const INSTRUCTION = /^(\s*)(ROOT\s+)?%([\w.\-]+)\s*=\s*(.+?)\s([a-z][a-z0-9\-]*)\(/;
// An array shape with its layout, e.g. f32[8,128]{1,0:T(8,128)}.
const ARRAY_SHAPE = /\b(pred|[suf]\d+|bf16|c64|c128|f8e[0-9a-z]+|f4e2m1fn|token)\[[0-9,?<=]*\](\{[^{}]*\})?/g;
// A computation header: `%name (` or `ENTRY %name (`.
const COMPUTATION = /^(ENTRY\s+)?%([\w.\-]+)\s*\(/;

let lastOutput = "";

function setStatus(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

async function errorText(response) {
  try {
    const body = await response.json();
    const e = body.error || {};
    const where = e.line ? ` (line ${e.line}, column ${e.col})` : "";
    return `${response.status} ${e.kind || ""}: ${e.message || ""}${where}`;
  } catch (_) {
    return `${response.status} ${response.statusText}`;
  }
}

async function loadTargets() {
  try {
    const r = await fetch("/v1/targets");
    if (!r.ok) return;
    const { targets } = await r.json();
    const select = $("target");
    select.textContent = "";
    for (const t of targets) {
      const o = document.createElement("option");
      o.value = t.name;
      o.textContent = t.name;
      o.title = t.description;
      select.appendChild(o);
    }
    select.value = "cpu";
  } catch (_) {
    // The default option stays.
  }
}

async function loadExample() {
  const r = await fetch("/example.hlo");
  $("module").value = await r.text();
  setStatus("Loaded the example: XLA CPU's entry_layout_colmajor, before layout assignment.");
}

function readFile() {
  const f = $("file").files[0];
  if (!f) return;
  const reader = new FileReader();
  reader.onload = () => {
    $("module").value = reader.result;
    setStatus(`Loaded ${f.name} (${f.size} bytes).`);
  };
  reader.readAsText(f);
}

async function run() {
  const text = $("module").value;
  if (!text.trim()) {
    setStatus("Paste or upload a module first.", true);
    return;
  }
  const params = new URLSearchParams({
    target: $("target").value,
    expand_relayouts: $("expand").checked ? "true" : "false",
    verify: $("semantic").checked ? "semantic" : "true",
  });
  setStatus("Running…");
  document.body.dataset.state = "running";
  let response;
  try {
    response = await fetch(`/v1/layout-assignment?${params}`, {
      method: "POST",
      headers: { "Content-Type": "text/plain", Accept: "application/json" },
      body: text,
    });
  } catch (e) {
    setStatus(`The service did not answer: ${e}`, true);
    document.body.dataset.state = "error";
    return;
  }
  if (!response.ok) {
    setStatus(await errorText(response), true);
    document.body.dataset.state = "error";
    return;
  }
  const answer = await response.json();
  lastOutput = answer.module;
  const relayoutSteps = renderReport(answer.report);
  renderOutput(answer.module, relayoutSteps);
  renderSemantic(answer.semantic_check);
  const st = answer.report.stats;
  $("summary").textContent =
    `${answer.report.module} on ${answer.report.target}: ${st.instructions} instructions, ` +
    `${st.copies} copies, ${st.bitcasts} bitcasts, ${st.bytes_moved} bytes moved, ` +
    `${st.padding_bytes} bytes of padding; ${answer.timings.total} µs.`;
  setStatus("Done. Click a shape to see its memory order.");
  await fillComputations(answer.module);
  document.body.dataset.state = "done";
}

// Names of the instructions that expanded relayouts consist of.
function renderReport(report) {
  const body = document.querySelector("#report tbody");
  body.textContent = "";
  const steps = new Set();
  const row = (cls, cells) => {
    const tr = document.createElement("tr");
    tr.className = cls;
    cells.forEach(([text, mono]) => {
      const td = document.createElement("td");
      td.textContent = text;
      if (mono) td.className = "mono";
      tr.appendChild(td);
    });
    body.appendChild(tr);
  };
  const la = report.layout_assignment;
  if (la) {
    for (const c of la.copies) {
      row("copy", [["copy"], [`%${c.name}`, true], [`${c.from} → ${c.to}`, true], [String(c.bytes)], [`${c.cause}: ${c.why}`]]);
    }
  }
  const rl = report.relayout;
  if (rl) {
    for (const w of rl.rewrites) {
      for (const s of w.steps || []) steps.add(s.name);
      const what = w.steps && w.steps.length ? `${w.kind} (${w.steps.map((s) => s.op).join(", ")})` : w.kind;
      row(w.kind, [[what], [`%${w.instruction}`, true], [`${w.from} → ${w.to}`, true], [String(w.bytes)], [w.why]]);
    }
  }
  if (!body.children.length) {
    row("", [["none"], [""], [""], [""], ["no copy, no relayout"]]);
  }
  return steps;
}

function renderSemantic(check) {
  const p = $("semantic-result");
  p.className = "";
  if (!check) {
    p.textContent = "";
    return;
  }
  p.className = check.result;
  if (check.result === "equivalent") {
    p.textContent = `Semantic check: equivalent (${check.elements_compared} result elements compared, seed 1).`;
  } else {
    p.textContent = `Semantic check: ${check.result.replace("_", " ")}: ${check.message}`;
  }
}

// Appends `text` to `parent`, with every array shape a clickable span.
function appendWithShapes(parent, text) {
  let last = 0;
  for (const m of text.matchAll(ARRAY_SHAPE)) {
    if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
    const s = document.createElement("span");
    s.className = "shape";
    s.textContent = m[0];
    s.dataset.shape = m[0];
    parent.appendChild(s);
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
}

function renderOutput(text, relayoutSteps) {
  const pre = $("output");
  pre.textContent = "";
  for (const line of text.split("\n")) {
    const div = document.createElement("span");
    div.className = "line";
    const m = INSTRUCTION.exec(line);
    if (m) {
      const [, indent, root, name, shape, opcode] = m;
      if (opcode === "copy") div.classList.add("op-copy");
      if (opcode === "bitcast") div.classList.add("op-bitcast");
      if (relayoutSteps.has(name)) div.classList.add("relayout");
      div.dataset.name = name;
      div.dataset.opcode = opcode;
      div.appendChild(document.createTextNode(indent + (root || "")));
      const n = document.createElement("span");
      n.className = "inst";
      n.textContent = `%${name}`;
      const first = shape.match(ARRAY_SHAPE);
      if (first) n.dataset.shape = first[0];
      div.appendChild(n);
      div.appendChild(document.createTextNode(" = "));
      appendWithShapes(div, line.slice(m[0].length - opcode.length - 1 - shape.length - 1));
    } else {
      appendWithShapes(div, line);
    }
    pre.appendChild(div);
  }
}

async function showLayout(shape, element) {
  document.querySelectorAll(".selected").forEach((e) => e.classList.remove("selected"));
  if (element) element.classList.add("selected");
  $("picture-title").textContent = shape;
  const q = new URLSearchParams({ shape });
  const [svg, explain] = await Promise.all([fetch(`/v1/layout/draw?${q}`), fetch(`/v1/layout/explain?${q}`)]);
  if (!svg.ok) {
    $("picture").textContent = await errorText(svg);
    return;
  }
  $("picture").innerHTML = await svg.text();
  if (explain.ok) {
    const e = await explain.json();
    const tiles = e.levels.map((l) => `T${l.tile}`).join(" then ") || "untiled";
    $("explain").textContent =
      `${e.element_count} elements in ${e.storage_elements} slots (${e.padding_elements} padding), ` +
      `${e.storage_bytes} bytes; ${tiles}; physical dims [${e.physical_dims.join(",")}]`;
  }
  document.body.dataset.picture = shape;
}

async function fillComputations(text) {
  const select = $("computation");
  select.textContent = "";
  let entry = null;
  for (const line of text.split("\n")) {
    const m = COMPUTATION.exec(line);
    if (!m) continue;
    const o = document.createElement("option");
    o.value = m[2];
    o.textContent = m[1] ? `${m[2]} (entry)` : m[2];
    select.appendChild(o);
    if (m[1]) entry = m[2];
  }
  if (entry) select.value = entry;
  await drawGraph();
}

async function drawGraph() {
  const name = $("computation").value;
  if (!name || !lastOutput) return;
  const r = await fetch(`/v1/graph?${new URLSearchParams({ computation: name })}`, {
    method: "POST",
    headers: { "Content-Type": "text/plain" },
    body: lastOutput,
  });
  $("graph").innerHTML = r.ok ? await r.text() : "";
  if (!r.ok) $("graph").textContent = await errorText(r);
}

function onOutputClick(event) {
  const t = event.target;
  if (t.dataset && t.dataset.shape) {
    showLayout(t.dataset.shape, t);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("run").addEventListener("click", run);
  $("example").addEventListener("click", loadExample);
  $("file").addEventListener("change", readFile);
  $("computation").addEventListener("change", drawGraph);
  $("output").addEventListener("click", onOutputClick);
  loadTargets();
  document.body.dataset.state = "ready";
});
