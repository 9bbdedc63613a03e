// moot view: draws the runs embedded in #moot-data. Every string from the data reaches the
// page as a text node (el() below), never as markup: model text is data, not HTML.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("moot-data").textContent);
  const RUNS = DATA.runs;
  // a large page holds each item's list fields only; the rest is in files of CHUNKS.size items
  // beside it, each loaded once, when one of its items is opened (a <script>: a page opened
  // from disk may not fetch)
  const CHUNKS = DATA.chunks;
  const PAGE = 50;
  const views = new Map();  // an items tab's element → its refresh and n / p
  const SVGNS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
      else if (k === "cls") node.className = v;
      else node.setAttribute(k, v);
    }
    add(node, children);
    return node;
  }
  function add(node, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }
  const fmt = (x) => (typeof x === "number" ? (Number.isInteger(x) ? String(x) : x.toFixed(3)) : x === null || x === undefined ? "—" : String(x));
  const statusClass = (s) => (["failed", "error"].includes(s) ? "failed" : ["ok", "complete"].includes(s) ? "" : "other");
  const badge = (s) => el("span", { cls: "status " + statusClass(s) }, s);

  // ---------- generic value display ----------
  function value(v, depth) {
    depth = depth || 0;
    if (v === null || v === undefined) return el("span", { cls: "muted" }, "null");
    if (typeof v !== "object") return el("span", { cls: typeof v === "string" && v.length > 80 ? "text" : "" }, String(v));
    if (Array.isArray(v)) {
      if (!v.length) return el("span", { cls: "muted" }, "[]");
      if (v.every((x) => typeof x !== "object" || x === null) && v.join(", ").length < 120) return el("span", {}, v.map(fmt).join(", "));
      return el("ol", { start: 0 }, v.map((x) => el("li", {}, value(x, depth + 1))));
    }
    const keys = Object.keys(v);
    if (!keys.length) return el("span", { cls: "muted" }, "{}");
    const grid = el("div", { cls: "kv" }, keys.map((k) => [el("div", {}, k), el("div", {}, value(v[k], depth + 1))]));
    return depth > 1 ? el("details", {}, el("summary", {}, keys.length + " fields"), grid) : grid;
  }
  const field = (name, v) => [el("div", {}, name), el("div", { "data-field": name }, v instanceof Node ? v : value(v))];
  const kv = (pairs) => el("div", { cls: "kv" }, pairs.filter((p) => p[1] !== undefined).map(([k, v]) => field(k, v)));
  const rawRecord = (r) => el("details", {}, el("summary", {}, "the whole record"), value(r, 2));
  const para = (text) => el("div", { cls: "text" }, text === null || text === undefined ? "—" : String(text));

  // ---------- one item, by kind ----------
  function failure(item) {
    return item.failed || item.error ? el("div", { cls: item.failed ? "error" : "warn", "data-role": "error" }, (item.failed ? "FAILED: " : item.status + ": ") + (item.error || item.status)) : null;
  }
  const DRAW = {
    debate(r) {
      if (r.arguments !== undefined && r.transcript === undefined) return kv([["topic", r.topic], ["stance", r.stance], ["arguments", r.arguments]]);
      return [
        kv([["topic", r.topic], ["stance (A)", r.stance], ["argument", r.argument], ["rounds", r.rounds], ["models", r.models], ["shard", r.shard]]),
        el("h3", {}, "Transcript"),
        (r.transcript || []).length ? (r.transcript || []).map((t) =>
          el("div", { cls: "turn " + t.speaker }, el("div", { cls: "who" }, `Round ${t.round + 1} · ${t.speaker} (${t.side})`), para(t.text))) : el("p", { cls: "muted" }, "no turns"),
        el("h3", {}, "Conclusion"),
        para(r.conclusion),
      ];
    },
    judge(r, item) {
      const debate = item.debate || {}, speeches = debate.speeches || [];
      const out = [kv([["motion", debate.motion], ["debate", r.debate], ["repeat", r.repeat], ["framework", r.framework], ["judge", r.judge], ["pro", r.pro], ["con", r.con], ["usage", r.usage]])];
      if (r.final) {
        out.push(el("h3", {}, "Verdict"), kv([["panel winner", r.final.winner || "unread"], ["gold winner", item.gold === undefined ? "not known (moot view --debates FILE)" : item.gold || "not known"]]));
        out.push(scoresTable(r.final.debaters), para(r.final.judgment));
      }
      for (const [name, d] of Object.entries(r.dimensions || {})) {
        const gold = (item.gold_dimensions || {})[name];
        out.push(el("h3", {}, `Dimension: ${name} (weight ${fmt(d.weight)}) — winner ${d.winner || "unread"}` + (gold ? ` · gold ${gold}` : "")));
        if (d.winner_failure) out.push(el("div", { cls: "warn" }, "winner unread: " + (d.winner_failure.error || "")));
        if ((d.speeches || []).length) {
          out.push(el("table", { "data-role": "speeches" }, el("tr", {}, el("th", {}, "#"), el("th", {}, "speaker"), el("th", {}, "analysis"), el("th", { cls: "num" }, "score")),
            d.speeches.map((s) => el("tr", {}, el("td", {}, s.index + 1), el("td", { cls: "nowrap" }, s.speaker),
              el("td", {}, speeches[s.index] ? el("details", {}, el("summary", {}, "speech"), para(speeches[s.index].content)) : null, para(s.analysis)),
              el("td", { cls: "num" }, s.parse_failure ? el("span", { cls: "status failed" }, "unread") : fmt(s.score))))));
        }
        if ((d.summaries || []).length) out.push(el("details", {}, el("summary", {}, `memory (${d.summaries.length} summaries)`), d.summaries.map((s, i) => el("div", { cls: "turn" }, el("div", { cls: "who" }, "summary " + (i + 1)), para(s)))));
        out.push(scoresTable(d.debaters), el("div", { cls: "who" }, "judgment"), para(d.judgment));
      }
      return out;
    },
    controllability(r) {
      const j = r.judgment || {};
      return [kv([["topic", r.topic], ["side", r.side], ["argument", r.argument]]), el("h3", {}, "Response"), para(r.response || r.text || r.instruction),
        el("h3", {}, "Controllability verdict"), judgmentBlock(j)];
    },
    quality(r) {
      return [kv([["topic", r.topic], ["side", r.side], ["argument", r.argument], ["outcome", r.outcome], ["inconsistent", r.inconsistent]]),
        el("h3", {}, "Forward order (response 1 = evaluated)"), judgmentBlock(r.forward || {}),
        el("h3", {}, "Reverse order"), judgmentBlock(r.reverse || {})];
    },
    answer(r) {
      const out = [kv([["question", r.question], ["mode", r.mode], ["ledger", r.ledger]]), el("h3", {}, "Answer"), para(r.answer)];
      if ((r.trace || []).length) {
        out.push(el("h3", {}, "ReAct trace"));
        r.trace.forEach((e, i) => out.push(el("div", { cls: "turn" }, el("div", { cls: "who" }, `${i + 1}. ${e.kind}`),
          e.thought !== undefined ? para("Thought: " + e.thought) : null, e.query !== undefined ? para("Search: " + e.query) : null,
          e.chunk_ids ? el("div", { cls: "muted" }, "chunks: " + e.chunk_ids.join(", ")) : null, e.reply === undefined ? null : e.kind === "step" ? el("details", {}, el("summary", {}, "the reply"), para(e.reply)) : para(e.reply))));
      }
      if ((r.chunks || []).length) {
        out.push(el("h3", {}, `Retrieved chunks (${r.chunks.length})`));
        for (const c of r.chunks) out.push(el("div", { cls: "turn" }, el("div", { cls: "who" }, `${c.id} · ${c.title || c.doc_id} · ${c.url || ""} · score ${fmt(c.score)}`), para(c.text)));
      }
      return out;
    },
    compqa(r) {
      const scores = r.score_dict || {};
      return [kv([["file", r.file], ["objects", `${r.object1} vs ${r.object2}`], ["aspect", r.aspect], ["judge", r.judge], ["total", r.score], ["categories", r.categories], ["repaired", r.repaired]]),
        r.status === "invalid" ? el("div", { cls: "warn", "data-role": "invalid" }, "INVALID judgment: " + (r.problem || "")) : null,
        el("h3", {}, "Answer"), para(r.comparison),
        el("h3", {}, "Criterion scores"),
        el("table", {}, el("tr", {}, Array.from({ length: 15 }, (_, i) => el("th", { cls: "num" }, "C" + (i + 1)))),
          el("tr", {}, Array.from({ length: 15 }, (_, i) => el("td", { cls: "num" }, fmt(scores[String(i + 1)]))))),
        (r.replies || []).length ? el("details", {}, el("summary", {}, "judge replies"), r.replies.map((x) => el("pre", {}, x))) : null];
    },
    compare(r) {
      const args = r.arguments || {};
      return [kv([["question", r.question], ["objects", `${r.object1} vs ${r.object2}`], ["aspect", r.aspect], ["extracted", r.extracted], ["ledger", r.ledger]]),
        r.parse_failure ? rawReply(r.parse_failure.raw) : null,
        el("h3", {}, "Answer"), para(r.comparison),
        r.arguments ? [el("h3", {}, `Arguments (${args.source || "given"})`), [r.object1, r.object2].map((o, i) =>
          [el("div", { cls: "who" }, `for ${o}`), el("ol", { "data-role": "arguments" }, (args["object" + (i + 1)] || []).map((a) => el("li", {}, a)))])] : null];
    },
    pd(r) {
      const povs = r.povs || [], ppl = r.perplexities || [];
      return [kv([["question", r.question], ["answer id", r.id], ["P.D. (lower is better)", r.pd], ["truncated", r.truncated], ["answer tokens dropped", r.dropped_answer_tokens]]),
        el("h3", {}, "Partial answers"),
        table(["#", "point of view", "perplexity", "tokens", "scored"], Array.from({ length: Math.max(povs.length, ppl.length) }, (_, i) =>
          [i + 1, povs[i], fmt(ppl[i]), fmt((r.partial_tokens || [])[i]), fmt((r.scored_tokens || [])[i])]), "partials")];
    },
    da(r) {
      const j = r.judgment || {};
      return [kv([["question", r.question], ["answer id", r.answer_id], ["verdict", verdict(j, ["0: not said to be debated", "1: says it is debated"])]]),
        el("h3", {}, "Judge's replies"), judgmentBlock(j)];
    },
    detector(r) {
      const j = r.judgment || {}, says = ["0: does not support", "1: supports"];
      return [kv([["pair", r.pair_id], ["question", r.question], ["perspective", r.perspective], ["gold", says[r.label] || r.label], ["verdict", verdict(j, says)]]),
        el("h3", {}, "Document"), para(r.document), el("h3", {}, "Detector's replies"), judgmentBlock(j)];
    },
    berds(r, item, run) {
      const docs = r.documents || [], persp = r.perspectives || [], grid = item.detections || [], k = (run.summary || {}).k || "k";
      const cell = (d) => el("td", { cls: "nowrap", "data-label": d ? (d.status !== "ok" ? "failed" : (d.judgment || {}).ok ? String(d.judgment.label) : "unread") : null },
        !d ? el("span", { cls: "muted" }, "—") : d.status !== "ok" ? el("span", { cls: "status failed" }, "failed")
          : !(d.judgment || {}).ok ? el("span", { cls: "status other" }, "unread") : d.judgment.label ? el("strong", { cls: "yes" }, "yes") : "no");
      const trouble = grid.flat().filter((d) => d && (d.status !== "ok" || !(d.judgment || {}).ok));
      return [kv([["question", r.question], [`MRecall@${k}`, r.mrecall], [`Precision@${k}`, r.precision], ["set apart", r.parse_failure || r.incomplete ? (r.incomplete ? "incomplete: a detection failed" : "an unread detection") : "no"]]),
        el("h3", {}, "Perspectives"),
        table(["#", "perspective", `covered in the top ${k}`], persp.map((p, i) => [`P${i + 1}`, p, r.supported && r.supported[i] !== undefined ? (r.supported[i] === null ? "unknown: an unread label decides" : r.supported[i] ? "yes" : "no") : "—"]), "perspectives"),
        el("h3", {}, `Retrieved documents (${docs.length}) and the detector's labels`),
        el("table", { "data-role": "detections" }, el("tr", {}, el("th", {}, "rank"), el("th", {}, "document"), grid.map((_, p) => el("th", { title: persp[p] || "" }, `P${p + 1}`))),
          Array.from({ length: Math.max(docs.length, ...grid.map((row) => row.length)) }, (_, rank) => el("tr", {}, el("td", {}, rank + 1),
            el("td", {}, docs[rank] ? [el("div", { cls: "who" }, docs[rank].id), folded(docs[rank].text)] : "—"),
            grid.map((row) => cell(row[rank]))))),
        trouble.map((d) => el("div", { cls: d.status !== "ok" ? "error" : "warn" }, `rank ${d.rank + 1}, P${d.perspective_index + 1}: ` + (d.status !== "ok" ? "FAILED: " + (d.error || d.status) : "unread: " + ((d.judgment.parse_failure || {}).error || "") + " (replies: " + (d.judgment.replies || []).join(" | ") + ")")))];
    },
    protocol(r) {
      const turns = r.turns || [], checks = r.checks || [], final = r.final || {};
      const out = [kv([["inputs", r.inputs], ["models", r.models], ["ended", r.ended]]), r.failure ? [el("div", { cls: "warn" }, `unread: ${r.failure.step}: ${r.failure.error}`), rawReply(r.failure.raw)] : null,
        el("h3", {}, "Transcript"),
        turns.length ? turns.map((t) => el("div", { cls: "turn" }, el("div", { cls: "who" }, `Round ${t.round + 1} · ${t.agent}`),
          t.question ? para("Asked: " + t.question) : null, para(t.text), t.answers ? kv(Object.entries(t.answers)) : null)) : el("p", { cls: "muted" }, "no turns")];
      if ((r.summaries || []).length) out.push(el("h3", {}, "Running summary"), r.summaries.map((x, i) => el("div", { cls: "turn" }, el("div", { cls: "who" }, `after round ${i + 1}`), para(x))));
      if (checks.length) out.push(el("h3", {}, "Moderator and stop checks"), table(["round", "step", "reply"], checks.map((c) => [c.round === null ? "—" : c.round + 1, c.step, c.speaker ? `${c.speaker}${c.question ? ": " + c.question : ""}` : c.reason || c.error || ""]), "checks"));
      if (r.final) out.push(el("h3", {}, "Final"), final.text !== undefined ? para(final.text) : kv(Object.entries(final)));
      return out;
    },
    custom_judge(r) {
      const jurors = Object.entries(r.jurors || {});
      return [kv([["item", r.place], ["verdict", r.verdict], ["jurors' verdicts", r.verdicts]]), el("h3", {}, "Input"), value(r.input || {}, 0),
        jurors.map(([name, j]) => [el("h3", {}, "Juror " + name), j.forward ? [kv([["outcome", j.outcome], ["inconsistent", j.inconsistent]]),
          el("div", { cls: "who" }, "a first"), judgmentBlock(j.forward), el("div", { cls: "who" }, "b first"), judgmentBlock(j.reverse)] : judgmentBlock(j)])];
    },
    curate(r) {
      const povs = r.partial_answers || [];
      return [kv([["question", r.question], ["id", r.id], ["chunks retrieved", (r.chunk_ids || []).join(", ")]]),
        r.failure ? rawReply(r.failure.raw) : null,
        povs.length ? [el("h3", {}, `Points of view (${povs.filter((p) => p.duplicate_of === undefined).length} kept of ${povs.length})`),
          table(["#", "point of view", "kept", "documents"], povs.map((p, i) => [i + 1, [p.pov, el("details", {}, el("summary", {}, "explanation" + (p.cut_at_300_words ? " (cut at 300 words)" : "")), para(p.explanation))],
            p.duplicate_of === undefined ? "kept" : el("span", { cls: "status other" }, `dropped: duplicate of “${p.duplicate_of}” (similarity ${fmt(p.similarity)})`), (p.chunk_ids || p.documents || []).join(", ")]), "povs")] : null];
    },
  };
  // a long text folded under its first 100 characters
  const folded = (text) => (String(text).length > 100 ? el("details", {}, el("summary", {}, String(text).slice(0, 100) + "…"), para(text)) : para(text));
  function table(heads, rows, role) {
    return el("table", { "data-role": role }, el("tr", {}, heads.map((h) => el("th", {}, h))), rows.map((cells) => el("tr", {}, cells.map((c, i) => el("td", { cls: i ? null : "nowrap" }, c)))));
  }
  function verdict(j, says) {
    return j.ok === false ? el("span", { cls: "status other" }, "unread") : j.label === undefined ? "—" : says[j.label] || String(j.label);
  }
  const rawReply = (raw) => el("details", {}, el("summary", {}, "the reply that could not be read"), para(raw));
  function judgmentBlock(j) {
    return [kv([["value", j.value], ["read", j.ok]]), j.parse_failure ? el("div", { cls: "warn" }, "unread: " + (j.parse_failure.error || "")) : null,
      (j.replies || []).map((x, i) => el("div", { cls: "turn" }, el("div", { cls: "who" }, "judge reply " + (i + 1)), para(x)))];
  }
  function scoresTable(debaters) {
    if (!debaters) return null;
    return el("table", {}, el("tr", {}, el("th", {}, "debater"), el("th", { cls: "num" }, "score"), el("th", {}, "comment")),
      Object.entries(debaters).map(([n, d]) => el("tr", {}, el("td", { cls: "nowrap" }, n), el("td", { cls: "num" }, d.parse_failure ? "unread" : fmt(d.score)), el("td", { cls: "text" }, d.comment || ""))));
  }
  const chunks = new Map(), arrived = new Map();
  window.mootChunk = (r, c, rest) => { const done = arrived.get(r + "-" + c); if (done) done(rest); };
  function whole(run, item) {
    if (!CHUNKS || item.record !== undefined) return Promise.resolve(item);  // whole: arrived live
    const i = run.items.indexOf(item), name = RUNS.indexOf(run) + "-" + Math.floor(i / CHUNKS.size);
    if (!chunks.has(name)) chunks.set(name, new Promise((resolve, reject) => {
      const src = `${encodeURIComponent(CHUNKS.folder)}/${CHUNKS.prefix}-${name}.js`;
      const script = el("script", { src });
      arrived.set(name, resolve);
      script.onerror = () => { chunks.delete(name); reject(new Error(`cannot read ${src}: keep the folder ${CHUNKS.folder} beside this page`)); };
      document.head.append(script);
    }));
    return chunks.get(name).then((rest) => ({ ...item, ...rest[i % CHUNKS.size] }));
  }
  // what a click asked for, once its items' files are read; a later click wins
  let asked = 0;
  function showWhole(detail, pairs, draw) {
    const ticket = ++asked;
    Promise.all(pairs.map(([run, item]) => (item ? whole(run, item) : null))).then(
      (items) => { if (ticket === asked) detail.replaceChildren(...draw(items)); },
      (err) => { if (ticket === asked) detail.replaceChildren(el("div", { cls: "error", "data-role": "error" }, err.message)); });
  }
  function drawItem(run, item) {
    const draw = DRAW[run.kind];
    return el("div", { cls: "item-detail" }, el("div", {}, badge(item.status), " ", el("strong", {}, item.title)),
      failure(item), labelPanel(run, item), draw ? draw(item.record, item, run) : value(item.record), rawRecord(item.record));
  }

  // ---------- labels: the labeller's own verdicts, next to the judge's ----------
  // Served (moot view --serve): each label is POSTed, the server appends it to
  // RUN/labels/<labeller>.jsonl. A page from disk keeps them in the browser (localStorage) and
  // exports the same JSONL. Either way the latest line per (item, field) is the label.
  const store = (() => { try { return window.localStorage; } catch (e) { return null; } })();
  let labeller = (store && store.getItem("moot-labeller")) || "";
  const mine = new Map();  // run index, item id, field → the labeller's latest line
  const labelKey = (r, item, field) => `${r}\u0001${item}\u0001${field}`;
  const keptKey = (run) => "moot-labels:" + run.name;
  const kept = (run) => { try { return JSON.parse((store && store.getItem(keptKey(run))) || "[]"); } catch (e) { return []; } };
  function loadLabels() {
    mine.clear();
    RUNS.forEach((run, r) => {
      for (const line of [...(run.labels || []), ...(DATA.live ? [] : kept(run))]) if (line.labeller === labeller) mine.set(labelKey(r, line.item, line.field), line);
    });
  }
  loadLabels();
  const labelledBy = (r, id) => [...mine.keys()].some((k) => k.startsWith(labelKey(r, id, "")));
  let panelNow = null;  // the label panel on screen: digits and f act on it
  function labelPanel(run, item) {
    const fields = item.fields || [], r = RUNS.indexOf(run);
    if (!fields.length) return null;
    const box = el("div", { cls: "labels", "data-role": "labels" });
    const note = el("input", { type: "text", placeholder: "note (optional): kept with the next label", "data-role": "note", size: 50 });
    const said = el("div", { "data-role": "label-message" });
    let active = Math.max(0, fields.findIndex((f) => !mine.has(labelKey(r, item.id, f.name))));
    const keyOf = (f, i) => (f.values.every((v) => Number.isInteger(v) && v >= 0 && v <= 9) ? String(f.values[i]) : String(i + 1));
    function save(field, v) {
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(labeller) || /^\.+$/.test(labeller)) {  // it names the labels file
        said.replaceChildren(el("div", { cls: "warn" }, "Your name first, at the top: 1-64 of A-Z a-z 0-9 . _ -"));
        document.querySelector("[data-role=labeller]").focus();
        return;
      }
      const record = { item: item.id, field: field.name, value: v };
      if (note.value.trim()) record.note = note.value.trim();
      const done = (line) => { mine.set(labelKey(r, line.item, line.field), line); note.value = ""; active = Math.min(fields.length - 1, fields.indexOf(field) + 1); said.replaceChildren(); draw(); redraw(); };
      const refused = (err) => said.replaceChildren(el("div", { cls: "error", "data-role": "error" }, "not kept: " + err.message));
      if (!DATA.live) {
        const line = { ...record, time: new Date().toISOString(), labeller };
        try { store.setItem(keptKey(run), JSON.stringify([...kept(run), line])); } catch (e) { return refused(e); }
        return done(line);
      }
      fetch("labels", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ run: r, labeller, ...record }) })
        .then((res) => res.text().then((text) => { if (!res.ok) throw new Error(text.trim()); return JSON.parse(text); }))
        .then(done, refused);
    }
    function control(field, i) {
      const line = mine.get(labelKey(r, item.id, field.name));
      if (field.values) {
        return field.values.map((v, j) => el("button", { cls: line && line.value === v ? "active" : null, "data-value": JSON.stringify(v), title: "key " + keyOf(field, j), on: { click: () => { active = i; save(field, v); } } },
          `${keyOf(field, j)}: ${fmt(v)}`));
      }
      const n = el("input", { type: "number", step: "any", min: field.scale[0], max: field.scale[1], value: line ? line.value : null, "data-role": "value" });
      return [n, el("button", { on: { click: () => save(field, Number(n.value)) } }, "keep"), ` ${field.scale[0]}–${field.scale[1]}`];
    }
    function draw() {
      const judged = item.judged || {};
      box.replaceChildren(el("h3", {}, `Your labels${labeller ? " (" + labeller + ")" : ""}`),
        el("table", {}, el("tr", {}, el("th", {}, "verdict"), el("th", {}, "judge"), el("th", {}, "yours")),
          fields.map((f, i) => el("tr", { cls: i === active ? "active-field" : null, "data-field": f.name, on: { click: () => { if (active !== i) { active = i; draw(); } } } },
            el("td", {}, f.title), el("td", { "data-role": "judge" }, fmt(judged[f.name])), el("td", {}, control(f, i))))),
        el("div", {}, note), said,
        el("div", { cls: "muted" }, "keys: a value's key labels the marked verdict · f / F next / previous verdict · n / p next / previous item"));
    }
    draw();
    panelNow = { box, key(k) {
      const f = fields[active];
      if (k === "f" || k === "F") { active = (active + (k === "f" ? 1 : fields.length - 1)) % fields.length; draw(); return true; }
      if (f && f.values) { const j = f.values.findIndex((_, j2) => keyOf(f, j2) === k); if (j >= 0) { save(f, f.values[j]); return true; } }
      return false;
    } };
    return box;
  }
  function labellerBar() {
    const input = el("input", { type: "text", placeholder: "your name", value: labeller, "data-role": "labeller", size: 14, pattern: "[A-Za-z0-9._\\-]{1,64}" });
    input.addEventListener("change", () => {
      if (input.value.trim() === labeller) return;
      labeller = input.value.trim();
      if (store) store.setItem("moot-labeller", labeller);
      loadLabels();
      redraw();
    });
    return el("label", { cls: "labeller" }, "labeller ", input);
  }
  // a page from disk: the run's labels as the JSONL file the server would have written
  function exportButton(run) {
    if (DATA.live || !run.labelled) return null;
    return el("button", { "data-role": "export", on: { click: () => {
      const lines = kept(run).filter((line) => line.labeller === labeller);
      const blob = new Blob(lines.map((line) => JSON.stringify(line) + "\n"), { type: "application/x-ndjson" });
      const a = el("a", { href: URL.createObjectURL(blob), download: `${labeller || "labels"}.jsonl` });
      document.body.append(a); a.click(); a.remove();
    } } }, "download my labels (JSONL)");
  }
  // a fair sample to label: at random, or as many of each judge's verdict as can be (seeded)
  function sampler(onChange) {
    const state = { how: "", seed: 1, size: 20 };
    const how = el("select", { "data-role": "sample" }, el("option", { value: "" }, "every item"), el("option", { value: "random" }, "a random sample"),
      el("option", { value: "stratified" }, "a sample stratified by the judge's verdict"));
    const seed = el("input", { type: "number", value: 1, "data-role": "seed", title: "seed" }), size = el("input", { type: "number", value: 20, min: 1, "data-role": "size", title: "items" });
    for (const [input, name] of [[how, "how"], [seed, "seed"], [size, "size"]]) input.addEventListener("change", () => { state[name] = name === "how" ? input.value : Number(input.value) || 1; onChange(); });
    function sample(items) {
      if (!state.how) return items;
      let t = state.seed >>> 0;  // mulberry32
      const rand = () => { t = (t + 0x6d2b79f5) >>> 0; let x = Math.imul(t ^ (t >>> 15), 1 | t); x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x; return ((x ^ (x >>> 14)) >>> 0) / 4294967296; };
      const shuffled = items.filter((i) => i.judged).slice();
      for (let i = shuffled.length - 1; i > 0; i--) { const j = Math.floor(rand() * (i + 1)); [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]]; }
      if (state.how === "random") return shuffled.slice(0, state.size);
      const first = shuffled.find((i) => Object.keys(i.judged).length), field = first ? Object.keys(first.judged)[0] : null;
      const strata = new Map();
      for (const item of shuffled) { const k = JSON.stringify(item.judged[field] ?? null); if (!strata.has(k)) strata.set(k, []); strata.get(k).push(item); }
      const lists = [...strata.keys()].sort().map((k) => strata.get(k)), out = [];
      for (let i = 0; out.length < state.size && lists.some((l) => i < l.length); i++) for (const l of lists) if (i < l.length && out.length < state.size) out.push(l[i]);
      return out;
    }
    return { bar: el("span", { cls: "sampler" }, how, el("span", { cls: "muted" }, " seed"), seed, el("span", { cls: "muted" }, " items"), size), sample };
  }

  // ---------- filters ----------
  function haystack(item) {
    if (item._hay === undefined) item._hay = (item.title + "\n" + item.id + "\n" + (item.error || "") + "\n" + (item.label || "") + "\n" + (CHUNKS ? "" : JSON.stringify(item.record))).toLowerCase();
    return item._hay;
  }
  function makeFilters(items, onChange, withStatus) {
    const state = { q: "", status: "", topic: "", model: "", min: "", max: "" };
    const uniq = (f) => [...new Set(items.map(f).filter((x) => x !== null && x !== undefined))].sort();
    const search = el("input", { type: "search", placeholder: CHUNKS ? "search topic, id, error, label…" : "search text, topic, id, error…", "data-role": "search" });
    let timer = null;
    search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => { state.q = search.value.trim().toLowerCase(); onChange(); }, 150); });
    const select = (name, values) => {
      const s = el("select", { "data-role": name }, el("option", { value: "" }, `any ${name}`), values.map((v) => el("option", { value: v }, v)));
      s.addEventListener("change", () => { state[name] = s.value; onChange(); });
      return s;
    };
    const number = (name) => {
      const n = el("input", { type: "number", step: "any", placeholder: name + " score", "data-role": name });
      n.addEventListener("input", () => { state[name] = n.value; onChange(); });
      return n;
    };
    const hasScores = items.some((i) => i.score != null);
    const topics = uniq((i) => i.title);  // a list of a few hundred at most: past that, search
    const bar = el("div", { cls: "filters" }, search, withStatus ? select("status", uniq((i) => i.status)) : null,
      topics.length > 1 && topics.length <= 300 ? select("topic", topics) : null, select("model", uniq((i) => i.model)),
      hasScores ? [el("span", { cls: "muted" }, "score"), number("min"), "–", number("max")] : null);
    function keep(item) {
      if (state.status && item.status !== state.status) return false;
      if (state.model && item.model !== state.model) return false;
      if (state.topic && item.title !== state.topic) return false;
      if (state.min !== "" && !(item.score != null && item.score >= Number(state.min))) return false;
      if (state.max !== "" && !(item.score != null && item.score <= Number(state.max))) return false;
      return !state.q || haystack(item).includes(state.q);
    }
    return { bar, keep };
  }
  function pager(total, page, go) {
    const pages = Math.max(1, Math.ceil(total / PAGE));
    return el("div", { cls: "pager" }, el("button", { "data-role": "prev", disabled: page === 0 ? "" : null, on: { click: () => go(page - 1) } }, "‹ prev"),
      el("span", { "data-role": "page" }, `page ${page + 1} of ${pages}`),
      el("button", { "data-role": "next", disabled: page >= pages - 1 ? "" : null, on: { click: () => go(page + 1) } }, "next ›"));
  }

  // ---------- views ----------
  function itemsView(run) {
    const main = el("div", { "data-view": "items" });
    const list = el("div", {}), detail = el("div", { cls: "detail", "data-role": "detail" }, el("p", { cls: "muted" }, "Choose an item."));
    let page = 0, shown = run.items, selected = null;
    let scored = false;
    const labelled = run.labelled;
    const filters = makeFilters(run.items, () => { page = 0; refresh(); }, true);
    const sample = labelled ? sampler(() => { page = 0; refresh(); }) : null;
    function open(item) {
      selected = item;
      showWhole(detail, [[run, item]], ([full]) => [drawItem(run, full)]);
      for (const r of list.querySelectorAll("tr.item-row")) r.classList.toggle("selected", r.dataset.id === item.id);
    }
    function step(by) {  // n / p: the next or previous item of the list as filtered and sampled
      const at = shown.indexOf(selected), next = shown[at < 0 ? 0 : at + by];
      if (!next) return;
      const p = Math.floor(shown.indexOf(next) / PAGE);
      if (p !== page) { page = p; refresh(); }
      open(next);
    }
    function refresh() {
      if (selected && !run.items.includes(selected)) selected = run.items.find((i) => i.id === selected.id) || null;  // it arrived again
      scored = run.items.some((i) => i.score != null);  // a running run's first score adds the column
      shown = run.items.filter(filters.keep);
      if (sample) shown = sample.sample(shown);
      page = Math.min(page, Math.max(0, Math.ceil(shown.length / PAGE) - 1));
      const rows = shown.slice(page * PAGE, page * PAGE + PAGE).map((item) => {
        const row = el("tr", { cls: "item-row" + (item === selected ? " selected" : ""), "data-status": item.status, "data-id": item.id, on: { click: () => open(item) } },
          el("td", {}, badge(item.status)), el("td", {}, item.title, item.error ? el("div", { cls: item.failed ? "error" : "warn" }, item.error) : null),
          el("td", {}, item.label || ""), scored ? el("td", { cls: "num" }, fmt(item.score)) : null,
          labelled ? el("td", { "data-role": "labelled" }, labelledBy(RUNS.indexOf(run), item.id) ? "✓" : "") : null);
        return row;
      });
      list.replaceChildren(el("div", { cls: "count", "data-role": "count" }, `${shown.length} of ${run.items.length} items`), pager(shown.length, page, (p) => { page = p; refresh(); }),
        el("table", {}, el("tr", {}, el("th", {}, "status"), el("th", {}, "item"), el("th", {}, "label"), scored ? el("th", { cls: "num" }, "score") : null, labelled ? el("th", {}, "yours") : null), rows));
    }
    refresh();
    views.set(main, { refresh, step });
    return add(main, [el("div", { cls: "filters" }, filters.bar, sample ? sample.bar : null, exportButton(run)), el("div", { cls: "split" }, list, detail)]);
  }

  function summaryView() {
    const out = el("div", { "data-view": "summary" });
    for (const run of RUNS) {
      const counts = {};
      for (const i of run.items) counts[i.status] = (counts[i.status] || 0) + 1;
      const failed = run.items.filter((i) => i.failed).length;
      add(out, [el("h2", {}, `${run.name} — ${run.command}`),
        el("div", { cls: "cards" }, el("div", { cls: "card" }, el("div", { cls: "muted" }, "items"), el("strong", {}, run.items.length)),
          el("div", { cls: "card" }, el("div", { cls: "muted" }, "failed"), el("strong", { "data-role": "failed-count" }, failed)),
          Object.keys(counts).length ? el("div", { cls: "card" }, el("div", { cls: "muted" }, "by status"), barChart(Object.entries(counts))) : null,
          histogram(run.items.map((i) => i.score).filter((s) => s != null)))]);
      if (run.ledger) add(out, [el("h3", {}, "Ledger"), ledgerTable(run.ledger)]);
      if (run.summary) out.append(el("details", { open: RUNS.length === 1 ? "" : null }, el("summary", {}, "manifest / summary"), value(run.summary, 1)));
    }
    return out;
  }
  function ledgerTable(ledger) {
    const cols = ["calls", "cache_hits", "prompt_tokens", "completion_tokens", "cost_usd", "retries", "failures", "latency_s"];
    const unpriced = ledger.unpriced || [];
    // a model without a known price costs "unpriced", never $0
    const cell = (r, c, unknown) => el("td", { cls: "num" }, c === "cost_usd" && unknown ? (r[c] ? fmt(r[c]) + " + unpriced" : "unpriced") : fmt(r[c]));
    const rows = (ledger.by_role || []).map((r) => el("tr", {}, el("td", {}, r.role), el("td", {}, r.stage), el("td", {}, r.model), cols.map((c) => cell(r, c, unpriced.includes(r.model)))));
    const t = ledger.total || {};
    return [el("table", { "data-role": "ledger" }, el("tr", {}, ["role", "stage", "model"].map((c) => el("th", {}, c)), cols.map((c) => el("th", { cls: "num" }, c))), rows,
      el("tr", {}, el("th", {}, "total"), el("th", {}), el("th", {}), cols.map((c) => cell(t, c, unpriced.length > 0)))),
      unpriced.length ? el("div", { cls: "warn" }, "unpriced (cost not known): " + unpriced.join(", ")) : null,
      rows.length ? barChart((ledger.by_role || []).map((r) => [`${r.role} ${r.stage}`, (r.prompt_tokens || 0) + (r.completion_tokens || 0)]), "tokens") : null];
  }
  function barChart(pairs, unit) {
    const width = 420, row = 18, left = 210, max = Math.max(1, ...pairs.map((p) => p[1]));
    const g = svg("svg", { width, height: pairs.length * row + 4, role: "img", "aria-label": unit || "counts" });
    pairs.forEach(([name, n], i) => {
      const w = Math.max(1, ((width - left - 60) * n) / max);
      g.append(svg("text", { x: 0, y: i * row + 13 }, String(name).slice(0, 34)),
        svg("rect", { x: left, y: i * row + 3, width: w, height: row - 6, fill: ["failed", "error"].includes(name) ? "#b3261e" : "#2457a6" }),
        svg("text", { x: left + w + 4, y: i * row + 13 }, fmt(n)));
    });
    return g;
  }
  function histogram(scores) {
    if (!scores.length) return null;
    const lo = Math.min(...scores), hi = Math.max(...scores), bins = Math.min(10, new Set(scores).size);
    const step = (hi - lo) / bins || 1, counts = new Array(bins).fill(0);
    for (const s of scores) counts[Math.min(bins - 1, Math.floor((s - lo) / step))]++;
    const width = 300, height = 90, bw = width / bins, max = Math.max(...counts);
    const g = svg("svg", { width, height: height + 16, role: "img", "aria-label": "scores" });
    counts.forEach((c, i) => {
      const h = (height * c) / max;
      g.append(svg("rect", { x: i * bw + 1, y: height - h, width: bw - 2, height: h, fill: "#2457a6" }, svg("title", {}, `${fmt(lo + i * step)}–${fmt(lo + (i + 1) * step)}: ${c}`)));
    });
    g.append(svg("text", { x: 0, y: height + 13 }, fmt(lo)), svg("text", { x: width, y: height + 13, "text-anchor": "end" }, fmt(hi)));
    return el("div", { cls: "card" }, el("div", { cls: "muted" }, `scores (${scores.length})`), g);
  }

  function sideBySideView() {
    const main = el("div", { "data-view": "side-by-side" });
    const rows = new Map();
    RUNS.forEach((run, r) => {
      for (const item of run.items) {
        if (!rows.has(item.key)) rows.set(item.key, { title: item.title, items: new Array(RUNS.length).fill(null) });
        const row = rows.get(item.key);
        if (!row.items[r]) row.items[r] = item;
      }
    });
    const aligned = [...rows.values()].map((row) => ({ ...row, status: "aligned",
      model: null, score: null, id: "", error: row.items.map((i) => i && i.error).filter(Boolean).join("\n"), label: "", record: row.items.map((i) => i && i.record) }));
    const list = el("div", {}), detail = el("div", { cls: "sxs", "data-role": "detail", style: `grid-template-columns: repeat(${RUNS.length}, 1fr)` });
    let page = 0;
    const filters = makeFilters(aligned, () => { page = 0; refresh(); }, false);
    function refresh() {
      const shown = aligned.filter(filters.keep);
      const rowsNow = shown.slice(page * PAGE, page * PAGE + PAGE).map((row) => el("tr", { cls: "item-row", on: { click: () => {
        showWhole(detail, row.items.map((item, r) => [RUNS[r], item]), (items) => items.map((item, r) => el("div", { cls: "detail" }, el("h3", {}, RUNS[r].name), item ? drawItem(RUNS[r], item) : el("p", { cls: "muted" }, "not in this run"))));
      } } }, el("td", {}, row.title), row.items.map((item) => el("td", {}, item ? [badge(item.status), " ", item.label || "", item.score != null ? ` ${fmt(item.score)}` : ""] : el("span", { cls: "muted" }, "—")))));
      list.replaceChildren(el("div", { cls: "count", "data-role": "count" }, `${shown.length} of ${aligned.length} aligned items`), pager(shown.length, page, (p) => { page = p; refresh(); }),
        el("table", {}, el("tr", {}, el("th", {}, "item"), RUNS.map((run) => el("th", {}, run.name))), rowsNow));
    }
    refresh();
    return add(main, [filters.bar, list, detail]);
  }

  // ---------- tabs ----------
  const tabs = [["Summary", summaryView]];
  RUNS.forEach((run) => { if (run.kind !== "summary") tabs.push([RUNS.length > 1 ? `Items: ${run.name}` : "Items", () => itemsView(run)]); });
  if (RUNS.length > 1) tabs.push(["Side by side", sideBySideView]);
  const nav = document.getElementById("tabs"), mainEl = document.getElementById("main"), built = new Map();
  let current = 0;
  function show(i) {
    if (!built.has(i)) built.set(i, tabs[i][1]());
    current = i;
    mainEl.replaceChildren(built.get(i));
    nav.querySelectorAll("button").forEach((b, j) => b.classList.toggle("active", i === j));
  }
  // new data (live, or another labeller's name): item lists refreshed in place, the rest redrawn
  function redraw() {
    for (const [i, view] of built) {
      const items = views.get(view);
      if (items) items.refresh();
      else built.delete(i);
    }
    if (!built.has(current)) show(current);
  }
  tabs.forEach(([name], i) => nav.append(el("button", { "data-tab": name, on: { click: () => show(i) } }, name)));
  const progressBar = el("div", { cls: "progress", "data-role": "progress" });
  nav.after(progressBar);
  if (RUNS.some((run) => run.labelled)) nav.append(labellerBar());
  drawProgress();
  show(tabs.length > 1 && RUNS.length === 1 ? 1 : 0);
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || ["INPUT", "SELECT", "TEXTAREA"].includes(event.target.tagName)) return;
    const view = views.get(built.get(current));
    if (view && (event.key === "n" || event.key === "p")) view.step(event.key === "n" ? 1 : -1);
    else if (!(panelNow && panelNow.box.isConnected && panelNow.key(event.key))) return;
    event.preventDefault();
  });

  // ---------- a running run: its progress, and (served) what is new every second ----------
  function drawProgress() {
    progressBar.replaceChildren(...RUNS.filter((run) => run.progress).map((run) => {
      const p = run.progress, began = Date.parse(p.started), at = Date.parse(p.updated);
      const ran = p.done + p.failed, left = p.planned - p.skipped - ran, rate = ran / Math.max(0.001, (at - began) / 1000);
      const quiet = (Date.now() - at) / 1000;
      const state = p.state !== "running" ? p.state : quiet > 5 ? `not updated for ${duration(quiet)}: stopped?` : left > 0 && rate > 0 ? `ETA ${duration(left / rate)}` : "running";
      return el("div", { "data-run": run.name }, `${RUNS.length > 1 ? run.name + " — " : ""}${p.stage}: ${p.skipped + ran} of ${p.planned} (${p.failed} failed)`,
        p.calls === undefined ? "" : ` · calls ${p.calls} · tokens ${p.tokens} · ${p.cost_usd === null ? "unpriced" : "$" + p.cost_usd.toFixed(4)}`, " · ", el("strong", { "data-role": "state" }, state));
    }));
  }
  function duration(s) {
    return s < 60 ? s.toFixed(0) + "s" : s < 3600 ? `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, "0")}s` : `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  }
  function merge(run, update) {
    if (update.reset) {
      Object.assign(run, { summary: update.summary, ledger: update.ledger, items: update.items, byId: null });
    } else {
      if (!run.byId) run.byId = new Map(run.items.map((item, i) => [item.id, i]));
      for (const item of update.items) {
        const at = run.byId.get(item.id);
        if (at === undefined) { run.byId.set(item.id, run.items.length); run.items.push(item); } else run.items[at] = item;
      }
    }
    run.progress = update.progress;
    run.cursor = update.cursor;
    return update.reset || update.items.length > 0;
  }
  if (DATA.live) {
    const said = el("span", { cls: "warn", "data-role": "live-error", hidden: "" });
    nav.append(said);
    const look = () => fetch("live?cursor=" + encodeURIComponent(JSON.stringify(RUNS.map((run) => run.cursor))), { cache: "no-store" })
      .then((res) => res.text().then((text) => { if (!res.ok) throw new Error(text.trim()); return JSON.parse(text); }))
      .then((update) => {
        if (update.reload) return location.reload();  // other runs (a `moot run`'s next stage)
        if (update.error) throw new Error(update.error);
        const moved = update.runs.map((u, r) => merge(RUNS[r], u)).some(Boolean);
        said.hidden = true;
        drawProgress();
        if (moved) redraw();
      }).catch((err) => { said.hidden = false; said.textContent = "not following the runs: " + err.message; })
      .finally(() => setTimeout(look, DATA.live.every));
    setTimeout(look, DATA.live.every);
  }
  document.body.setAttribute("data-ready", "1");
})();
