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
    if (!CHUNKS) return Promise.resolve(item);
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
      failure(item), draw ? draw(item.record, item, run) : value(item.record), rawRecord(item.record));
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
    const scored = run.items.some((i) => i.score != null);
    const filters = makeFilters(run.items, () => { page = 0; refresh(); }, true);
    function refresh() {
      shown = run.items.filter(filters.keep);
      page = Math.min(page, Math.max(0, Math.ceil(shown.length / PAGE) - 1));
      const rows = shown.slice(page * PAGE, page * PAGE + PAGE).map((item) => {
        const row = el("tr", { cls: "item-row" + (item === selected ? " selected" : ""), "data-status": item.status, on: { click: () => { selected = item; showWhole(detail, [[run, item]], ([full]) => [drawItem(run, full)]); for (const r of list.querySelectorAll("tr.selected")) r.classList.remove("selected"); row.classList.add("selected"); } } },
          el("td", {}, badge(item.status)), el("td", {}, item.title, item.error ? el("div", { cls: item.failed ? "error" : "warn" }, item.error) : null),
          el("td", {}, item.label || ""), scored ? el("td", { cls: "num" }, fmt(item.score)) : null);
        return row;
      });
      list.replaceChildren(el("div", { cls: "count", "data-role": "count" }, `${shown.length} of ${run.items.length} items`), pager(shown.length, page, (p) => { page = p; refresh(); }),
        el("table", {}, el("tr", {}, el("th", {}, "status"), el("th", {}, "item"), el("th", {}, "label"), scored ? el("th", { cls: "num" }, "score") : null), rows));
    }
    refresh();
    return add(main, [filters.bar, el("div", { cls: "split" }, list, detail)]);
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
  function show(i) {
    if (!built.has(i)) built.set(i, tabs[i][1]());
    mainEl.replaceChildren(built.get(i));
    nav.querySelectorAll("button").forEach((b, j) => b.classList.toggle("active", i === j));
  }
  tabs.forEach(([name], i) => nav.append(el("button", { "data-tab": name, on: { click: () => show(i) } }, name)));
  show(tabs.length > 1 && RUNS.length === 1 ? 1 : 0);
  document.body.setAttribute("data-ready", "1");
})();
