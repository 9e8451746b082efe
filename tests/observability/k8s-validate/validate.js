#!/usr/bin/env node
// Strict validation of rendered Kubernetes manifests against the API's own types
// (docs/observability.md, "Validating the chart").
//
//   node validate.js MANIFESTS.json
//
// MANIFESTS.json is a list of {"source": "<what rendered it>", "object": {...}}. Every object is
// checked against the TypeScript interface of its apiVersion and kind, as generated from the
// Kubernetes OpenAPI definitions (kubernetes-models, Kubernetes 1.27) and from the
// prometheus-operator CRDs (@kubernetes-models/prometheus-operator): the versions are pinned in
// package.json / package-lock.json beside this file and installed by scripts/install-deps.sh.
//
// The objects become typed object literals in one generated TypeScript module, compiled in
// memory with the TypeScript compiler in strict mode. That is strict in the way the issue asks:
// an object literal may only name the interface's properties (an unknown or misspelt field is
// an error at every depth), required properties must be present, and scalars and enums must
// have their declared type. null is refused where the API has no null (a real API server drops
// it silently; a chart that renders it has a mistake).
//
// Output: one line per error, "<source>: <kind>/<name>: <JSON path>: <message>", then a summary
// line; exit 1 when there is an error, 2 on bad usage or an unknown apiVersion/kind.
"use strict";

const fs = require("fs");
const path = require("path");

const here = __dirname;
let ts;
try {
  ts = require("typescript");
} catch (e) {
  console.error(`validate: the TypeScript compiler is not installed under ${here}/node_modules; ` +
                "run scripts/install-deps.sh");
  process.exit(2);
}

// apiVersion -> the module folder holding one <Kind>.d.ts per kind, exporting I<Kind>.
function moduleFolder(apiVersion) {
  if (apiVersion === "monitoring.coreos.com/v1") {
    return "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
  }
  return `kubernetes-models/${apiVersion}`;  // "v1" is the core group: kubernetes-models/v1
}

function typeModule(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" ||
      !/^[A-Za-z0-9.\/-]+$/.test(apiVersion) || !/^[A-Za-z0-9]+$/.test(kind)) {
    return null;
  }
  const mod = `${moduleFolder(apiVersion)}/${kind}`;
  try {
    require.resolve(mod, {paths: [here]});
    return mod;
  } catch (e) {
    return null;
  }
}

// Appends v as TypeScript source to rows, one property or element per line: rows of
// [text, JSON path], so that a compiler error's line names the field it is about.
function emit(v, p, indent, prefix, suffix, rows) {
  const pad = "  ".repeat(indent);
  const isArray = Array.isArray(v);
  const entries = isArray ? v.map((x, i) => [`${p}[${i}]`, "", x]) :
      v !== null && typeof v === "object" ?
      Object.keys(v).map((k) => [/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${p}.${k}` :
                                 `${p}[${JSON.stringify(k)}]`, JSON.stringify(k) + ": ", v[k]]) :
      null;
  if (entries === null || entries.length === 0) {
    const t = entries === null ? JSON.stringify(v) : isArray ? "[]" : "{}";
    rows.push([pad + prefix + t + suffix, p]);
    return;
  }
  rows.push([pad + prefix + (isArray ? "[" : "{"), p]);
  for (const [at, key, x] of entries) emit(x, at, indent + 1, key, ",", rows);
  rows.push([pad + (isArray ? "]" : "}") + suffix, p]);
}

function main() {
  if (process.argv.length !== 3) {
    console.error("usage: node validate.js MANIFESTS.json");
    process.exit(2);
  }
  const started = Date.now();
  let docs;
  try {
    docs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  } catch (e) {
    console.error(`validate: ${process.argv[2]}: ${e.message}`);
    process.exit(2);
  }
  if (!Array.isArray(docs)) {
    console.error(`validate: ${process.argv[2]}: want a JSON list of {source, object}`);
    process.exit(2);
  }

  // The generated module: one import and one typed constant per object.
  const rows = [];  // [text, {doc, path}]
  let unknown = 0;
  const bodies = [];
  docs.forEach((d, i) => {
    const o = d.object || {};
    const mod = typeModule(o.apiVersion, o.kind);
    if (!mod) {
      console.error(`${d.source}: ${o.kind}/${(o.metadata || {}).name}: unknown apiVersion/kind ` +
                    `${JSON.stringify(o.apiVersion)} ${JSON.stringify(o.kind)} (no type in the ` +
                    "pinned schemas)");
      unknown += 1;
      return;
    }
    rows.push([`import type { I${o.kind} as T${i} } from ${JSON.stringify(mod)};`, null]);
    bodies.push(i);
  });
  for (const i of bodies) {
    const own = [];
    emit(docs[i].object, "$", 0, `export const m${i}: T${i} = `, ";", own);
    for (const [t, p] of own) rows.push([t, {doc: i, path: p}]);
  }
  const text = rows.map((r) => r[0]).join("\n") + "\n";
  const where = rows.map((r) => r[1]);

  const file = path.join(here, "__manifests__.ts");
  const options = {
    strict: true, noEmit: true, target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10, types: [], skipLibCheck: true,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, onError, create) =>
      name === file ? ts.createSourceFile(name, text, lang, true) :
                      getSourceFile(name, lang, onError, create);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => (name === file ? text : readFile(name));
  const program = ts.createProgram([file], options, host);
  const diags = [...program.getSyntacticDiagnostics(), ...program.getSemanticDiagnostics()];

  let errors = 0;
  for (const diag of diags) {
    const msg = ts.flattenDiagnosticMessageText(diag.messageText, " ");
    if (!diag.file || diag.file.fileName !== file) {
      console.error(`validate: ${diag.file ? diag.file.fileName : "?"}: ${msg}`);
      errors += 1;
      continue;
    }
    const {line: l} = diag.file.getLineAndCharacterOfPosition(diag.start);
    const w = where[l];
    if (!w) {
      console.error(`validate: generated line ${l + 1}: ${msg}`);
    } else {
      const o = docs[w.doc].object;
      console.error(`${docs[w.doc].source}: ${o.kind}/${(o.metadata || {}).name}: ${w.path}: ${msg}`);
    }
    errors += 1;
  }
  const secs = (Date.now() - started) / 1000;
  console.log(`validate: ${docs.length} manifests, ${errors + unknown} error(s), ` +
              `${secs.toFixed(2)} s (typescript ${ts.version})`);
  process.exit(unknown > 0 ? 2 : errors > 0 ? 1 : 0);
}

main();
