// The model page: calls TensorFlow Serving's REST API and nothing else.
//
// The model's metadata (its signatures) chooses the view: a translator (the default),
// a language model (a "sample" signature with a "generation" output: prompt and sampling
// settings in, text out, through :predict) or a classifier (a signature whose method is
// tensorflow/serving/classify: text in, the label and every class's probability out,
// through :classify).
//
// Settings, first found wins: the query string (?model=zh_en&api=http://host:8501),
// then config.json beside the page ({"model": ..., "api": ..., "max_chars": ...}; the
// embedded server writes one, a static file server may hold one), then the defaults.
// `api` is the REST base URL; empty means this page's own origin. A page on another
// origin than the API needs the API to allow it (CORS), or one reverse proxy for both.
//
// Every failure ends as words in #error (or #model-status on load), never a blank page.
// body[data-state] is "idle", "loading", "done" or "error", body[data-kind] "translate",
// "lm" or "classify", and body[data-ready] is "true" once the settings are read and the
// model checked: for tests and screenshots.
"use strict";

(function () {
  const DEFAULTS = { model: "default", api: "", maxChars: 1000, timeoutMs: 60000 };
  const SPACE = "\u2581"; // SentencePiece's word-start mark.

  const $ = (id) => document.getElementById(id);

  /** An error whose message is meant for the reader of the page. */
  class PageError extends Error {}

  // Settings --------------------------------------------------------------------

  async function readConfigFile() {
    try {
      const response = await fetch("config.json", { cache: "no-store" });
      if (!response.ok) return {};
      const answer = await response.json();
      return answer && typeof answer === "object" ? answer : {};
    } catch (error) {
      return {}; // No config.json (or a file:// page): the defaults apply.
    }
  }

  async function loadSettings() {
    const query = new URLSearchParams(window.location.search);
    const file = await readConfigFile();
    const pick = (key) => (query.has(key) ? query.get(key) : file[key]);
    const settings = {
      model: String(pick("model") || DEFAULTS.model).trim(),
      api: String(pick("api") || DEFAULTS.api).trim().replace(/\/+$/, ""),
      maxChars: Number(file.max_chars) > 0 ? Number(file.max_chars) : DEFAULTS.maxChars,
      timeoutMs: DEFAULTS.timeoutMs,
      models: Array.isArray(file.models) ? file.models.map(String) : [],
    };
    if (settings.api && !/^https?:\/\//i.test(settings.api)) {
      throw new PageError(
        `The API address "${settings.api}" should start with http:// or https://.`);
    }
    if (!settings.model || /[/:?#]/.test(settings.model)) {
      throw new PageError(
        `"${settings.model}" is not a model name: use ?model=NAME in the address.`);
    }
    return settings;
  }

  function apiLabel(settings) {
    return settings.api || window.location.origin;
  }

  // REST calls ----------------------------------------------------------------------

  function httpMessage(status, statusText, detail) {
    const said = detail ? `: ${detail}` : statusText ? ` (${statusText})` : "";
    switch (status) {
      case 400:
        return `The server could not use this request${said}`;
      case 404:
        return `Not found${said}. Check the model name (?model=NAME in the address).`;
      case 413:
        return `The text is too long for the server${said}`;
      case 429:
        return `The server is busy${said}. Try again in a moment.`;
      case 502:
      case 503:
        return `The translation server is unavailable${said}. Try again in a moment.`;
      case 504:
        return `The translation took too long${said}`;
      default:
        return `The server answered with an error, HTTP ${status}${said}`;
    }
  }

  /** Calls the API; returns its JSON document or throws a PageError in words. */
  async function callApi(settings, method, path, body) {
    const url = settings.api + path;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), settings.timeoutMs);
    let response;
    let text;
    try {
      response = await fetch(url, {
        method,
        headers: body === undefined ? {} : { "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
        cache: "no-store",
      });
      text = await response.text();
    } catch (error) {
      if (error && error.name === "AbortError") {
        throw new PageError(
          `The translation server at ${apiLabel(settings)} did not answer within ` +
            `${Math.round(settings.timeoutMs / 1000)} seconds.`);
      }
      throw new PageError(
        `Could not reach the translation server at ${apiLabel(settings)}. ` +
          "Is it running, and reachable from this browser?");
    } finally {
      clearTimeout(timer);
    }
    let answer = null;
    try {
      answer = JSON.parse(text);
    } catch (error) {
      answer = null;
    }
    if (!response.ok) {
      const detail = answer && typeof answer.error === "string" ? answer.error : "";
      throw new PageError(httpMessage(response.status, response.statusText, detail));
    }
    if (!answer || typeof answer !== "object") {
      throw new PageError("The server's answer was not the JSON that TensorFlow Serving sends.");
    }
    return answer;
  }

  function modelPath(settings) {
    return `/v1/models/${encodeURIComponent(settings.model)}`;
  }

  /** The one row of a row-format (`instances`) predict answer, checked. */
  function firstPrediction(answer, names) {
    const rows = answer.predictions;
    const row = Array.isArray(rows) ? rows[0] : null;
    const missing = row && typeof row === "object" ? names.filter((n) => !(n in row)) : names;
    if (missing.length) {
      throw new PageError(
        `The model's answer lacks ${missing.join(", ")}: was it exported with this signature?`);
    }
    return row;
  }

  async function translate(settings, text) {
    const path = `${modelPath(settings)}:predict`;
    const [attention, nBest] = await Promise.all([
      callApi(settings, "POST", path, { signature_name: "attention", instances: [text] }),
      callApi(settings, "POST", path, { signature_name: "translate_n_best", instances: [text] }),
    ]);
    const row = firstPrediction(attention, [
      "translation", "score", "source_pieces", "target_pieces",
      "source_lengths", "target_lengths", "cross_attention",
    ]);
    const best = firstPrediction(nBest, ["translations", "scores"]);
    return { ...row, translations: best.translations, scores: best.scores };
  }

  // Kinds of model --------------------------------------------------------------------

  const CLASSIFY_METHOD = "tensorflow/serving/classify";
  const SAMPLE_INPUTS = ["text", "temperature", "top_k", "top_p", "seed", "max_new_tokens"];
  const VIEWS = {
    translate: { title: "Translate", label: "Text to translate", button: "Translate",
      busy: "Translating…", empty: "Type a sentence to translate first", placeholder: "我们来试试。" },
    lm: { title: "Generate", label: "Beginning of the text", button: "Generate",
      busy: "Generating…", empty: "Type the beginning of a text first", placeholder: "" },
    classify: { title: "Classify", label: "Text to classify", button: "Classify",
      busy: "Classifying…", empty: "Type a sentence to classify first", placeholder: "" },
  };

  /** The view a model's SignatureDefs call for: {kind, signature}. */
  function modelKind(signatureDefs) {
    const defs = signatureDefs && typeof signatureDefs === "object" ? signatureDefs : {};
    const names = Object.keys(defs).sort();
    const classify = names.find((name) => defs[name] && defs[name].method_name === CLASSIFY_METHOD);
    if (classify) return { kind: "classify", signature: classify };
    const sample = defs.sample;
    if (sample && sample.outputs && "generation" in sample.outputs && sample.inputs &&
        SAMPLE_INPUTS.every((name) => name in sample.inputs)) {
      return { kind: "lm", signature: "sample" };
    }
    return { kind: "translate", signature: "" };
  }

  async function readModelKind(settings) {
    const answer = await callApi(settings, "GET", `${modelPath(settings)}/metadata`);
    const map = answer.metadata && answer.metadata.signature_def;
    return modelKind(map && map.signature_def);
  }

  function applyView(model) {
    const view = VIEWS[model.kind];
    document.body.dataset.kind = model.kind;
    document.title = `${view.title} · keras-transformer`;
    $("page-title").textContent = view.title;
    $("source-label").textContent = view.label;
    $("translate").textContent = view.button;
    $("busy").textContent = view.busy;
    $("source").placeholder = view.placeholder;
    $("sampling").hidden = model.kind !== "lm";
  }

  /** The sampling settings of the form, checked; throws a PageError in words. */
  function samplingSettings() {
    const read = (id, name, check, rule) => {
      const text = $(id).value.trim();
      const value = Number(text);
      if (!text || !Number.isFinite(value) || !check(value)) {
        throw new PageError(`${name} must be ${rule}; "${text}" is not.`);
      }
      return value;
    };
    const integer = (value) => Number.isInteger(value);
    return {
      temperature: read("temperature", "Temperature", (v) => v >= 0,
        "a number of 0 or more (0: always the likeliest token)"),
      top_k: read("top-k", "Top-k", (v) => integer(v) && v >= 0,
        "a whole number of 0 or more (0: no limit)"),
      top_p: read("top-p", "Top-p", (v) => v > 0 && v <= 1,
        "a number above 0 and at most 1 (1: no limit)"),
      seed: read("seed", "Seed", (v) => integer(v) && Math.abs(v) < 2 ** 31,
        "a whole number (below 2147483648 in size)"),
      max_new_tokens: read("max-new-tokens", "New tokens", (v) => integer(v) && v >= 1 && v <= 1024,
        "a whole number from 1 to 1024"),
    };
  }

  async function generate(settings, text, sampling) {
    const answer = await callApi(settings, "POST", `${modelPath(settings)}:predict`,
      { signature_name: "sample", instances: [{ text, ...sampling }] });
    const rows = answer.predictions;
    const row = Array.isArray(rows) ? rows[0] : undefined;
    // One output comes as the value itself, several as an object keyed by name.
    const generation = row && typeof row === "object" ? row.generation : row;
    if (typeof generation !== "string") {
      throw new PageError("The model's answer lacks the generated text: was it exported " +
        "as a language model?");
    }
    return { prompt: text, generation };
  }

  async function classify(settings, text, signature) {
    const answer = await callApi(settings, "POST", `${modelPath(settings)}:classify`,
      { signature_name: signature, examples: [{ text }] });
    // TF Serving writes "results" (its REST guide shows "result").
    const rows = answer.results || answer.result;
    const pairs = Array.isArray(rows) ? rows[0] : null;
    if (!Array.isArray(pairs) || !pairs.length) {
      throw new PageError("The model's answer holds no class: was it exported as a classifier?");
    }
    const classes = pairs.map(([label, score]) => ({ label: String(label), score: Number(score) }));
    return { classes: classes.sort((a, b) => b.score - a.score) };
  }

  // Rendering ------------------------------------------------------------------------

  function setState(state) {
    document.body.dataset.state = state;
  }

  function show(element, text) {
    element.textContent = text;
    element.hidden = !text;
  }

  function hideResults() {
    for (const id of ["result", "generation-result", "classification-result"]) $(id).hidden = true;
  }

  function showError(text) {
    show($("error"), text);
    if (text) {
      setState("error");
      hideResults(); // It belonged to an earlier text.
    }
  }

  function formatScore(value) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(3) : String(value);
  }

  /** The (T, S) matrix of one view: "avg", "L<i>" (a layer's average) or "L<i>H<j>". */
  function attentionMatrix(cross, view, rows, columns) {
    const maps = [];
    cross.forEach((layer, i) =>
      layer.forEach((head, j) => {
        if (view === "avg" || view === `L${i}` || view === `L${i}H${j}`) maps.push(head);
      }));
    const matrix = [];
    for (let t = 0; t < rows; t++) {
      const line = new Array(columns).fill(0);
      for (const map of maps) {
        for (let s = 0; s < columns; s++) line[s] += Number(map[t][s]) / maps.length;
      }
      matrix.push(line);
    }
    return matrix;
  }

  function fillViewMenu(cross) {
    const menu = $("attention-view");
    const previous = menu.value;
    menu.replaceChildren(new Option("Average of all layers and heads", "avg"));
    cross.forEach((layer, i) => {
      const group = document.createElement("optgroup");
      group.label = `Layer ${i + 1}`;
      group.append(new Option(`Layer ${i + 1}, average of its heads`, `L${i}`));
      layer.forEach((_, j) =>
        group.append(new Option(`Layer ${i + 1}, head ${j + 1}`, `L${i}H${j}`)));
      menu.append(group);
    });
    menu.value = [...menu.options].some((o) => o.value === previous) ? previous : "avg";
  }

  function pieceCell(tag, piece, className) {
    const cell = document.createElement(tag);
    cell.className = className;
    cell.textContent = piece;
    cell.title = piece;
    return cell;
  }

  function drawHeatmap(result) {
    const sources = result.source_pieces.slice(0, result.source_lengths);
    const targets = result.target_pieces.slice(0, result.target_lengths);
    const matrix = attentionMatrix(
      result.cross_attention, $("attention-view").value, targets.length, sources.length);
    const largest = Math.max(1e-9, ...matrix.flat());
    const table = $("heatmap");
    const head = document.createElement("thead");
    const headRow = head.insertRow();
    headRow.append(pieceCell("th", "output ↓ input →", "corner"));
    for (const piece of sources) {
      const cell = pieceCell("th", piece, "source-piece");
      cell.scope = "col";
      headRow.append(cell);
    }
    const body = document.createElement("tbody");
    targets.forEach((target, t) => {
      const row = body.insertRow();
      const label = pieceCell("th", target, "target-piece");
      label.scope = "row";
      row.append(label);
      sources.forEach((source, s) => {
        const weight = matrix[t][s];
        const cell = row.insertCell();
        cell.className = "weight";
        cell.dataset.weight = weight.toFixed(4);
        cell.style.setProperty("--alpha", (weight / largest).toFixed(3));
        cell.title = `${target} ← ${source}: ${weight.toFixed(3)}`;
      });
    });
    table.replaceChildren(head, body);
  }

  function render(result, text) {
    $("translation").textContent = result.translation;
    $("score").textContent = formatScore(result.score);
    const list = $("n-best");
    list.replaceChildren(
      ...result.translations.map((translation, k) => {
        const item = document.createElement("li");
        const words = document.createElement("span");
        words.className = "candidate";
        words.textContent = translation;
        const score = document.createElement("span");
        score.className = "candidate-score muted";
        score.textContent = formatScore(result.scores[k]);
        item.append(words, " ", score);
        return item;
      }));
    fillViewMenu(result.cross_attention);
    drawHeatmap(result);
    $("result").hidden = false;
    show($("notice"), noticeFor(result, text));
  }

  function renderGeneration(result) {
    hideResults();
    $("prompt").textContent = result.prompt;
    // The exported signature returns the continuation with its leading space, if any.
    $("continuation").textContent = result.generation;
    $("generation-result").hidden = false;
  }

  function renderClassification(result) {
    hideResults();
    $("label").textContent = result.classes[0].label;
    const body = document.createElement("tbody");
    for (const { label, score } of result.classes) {
      const row = body.insertRow();
      row.className = "class";
      const name = document.createElement("th");
      name.scope = "row";
      name.className = "class-label";
      name.textContent = label;
      row.append(name);
      const bar = row.insertCell();
      bar.className = "bar";
      const fill = document.createElement("span");
      fill.style.width = `${(100 * Math.max(0, Math.min(1, score))).toFixed(1)}%`;
      bar.append(fill);
      const value = row.insertCell();
      value.className = "probability";
      value.dataset.score = String(score);
      value.textContent = `${(100 * score).toFixed(1)} %`;
    }
    $("class-scores").replaceChildren(body);
    $("classification-result").hidden = false;
  }

  /** Words about an input the model read only in part (it truncates long inputs). */
  function noticeFor(result, text) {
    const count = result.source_lengths;
    if (count === 0) return "The model found nothing it could translate in this text.";
    const plain = (piece) =>
      String(piece).normalize("NFKC").split(SPACE).join("").replace(/\s+/g, "");
    const pieces = result.source_pieces.slice(0, count).map(plain);
    const input = plain(text);
    const isUnknown = (piece) => !piece || /^(<unk>|\u2047)$/.test(piece);
    // Without unknown pieces the pieces spell the (normalized) input; with some, only
    // the last piece can be compared with the end of the input.
    const truncated = pieces.some(isUnknown)
      ? !isUnknown(pieces[count - 1]) && !input.endsWith(pieces[count - 1])
      : pieces.join("").length < input.length;
    if (truncated) {
      return `The text is too long for this model: only its first ${count} pieces ` +
        "(up to the last column below) were translated.";
    }
    return "";
  }

  // Page ----------------------------------------------------------------------------

  let settings = null;
  let settingsLoaded = null; // The promise of `settings`, made on start.
  let model = { kind: "translate", signature: "" }; // From the metadata, on start.
  let lastResult = null;

  function updateCount() {
    const length = $("source").value.length;
    const limit = settings ? settings.maxChars : DEFAULTS.maxChars;
    $("char-count").textContent = `${length} / ${limit} characters`;
    $("char-count").classList.toggle("over", length > limit);
  }

  async function onSubmit(event) {
    event.preventDefault();
    const text = $("source").value;
    show($("notice"), "");
    try {
      settings = await settingsLoaded;
    } catch (error) {
      showError("The page is not set up: see the message at the top.");
      return;
    }
    if (!text.trim()) {
      showError(`${VIEWS[model.kind].empty}: the text box is empty.`);
      $("source").focus();
      return;
    }
    if (text.length > settings.maxChars) {
      showError(`The text is too long: ${text.length} characters, at most ` +
        `${settings.maxChars} are accepted. Translate it a sentence or two at a time.`);
      return;
    }
    let sampling = null;
    try {
      if (model.kind === "lm") sampling = samplingSettings();
    } catch (error) {
      showError(error.message);
      return;
    }
    showError("");
    setState("loading");
    $("translate").disabled = true;
    $("busy").hidden = false;
    try {
      if (model.kind === "lm") {
        renderGeneration(await generate(settings, text, sampling));
      } else if (model.kind === "classify") {
        renderClassification(await classify(settings, text, model.signature));
      } else {
        lastResult = await translate(settings, text);
        render(lastResult, text);
      }
      setState("done");
    } catch (error) {
      showError(error instanceof PageError ? error.message
        : "Something went wrong while showing the answer; please try again.");
    } finally {
      $("translate").disabled = false;
      $("busy").hidden = true;
    }
  }

  async function checkModel() {
    const status = $("model-status");
    try {
      const answer = await callApi(settings, "GET", modelPath(settings));
      const versions = Array.isArray(answer.model_version_status)
        ? answer.model_version_status : [];
      const ready = versions.filter((v) => v.state === "AVAILABLE").map((v) => v.version);
      status.textContent = ready.length
        ? `Model ${settings.model}, version ${ready.join(", ")}, ready.`
        : `Model ${settings.model} has no version ready yet ` +
          `(${versions.map((v) => v.state).join(", ") || "none"}).`;
      status.classList.toggle("error", !ready.length);
      if (ready.length) {
        model = await readModelKind(settings);
        applyView(model);
      }
    } catch (error) {
      status.textContent =
        error instanceof PageError ? error.message : "Could not check the model.";
      status.classList.add("error");
    }
    const others = settings.models.filter((name) => name !== settings.model);
    if (others.length) status.textContent += ` Also served: ${others.join(", ")} (?model=NAME).`;
  }

  async function start() {
    $("translate-form").addEventListener("submit", onSubmit);
    $("source").addEventListener("input", updateCount);
    $("source").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        $("translate-form").requestSubmit();
      }
    });
    $("attention-view").addEventListener("change", () => lastResult && drawHeatmap(lastResult));
    applyView(model);
    settingsLoaded = loadSettings();
    try {
      settings = await settingsLoaded;
      $("endpoint").textContent = `REST API: ${apiLabel(settings)} · model: ${settings.model}`;
      updateCount();
      await checkModel();
    } catch (error) {
      $("model-status").textContent = error instanceof PageError ? error.message
        : "The page could not read its settings.";
      $("model-status").classList.add("error");
    } finally {
      document.body.dataset.ready = "true";
    }
  }

  window.addEventListener("unhandledrejection", () =>
    showError("Something went wrong in this page; please reload it."));
  document.addEventListener("DOMContentLoaded", start);
})();
